// SPDX-License-Identifier: GPL-3.0-or-later
// The warp-level arithmetic of the CTA consumers, where each thread owns 8 contiguous elements of
// D: dot products of four rows at once summed across the warp, and the down accumulation of four
// rows into the thread's own elements, both with the bf16 products summed in fp32 on the tensor
// cores in default precision (TWELL_SPEC §2.2, §2.5). Shared by the per-token CTA kernel and the
// persistent bulk-copy kernel, which differ in where the rows come from (registers or shared memory).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "mma_sync.cuh"
#include "twell_up_down_math.cuh"

namespace twell::cuda::up_down {

constexpr std::uint32_t kOnes = 0x3f803f80u;  // two bf16 1.0, one 32-bit MMA operand register

// Folds four per-lane values across the lanes 16 and 8 apart, halving the values a lane holds at
// each exchange: afterwards lane l holds value (l >> 3) & 3 summed over lanes l, l ^ 8, l ^ 16, l ^ 24.
__device__ __forceinline__ float fold_four_across_lane_groups(float (&v)[4], int lane) {
  {
    const bool upper = lane & 16;
    const float send0 = upper ? v[0] : v[2], send1 = upper ? v[1] : v[3];
    const float keep0 = upper ? v[2] : v[0], keep1 = upper ? v[3] : v[1];
    v[0] = keep0 + __shfl_xor_sync(0xffffffffu, send0, 16);
    v[1] = keep1 + __shfl_xor_sync(0xffffffffu, send1, 16);
  }
  const bool upper = lane & 8;
  const float send = upper ? v[0] : v[1], keep = upper ? v[1] : v[0];
  return keep + __shfl_xor_sync(0xffffffffu, send, 8);
}

// Sums four values over the warp with far fewer shuffles than one reduction per value. Afterwards
// lane l holds the warp total of value (l >> 3) & 3 (lanes 0, 8, 16, 24 hold values 0..3).
__device__ __forceinline__ float warp_sum_four(float (&v)[4], int lane) {
  float total = fold_four_across_lane_groups(v, lane);
  total += __shfl_xor_sync(0xffffffffu, total, 4);
  total += __shfl_xor_sync(0xffffffffu, total, 2);
  total += __shfl_xor_sync(0xffffffffu, total, 1);
  return total;
}

__device__ __forceinline__ std::uint32_t hmul2_bits(std::uint32_t a, std::uint32_t b) {
  const __nv_bfloat162 product = __hmul2(as_bf162(a), as_bf162(b));
  return *reinterpret_cast<const std::uint32_t*>(&product);
}

// <x, w_i> over the warp's 256 elements for four rows, default precision: the bf16 products (HMUL2,
// rounded as the reference's) summed exactly in fp32 by the tensor cores, an m16n8k16 MMA against a
// matrix of ones; row g of A carries rows 0 and 2, row g + 8 rows 1 and 3, so C[g] and C[g + 8] hold
// each row's sum over the four lanes of group g, and four shuffles finish the warp. Lane l ends with
// the total of row (l >> 3) & 3, like warp_sum_four.
__device__ __forceinline__ float warp_dot_four_bf16(const uint4& x, const uint4 (&w)[4], int lane) {
  float rows01[4] = {0.0f, 0.0f, 0.0f, 0.0f}, rows23[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // Each MMA's products are formed just before it: fewer of them live at once.
  mma::mma_bf16_16816(rows01, hmul2_bits(x.x, w[0].x), hmul2_bits(x.x, w[1].x), hmul2_bits(x.y, w[0].y),
                      hmul2_bits(x.y, w[1].y), kOnes, kOnes);
  mma::mma_bf16_16816(rows01, hmul2_bits(x.z, w[0].z), hmul2_bits(x.z, w[1].z), hmul2_bits(x.w, w[0].w),
                      hmul2_bits(x.w, w[1].w), kOnes, kOnes);
  mma::mma_bf16_16816(rows23, hmul2_bits(x.x, w[2].x), hmul2_bits(x.x, w[3].x), hmul2_bits(x.y, w[2].y),
                      hmul2_bits(x.y, w[3].y), kOnes, kOnes);
  mma::mma_bf16_16816(rows23, hmul2_bits(x.z, w[2].z), hmul2_bits(x.z, w[3].z), hmul2_bits(x.w, w[2].w),
                      hmul2_bits(x.w, w[3].w), kOnes, kOnes);
  // The four lanes of a group hold the same sums; only the row groups (lane bits 2..4) remain.
  float v[4] = {rows01[0], rows01[2], rows23[0], rows23[2]};
  const float total = fold_four_across_lane_groups(v, lane);
  return total + __shfl_xor_sync(0xffffffffu, total, 4);
}

// out[d] += sum_i h_i * Wd^T[i][d] for four rows and the thread's 8 elements, default precision: the
// bf16 products (HMUL2, rounded as the reference's) are paired by element across two rows (PRMT) and
// summed in fp32 by the tensor cores into the thread's own accumulators. In one m16n8k16 MMA, lane
// (g, q) puts element e0 in a0, e1 in a2, e2 in a1 and e3 in a3 (two rows' products each); B keeps,
// in output column 2q, only a0's k-positions of lane q and in column 2q + 1 only a2's, so C[g][2q],
// C[g][2q + 1], C[g + 8][2q], C[g + 8][2q + 1] are this lane's e0..e3: c[E][j] is element 4E + j.
struct OwnLaneSelectors {
  std::uint32_t b0, b1;
};
__device__ __forceinline__ OwnLaneSelectors own_lane_selectors(int lane) {
  const int column = lane >> 2, q = lane & 3;  // this lane supplies B's column `column`
  const bool mine = q == (column >> 1);
  return {mine && (column & 1) == 0 ? kOnes : 0u, mine && (column & 1) == 1 ? kOnes : 0u};
}
__device__ __forceinline__ void accumulate_four_bf16(float (&c)[2][4], const __nv_bfloat16 (&h)[4],
                                                     const uint4 (&w)[4], OwnLaneSelectors select) {
  const std::uint32_t rows[4][4] = {{w[0].x, w[0].y, w[0].z, w[0].w},
                                    {w[1].x, w[1].y, w[1].z, w[1].w},
                                    {w[2].x, w[2].y, w[2].z, w[2].w},
                                    {w[3].x, w[3].y, w[3].z, w[3].w}};
#pragma unroll
  for (int pair = 0; pair < 2; ++pair) {
    const __nv_bfloat162 h_pair = __halves2bfloat162(h[2 * pair], h[2 * pair + 1]);
    const std::uint32_t h_bits = *reinterpret_cast<const std::uint32_t*>(&h_pair);
    const std::uint32_t(&a)[4] = rows[2 * pair];
    const std::uint32_t(&b)[4] = rows[2 * pair + 1];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::uint32_t e0 = hmul2_bits(__byte_perm(a[2 * half], b[2 * half], 0x5410), h_bits);
      const std::uint32_t e1 = hmul2_bits(__byte_perm(a[2 * half], b[2 * half], 0x7632), h_bits);
      const std::uint32_t e2 = hmul2_bits(__byte_perm(a[2 * half + 1], b[2 * half + 1], 0x5410), h_bits);
      const std::uint32_t e3 = hmul2_bits(__byte_perm(a[2 * half + 1], b[2 * half + 1], 0x7632), h_bits);
      mma::mma_bf16_16816(c[half], e0, e2, e1, e3, select.b0, select.b1);
    }
  }
}

// <x, w_i> for four rows in highest precision: fp32 FMAs of the widened operands, shuffle reduction.
__device__ __forceinline__ float warp_dot_four_fp32(const uint4& x, const uint4 (&w)[4], int lane) {
  float partial[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) partial[i] = dot8<true>(x, w[i]);
  return warp_sum_four(partial, lane);
}

}  // namespace twell::cuda::up_down
