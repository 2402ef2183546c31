// SPDX-License-Identifier: GPL-3.0-or-later
// RMSNorm, alone or fused with the residual add that precedes it: one block per row, one 16-byte
// vector (8 bf16) per thread held in registers between the reduction and the scaling.
#include <cuda_bf16.h>

#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/transformer_ops.hpp"

namespace twell::cuda {

namespace {

struct Vector8 {
  float v[8];
};

__device__ inline Vector8 unpack8(uint4 bits) {
  Vector8 out;
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&bits);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out.v[2 * i] = f.x;
    out.v[2 * i + 1] = f.y;
  }
  return out;
}

__device__ inline uint4 pack8(const Vector8& in) {
  uint4 bits;
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&bits);
#pragma unroll
  for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(in.v[2 * i], in.v[2 * i + 1]);
  return bits;
}

/// Sum over the block; every thread gets the result. `scratch` holds one float per warp.
__device__ inline float block_sum(float value, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  const int warps = blockDim.x / 32;
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

/// kAdd: residual += delta first (stored rounded to bf16), and the norm reads the updated residual.
template <bool kAdd>
__global__ void rms_norm_kernel(__nv_bfloat16* __restrict__ residual, const __nv_bfloat16* __restrict__ delta,
                                const __nv_bfloat16* __restrict__ weight, int hidden, float eps,
                                __nv_bfloat16* __restrict__ out) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const int vectors = hidden / 8;
  const int index = threadIdx.x;
  const bool active = index < vectors;
  uint4* row_in = reinterpret_cast<uint4*>(residual + row * hidden);
  Vector8 x{};
  float sum_sq = 0.0f;
  if (active) {
    x = unpack8(row_in[index]);
    if constexpr (kAdd) {
      const Vector8 d = unpack8(reinterpret_cast<const uint4*>(delta + row * hidden)[index]);
#pragma unroll
      for (int i = 0; i < 8; ++i) x.v[i] += d.v[i];
      const uint4 rounded = pack8(x);
      row_in[index] = rounded;
      x = unpack8(rounded);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) sum_sq += x.v[i] * x.v[i];
  }
  const float total = block_sum(sum_sq, scratch);
  const float inverse_rms = rsqrtf(total / static_cast<float>(hidden) + eps);
  if (active) {
    const Vector8 w = unpack8(reinterpret_cast<const uint4*>(weight)[index]);
    Vector8 y;
#pragma unroll
    for (int i = 0; i < 8; ++i) y.v[i] = w.v[i] * (x.v[i] * inverse_rms);
    reinterpret_cast<uint4*>(out + row * hidden)[index] = pack8(y);
  }
}

void check_hidden(int hidden, const char* op) {
  if (hidden <= 0 || hidden % 8 != 0 || hidden > kMaxNormHidden)
    throw Error(Error::Kind::Unsupported, std::string(op) + ": hidden size " + std::to_string(hidden) +
                                              " must be a positive multiple of 8 and at most " +
                                              std::to_string(kMaxNormHidden));
}

int threads_for(int hidden) {
  return ((hidden / 8 + 31) / 32) * 32;
}

}  // namespace

void rms_norm(const __nv_bfloat16* x, const __nv_bfloat16* weight, std::int64_t rows, int hidden, float eps,
              __nv_bfloat16* out, cudaStream_t stream) {
  check_hidden(hidden, "rms_norm");
  if (rows == 0) return;
  // The kernel only writes `residual` when kAdd, so the const_cast never leads to a write.
  rms_norm_kernel<false><<<static_cast<unsigned>(rows), threads_for(hidden), 0, stream>>>(
      const_cast<__nv_bfloat16*>(x), nullptr, weight, hidden, eps, out);
  TWELL_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

void add_rms_norm(__nv_bfloat16* residual, const __nv_bfloat16* delta, const __nv_bfloat16* weight,
                  std::int64_t rows, int hidden, float eps, __nv_bfloat16* out, cudaStream_t stream) {
  check_hidden(hidden, "add_rms_norm");
  if (rows == 0) return;
  rms_norm_kernel<true><<<static_cast<unsigned>(rows), threads_for(hidden), 0, stream>>>(
      residual, delta, weight, hidden, eps, out);
  TWELL_CUDA_CHECK_LAUNCH("add_rms_norm_kernel");
}

}  // namespace twell::cuda
