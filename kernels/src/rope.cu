// SPDX-License-Identifier: GPL-3.0-or-later
// Rotary position embedding (Hugging Face rotate_half convention), in place on the fused QKV buffer.
// One thread rotates 8 dimension pairs (i, i + head_dim / 2) of one head of one token.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/transformer_ops.hpp"

namespace twell::cuda {

namespace {

__global__ void rope_kernel(__nv_bfloat16* __restrict__ qkv, std::int64_t tokens, int sequence,
                            int rotated_heads, int row_stride, int head_dim,
                            const float2* __restrict__ cos_sin) {
  const int half = head_dim / 2;
  const int chunks = half / 8;
  const std::int64_t total = tokens * rotated_heads * chunks;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int chunk = static_cast<int>(i % chunks);
    const std::int64_t head_row = i / chunks;
    const int head = static_cast<int>(head_row % rotated_heads);
    const std::int64_t token = head_row / rotated_heads;
    const int position = static_cast<int>(token % sequence);
    __nv_bfloat16* base = qkv + token * row_stride + static_cast<std::int64_t>(head) * head_dim + chunk * 8;
    uint4 low_bits = *reinterpret_cast<const uint4*>(base);
    uint4 high_bits = *reinterpret_cast<const uint4*>(base + half);
    __nv_bfloat162* low = reinterpret_cast<__nv_bfloat162*>(&low_bits);
    __nv_bfloat162* high = reinterpret_cast<__nv_bfloat162*>(&high_bits);
    const float2* angles = cos_sin + static_cast<std::int64_t>(position) * half + chunk * 8;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 a = __bfloat1622float2(low[p]);
      const float2 b = __bfloat1622float2(high[p]);
      const float2 cs0 = angles[2 * p];
      const float2 cs1 = angles[2 * p + 1];
      low[p] = __floats2bfloat162_rn(a.x * cs0.x - b.x * cs0.y, a.y * cs1.x - b.y * cs1.y);
      high[p] = __floats2bfloat162_rn(b.x * cs0.x + a.x * cs0.y, b.y * cs1.x + a.y * cs1.y);
    }
    *reinterpret_cast<uint4*>(base) = low_bits;
    *reinterpret_cast<uint4*>(base + half) = high_bits;
  }
}

}  // namespace

void rope_table(int sequence, std::span<const double> inverse_frequencies, float2* host_out) {
  const std::size_t half = inverse_frequencies.size();
  for (std::size_t i = 0; i < half; ++i) {
    for (int position = 0; position < sequence; ++position) {
      const double angle = position * inverse_frequencies[i];
      host_out[static_cast<std::size_t>(position) * half + i] =
          make_float2(static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle)));
    }
  }
}

void apply_rope(__nv_bfloat16* qkv, std::int64_t tokens, int sequence, int q_heads, int kv_heads,
                int head_dim, const float2* cos_sin, cudaStream_t stream) {
  if (head_dim % 16 != 0)
    throw Error(Error::Kind::Unsupported,
                "apply_rope: head_dim " + std::to_string(head_dim) + " must be a multiple of 16");
  if (tokens == 0) return;
  const int rotated_heads = q_heads + kv_heads;  // V is not rotated
  const int row_stride = (q_heads + 2 * kv_heads) * head_dim;
  const std::int64_t total = tokens * rotated_heads * (head_dim / 16);
  constexpr int kThreads = 256;
  const auto blocks =
      static_cast<unsigned>(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
  rope_kernel<<<blocks, kThreads, 0, stream>>>(qkv, tokens, sequence, rotated_heads, row_stride, head_dim,
                                               cos_sin);
  TWELL_CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace twell::cuda
