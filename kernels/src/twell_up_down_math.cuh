// SPDX-License-Identifier: GPL-3.0-or-later
// Arithmetic shared by the TwELL up/down consumers: 16-byte weight and input loads and the 8-element
// dot product and down accumulation with the reference's rounding points (TWELL_SPEC §2.2, §2.5):
// bf16 products summed in fp32 by default, all-fp32 FMAs in highest precision.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace twell::cuda::up_down {

__device__ __forceinline__ uint4 load_streaming(const __nv_bfloat16* address) {
  return __ldcs(reinterpret_cast<const uint4*>(address));
}
// Weight rows: default caching, so the hot rows of both matrices stay in L2 across tokens.
__device__ __forceinline__ uint4 load_weight(const __nv_bfloat16* address) {
  return __ldg(reinterpret_cast<const uint4*>(address));
}

__device__ __forceinline__ __nv_bfloat162 as_bf162(std::uint32_t bits) {
  return *reinterpret_cast<const __nv_bfloat162*>(&bits);
}

// <x, w> over 8 elements. Default: bf16 products (rounded, as the reference's hmul2), fp32 sum.
template <bool kHighest>
__device__ __forceinline__ float dot8(const uint4& x, const uint4& w) {
  const std::uint32_t xs[4] = {x.x, x.y, x.z, x.w};
  const std::uint32_t ws[4] = {w.x, w.y, w.z, w.w};
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kHighest) {
      const float2 xf = __bfloat1622float2(as_bf162(xs[i]));
      const float2 wf = __bfloat1622float2(as_bf162(ws[i]));
      sum = fmaf(xf.x, wf.x, sum);
      sum = fmaf(xf.y, wf.y, sum);
    } else {
      const float2 product = __bfloat1622float2(__hmul2(as_bf162(xs[i]), as_bf162(ws[i])));
      sum += product.x;
      sum += product.y;
    }
  }
  return sum;
}

// acc += h * w over 8 elements. Default: bf16 products, fp32 accumulation.
template <bool kHighest>
__device__ __forceinline__ void accumulate8(float (&acc)[8], float h, __nv_bfloat16 h_bf16, const uint4& w) {
  const std::uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kHighest) {
      const float2 wf = __bfloat1622float2(as_bf162(ws[i]));
      acc[2 * i] = fmaf(h, wf.x, acc[2 * i]);
      acc[2 * i + 1] = fmaf(h, wf.y, acc[2 * i + 1]);
    } else {
      const float2 product = __bfloat1622float2(__hmul2(__bfloat162bfloat162(h_bf16), as_bf162(ws[i])));
      acc[2 * i] += product.x;
      acc[2 * i + 1] += product.y;
    }
  }
}

// The 8 fp32 accumulators rounded to bf16 (RN) as one 16-byte vector.
__device__ __forceinline__ uint4 round_to_bf16x8(const float (&acc)[8]) {
  uint4 packed;
  std::uint32_t* words = &packed.x;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
    words[i] = *reinterpret_cast<const std::uint32_t*>(&pair);
  }
  return packed;
}

}  // namespace twell::cuda::up_down
