// SPDX-License-Identifier: GPL-3.0-or-later
// Device-side inputs for the GPU benchmarks, too large to build on the host at M 131 072: Gaussian
// bf16 matrices whose column 0 holds a constant (MODELS.md §4's bias channel).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace twell::test {
namespace device_fill_detail {

// Box-Muller on a splitmix64 stream keyed by the element index, so the values do not depend on the
// launch shape.
__global__ void fill_gaussian_kernel(__nv_bfloat16* out, std::size_t count, std::uint64_t seed, float scale,
                                     int row_length, float column0) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u1 = ((z >> 40) + 1) * (1.0f / 16777217.0f);
    const float u2 = ((z >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
    float value = scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (i % row_length == 0) value = column0;
    out[i] = __float2bfloat16_rn(value);
  }
}

}  // namespace device_fill_detail

/// Fills `count` elements (rows of `row_length`) with N(0, scale^2) draws from `seed`, then sets each
/// row's column 0 to `column0`. Asynchronous on the default stream; check with cudaGetLastError.
inline void fill_gaussian_bf16(__nv_bfloat16* out, std::size_t count, std::uint64_t seed, float scale,
                               int row_length, float column0) {
  device_fill_detail::fill_gaussian_kernel<<<1024, 256>>>(out, count, seed, scale, row_length, column0);
}

}  // namespace twell::test
