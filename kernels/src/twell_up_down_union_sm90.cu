// SPDX-License-Identifier: GPL-3.0-or-later
// The union consumer's two GEMMs on Hopper (sm_90a), after the union pass (twell_up_down_union_pass.cu).
//
// Up, one work item per (block of 128 tokens, 256 union positions): U = x_block * Wu[union]^T with wgmma
// m64n256k16 (two consumer warpgroups of 64 tokens, fp32 accumulators in registers), then each non-zero of
// the tile's positions takes h = bf16(g * bf16(u)) from the tile staged in shared memory, written over its
// entry's value. Down, one item per (block, 256 output columns): out = H * Wd^T[union], K over the union
// in steps of 64, H's 128 x 64 tile built in shared memory from the entries of those positions (zeros,
// then each h in its place), Wd^T's rows N-major. Tokens a block does not fire multiply by zero: the
// tensor cores do those products instead of reading a weight row per non-zero. Both kernels are
// persistent (one CTA per SM over the items), so that the producer fills the next item's stages while the
// consumers finish the last one.
//
// Both gather weight rows, so no TMA: the producer warpgroup copies them with cp.async, 16 bytes a
// thread and eight or thirty-two threads a row (whole 32-byte sectors per instruction), into a ring of
// stages with the 128-byte swizzle wgmma reads. A stage is released to the consumers three k-blocks
// after it was issued, once the producer's copies into it have landed (cp.async.wait_group) and been
// fenced for the tensor cores' (async) proxy, as are the zeros and entries of the down GEMM's A tile.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "sm90_primitives.cuh"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_up_down_union.hpp"
#include "twell/twell_block_union.hpp"
#include "twell/twell_format.hpp"
#include "twell_dispatch_gate.hpp"

namespace twell::cuda {
namespace {

constexpr int kTileM = static_cast<int>(kTwellUnionBlockTokens);  // tokens: two warpgroups of 64
constexpr int kTileN = 256;                                       // union positions (up), columns (down)
constexpr int kTileK = 64;                                        // one 128-byte swizzled row of bf16
constexpr int kThreads = 384;                                     // warpgroup 0 produces, 1 and 2 consume
constexpr int kStages = 4;
constexpr int kStageBytesA = kTileM * kTileK * 2;
constexpr int kStageBytesB = kTileN * kTileK * 2;
constexpr int kStageBytes = kStageBytesA + kStageBytesB;
constexpr int kStagingPitch = kTileN + 8;  // bf16 per staged row of u (padded against bank conflicts)
constexpr int kStagedRows = 64;            // one consumer warpgroup's rows of u at a time
constexpr int kSharedBytes =
    1024 /* alignment slack */ + kStages * kStageBytes + kStagedRows * kStagingPitch * 2 + 2 * kStages * 8;
static_assert(kSharedBytes <= 227 * 1024, "the stages and u's staging fit one SM's shared memory");
static_assert(kTileK * 2 == 128, "a k-block row is one 128-byte swizzle row");

struct UnionGemmParams {
  const __nv_bfloat16* x;
  const __nv_bfloat16* up;
  const __nv_bfloat16* down_t;
  const std::uint32_t* row_flags;
  __nv_bfloat16* out;
  UnionWorkspaceView view;
  int rows, hidden;
};

#ifdef TWELL_SM90A_DEVICE
constexpr int kLag = kStages - 1;         // k-blocks in flight in one producer thread's cp.async groups
constexpr int kAtomBytes = kTileK * 128;  // the down GEMM's B: one 64-column atom of 64 k rows
constexpr unsigned kProducerRegisters = 40, kConsumerRegisters = 232;
constexpr int kScatterBatch = 4;                 // entries a producer thread loads at once (down GEMM)
constexpr std::uint32_t kNoEntry = 0xffffffffu;  // an entry never sets bit 15

// 16 bytes from global to shared memory, zeros where !valid (source size 0; the address is still valid).
__device__ __forceinline__ void cp_async_16(std::uint32_t destination, const void* source, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(source),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}
__device__ __forceinline__ void fence_shared_for_async_proxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ unsigned char* aligned_stages(unsigned char* raw) {
  return reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) &
                                          ~static_cast<std::uintptr_t>(1023));
}

// Every producer thread, one ring over all of its CTA's work: while more() says a k-block remains, wait
// until the consumers have released the next stage, then fill(shared address of the stage) issues this
// thread's copies and stores for it. kLag k-blocks later, once those copies have landed, its writes are
// fenced for wgmma and the thread arrives on the stage's full barrier. That arrival comes before the wait
// for the next free stage: the consumers release a stage only after the following one has arrived, so
// waiting first would deadlock the ring.
template <typename More, typename Fill>
__device__ __forceinline__ void produce(std::uint32_t stages, std::uint64_t* full, std::uint64_t* empty,
                                        More more, Fill fill) {
  static_assert(kLag == kStages - 1, "one stage is always the consumers'");
  int stage = 0, issued = 0;
  unsigned phase = 0;
  while (more()) {
    if (issued >= kLag) {
      cp_async_wait<kLag - 1>();  // k-block issued - kLag has landed
      fence_shared_for_async_proxy();
      mbarrier_arrive(&full[(issued - kLag) % kStages]);
    }
    mbarrier_wait(&empty[stage], phase ^ 1);
    fill(stages + stage * kStageBytes);
    cp_async_commit();
    ++issued;
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  cp_async_wait<0>();
  fence_shared_for_async_proxy();
  for (int kb = issued > kLag ? issued - kLag : 0; kb < issued; ++kb) mbarrier_arrive(&full[kb % kStages]);
}

// Where a consumer warpgroup is in the ring; it carries over from one work item to the next.
struct RingPosition {
  int stage = 0;
  unsigned phase = 0;
};

// A consumer warpgroup: acc = sum over k_blocks k-blocks of its 64 rows of A times B, descriptors(stage,
// k16) giving the two descriptors of a k16 step; every stage handed back once read.
template <bool TransposeB, typename Descriptors>
__device__ __forceinline__ void consume(float (&acc)[128], unsigned char* stages, std::uint64_t* full,
                                        std::uint64_t* empty, RingPosition& ring, int k_blocks,
                                        int thread_in_group, Descriptors descriptors) {
  int previous = -1;
  for (int kb = 0; kb < k_blocks; ++kb) {
    mbarrier_wait(&full[ring.stage], ring.phase);
    unsigned char* base = stages + ring.stage * kStageBytes;
    wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < kTileK / 16; ++k16) {
      const auto [desc_a, desc_b] = descriptors(base, k16);
      wgmma_m64n256k16<TransposeB>(acc, desc_a, desc_b, kb + k16 != 0);
    }
    wgmma_commit();
    wgmma_wait<1>();
    if (previous >= 0 && thread_in_group == 0) mbarrier_arrive(&empty[previous]);
    previous = ring.stage;
    if (++ring.stage == kStages) {
      ring.stage = 0;
      ring.phase ^= 1;
    }
  }
  wgmma_wait<0>();
  if (previous >= 0 && thread_in_group == 0) mbarrier_arrive(&empty[previous]);
}

struct DescriptorPair {
  std::uint64_t a, b;
};

__device__ __forceinline__ void init_ring(std::uint64_t* full, std::uint64_t* empty) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 128);  // every producer thread
      mbarrier_init(&empty[s], 2);   // one thread of each consumer warpgroup
    }
  }
}
#endif

// Persistent: one CTA per SM walks the items the union pass listed, the producer running ahead into the
// next item while the consumers finish the last (the stages and the staging of u are separate).
__global__ void __launch_bounds__(kThreads, 1) twell_union_up_kernel(UnionGemmParams p) {
#ifdef TWELL_SM90A_DEVICE
  extern __shared__ unsigned char shared_raw[];
  unsigned char* stages = aligned_stages(shared_raw);
  __nv_bfloat16* staging = reinterpret_cast<__nv_bfloat16*>(stages + kStages * kStageBytes);
  std::uint64_t* full = reinterpret_cast<std::uint64_t*>(staging + kStagedRows * kStagingPitch);
  std::uint64_t* empty = full + kStages;
  init_ring(full, empty);
  __syncthreads();
  const int items = static_cast<int>(*p.view.up_item_count);
  const int k_blocks = p.hidden / kTileK;
  const int warpgroup = threadIdx.x / 128, thread_in_group = threadIdx.x % 128;
  const auto item_block = [&](int item) { return static_cast<int>(p.view.up_items[item] >> 8); };
  const auto item_n0 = [&](int item) { return static_cast<int>(p.view.up_items[item] & 0xffu) * kTileN; };

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegisters));
    // Eight threads a row, rows row0 + 16 i: every row this thread copies has the same swizzle.
    const int chunk = thread_in_group % 8, row0 = thread_in_group / 8;
    const std::uint32_t swizzled = static_cast<std::uint32_t>((chunk ^ (row0 & 7)) << 4);
    int item = static_cast<int>(blockIdx.x), kb = 0, first = 0;
    std::uint32_t weight_row[kTileN / 16];  // this thread's rows of the item: neuron * hidden, or ~0
    const auto start_item = [&] {
      const int block = item_block(item), n0 = item_n0(item);
      const int union_size = static_cast<int>(p.view.union_sizes[block]);
      const std::uint32_t* neurons = p.view.neurons + static_cast<std::size_t>(block) * p.view.padded_neurons;
      first = block * kTileM;
#pragma unroll
      for (int i = 0; i < kTileN / 16; ++i) {
        const int position = n0 + row0 + 16 * i;
        weight_row[i] =
            position < union_size ? neurons[position] * static_cast<std::uint32_t>(p.hidden) : ~0u;
      }
    };
    if (item < items) start_item();
    produce(
        smem_address(stages), full, empty, [&] { return item < items; },
        [&](std::uint32_t stage) {
          const int column = kb * kTileK + chunk * 8;
#pragma unroll
          for (int i = 0; i < kTileM / 16; ++i) {
            const int row = row0 + 16 * i, token = first + row;
            const bool valid = token < p.rows;
            cp_async_16(stage + row * 128 + swizzled,
                        p.x + static_cast<std::size_t>(valid ? token : 0) * p.hidden + column, valid);
          }
#pragma unroll
          for (int i = 0; i < kTileN / 16; ++i) {
            const int row = row0 + 16 * i;
            const bool valid = weight_row[i] != ~0u;
            cp_async_16(stage + kStageBytesA + row * 128 + swizzled,
                        p.up + (valid ? weight_row[i] : 0u) + column, valid);
          }
          if (++kb == k_blocks) {
            kb = 0;
            item += gridDim.x;
            if (item < items) start_item();
          }
        });
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegisters));
  const int consumer = warpgroup - 1;
  const int warp = thread_in_group / 32, lane = thread_in_group % 32;
  const int consumer_thread = threadIdx.x - 128;
  RingPosition ring;
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;  // every item's first wgmma overwrites it
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int block = item_block(item), n0 = item_n0(item);
    const int union_size = static_cast<int>(p.view.union_sizes[block]);
    const std::uint32_t* column_start =
        p.view.column_start + static_cast<std::size_t>(block) * (p.view.padded_neurons + 1);
    const std::uint32_t entries_begin = column_start[n0];  // read now, used after the mainloop
    const std::uint32_t entries_end = column_start[min(n0 + kTileN, union_size)];
    consume<false>(acc, stages, full, empty, ring, k_blocks, thread_in_group,
                   [&](unsigned char* base, int k16) {
                     return DescriptorPair{swizzle128_descriptor(base + consumer * 64 * 128) + 2 * k16,
                                           swizzle128_descriptor(base + kStageBytesA) + 2 * k16};
                   });
    // h for the item's non-zeros, one warpgroup's 64 tokens at a time through the staging of u. The
    // tile's entries are one contiguous range, each tagged with its column in the tile.
    std::uint32_t* entries = p.view.entries + static_cast<std::size_t>(block) * p.view.entries_per_block;
    for (int half = 0; half < 2; ++half) {
      if (consumer == half) {
        const int row = warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const int column = 8 * j + 2 * (lane % 4);
          *reinterpret_cast<__nv_bfloat162*>(staging + row * kStagingPitch + column) =
              __floats2bfloat162_rn(acc[4 * j], acc[4 * j + 1]);
          *reinterpret_cast<__nv_bfloat162*>(staging + (row + 8) * kStagingPitch + column) =
              __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
        }
      }
      named_barrier(1, 256);
      for (std::uint32_t e = entries_begin + consumer_thread; e < entries_end; e += 256) {
        const std::uint32_t word = entries[e];
        const std::uint32_t token = word & 0x7fu, column = (word >> 7) & 0xffu;
        if (static_cast<int>(token >> 6) != half) continue;
        const float g = __uint_as_float(word & 0xffff0000u);
        const float u = __bfloat162float(staging[(token & 63u) * kStagingPitch + column]);
        const __nv_bfloat16 h = __float2bfloat16_rn(g * u);
        entries[e] = (static_cast<std::uint32_t>(__bfloat16_as_ushort(h)) << 16) | (word & 0xffffu);
      }
      named_barrier(1, 256);  // the staging is free again
    }
  }
#else
  (void)p;
#endif
}

// Persistent: one CTA per SM walks the (block, 256 output columns) items, the producer running ahead into
// the next item while the consumers store the last one's outputs.
__global__ void __launch_bounds__(kThreads, 1) twell_union_down_kernel(UnionGemmParams p) {
#ifdef TWELL_SM90A_DEVICE
  extern __shared__ unsigned char shared_raw[];
  unsigned char* stages = aligned_stages(shared_raw);
  std::uint64_t* full =
      reinterpret_cast<std::uint64_t*>(stages + kStages * kStageBytes + kStagedRows * kStagingPitch * 2);
  std::uint64_t* empty = full + kStages;
  init_ring(full, empty);
  __syncthreads();
  const int column_tiles = p.hidden / kTileN;
  const int items = p.view.blocks * column_tiles;
  const int warpgroup = threadIdx.x / 128, thread_in_group = threadIdx.x % 128;
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegisters));
    // Thirty-two threads a Wd^T row segment of 256 columns (512 bytes), rows row0 + 4 i.
    const int chunk = thread_in_group % 32, row0 = thread_in_group / 32;
    const std::uint32_t atom = static_cast<std::uint32_t>((chunk / 8) * kAtomBytes);
    const int in_atom = chunk % 8;
    int item = static_cast<int>(blockIdx.x) - static_cast<int>(gridDim.x), kb = 0, k_blocks = 0;
    int union_size = 0, d0 = 0;
    const std::uint32_t *neurons = nullptr, *column_start = nullptr, *entries = nullptr;
    // A k-block's entries are one contiguous range. Its first batch and the next range's end are loaded
    // one k-block ahead, so that no global load waits on the producer's path (waiting on them made the
    // producer, not the tensor cores, set the pace). A prefetched word past its range is dropped.
    std::uint32_t entries_begin = 0, entries_end = 0;
    std::uint32_t words[kScatterBatch];
    const auto load_batch = [&](std::uint32_t begin, std::uint32_t(&batch)[kScatterBatch]) {
#pragma unroll
      for (int j = 0; j < kScatterBatch; ++j) {
        const std::uint32_t e = begin + j * 128 + thread_in_group;
        batch[j] = e < p.view.entries_per_block ? entries[e] : kNoEntry;
      }
    };
    // Moves to the next item with a k-block left (an empty union has none: its consumers write zeros).
    const auto more = [&] {
      while (kb == k_blocks) {
        item += gridDim.x;
        if (item >= items) return false;
        const int block = item / column_tiles;
        d0 = (item % column_tiles) * kTileN;
        union_size = static_cast<int>(p.view.union_sizes[block]);
        k_blocks = (union_size + kTileK - 1) / kTileK;
        kb = 0;
        neurons = p.view.neurons + static_cast<std::size_t>(block) * p.view.padded_neurons;
        column_start = p.view.column_start + static_cast<std::size_t>(block) * (p.view.padded_neurons + 1);
        entries = p.view.entries + static_cast<std::size_t>(block) * p.view.entries_per_block;
        if (k_blocks > 0) {
          entries_begin = 0;
          entries_end = column_start[min(kTileK, union_size)];
          load_batch(0, words);
        }
      }
      return true;
    };
    produce(smem_address(stages), full, empty, more, [&](std::uint32_t stage) {
#pragma unroll
      for (int i = 0; i < kTileK / 4; ++i) {
        const int row = row0 + 4 * i, position = kb * kTileK + row;
        const bool valid = position < union_size;
        const std::uint32_t neuron = valid ? neurons[position] : 0u;
        cp_async_16(stage + kStageBytesA + atom + row * 128 + ((in_atom ^ (row & 7)) << 4),
                    p.down_t + static_cast<std::size_t>(neuron) * p.hidden + d0 + chunk * 8, valid);
      }
      const std::uint32_t next_end = column_start[min((kb + 2) * kTileK, union_size)];
      std::uint32_t next_words[kScatterBatch];
      load_batch(entries_end, next_words);
#pragma unroll
      for (int j = 0; j < kStageBytesA / (128 * 16); ++j)
        asm volatile(
            "st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(stage + (j * 128 + thread_in_group) * 16),
            "r"(0u)
            : "memory");
      named_barrier(2, 128);  // the A tile's zeros are written before any h lands in it
      for (std::uint32_t base = entries_begin;;) {
#pragma unroll
        for (int j = 0; j < kScatterBatch; ++j) {
          const std::uint32_t word = words[j];
          if (base + j * 128 + thread_in_group >= entries_end || word == kNoEntry) continue;
          const std::uint32_t token = word & 0x7fu, k = (word >> 7) & 63u;
          const std::uint32_t address = stage + token * 128 + (((k >> 3) ^ (token & 7u)) << 4) + (k & 7u) * 2;
          asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(address),
                       "h"(static_cast<unsigned short>(word >> 16))
                       : "memory");
        }
        base += kScatterBatch * 128;
        if (base >= entries_end) break;
        load_batch(base, words);  // more entries than one batch: rare at the densities TwELL serves
      }
      entries_begin = entries_end;
      entries_end = next_end;
#pragma unroll
      for (int j = 0; j < kScatterBatch; ++j) words[j] = next_words[j];
      ++kb;
    });
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegisters));
  const int consumer = warpgroup - 1;
  const int warp = thread_in_group / 32, lane = thread_in_group % 32;
  RingPosition ring;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int block = item / column_tiles, d0 = (item % column_tiles) * kTileN;
    const int union_size = static_cast<int>(p.view.union_sizes[block]);
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;  // an empty union's output
    consume<true>(acc, stages, full, empty, ring, (union_size + kTileK - 1) / kTileK, thread_in_group,
                  [&](unsigned char* base, int k16) {
                    return DescriptorPair{swizzle128_descriptor(base + consumer * 64 * 128) + 2 * k16,
                                          swizzle128_n_major_descriptor(base + kStageBytesA + k16 * 16 * 128,
                                                                        kAtomBytes, 8 * 128)};
                  });
    const int first = block * kTileM;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = first + consumer * 64 + warp * 16 + lane / 4 + 8 * half;
      if (row >= p.rows || (p.row_flags != nullptr && p.row_flags[row] != 0)) continue;
      __nv_bfloat16* out_row = p.out + static_cast<std::size_t>(row) * p.hidden + d0 + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<__nv_bfloat162*>(out_row + 8 * j) =
            __floats2bfloat162_rn(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
    }
  }
#else
  (void)p;
#endif
}

}  // namespace

bool up_down_union_available(int device) {
  return binary_runs_sm90a_code(device);
}

const char* up_down_union_refusal(const UpDownArgs& args) {
  if (args.highest_precision)
    return "the union consumer runs in default precision only (its h is bf16 for the tensor cores)";
  if (args.hidden % kTileN != 0) return "the union consumer needs a hidden size that is a multiple of 256";
  if (args.padded_neurons > 16384) return "the union consumer counts at most 16384 neurons per block";
  const int words_per_row = args.padded_neurons / static_cast<int>(kTwellTileWidth) *
                            static_cast<int>(twell_slots_per_tile(args.compression));
  if (args.union_workspace == nullptr ||
      args.union_workspace_words < union_workspace_words(args.rows, args.padded_neurons, words_per_row))
    return "the union consumer's workspace is missing or too small";
  return "";
}

void launch_twell_up_down_union(const UpDownArgs& args, cudaStream_t stream) {
  const int words_per_row = args.padded_neurons / static_cast<int>(kTwellTileWidth) *
                            static_cast<int>(twell_slots_per_tile(args.compression));
  const UnionWorkspaceView view =
      union_workspace_view(args.union_workspace, args.rows, args.padded_neurons, words_per_row);
  launch_twell_union_pass(args, view, stream);
  int device = 0, sms = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  UnionGemmParams params{};
  params.x = args.x;
  params.up = args.up;
  params.down_t = args.down_t;
  params.row_flags = args.row_flags;
  params.out = args.out;
  params.view = view;
  params.rows = args.rows;
  params.hidden = args.hidden;
  if (args.up != nullptr) {
    TWELL_CUDA_CHECK(cudaFuncSetAttribute(twell_union_up_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          kSharedBytes));
    twell_union_up_kernel<<<std::min(sms, view.blocks * (args.padded_neurons / kTileN)), kThreads,
                            kSharedBytes, stream>>>(params);
    TWELL_CUDA_CHECK_LAUNCH("twell_union_up_kernel (persistent, one CTA per SM)");
  }
  TWELL_CUDA_CHECK(cudaFuncSetAttribute(twell_union_down_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        kSharedBytes));
  twell_union_down_kernel<<<std::min(sms, view.blocks * (args.hidden / kTileN)), kThreads, kSharedBytes,
                            stream>>>(params);
  TWELL_CUDA_CHECK_LAUNCH("twell_union_down_kernel (persistent, one CTA per SM)");
}

}  // namespace twell::cuda
