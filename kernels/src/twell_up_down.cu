// SPDX-License-Identifier: GPL-3.0-or-later
// The fused TwELL consumer. One CTA per token; thread t owns the 8 contiguous elements [8t, 8t+8)
// of D, so the x row and the output accumulators live in registers (4 and 8 per thread) and every
// weight access is a coalesced 16-byte load. The packed row is read once, compacted across tiles
// in shared memory, then consumed 4 non-zeros at a time: their 4 up rows and 4 down rows in flight
// together, one block reduction of 4 dot products, then the down accumulation. The hidden
// activation never leaves registers.
#include <cuda_bf16.h>

#include <string>

#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell_up_down_math.cuh"

namespace twell::cuda {
namespace {

using up_down::accumulate8;
using up_down::dot8;
using up_down::load_streaming;
using up_down::load_weight;

// Tuned on H200 at D 2048, N 5632, M 131072 (resources/benchmarks/h200-ffn-2026-12-02-run2.json):
// groups of 4 with the down rows loaded alongside the up rows and 6 CTAs per SM (40 registers)
// took the consumer from 5.66 to 4.98 ms at 0.5 % against groups of 8 loaded in two round trips at
// 3 CTAs per SM; ncu had shown the old kernel issue-bound at 37 % occupancy.
constexpr int kGroup = 4;      // non-zeros consumed per reduction
constexpr int kMinBlocks = 6;  // CTAs of 256 threads per SM the register budget allows
static_assert(kGroup == 4 || kGroup == 8, "entries and partials are read four at a time");
constexpr int kChunkWords = 1024;  // packed words staged per pass (32 tiles at C = 8)
constexpr int kMaxWarps = 32;

struct UpDownParams {
  const __nv_bfloat16* x;
  const std::uint32_t* packed;
  const __nv_bfloat16* up;
  const __nv_bfloat16* down_t;
  const std::uint32_t* row_flags;
  __nv_bfloat16* out;
  int hidden, chunks;  // chunks = D / 8 = threads doing work
  int tiles, slots_per_tile, words_per_row;
  int slot_shift;  // log2(slots_per_tile): slots are 32, 64 or 128
};

// Sums each of the kGroup partial values over the warp with far fewer shuffles than one reduction
// per value: every exchange halves the values a lane holds, then the last value is summed over the
// remaining lanes. Afterwards the lane holds the warp total of value group_index(lane).
constexpr int kLastHalvingOffset = 32 / kGroup;  // 4 for a group of 8
__device__ __forceinline__ float warp_reduce_group(float (&v)[kGroup], int lane) {
#pragma unroll
  for (int offset = 16, count = kGroup; count > 1; offset >>= 1, count >>= 1) {
    const bool upper = lane & offset;
#pragma unroll
    for (int i = 0; i < count / 2; ++i) {
      const float send = upper ? v[i] : v[i + count / 2];
      const float keep = upper ? v[i + count / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
  }
  float total = v[0];
#pragma unroll
  for (int offset = kLastHalvingOffset / 2; offset > 0; offset >>= 1)
    total += __shfl_xor_sync(0xffffffffu, total, offset);
  return total;
}
__device__ __forceinline__ int group_index(int lane) {
  int index = 0;
#pragma unroll
  for (int offset = 16, weight = kGroup / 2; weight > 0; offset >>= 1, weight >>= 1)
    if (lane & offset) index += weight;
  return index;
}

// kMaxThreads bounds the CTA (D / 8 rounded up to warps): small CTAs get registers enough for the
// 8 up rows in flight without spilling and still keep 3 CTAs on each SM.
template <bool kGated, bool kHighest, int kMaxThreads>
__global__ void __launch_bounds__(kMaxThreads, kMaxThreads <= 256 ? kMinBlocks : 1)
    twell_up_down_kernel(const UpDownParams p) {
  __shared__ std::uint32_t row_words[kChunkWords];
  __shared__ __align__(16) std::uint32_t entries[kChunkWords];
  __shared__ std::uint32_t tile_offset[32];
  __shared__ std::uint32_t entry_total;
  __shared__ __align__(16) float partials[2][kMaxWarps][kGroup];

  const std::size_t row = blockIdx.x;
  if (p.row_flags != nullptr && p.row_flags[row] != 0u) return;  // recomputed densely afterwards

  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, warps = blockDim.x >> 5;
  const bool active = t < p.chunks;
  const std::size_t column = static_cast<std::size_t>(t) * 8;

  uint4 x = make_uint4(0, 0, 0, 0);
  if (kGated && active) x = load_streaming(p.x + row * p.hidden + column);
  float acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.0f;

  const int slots = p.slots_per_tile;
  const std::uint32_t capacity = static_cast<std::uint32_t>(slots - 1);
  const int tiles_per_pass = kChunkWords / slots;
  int parity = 0;

  for (int tile0 = 0; tile0 < p.tiles; tile0 += tiles_per_pass) {
    const int pass_tiles = min(tiles_per_pass, p.tiles - tile0);
    const int pass_words = pass_tiles * slots;
    const std::uint32_t* source = p.packed + row * p.words_per_row + static_cast<std::size_t>(tile0) * slots;
    for (int w = t; w < pass_words; w += blockDim.x) row_words[w] = __ldcs(source + w);
    __syncthreads();

    if (warp == 0) {  // exclusive scan of the (clamped) tile counts
      const std::uint32_t count = lane < pass_tiles ? min(row_words[lane * slots], capacity) : 0u;
      std::uint32_t inclusive = count;
#pragma unroll
      for (int offset = 1; offset < 32; offset <<= 1) {
        const std::uint32_t other = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive += other;
      }
      tile_offset[lane] = inclusive - count;
      if (lane == 31) entry_total = inclusive;
    }
    __syncthreads();

    for (int w = t; w < pass_words; w += blockDim.x) {
      const int tile = w >> p.slot_shift, slot = w & (slots - 1);
      const std::uint32_t count = min(row_words[tile * slots], capacity);
      if (slot >= 1 && static_cast<std::uint32_t>(slot) <= count)
        entries[tile_offset[tile] + slot - 1] = row_words[w];
    }
    __syncthreads();
    const int total = static_cast<int>(entry_total);

    for (int first = 0; first < total; first += kGroup) {
      // Entries are re-read from shared memory where needed rather than held across the reduction.
      // The group's entries in registers (one 16-byte shared load per 4); zero past the end.
      std::uint32_t group[kGroup];
#pragma unroll
      for (int i = 0; i < kGroup; i += 4) {
        const uint4 four = *reinterpret_cast<const uint4*>(&entries[first + i]);
        group[i] = four.x, group[i + 1] = four.y, group[i + 2] = four.z, group[i + 3] = four.w;
      }
#pragma unroll
      for (int i = 0; i < kGroup; ++i)
        if (first + i >= total) group[i] = 0u;
      const auto entry_at = [&](int i) { return group[i]; };
      float h[kGroup] = {};
      __nv_bfloat16 h_bf16[kGroup] = {};
      // The rows of the group's non-zeros from an [N, D] matrix, zero past the end.
      const auto load_rows = [&](const __nv_bfloat16* matrix, uint4(&rows)[kGroup]) {
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          rows[i] = make_uint4(0, 0, 0, 0);
          if (active && first + i < total)
            rows[i] =
                load_weight(matrix + static_cast<std::size_t>(entry_at(i) & 0xffffu) * p.hidden + column);
        }
      };
      uint4 down_rows[kGroup];
      if constexpr (kGated) {
        float partial[kGroup];
        uint4 up_rows[kGroup];
        load_rows(p.up, up_rows);
        // The down rows do not depend on the reduction: in flight with the up rows, one memory
        // round trip per group instead of two.
        load_rows(p.down_t, down_rows);
#pragma unroll
        for (int i = 0; i < kGroup; ++i) partial[i] = dot8<kHighest>(x, up_rows[i]);
        const float warp_total = warp_reduce_group(partial, lane);
        if ((lane & (kLastHalvingOffset - 1)) == 0) partials[parity][warp][group_index(lane)] = warp_total;
        __syncthreads();
        float u[kGroup];
#pragma unroll
        for (int i = 0; i < kGroup; ++i) u[i] = 0.0f;
        for (int w = 0; w < warps; ++w) {
#pragma unroll
          for (int i = 0; i < kGroup; i += 4) {
            const float4 four = *reinterpret_cast<const float4*>(&partials[parity][w][i]);
            u[i] += four.x, u[i + 1] += four.y, u[i + 2] += four.z, u[i + 3] += four.w;
          }
        }
        parity ^= 1;  // double buffer: the next group's writes cannot race this group's reads
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          const __nv_bfloat16 gate = __ushort_as_bfloat16(static_cast<unsigned short>(entry_at(i) >> 16));
          if constexpr (kHighest) {
            h[i] = __bfloat162float(gate) * u[i];
          } else {
            h_bf16[i] = __hmul(gate, __float2bfloat16_rn(u[i]));
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          h_bf16[i] = __ushort_as_bfloat16(static_cast<unsigned short>(entry_at(i) >> 16));
          h[i] = __bfloat162float(h_bf16[i]);
        }
        load_rows(p.down_t, down_rows);
      }

#pragma unroll
      for (int i = 0; i < kGroup; ++i)
        if (first + i < total) accumulate8<kHighest>(acc, h[i], h_bf16[i], down_rows[i]);
    }
    __syncthreads();  // the staged words and entries are rewritten by the next pass
  }

  if (active) {
    __stcs(reinterpret_cast<uint4*>(p.out + row * p.hidden + column), up_down::round_to_bf16x8(acc));
  }
}

template <int kMaxThreads>
void launch_variant(const UpDownParams& params, bool gated, bool highest, int rows, int threads,
                    cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows));
  if (gated && highest) {
    twell_up_down_kernel<true, true, kMaxThreads><<<grid, threads, 0, stream>>>(params);
  } else if (gated) {
    twell_up_down_kernel<true, false, kMaxThreads><<<grid, threads, 0, stream>>>(params);
  } else if (highest) {
    twell_up_down_kernel<false, true, kMaxThreads><<<grid, threads, 0, stream>>>(params);
  } else {
    twell_up_down_kernel<false, false, kMaxThreads><<<grid, threads, 0, stream>>>(params);
  }
}

}  // namespace

const char* to_string(UpDownKernel kernel) noexcept {
  switch (kernel) {
    case UpDownKernel::Auto:
      return "auto";
    case UpDownKernel::PerTokenCta:
      return "per_token_cta";
    case UpDownKernel::PerTokenWarp:
      return "per_token_warp";
  }
  return "unknown";
}

bool up_down_per_token_warp_supported(int hidden) {
  return hidden > 0 && hidden % 64 == 0 && hidden <= 2048;
}

// Auto is the CTA-per-token kernel everywhere: on H200 (resources/benchmarks/h200-ffn-hopper-*.json)
// the warp-per-token kernel measured within noise of it at M 131072 and 0.25-0.5 % density and
// 5-18 % slower at M 16384 and at 1-5 %.
UpDownKernel resolve_up_down_kernel(UpDownKernel requested, int /*hidden*/) {
  return requested == UpDownKernel::Auto ? UpDownKernel::PerTokenCta : requested;
}

void launch_twell_up_down(const UpDownArgs& args, cudaStream_t stream) {
  const auto fail = [](const std::string& what) {
    throw Error(Error::Kind::Unsupported, "TwELL up/down kernel: " + what);
  };
  if (args.rows <= 0) fail("rows must be positive (got " + std::to_string(args.rows) + ")");
  if (args.hidden <= 0 || args.hidden % 64 != 0 || args.hidden > 8192)
    fail("hidden size " + std::to_string(args.hidden) + " is not a multiple of 64 in 64..8192");
  if (args.padded_neurons <= 0 || args.padded_neurons % 256 != 0 || args.padded_neurons > 65536)
    fail("padded intermediate size " + std::to_string(args.padded_neurons) +
         " is not a multiple of 256 <= 65536");
  if (args.compression != 8 && args.compression != 4 && args.compression != 2)
    fail("compression factor " + std::to_string(args.compression) + " is not 8, 4 or 2");
  const bool gated = args.up != nullptr;
  if (!args.packed || !args.down_t || !args.out || (gated && !args.x))
    throw Error(Error::Kind::InvalidInput, "TwELL up/down kernel: a device pointer is null");

  const UpDownKernel kernel = resolve_up_down_kernel(args.kernel, args.hidden);
  if (kernel == UpDownKernel::PerTokenWarp) {
    if (!up_down_per_token_warp_supported(args.hidden))
      fail("the one-warp-per-token consumer needs hidden <= 2048 (got " + std::to_string(args.hidden) + ")");
    launch_twell_up_down_per_token_warp(args, stream);
    return;
  }

  UpDownParams params{};
  params.x = args.x;
  params.packed = args.packed;
  params.up = args.up;
  params.down_t = args.down_t;
  params.row_flags = args.row_flags;
  params.out = args.out;
  params.hidden = args.hidden;
  params.chunks = args.hidden / 8;
  params.tiles = args.padded_neurons / 256;
  params.slots_per_tile = 256 / static_cast<int>(args.compression);
  params.words_per_row = args.padded_neurons / static_cast<int>(args.compression);
  params.slot_shift = __builtin_ctz(static_cast<unsigned>(params.slots_per_tile));

  const int threads = (params.chunks + 31) / 32 * 32;
  if (threads <= 256) {
    launch_variant<256>(params, gated, args.highest_precision, args.rows, threads, stream);
  } else if (threads <= 512) {
    launch_variant<512>(params, gated, args.highest_precision, args.rows, threads, stream);
  } else {
    launch_variant<1024>(params, gated, args.highest_precision, args.rows, threads, stream);
  }
  TWELL_CUDA_CHECK_LAUNCH("twell_up_down_kernel (one CTA per token)");
}

}  // namespace twell::cuda
