// SPDX-License-Identifier: GPL-3.0-or-later
// Rows whose tiles overflowed TwELL's capacity are recomputed with the dense FFN: their inputs are
// gathered into a compact batch, run through cuBLASLt, and scattered back over the output.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace twell::cuda {

/// dst[r, :] = src[rows[r], :] for r < count; rows are [*, cols] bf16 with cols % 8 == 0.
void launch_gather_rows(const __nv_bfloat16* src, const std::uint32_t* rows, int count, int cols,
                        __nv_bfloat16* dst, cudaStream_t stream);
/// dst[rows[r], :] = src[r, :] for r < count.
void launch_scatter_rows(const __nv_bfloat16* src, const std::uint32_t* rows, int count, int cols,
                         __nv_bfloat16* dst, cudaStream_t stream);

}  // namespace twell::cuda
