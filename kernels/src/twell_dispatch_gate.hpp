// SPDX-License-Identifier: GPL-3.0-or-later
// Glue between FfnRunner and the two gate kernels: whether this binary can run the sm_90a kernel
// on a device, and the compaction of the sm_90a kernel's per-row overflow flags into the
// (count, row list) form the dense recomputation of overflowing rows consumes.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace twell::cuda {

/// True when the device has compute capability 9.0 and this binary carries sm_90a machine code
/// (probed once per device with a kernel compiled the same way as the sm_90a gate kernel).
bool binary_runs_sm90a_code(int device);

/// counters[0] += the number of rows with row_flags[r] != 0; those rows appended to row_list in
/// any order. counters must be zeroed by the caller; counters[1] is left alone.
void launch_compact_flagged_rows(const std::uint32_t* row_flags, int rows, std::uint32_t* counters,
                                 std::uint32_t* row_list, cudaStream_t stream);

}  // namespace twell::cuda
