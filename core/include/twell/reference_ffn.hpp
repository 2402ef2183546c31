// SPDX-License-Identifier: GPL-3.0-or-later
// CPU reference FFNs: the oracle for every GPU FFN kernel and the CPU backend's FFN.
// Weights are fp32 in nn.Linear layout: gate, up [N, D]; down [D, N]; down_t = down^T [N, D].
#pragma once
#include <cstdint>

#include "twell/matrix.hpp"
#include "twell/model_config.hpp"
#include "twell/twell_format.hpp"

namespace twell::reference {

enum class Precision {
  Fp32,           ///< everything fp32
  Bf16Emulated,   ///< rounds where the GPU kernels round (TWELL_SPEC §2.5): bf16 inputs, products, u, h, output
  Highest,        ///< bf16 inputs and output, fp32 products and h (the "highest precision" TwELL variant)
};

struct FfnWeights {
  const Matrix* gate = nullptr;    ///< [N, D]; null: non-gated ReLU FFN y = ReLU(x Wu^T) Wd^T
  const Matrix* up = nullptr;      ///< [N, D]
  const Matrix* down = nullptr;    ///< [D, N]
  const Matrix* down_t = nullptr;  ///< [N, D]; the TwELL consumer's layout
};

/// out = a * b^T for a [M, K], b [N, K]; threads over blocks of rows and columns (0 = hardware
/// concurrency). Each element sums in a fixed order, so the result does not depend on `threads`.
void matmul_nt(const Matrix& a, const Matrix& b, Matrix& out, unsigned threads = 0);

/// Dense FFN; `gate_preactivation`, if non-null, receives x Wg^T (or x Wu^T non-gated) [M, N],
/// bf16-rounded in Bf16Emulated as the GPU stores it. Non-gated applies `activation` to x Wu^T.
Matrix dense_ffn(const Matrix& x, const FfnWeights& weights, Activation activation, Precision precision,
                 Matrix* gate_preactivation = nullptr, unsigned threads = 0);

struct TwellFfnResult {
  Matrix out;                   ///< [M, D]
  TwellPacked packed;           ///< the gate (or non-gated up) activations as TwELL
  std::uint64_t overflow_rows = 0;  ///< rows recomputed densely because a tile overflowed
};

/// TwELL FFN: gate GEMM with ReLU + pack, then per non-zero the up dot product and the down
/// accumulation; overflowing rows go through the dense FFN, so the output is right at any sparsity.
/// The activation is always ReLU (the packing predicate). `gate_preactivation`, if non-null,
/// receives the fp32 x Wg^T (or x Wu^T non-gated) [M, N] that was packed. reference_ffn.cpp's
/// header comment lists exactly where each precision rounds to bf16 (the GPU kernels' contract).
TwellFfnResult twell_ffn(const Matrix& x, const FfnWeights& weights, std::uint32_t compression,
                         Precision precision, unsigned threads = 0, Matrix* gate_preactivation = nullptr);

}  // namespace twell::reference
