// SPDX-License-Identifier: GPL-3.0-or-later
// The TwELL consumer with one warp per token (hidden <= 2048). Lane l owns the 16-byte chunks
// l, l + 32, l + 64, ... of D, so the output accumulators stay in registers (x in the warp's slice of
// shared memory) and every weight access is a coalesced 512-byte warp load. Why a warp and not a CTA per
// token: the dot products reduce with shuffles alone, no block barrier stalls the loads, and an SM keeps many
// more tokens (each with its weight rows in flight) resident than with one 256-thread CTA per token.
//
// Persistent warps: while a warp computes one token, cp.async brings its next token's x row and
// the head of its packed row into shared memory, so the HBM latency of a token's inputs hides
// behind the previous token's L2 traffic. The packed row is scanned 8 groups of 32 words at a time,
// its live entries compacted across tiles into a per-warp list in shared memory with a ballot, and
// the list consumed two non-zeros at a time (one in highest precision): both up rows in flight, two
// interleaved butterfly reductions, then both down rows in flight. Warps never wait on each other,
// so a token with many non-zeros only delays its own warp.
#include <cuda_bf16.h>

#include <algorithm>

#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell_up_down_math.cuh"

namespace twell::cuda {
namespace {

using up_down::accumulate8;
using up_down::dot8;

constexpr int kWarpsPerCta = 4;
constexpr int kMaxChunksPerLane = 8;  // 8 x 32 lanes x 8 elements = D 2048
constexpr int kGroupsPerBatch = 8;    // 32-word groups of the packed row loaded together
constexpr int kBatchWords = kGroupsPerBatch * 32;
constexpr int kListCapacity = 2 * kBatchWords;  // a batch adds at most kBatchWords entries
constexpr int kPrefetchWords = 1024;            // head of the packed row fetched ahead (all of it at
                                                // N 5632 for C = 8 and 4); the rest is read in place

struct WarpParams {
  const __nv_bfloat16* x;
  const std::uint32_t* packed;
  const __nv_bfloat16* up;
  const __nv_bfloat16* down_t;
  const std::uint32_t* row_flags;
  __nv_bfloat16* out;
  int rows, hidden, chunks;  // chunks = D / 8
  int words_per_row, groups_per_tile;
  std::uint32_t capacity;
};

template <bool kGated, bool kHighest>
struct TokenState {
  const uint4* x;  // the token's x row in shared memory, D / 8 vectors
  float acc[kMaxChunksPerLane][8];
};

// x lives in shared memory, not registers: registers would hold it (and, in highest precision, its
// fp32 widening hoisted out of the loop) on top of the accumulators and two weight rows, and the
// gated kernel would run at 8 warps per SM. A volatile load keeps the compiler from hoisting it back.
__device__ __forceinline__ uint4 load_shared_vector(const uint4* address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(address))));
  return v;
}

// Consumes list[0, count), kGroup non-zeros per step (their rows in flight together).
template <bool kGated, bool kHighest, int kGroup>
__device__ __forceinline__ void consume(const WarpParams& p, const std::uint32_t* list, int count, int lane,
                                        TokenState<kGated, kHighest>& state) {
  for (int first = 0; first < count; first += kGroup) {
    std::uint32_t word[kGroup];
    bool live[kGroup];
    std::size_t neuron[kGroup];
#pragma unroll
    for (int e = 0; e < kGroup; ++e) {
      live[e] = first + e < count;
      word[e] = live[e] ? list[first + e] : 0u;
      neuron[e] = word[e] & 0xffffu;
    }

    float h[kGroup];
    __nv_bfloat16 h_bf16[kGroup];
    if constexpr (kGated) {
      uint4 up_rows[kGroup][kMaxChunksPerLane];
#pragma unroll
      for (int e = 0; e < kGroup; ++e)
#pragma unroll
        for (int c = 0; c < kMaxChunksPerLane; ++c) {
          const int chunk = lane + 32 * c;
          up_rows[e][c] = make_uint4(0, 0, 0, 0);
          if (live[e] && chunk < p.chunks)
            up_rows[e][c] = up_down::load_weight(p.up + neuron[e] * p.hidden + chunk * 8);
        }
      float partial[kGroup];
#pragma unroll
      for (int e = 0; e < kGroup; ++e) {
        partial[e] = 0.0f;
#pragma unroll
        for (int c = 0; c < kMaxChunksPerLane; ++c)
          if (lane + 32 * c < p.chunks)
            partial[e] += dot8<kHighest>(load_shared_vector(state.x + lane + 32 * c), up_rows[e][c]);
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1)  // the group's reductions interleaved
#pragma unroll
        for (int e = 0; e < kGroup; ++e) partial[e] += __shfl_xor_sync(0xffffffffu, partial[e], offset);
#pragma unroll
      for (int e = 0; e < kGroup; ++e) {
        const __nv_bfloat16 gate = __ushort_as_bfloat16(static_cast<unsigned short>(word[e] >> 16));
        if constexpr (kHighest) {
          h[e] = __bfloat162float(gate) * partial[e];
          h_bf16[e] = __float2bfloat16_rn(0.0f);
        } else {
          h_bf16[e] = __hmul(gate, __float2bfloat16_rn(partial[e]));
          h[e] = 0.0f;
        }
      }
    } else {
#pragma unroll
      for (int e = 0; e < kGroup; ++e) {
        h_bf16[e] = __ushort_as_bfloat16(static_cast<unsigned short>(word[e] >> 16));
        h[e] = __bfloat162float(h_bf16[e]);
      }
    }

    uint4 down_rows[kGroup][kMaxChunksPerLane];
#pragma unroll
    for (int e = 0; e < kGroup; ++e)
#pragma unroll
      for (int c = 0; c < kMaxChunksPerLane; ++c) {
        const int chunk = lane + 32 * c;
        down_rows[e][c] = make_uint4(0, 0, 0, 0);
        if (live[e] && chunk < p.chunks)
          down_rows[e][c] = up_down::load_weight(p.down_t + neuron[e] * p.hidden + chunk * 8);
      }
#pragma unroll
    for (int e = 0; e < kGroup; ++e) {
      if (!live[e]) continue;
#pragma unroll
      for (int c = 0; c < kMaxChunksPerLane; ++c)
        accumulate8<kHighest>(state.acc[c], h[e], h_bf16[e], down_rows[e][c]);
    }
  }
}

// Asynchronous 16-byte global -> shared copies (L2 only: the data is read once), so a warp fetches
// its next token's x row and packed row while it computes the current token.
__device__ __forceinline__ void copy_async16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                   static_cast<std::uint32_t>(__cvta_generic_to_shared(shared))),
               "l"(global)
               : "memory");
}
__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void wait_all_but_newest_copies() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

// Per-warp shared memory: two buffers (current token, next token) for x and for the head of the
// packed row, and the entry list.
struct WarpShared {
  uint4 x[2][kMaxChunksPerLane * 32];
  std::uint32_t packed[2][kPrefetchWords];
  std::uint32_t list[kListCapacity];
};

__device__ __forceinline__ void prefetch_token(const WarpParams& p, int row, WarpShared& shared, int buffer,
                                               int lane, bool gated) {
  if (gated) {
    const __nv_bfloat16* x_row = p.x + static_cast<std::size_t>(row) * p.hidden;
    for (int chunk = lane; chunk < p.chunks; chunk += 32)
      copy_async16(&shared.x[buffer][chunk], x_row + chunk * 8);
  }
  const std::uint32_t* packed_row = p.packed + static_cast<std::size_t>(row) * p.words_per_row;
  const int words = min(p.words_per_row, kPrefetchWords);
  for (int vector = lane; vector < words / 4; vector += 32)
    copy_async16(&shared.packed[buffer][vector * 4], packed_row + vector * 4);
}

// Persistent: each warp walks tokens warp_id, warp_id + warps, ..., prefetching the next one.
// Two non-zeros in flight by default; one in highest precision, whose fp32 widening of x and the
// weights would otherwise spill.
template <bool kGated, bool kHighest>
__global__ void __launch_bounds__(kWarpsPerCta * 32) twell_up_down_warp_kernel(const WarpParams p) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  WarpShared& shared = reinterpret_cast<WarpShared*>(shared_bytes)[warp];
  const int stride = gridDim.x * kWarpsPerCta;
  const unsigned lanes_below = (1u << lane) - 1u;
  const int prefetched_words = min(p.words_per_row, kPrefetchWords);

  int row = blockIdx.x * kWarpsPerCta + warp;
  if (row < p.rows) prefetch_token(p, row, shared, 0, lane, kGated);
  commit_copies();
  for (int buffer = 0; row < p.rows; row += stride, buffer ^= 1) {
    const int next = row + stride;
    if (next < p.rows) prefetch_token(p, next, shared, buffer ^ 1, lane, kGated);
    commit_copies();  // possibly empty: the wait below always leaves exactly the newest group pending
    wait_all_but_newest_copies();
    __syncwarp();
    if (p.row_flags != nullptr && p.row_flags[row] != 0u) continue;  // recomputed densely afterwards

    TokenState<kGated, kHighest> state;
    state.x = shared.x[buffer];
#pragma unroll
    for (int c = 0; c < kMaxChunksPerLane; ++c)
#pragma unroll
      for (int i = 0; i < 8; ++i) state.acc[c][i] = 0.0f;

    const std::uint32_t* packed_row = p.packed + static_cast<std::size_t>(row) * p.words_per_row;
    const std::uint32_t* packed_head = shared.packed[buffer];
    int filled = 0;
    for (int batch = 0; batch < p.words_per_row; batch += kBatchWords) {
      std::uint32_t words[kGroupsPerBatch];
#pragma unroll
      for (int g = 0; g < kGroupsPerBatch; ++g) {
        const int index = batch + g * 32 + lane;
        words[g] = index < prefetched_words  ? packed_head[index]
                   : index < p.words_per_row ? __ldcs(packed_row + index)
                                             : 0u;
      }
      // Each group's tile count sits in lane 0 of the tile's first group (a tile spans 1, 2 or 4
      // groups for C = 8, 4, 2; a batch always starts on a tile boundary).
      std::uint32_t group_count[kGroupsPerBatch];
#pragma unroll
      for (int g = 0; g < kGroupsPerBatch; ++g)
        group_count[g] = min(__shfl_sync(0xffffffffu, words[g], 0), p.capacity);
      if (filled > kListCapacity - kBatchWords) {
        consume<kGated, kHighest, kHighest ? 1 : 2>(p, shared.list, filled, lane, state);
        filled = 0;
        __syncwarp();
      }
#pragma unroll
      for (int g = 0; g < kGroupsPerBatch; ++g) {
        const int in_tile = g % p.groups_per_tile;  // 0 .. groups_per_tile - 1
        const std::uint32_t count = p.groups_per_tile == 1   ? group_count[g]
                                    : p.groups_per_tile == 2 ? group_count[g & ~1]
                                                             : group_count[g & ~3];
        const std::uint32_t slot = static_cast<std::uint32_t>(in_tile * 32 + lane);
        const bool live = batch + g * 32 < p.words_per_row && slot >= 1u && slot <= count;
        const unsigned ballot = __ballot_sync(0xffffffffu, live);
        if (live) shared.list[filled + __popc(ballot & lanes_below)] = words[g];
        filled += __popc(ballot);
      }
      __syncwarp();
    }
    consume<kGated, kHighest, kHighest ? 1 : 2>(p, shared.list, filled, lane, state);

    const std::size_t row_offset = static_cast<std::size_t>(row) * p.hidden;
#pragma unroll
    for (int c = 0; c < kMaxChunksPerLane; ++c) {
      const int chunk = lane + 32 * c;
      if (chunk < p.chunks)
        __stcs(reinterpret_cast<uint4*>(p.out + row_offset + chunk * 8),
               up_down::round_to_bf16x8(state.acc[c]));
    }
    __syncwarp();  // this token's buffers are the target of the prefetch issued next iteration
  }
  // Leave no copy in flight into shared memory when the warp exits.
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

template <bool kGated, bool kHighest>
void launch_persistent(const WarpParams& params, int rows, cudaStream_t stream) {
  auto* kernel = twell_up_down_warp_kernel<kGated, kHighest>;
  constexpr int kSharedBytes = kWarpsPerCta * static_cast<int>(sizeof(WarpShared));
  TWELL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes));
  int device = 0, multiprocessors = 0, per_multiprocessor = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  TWELL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel,
                                                                 kWarpsPerCta * 32, kSharedBytes));
  const int needed = (rows + kWarpsPerCta - 1) / kWarpsPerCta;
  const int resident = std::max(1, per_multiprocessor) * multiprocessors;
  kernel<<<std::min(needed, resident), kWarpsPerCta * 32, kSharedBytes, stream>>>(params);
}

}  // namespace

void launch_twell_up_down_per_token_warp(const UpDownArgs& args, cudaStream_t stream) {
  WarpParams params{};
  params.x = args.x;
  params.packed = args.packed;
  params.up = args.up;
  params.down_t = args.down_t;
  params.row_flags = args.row_flags;
  params.out = args.out;
  params.rows = args.rows;
  params.hidden = args.hidden;
  params.chunks = args.hidden / 8;
  params.words_per_row = args.padded_neurons / static_cast<int>(args.compression);
  const int slots = 256 / static_cast<int>(args.compression);
  params.groups_per_tile = slots / 32;
  params.capacity = static_cast<std::uint32_t>(slots - 1);

  const bool gated = args.up != nullptr;
  if (gated && args.highest_precision) {
    launch_persistent<true, true>(params, args.rows, stream);
  } else if (gated) {
    launch_persistent<true, false>(params, args.rows, stream);
  } else if (args.highest_precision) {
    launch_persistent<false, true>(params, args.rows, stream);
  } else {
    launch_persistent<false, false>(params, args.rows, stream);
  }
  TWELL_CUDA_CHECK_LAUNCH("twell_up_down_warp_kernel (one warp per token)");
}

}  // namespace twell::cuda
