// SPDX-License-Identifier: GPL-3.0-or-later
// bf16 matrix transpose through a padded shared-memory tile (weight layout conversion at load time).
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/transformer_ops.hpp"

namespace twell::cuda {

namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;

__global__ void transpose_kernel(const __nv_bfloat16* __restrict__ src, std::int64_t rows, std::int64_t cols,
                                 __nv_bfloat16* __restrict__ dst) {
  __shared__ __nv_bfloat16 tile[kTile][kTile + 1];  // +1: no bank conflicts on the column read
  const std::int64_t col = blockIdx.x * static_cast<std::int64_t>(kTile) + threadIdx.x;
  const std::int64_t row0 = blockIdx.y * static_cast<std::int64_t>(kTile);
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {
    if (row0 + r < rows && col < cols) tile[r][threadIdx.x] = src[(row0 + r) * cols + col];
  }
  __syncthreads();
  const std::int64_t out_col = row0 + threadIdx.x;  // a source row
  const std::int64_t out_row0 = blockIdx.x * static_cast<std::int64_t>(kTile);
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {
    if (out_row0 + r < cols && out_col < rows) dst[(out_row0 + r) * rows + out_col] = tile[threadIdx.x][r];
  }
}

}  // namespace

void transpose_bf16(const __nv_bfloat16* src, std::int64_t rows, std::int64_t cols, __nv_bfloat16* dst,
                    cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                  static_cast<unsigned>((rows + kTile - 1) / kTile));
  transpose_kernel<<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(src, rows, cols, dst);
  TWELL_CUDA_CHECK_LAUNCH("transpose_kernel");
}

}  // namespace twell::cuda
