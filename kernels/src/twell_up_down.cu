// SPDX-License-Identifier: GPL-3.0-or-later
// The fused TwELL consumer. One CTA per token; thread t owns the 8 contiguous elements [8t, 8t+8)
// of D, so the x row and the output accumulators live in registers (4 and 8 per thread) and every
// weight access is a coalesced 16-byte load. The packed row is read once, compacted across tiles
// in shared memory, then consumed 8 non-zeros at a time: 8 up rows in flight, one block reduction
// of 8 dot products, then 8 down rows in flight. The hidden activation never leaves registers.
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

constexpr int kGroup = 8;          // non-zeros consumed per reduction
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
};

// Sums each of the 8 partial values over the warp in 9 shuffles instead of 40: every exchange
// halves the values a lane holds. Afterwards the lane holds the warp total of value
// 4*bit4(lane) + 2*bit3(lane) + bit2(lane).
__device__ __forceinline__ float warp_reduce8(float (&v)[kGroup], int lane) {
  {
    const bool upper = lane & 16;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float send = upper ? v[i] : v[i + 4];
      const float keep = upper ? v[i + 4] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
    }
  }
  {
    const bool upper = lane & 8;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float send = upper ? v[i] : v[i + 2];
      const float keep = upper ? v[i + 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
    }
  }
  const bool upper = lane & 4;
  const float send = upper ? v[0] : v[1];
  float total = (upper ? v[1] : v[0]) + __shfl_xor_sync(0xffffffffu, send, 4);
  total += __shfl_xor_sync(0xffffffffu, total, 2);
  total += __shfl_xor_sync(0xffffffffu, total, 1);
  return total;
}

// kMaxThreads bounds the CTA (D / 8 rounded up to warps): small CTAs get registers enough for the
// 8 up rows in flight without spilling and still keep 3 CTAs on each SM.
template <bool kGated, bool kHighest, int kMaxThreads>
__global__ void __launch_bounds__(kMaxThreads, kMaxThreads <= 256 ? 3 : 1)
    twell_up_down_kernel(const UpDownParams p) {
  __shared__ std::uint32_t row_words[kChunkWords];
  __shared__ std::uint32_t entries[kChunkWords];
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
      const int tile = w / slots, slot = w - tile * slots;
      const std::uint32_t count = min(row_words[tile * slots], capacity);
      if (slot >= 1 && static_cast<std::uint32_t>(slot) <= count)
        entries[tile_offset[tile] + slot - 1] = row_words[w];
    }
    __syncthreads();
    const int total = static_cast<int>(entry_total);

    for (int first = 0; first < total; first += kGroup) {
      // Entries are re-read from shared memory where needed rather than held across the reduction.
      const auto entry_at = [&](int i) { return first + i < total ? entries[first + i] : 0u; };
      float h[kGroup] = {};
      __nv_bfloat16 h_bf16[kGroup] = {};
      if constexpr (kGated) {
        float partial[kGroup];
        uint4 up_rows[kGroup];
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          up_rows[i] = make_uint4(0, 0, 0, 0);
          if (active && first + i < total)
            up_rows[i] =
                load_weight(p.up + static_cast<std::size_t>(entry_at(i) & 0xffffu) * p.hidden + column);
        }
#pragma unroll
        for (int i = 0; i < kGroup; ++i) partial[i] = dot8<kHighest>(x, up_rows[i]);
        const float warp_total = warp_reduce8(partial, lane);
        if ((lane & 3) == 0) {
          const int which = ((lane >> 4) & 1) * 4 + ((lane >> 3) & 1) * 2 + ((lane >> 2) & 1);
          partials[parity][warp][which] = warp_total;
        }
        __syncthreads();
        float u[kGroup];
#pragma unroll
        for (int i = 0; i < kGroup; ++i) u[i] = 0.0f;
        for (int w = 0; w < warps; ++w) {
          const float4 low = *reinterpret_cast<const float4*>(&partials[parity][w][0]);
          const float4 high = *reinterpret_cast<const float4*>(&partials[parity][w][4]);
          u[0] += low.x, u[1] += low.y, u[2] += low.z, u[3] += low.w;
          u[4] += high.x, u[5] += high.y, u[6] += high.z, u[7] += high.w;
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
      }

      uint4 down_rows[kGroup];
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        down_rows[i] = make_uint4(0, 0, 0, 0);
        if (active && first + i < total)
          down_rows[i] =
              load_weight(p.down_t + static_cast<std::size_t>(entry_at(i) & 0xffffu) * p.hidden + column);
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
