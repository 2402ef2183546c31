// SPDX-License-Identifier: GPL-3.0-or-later
// Token embedding gather: one 16-byte vector (8 bf16) per thread.
#include <algorithm>

#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/transformer_ops.hpp"

namespace twell::cuda {

namespace {

__global__ void embedding_kernel(const std::int32_t* __restrict__ ids, const uint4* __restrict__ table,
                                 std::int64_t tokens, int vectors_per_row, uint4* __restrict__ out) {
  const std::int64_t total = tokens * vectors_per_row;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t token = i / vectors_per_row;
    const int vector = static_cast<int>(i - token * vectors_per_row);
    out[i] = table[static_cast<std::int64_t>(ids[token]) * vectors_per_row + vector];
  }
}

}  // namespace

void embedding_lookup(const std::int32_t* ids, const __nv_bfloat16* table, std::int64_t tokens, int hidden,
                      __nv_bfloat16* out, cudaStream_t stream) {
  if (tokens == 0) return;
  const int vectors_per_row = hidden / 8;
  const std::int64_t total = tokens * vectors_per_row;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65536));
  embedding_kernel<<<blocks, kThreads, 0, stream>>>(ids, reinterpret_cast<const uint4*>(table), tokens,
                                                    vectors_per_row, reinterpret_cast<uint4*>(out));
  TWELL_CUDA_CHECK_LAUNCH("embedding_kernel");
}

}  // namespace twell::cuda
