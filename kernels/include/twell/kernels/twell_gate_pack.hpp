// SPDX-License-Identifier: GPL-3.0-or-later
// TwELL's producer: the gate GEMM on tensor cores (mma.sync, sm_80 and newer) whose epilogue applies
// the ReLU and packs each 256-column tile of the output straight into the TwELL layout
// (TWELL_SPEC.md §1, §2.1). No dense gate tensor reaches global memory.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace twell::cuda {

/// Device-side overflow bookkeeping, zeroed before each gate-pack launch.
struct TwellOverflowState {
  std::uint32_t* counters = nullptr;   ///< [2]: overflowing rows, overflowing (row, tile) pairs
  std::uint32_t* row_flags = nullptr;  ///< [rows]: 1 where some tile of the row overflowed
  std::uint32_t* row_list = nullptr;   ///< [rows]: the overflowing rows, counters[0] of them, any order
};

struct GatePackArgs {
  const __nv_bfloat16* x = nullptr;       ///< [rows, hidden] row-major, 16-byte aligned
  const __nv_bfloat16* weight = nullptr;  ///< [neurons, hidden] (gate, or up for the non-gated FFN)
  int rows = 0;                           ///< M, any value >= 1
  int hidden = 0;                         ///< D = K, a multiple of 64
  int neurons = 0;                        ///< N <= 65536; padded to 256 inside (padding never fires)
  std::uint32_t compression = 8;          ///< C in {8, 4, 2}
  std::uint32_t* packed = nullptr;        ///< [rows, padded_neurons / C]
  TwellOverflowState overflow;
};

inline int twell_padded_neurons(int neurons) {
  return (neurons + 255) / 256 * 256;
}

/// Launches the gate GEMM + ReLU + pack. Validates shapes (throws twell::Error).
void launch_twell_gate_pack(const GatePackArgs& args, cudaStream_t stream);

}  // namespace twell::cuda
