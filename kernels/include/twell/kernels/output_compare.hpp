// SPDX-License-Identifier: GPL-3.0-or-later
// Error sums of two FFN outputs computed on the device (see core's metrics.hpp for the metrics).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "twell/metrics.hpp"

namespace twell::cuda {

/// Bytes of device scratch output_error_sums needs.
inline constexpr std::size_t kErrorSumsScratchBytes = 5 * sizeof(double);

/// Sums of a^2, b^2, (b - a)^2, a * b and max |b - a| over `count` elements of two bf16 arrays,
/// accumulated in fp64 on the device. `device_scratch` holds kErrorSumsScratchBytes. Waits for `stream`.
ErrorSums output_error_sums(const __nv_bfloat16* reference, const __nv_bfloat16* candidate,
                            std::int64_t count, void* device_scratch, cudaStream_t stream);

}  // namespace twell::cuda
