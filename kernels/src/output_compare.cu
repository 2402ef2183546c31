// SPDX-License-Identifier: GPL-3.0-or-later
// fp64 error sums of two bf16 outputs: per-thread partials, warp shuffles, one atomic per warp.
#include <cuda_bf16.h>

#include <algorithm>

#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/output_compare.hpp"

namespace twell::cuda {

namespace {

struct Partial {
  double reference_sq = 0, candidate_sq = 0, diff_sq = 0, dot = 0, max_abs = 0;
};

__device__ inline void accumulate(Partial& p, float a, float b) {
  const double da = a;
  const double db = b;
  const double diff = db - da;
  p.reference_sq += da * da;
  p.candidate_sq += db * db;
  p.diff_sq += diff * diff;
  p.dot += da * db;
  const double magnitude = fabs(diff);
  // NaN sticks: once seen it is the maximum (its bit pattern also wins the atomicMax below).
  if (!(magnitude <= p.max_abs)) p.max_abs = magnitude;
}

__global__ void error_sums_kernel(const __nv_bfloat16* __restrict__ reference,
                                  const __nv_bfloat16* __restrict__ candidate, std::int64_t count,
                                  bool vector_ok, double* __restrict__ sums) {
  Partial p;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  std::int64_t scalar_begin = 0;
  if (vector_ok) {
    const std::int64_t vectors = count / 8;
    for (std::int64_t v = first; v < vectors; v += stride) {
      const uint4 a_bits = reinterpret_cast<const uint4*>(reference)[v];
      const uint4 b_bits = reinterpret_cast<const uint4*>(candidate)[v];
      const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(&a_bits);
      const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&b_bits);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 fa = __bfloat1622float2(a[i]);
        const float2 fb = __bfloat1622float2(b[i]);
        accumulate(p, fa.x, fb.x);
        accumulate(p, fa.y, fb.y);
      }
    }
    scalar_begin = vectors * 8;
  }
  for (std::int64_t i = scalar_begin + first; i < count; i += stride)
    accumulate(p, __bfloat162float(reference[i]), __bfloat162float(candidate[i]));

#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    p.reference_sq += __shfl_xor_sync(0xffffffffu, p.reference_sq, offset);
    p.candidate_sq += __shfl_xor_sync(0xffffffffu, p.candidate_sq, offset);
    p.diff_sq += __shfl_xor_sync(0xffffffffu, p.diff_sq, offset);
    p.dot += __shfl_xor_sync(0xffffffffu, p.dot, offset);
    const double other = __shfl_xor_sync(0xffffffffu, p.max_abs, offset);
    if (!(other <= p.max_abs)) p.max_abs = other;
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&sums[0], p.reference_sq);
    atomicAdd(&sums[1], p.candidate_sq);
    atomicAdd(&sums[2], p.diff_sq);
    atomicAdd(&sums[3], p.dot);
    // Non-negative doubles order like their bit patterns.
    atomicMax(reinterpret_cast<unsigned long long*>(&sums[4]),
              static_cast<unsigned long long>(__double_as_longlong(p.max_abs)));
  }
}

}  // namespace

ErrorSums output_error_sums(const __nv_bfloat16* reference, const __nv_bfloat16* candidate,
                            std::int64_t count, void* device_scratch, cudaStream_t stream) {
  auto* sums = static_cast<double*>(device_scratch);
  TWELL_CUDA_CHECK(cudaMemsetAsync(sums, 0, kErrorSumsScratchBytes, stream));
  if (count > 0) {
    const bool vector_ok = reinterpret_cast<std::uintptr_t>(reference) % 16 == 0 &&
                           reinterpret_cast<std::uintptr_t>(candidate) % 16 == 0;
    constexpr int kThreads = 256;
    const std::int64_t work = vector_ok ? count / 8 + 8 : count;
    const auto blocks =
        static_cast<unsigned>(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, 2048));
    error_sums_kernel<<<blocks, kThreads, 0, stream>>>(reference, candidate, count, vector_ok, sums);
    TWELL_CUDA_CHECK_LAUNCH("error_sums_kernel");
  }
  double host[5] = {};
  TWELL_CUDA_CHECK(cudaMemcpyAsync(host, sums, sizeof(host), cudaMemcpyDeviceToHost, stream));
  TWELL_CUDA_CHECK(cudaStreamSynchronize(stream));
  ErrorSums result;
  result.reference_sq = host[0];
  result.candidate_sq = host[1];
  result.diff_sq = host[2];
  result.dot = host[3];
  result.max_abs = host[4];
  return result;
}

}  // namespace twell::cuda
