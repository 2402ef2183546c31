// SPDX-License-Identifier: GPL-3.0-or-later
#include "cpu_ffn_stages.hpp"

namespace twell::cpu {

std::vector<KernelVariant> stage_variants() {
  constexpr const char* kAnyCpu = "any CPU (AVX-512 and AVX2 clones on x86-64)";
  return {
      {"cpu:gate_up", false, "dense", "gate_up", kAnyCpu,
       "fp32 blocked GEMMs x Wg^T and x Wu^T over packed weight panels, then act(gate) * up (non-gated: "
       "x Wu^T and a ReLU)"},
      {"cpu:down", false, "dense", "down", kAnyCpu, "fp32 blocked GEMM h Wd^T over packed weight panels"},
      {"cpu:gate_pack", false, "twell", "gate_pack", kAnyCpu,
       "fp32 blocked gate GEMM, then ReLU and TwELL packing (bf16 values, counts clamped to the tile "
       "capacity, overflowing rows listed)"},
      {"cpu:up_down", false, "twell", "up_down", kAnyCpu,
       "per token, per stored non-zero: the up row's dot product with x (gated) and the down row "
       "accumulated into the output, fp32, threads over tokens"},
      {"cpu:overflow_dense", false, "twell", "overflow_dense", kAnyCpu,
       "rows with an overflowing tile recomputed densely from their gate values: up and down as "
       "matrix-vector products (or the GEMM from 16 rows)"},
  };
}

}  // namespace twell::cpu
