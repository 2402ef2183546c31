// SPDX-License-Identifier: GPL-3.0-or-later
// TwELL's packing on its own: ReLU + pack of gate pre-activations that a dense GEMM already wrote
// to global memory (the cuBLAS gate of GateKernel::CublasPack). Where the fused gate kernels cover
// too few tiles to fill the GPU (decode-sized M), cuBLAS's GEMM plus this pass is the faster producer.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "twell/kernels/twell_gate_pack.hpp"

namespace twell::cuda {

struct PackDenseArgs {
  const __nv_bfloat16* preactivations = nullptr;  ///< [*, pitch] row-major, the first `neurons` used
  /// Optional: packed row r comes from pre-activation row source_rows[r] (null: from row r).
  const std::uint32_t* source_rows = nullptr;
  int rows = 0;                     ///< M >= 1 packed rows
  int neurons = 0;                  ///< N <= 65536; padded to 256 (padding never fires)
  int pitch = 0;                    ///< elements between rows, >= neurons
  std::uint32_t compression = 8;    ///< C in {8, 4, 2}, or kTwellUnbounded
  std::uint32_t* packed = nullptr;  ///< [rows, tiles * twell_slots_per_tile(C)]
  /// In the unbounded layout, where no tile overflows: the factor C (8, 4 or 2) whose capacity the
  /// rows and tiles are counted against in `overflow`, all entries still stored; 0 counts nothing.
  /// Ignored in the bounded layouts, which count against their own capacity.
  std::uint32_t counted_compression = 0;
  /// Zeroed by the caller; rows and tiles counted. Unused (may be null) in the unbounded layout
  /// unless counted_compression is set.
  TwellOverflowState overflow;
};

/// A value is stored iff it is > 0, in ascending column order within its 256-column tile: the
/// layout core's twell_pack writes for the same bf16 values. Every word of `packed` is written.
/// Validates the arguments (throws twell::Error).
void launch_twell_pack_dense(const PackDenseArgs& args, cudaStream_t stream);

}  // namespace twell::cuda
