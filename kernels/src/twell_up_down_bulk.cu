// SPDX-License-Identifier: GPL-3.0-or-later
// The persistent bulk-copy consumer (UpDownKernel::PersistentBulk, compute capability 9.0): the
// per-token CTA consumer's arithmetic, with the rows it reads copied into shared memory ahead of
// use instead of loaded into registers as they are needed.
//
// Why: the CTA consumer keeps four rows per thread in flight and waits at every phase barrier, so at
// M 131072 and 0.5 % it runs at 1.27x the pure gather of its rows (4.08 against 3.21 ms on H200);
// bulk copies of the same rows through the copy engine reach about the same floor (3.29 ms,
// h200-up-down-ceiling-2026-12-02.json) without holding a register.
//
// The body is compiled for sm_90a only (cp.async.bulk and mbarrier transaction counts; the same
// pass the Hopper gate kernel's body is in). Hidden sizes: multiples of 256 up to 2048.
// Shape: one CTA per SM slot, persistent over the tokens blockIdx.x, blockIdx.x + gridDim.x, ...
// Warp 0 produces: it walks each token's packed row in tile order and, per non-zero, copies the up
// row (gated) and the down row into the next free slot of a ring of stages (cp.async.bulk, completion
// counted on the stage's mbarrier), with the token's x row in its first stage. A stage holds up to
// kStageEntries non-zeros of one token. The other warps consume, each thread owning the 8 contiguous
// elements [8c, 8c + 8) of D as in the CTA kernel: every up dot product of the stage, a barrier among
// the consumers, each entry's warp partials added once, a barrier, then every down accumulation; the
// stage goes back to the producer, and the token's output is written after its last stage. The
// arithmetic and its order per token are the CTA kernel's (twell_up_down_lanes.cuh), so the outputs
// match it bit for bit wherever its entry list fits one pass of its shared staging.
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/twell_format.hpp"
#include "twell_dispatch_gate.hpp"
#include "twell_up_down_lanes.cuh"
#include "twell_up_down_math.cuh"

namespace twell::cuda {
namespace {

constexpr int kStageEntries = 8;  // non-zeros a stage holds: a multiple of the lane math's 4 rows
constexpr int kStages = 3;        // 3 x 68 KiB at D 2048: one CTA per SM, about 200 KiB in flight
constexpr int kProducerThreads = 32;
constexpr int kMaxConsumerWarps = 8;  // D <= 2048
constexpr std::uint32_t kEndOfWork = 0xffffffffu;
static_assert(kStageEntries % 4 == 0);

// Written by the producer before it arrives on the stage's full barrier, read by the consumers after
// they waited on it and before they release the stage.
struct StageMeta {
  std::uint32_t words[kStageEntries];  // entry words: column | bf16 value << 16
  std::uint32_t count;                 // entries, or kEndOfWork
  std::uint32_t token;
  std::uint32_t first, last;  // the token's first stage (x is in it) and last (write the output)
};

// Barriers, metadata and the consumers' partial sums, then the stages at a 128-byte boundary.
struct SharedHeader {
  unsigned long long full[kStages], empty[kStages];
  StageMeta meta[kStages];
  float partials[kMaxConsumerWarps][kStageEntries];
  float totals[kStageEntries];
};
constexpr std::size_t kStagesOffset = (sizeof(SharedHeader) + 127) / 128 * 128;

struct BulkParams {
  const __nv_bfloat16* x;
  const std::uint32_t* packed;
  const __nv_bfloat16* up;
  const __nv_bfloat16* down_t;
  const std::uint32_t* row_flags;
  __nv_bfloat16* out;
  int rows, hidden, tiles, slots, words_per_row;
  std::uint32_t capacity;
};

// Stage bytes: the x row, then kStageEntries up rows, then kStageEntries down rows.
__host__ __device__ constexpr std::size_t stage_bytes(int hidden) {
  return static_cast<std::size_t>(hidden) * 2 * (1 + 2 * kStageEntries);
}

// The body is compiled in the sm_90a pass only, the one binary_runs_sm90a_code probes for.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TWELL_BULK_DEVICE 1
#endif

#ifdef TWELL_BULK_DEVICE
// The barrier operations carry "memory" clobbers: the metadata and rows read after a wait, and the
// metadata written before an arrive, must not move across them.
__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}
__device__ __forceinline__ void barrier_init(unsigned long long* barrier, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(count)
               : "memory");
}
// Raises the bytes the barrier's current phase waits for, without arriving.
__device__ __forceinline__ void barrier_expect_bytes(unsigned long long* barrier, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void barrier_arrive(unsigned long long* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}
__device__ __forceinline__ void barrier_wait(unsigned long long* barrier, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred complete;\n"
      "waiting:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 complete, [%0], %1;\n"
      "@!complete bra waiting;\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}
// `bytes` from global memory into this CTA's shared memory, counted on `barrier` when they land.
__device__ __forceinline__ void bulk_copy(void* destination, const void* source, unsigned bytes,
                                          unsigned long long* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          shared_address(destination)),
      "l"(source), "r"(bytes), "r"(shared_address(barrier))
      : "memory");
}
// The consumer warps only (the producer never waits here).
__device__ __forceinline__ void consumers_sync(unsigned threads) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(threads) : "memory");
}

// Fills the ring for this CTA's tokens; ends with a stage whose count is kEndOfWork.
template <bool kGated>
__device__ void produce(const BulkParams& p, SharedHeader& header, unsigned char* stages) {
  const int lane = threadIdx.x & 31;
  const unsigned row_bytes = static_cast<unsigned>(p.hidden) * 2u;
  const unsigned entry_bytes = (kGated ? 2u : 1u) * row_bytes;
  const std::size_t bytes_per_stage = stage_bytes(p.hidden);
  int stage = 0;
  unsigned opened = 0;  // stages opened so far: the ring position and the barrier phases
  bool open = false;
  int fill = 0;
  // Waits until the consumers released the stage's previous contents.
  const auto begin_stage = [&]() {
    if (lane == 0 && opened >= static_cast<unsigned>(kStages))
      barrier_wait(&header.empty[stage], (opened / kStages - 1u) & 1u);
    __syncwarp();
    open = true;
    fill = 0;
  };
  const auto close_stage = [&](std::uint32_t count, std::uint32_t token, bool first, bool last) {
    if (lane == 0) {
      StageMeta& meta = header.meta[stage];
      meta.count = count;
      meta.token = token;
      meta.first = first ? 1u : 0u;
      meta.last = last ? 1u : 0u;
      barrier_arrive(&header.full[stage]);
    }
    __syncwarp();
    open = false;
    stage = stage + 1 == kStages ? 0 : stage + 1;
    ++opened;
  };

  for (int token = blockIdx.x; token < p.rows; token += gridDim.x) {
    if (p.row_flags != nullptr && p.row_flags[token] != 0u) continue;  // recomputed apart
    const std::uint32_t* row = p.packed + static_cast<std::size_t>(token) * p.words_per_row;
    bool first = true;
    const auto start_token_stage = [&]() {
      begin_stage();
      if (kGated && first && lane == 0) {
        unsigned char* x_slot = stages + stage * bytes_per_stage;
        barrier_expect_bytes(&header.full[stage], row_bytes);
        bulk_copy(x_slot, p.x + static_cast<std::size_t>(token) * p.hidden, row_bytes, &header.full[stage]);
      }
    };
    for (int tile0 = 0; tile0 < p.tiles; tile0 += 32) {
      const int tile = tile0 + lane;
      const std::uint32_t count =
          tile < p.tiles ? min(row[static_cast<std::size_t>(tile) * p.slots], p.capacity) : 0u;
      unsigned pending = __ballot_sync(0xffffffffu, count > 0u);
      while (pending != 0u) {
        const int source_lane = __ffs(pending) - 1;
        pending &= pending - 1u;
        const std::uint32_t entries = __shfl_sync(0xffffffffu, count, source_lane);
        const std::uint32_t* words = row + static_cast<std::size_t>(tile0 + source_lane) * p.slots + 1;
        for (std::uint32_t entry0 = 0; entry0 < entries; entry0 += 32) {
          const std::uint32_t batch = min(32u, entries - entry0);
          const std::uint32_t word = static_cast<std::uint32_t>(lane) < batch ? words[entry0 + lane] : 0u;
          for (std::uint32_t placed = 0; placed < batch;) {
            // A full stage is closed only when another entry needs room, so that a token's last
            // stage is always closed as its last.
            if (open && fill == kStageEntries) {
              close_stage(kStageEntries, token, first, false);
              first = false;
            }
            if (!open) start_token_stage();
            const std::uint32_t take = min(static_cast<std::uint32_t>(kStageEntries - fill), batch - placed);
            StageMeta& meta = header.meta[stage];
            if (static_cast<std::uint32_t>(lane) >= placed &&
                static_cast<std::uint32_t>(lane) < placed + take)
              meta.words[fill + lane - placed] = word;
            __syncwarp();
            if (lane == 0) {
              unsigned char* base = stages + stage * bytes_per_stage;
              barrier_expect_bytes(&header.full[stage], take * entry_bytes);
              for (std::uint32_t i = 0; i < take; ++i) {
                const int slot = fill + static_cast<int>(i);
                const std::size_t neuron = meta.words[slot] & 0xffffu;
                if (kGated)
                  bulk_copy(base + row_bytes * (1 + slot), p.up + neuron * p.hidden, row_bytes,
                            &header.full[stage]);
                bulk_copy(base + row_bytes * (1 + kStageEntries + slot), p.down_t + neuron * p.hidden,
                          row_bytes, &header.full[stage]);
              }
            }
            __syncwarp();
            fill += static_cast<int>(take);
            placed += take;
          }
        }
      }
    }
    if (!open && first) start_token_stage();  // no non-zeros: the consumers still write zeros
    close_stage(static_cast<std::uint32_t>(fill), token, first, true);
  }
  begin_stage();
  close_stage(kEndOfWork, 0, false, false);
}

// Consumes the ring; `consumer` is the thread's index among the consumers (D / 8 of them).
template <bool kGated, bool kHighest>
__device__ void consume(const BulkParams& p, SharedHeader& header, const unsigned char* stages,
                        int consumer) {
  const int lane = consumer & 31, warp = consumer >> 5;
  const int warps = p.hidden / 256;
  const unsigned consumer_threads = static_cast<unsigned>(p.hidden / 8);
  const unsigned row_bytes = static_cast<unsigned>(p.hidden) * 2u;
  const std::size_t bytes_per_stage = stage_bytes(p.hidden);
  const unsigned column_bytes = static_cast<unsigned>(consumer) * 16u;
  const up_down::OwnLaneSelectors own_lane = up_down::own_lane_selectors(lane);
  uint4 x = make_uint4(0, 0, 0, 0);
  float acc[8];
  float acc_mma[2][4];
  int stage = 0;
  unsigned consumed = 0;
  const auto row_at = [&](const unsigned char* base, int slot, bool live) {
    return live ? *reinterpret_cast<const uint4*>(base + row_bytes * slot + column_bytes)
                : make_uint4(0, 0, 0, 0);
  };

  while (true) {
    barrier_wait(&header.full[stage], (consumed / kStages) & 1u);
    const StageMeta& meta = header.meta[stage];
    const std::uint32_t count = meta.count;
    if (count == kEndOfWork) return;
    const std::uint32_t token = meta.token;
    const bool last = meta.last != 0u;
    const unsigned char* base = stages + stage * bytes_per_stage;
    const int entries = static_cast<int>(count);
    if (meta.first != 0u) {
      if (kGated) x = *reinterpret_cast<const uint4*>(base + column_bytes);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] = 0.0f, acc_mma[i / 4][i % 4] = 0.0f;
    }
    if (kGated && entries > 0) {
      // Every up dot product of the stage, each warp's share to its partials.
      for (int first = 0; first < entries; first += 4) {
        const uint4 rows[4] = {
            row_at(base, 1 + first, first < entries), row_at(base, 2 + first, first + 1 < entries),
            row_at(base, 3 + first, first + 2 < entries), row_at(base, 4 + first, first + 3 < entries)};
        const float total = kHighest ? up_down::warp_dot_four_fp32(x, rows, lane)
                                     : up_down::warp_dot_four_bf16(x, rows, lane);
        if ((lane & 7) == 0) header.partials[warp][first + (lane >> 3)] = total;
      }
      consumers_sync(consumer_threads);
      if (consumer < entries) {
        float u = 0.0f;
        for (int w = 0; w < warps; ++w) u += header.partials[w][consumer];
        header.totals[consumer] = u;
      }
      consumers_sync(consumer_threads);
    }
    // Every down accumulation: out += h * Wd^T[j], h = g * u (gated) or g.
    for (int first = 0; first < entries; first += 4) {
      float h[4];
      __nv_bfloat16 h_bf16[4];
      uint4 rows[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const bool live = first + i < entries;
        const std::uint32_t word = live ? meta.words[first + i] : 0u;
        h_bf16[i] = __ushort_as_bfloat16(static_cast<unsigned short>(word >> 16));
        h[i] = __bfloat162float(h_bf16[i]);
        if (kGated) {
          const float u = live ? header.totals[first + i] : 0.0f;
          if (kHighest)
            h[i] *= u;
          else
            h_bf16[i] = __hmul(h_bf16[i], __float2bfloat16_rn(u));
        }
        rows[i] = row_at(base, 1 + kStageEntries + first + i, live);
      }
      if constexpr (kHighest) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (first + i < entries) up_down::accumulate8<true>(acc, h[i], h_bf16[i], rows[i]);
      } else {  // rows past the end are zero with h zero: their products add nothing
        up_down::accumulate_four_bf16(acc_mma, h_bf16, rows, own_lane);
      }
    }
    // The stage's rows and metadata are no longer read: back to the producer.
    __syncwarp();
    if (lane == 0) barrier_arrive(&header.empty[stage]);
    if (last) {
      if constexpr (!kHighest) {
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = acc_mma[i / 4][i % 4];
      }
      __stcs(reinterpret_cast<uint4*>(p.out + static_cast<std::size_t>(token) * p.hidden + consumer * 8),
             up_down::round_to_bf16x8(acc));
    }
    stage = stage + 1 == kStages ? 0 : stage + 1;
    ++consumed;
  }
}
#endif

template <bool kGated, bool kHighest>
__global__ void __launch_bounds__(kProducerThreads + 32 * kMaxConsumerWarps, 1)
    twell_up_down_bulk_kernel(const BulkParams p) {
#ifdef TWELL_BULK_DEVICE
  extern __shared__ __align__(128) unsigned char shared[];
  SharedHeader& header = *reinterpret_cast<SharedHeader*>(shared);
  unsigned char* stages = shared + kStagesOffset;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(&header.full[s], 1);
      barrier_init(&header.empty[s], static_cast<unsigned>(p.hidden / 256));
    }
  }
  __syncthreads();
  if (threadIdx.x < kProducerThreads)
    produce<kGated>(p, header, stages);
  else
    consume<kGated, kHighest>(p, header, stages, static_cast<int>(threadIdx.x) - kProducerThreads);
#endif
}

std::size_t shared_bytes_for(int hidden) {
  return kStagesOffset + kStages * stage_bytes(hidden);
}

template <bool kGated, bool kHighest>
void launch_variant(const BulkParams& params, cudaStream_t stream) {
  const auto kernel = twell_up_down_bulk_kernel<kGated, kHighest>;
  const std::size_t shared = shared_bytes_for(params.hidden);
  TWELL_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  int device = 0, multiprocessors = 0, per_sm = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  const int threads = kProducerThreads + params.hidden / 8;
  TWELL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared));
  if (per_sm < 1)
    throw Error(Error::Kind::Unsupported, "TwELL up/down kernel: the persistent bulk consumer's " +
                                              std::to_string(shared) +
                                              " bytes of shared memory do not fit an SM");
  const int ctas = std::min(params.rows, multiprocessors * per_sm);
  kernel<<<ctas, threads, shared, stream>>>(params);
}

}  // namespace

bool up_down_persistent_bulk_supported(int hidden, int device) {
  if (hidden <= 0 || hidden % 256 != 0 || hidden > 32 * kMaxConsumerWarps * 8) return false;
  if (!binary_runs_sm90a_code(device)) return false;
  int optin_shared = 0;
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&optin_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<std::size_t>(optin_shared) >= shared_bytes_for(hidden);
}

void launch_twell_up_down_persistent_bulk(const UpDownArgs& args, cudaStream_t stream) {
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  if (!up_down_persistent_bulk_supported(args.hidden, device))
    throw Error(Error::Kind::Unsupported,
                "TwELL up/down kernel: the persistent bulk consumer needs an sm_90a build on a compute "
                "capability 9.0 device and hidden a multiple of 256 up to 2048 (got " +
                    std::to_string(args.hidden) + ")");
  // Bulk copies move 16-byte-aligned blocks: every row must start on such a boundary.
  for (const void* base : {static_cast<const void*>(args.x), static_cast<const void*>(args.up),
                           static_cast<const void*>(args.down_t)})
    if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0)
      throw Error(Error::Kind::Unsupported,
                  "TwELL up/down kernel: the persistent bulk consumer needs 16-byte aligned x and weights");
  BulkParams params{};
  params.x = args.x;
  params.packed = args.packed;
  params.up = args.up;
  params.down_t = args.down_t;
  params.row_flags = args.row_flags;
  params.out = args.out;
  params.rows = args.rows;
  params.hidden = args.hidden;
  params.tiles = args.padded_neurons / static_cast<int>(kTwellTileWidth);
  params.slots = static_cast<int>(twell_slots_per_tile(args.compression));
  params.words_per_row = params.tiles * params.slots;
  params.capacity = static_cast<std::uint32_t>(params.slots - 1);
  const bool gated = args.up != nullptr;
  if (gated && args.highest_precision)
    launch_variant<true, true>(params, stream);
  else if (gated)
    launch_variant<true, false>(params, stream);
  else if (args.highest_precision)
    launch_variant<false, true>(params, stream);
  else
    launch_variant<false, false>(params, stream);
  TWELL_CUDA_CHECK_LAUNCH("twell_up_down_bulk_kernel (persistent, bulk copies)");
}

}  // namespace twell::cuda
