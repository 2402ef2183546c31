// SPDX-License-Identifier: GPL-3.0-or-later
// Gather and scatter of the TwELL rows that overflowed a tile, around their dense recomputation.
#include <cuda_bf16.h>

#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_overflow.hpp"

namespace twell::cuda {
namespace {

// One CTA per listed row; 16-byte copies.
template <bool kGather>
__global__ void move_rows_kernel(const __nv_bfloat16* __restrict__ src,
                                 const std::uint32_t* __restrict__ rows, int cols,
                                 __nv_bfloat16* __restrict__ dst) {
  const std::size_t listed = rows[blockIdx.x];
  const std::size_t from = kGather ? listed : blockIdx.x;
  const std::size_t to = kGather ? blockIdx.x : listed;
  const uint4* source = reinterpret_cast<const uint4*>(src + from * cols);
  uint4* target = reinterpret_cast<uint4*>(dst + to * cols);
  for (int v = threadIdx.x; v < cols / 8; v += blockDim.x) target[v] = source[v];
}

}  // namespace

void launch_gather_rows(const __nv_bfloat16* src, const std::uint32_t* rows, int count, int cols,
                        __nv_bfloat16* dst, cudaStream_t stream) {
  if (count <= 0) return;
  move_rows_kernel<true><<<count, 256, 0, stream>>>(src, rows, cols, dst);
  TWELL_CUDA_CHECK_LAUNCH("move_rows_kernel (gather)");
}

void launch_scatter_rows(const __nv_bfloat16* src, const std::uint32_t* rows, int count, int cols,
                         __nv_bfloat16* dst, cudaStream_t stream) {
  if (count <= 0) return;
  move_rows_kernel<false><<<count, 256, 0, stream>>>(src, rows, cols, dst);
  TWELL_CUDA_CHECK_LAUNCH("move_rows_kernel (scatter)");
}

}  // namespace twell::cuda
