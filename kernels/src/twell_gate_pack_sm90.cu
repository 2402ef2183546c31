// SPDX-License-Identifier: GPL-3.0-or-later
// TwELL gate GEMM for Hopper (sm_90a): P = pack_TwELL(ReLU(x * Wg^T)), the ReLU and the packing done
// from the accumulators, so no dense gate tensor ever reaches global memory.
//
// Shape of the kernel (our own design, after TWELL_SPEC.md §2.1):
// - persistent grid (one CTA per SM), CTA tile 128 (tokens) x 256 (neurons = one TwELL tile) x 64 (K);
// - warp specialisation: warpgroup 0 is the producer (one thread issues TMA loads into a ring of
//   shared-memory stages guarded by full/empty mbarriers), warpgroups 1 and 2 are consumers that each
//   own 64 rows and issue wgmma m64n256k16 with the fp32 accumulators in registers;
// - tiles are walked neuron-tile-fastest so the CTAs in flight share the same token rows (read once
//   from HBM) while the whole gate weight stays resident in L2;
// - packing overlapped with the next tile: after a tile's mainloop each consumer thread turns its
//   128 accumulators into 64 ReLU'd bf16 pairs (one cvt each) and goes on to the next tile; the
//   pairs are placed during that tile's first eight k-blocks, one slice of 8 between issuing a
//   k-block's wgmma and waiting for them, so the tensor cores idle only for the conversion. Each
//   lane stores its own positives in consecutive slots after those of its quad's earlier lanes (no
//   atomics; a fixed order, not column order: see place_slice);
//   entries are (global column | bf16 << 16) staged in shared memory and written after the eighth
//   slice (C = 8: one TMA store per warpgroup from 128-byte-swizzled rows; C = 4/2: 16 bytes per
//   thread). A tile never holds more than its capacity: the count word is clamped and the
//   row is flagged for dense recomputation. Each consumer warpgroup stages and writes only its own
//   64 rows, and a warpgroup barrier separates the copy-out of one tile from the first slice of the
//   next (the reuse race TWELL_SPEC §2.1 step 5 describes cannot happen).
// Every instruction a consumer warp issues while its wgmma run costs tensor-core time (with the
// placing and copy-out removed and the conversion kept the gate ran at 0.955 of cuBLAS and its
// tensor pipe 98 % busy under ncu; with both, 1.12 and 84 %), so the placing is kept short: each
// lane places only its own entries in slots counted once per slice (no vote per pair, no rank per
// entry), and at C = 8 one TMA store per warpgroup replaces the thread copy-out.
// Gate / cuBLAS at M 131072 on the H200: 0.990-0.991 at 0.5 % density, 1.043-1.044 at 2 %,
// 1.094-1.096 at 5 % with entries ranked in column order, against 1.040-1.047 / 1.137-1.147 /
// 1.193-1.197 for the vote-per-pair placing before it (h200-gate-lane-placing-consumer-2026-12-05.json).
// Dropping the column order (consecutive slots per lane) took the H100's pairs from 1.065-1.074 to
// 1.026-1.041 at 5 % and from 0.970-0.973 to 0.945-0.963 at 0.5 %, on two machines
// (h100-gate-lane-order-2026-12-06.json); writing out the first eight k-blocks, so that each slice's
// index is a constant, took them on to 0.978-0.998 and 0.909-0.928 on two more
// (h100-gate-constant-slices-2026-12-06.json).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "sm90_primitives.cuh"
#include "twell/error.hpp"
#include "twell/kernels/twell_gate_pack_sm90.hpp"

namespace twell::cuda {
namespace {

constexpr int kTileM = 128;
constexpr int kTileN = 256;
constexpr int kTileK = 64;
constexpr int kThreads = 384;
constexpr int kStageBytesA = kTileM * kTileK * 2;  // 16 KiB
constexpr int kStageBytesB = kTileN * kTileK * 2;  // 32 KiB
constexpr int kStageBytes = kStageBytesA + kStageBytesB;
// With clusters of two, the CTAs of a cluster take vertically adjacent token tiles of the same
// neuron tile: each loads its own x tile and half of the shared weight tile, which TMA multicasts
// into both (half the L2 -> SM traffic for weights). Cluster size 1 is the plain persistent kernel.

__host__ __device__ constexpr int stages_for(int compression) {
  return compression == 8 ? 4 : 3;
}
// With C = 8 a staged row is one 128-byte line and the tile leaves through one TMA store per
// consumer warpgroup, its rows in the store's 128-byte swizzle (which also spreads the rows' equal
// slots over the banks); with C = 4 and C = 2 rows are padded by 4 words against bank conflicts and
// copied out by the threads.
__host__ __device__ constexpr bool stores_by_tma(int compression) {
  return compression == 8;
}
__host__ __device__ constexpr int staging_pitch_words(int compression) {
  return stores_by_tma(compression) ? kTileN / compression : kTileN / compression + 4;
}
__host__ __device__ constexpr int shared_bytes_for(int compression) {
  return 1024 /* alignment slack */ + stages_for(compression) * kStageBytes +
         kTileM * staging_pitch_words(compression) * 4 + 2 * stages_for(compression) * 8;
}

// The cluster shape is compiled in for the host and for devices that have clusters. The device
// passes for older architectures (whose kernel body is empty) must not see it: nvcc rejects it
// there unless the toolkit headers happen to be system headers (-isystem), as CMake passes them.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define TWELL_GATE_CLUSTER_DIMS(size) __cluster_dims__(size, 1, 1)
#else
#define TWELL_GATE_CLUSTER_DIMS(size)
#endif

#ifdef TWELL_SM90A_DEVICE
__device__ __forceinline__ void mbarrier_expect_tx(std::uint64_t* barrier, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(barrier)),
               "r"(bytes));
}

__device__ __forceinline__ void tma_load_2d(void* destination, const CUtensorMap* map, std::uint64_t* barrier,
                                            int inner, int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
      "[%2];\n" ::"r"(smem_address(destination)),
      "l"(map), "r"(smem_address(barrier)), "r"(inner), "r"(outer)
      : "memory");
}

// The same copy, its box written into the same offset of every CTA in `cta_mask`, each CTA's
// barrier at the same offset receiving the bytes.
__device__ __forceinline__ void tma_load_2d_multicast(void* destination, const CUtensorMap* map,
                                                      std::uint64_t* barrier, int inner, int outer,
                                                      std::uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_address(destination)),
      "l"(map), "r"(smem_address(barrier)), "r"(inner), "r"(outer), "h"(cta_mask)
      : "memory");
}

// Writes the box at (inner, outer) of the tensor `map` from shared memory, in the bulk async-group
// of the issuing thread.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, std::uint32_t source, int inner,
                                             int outer) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
               "r"(source), "r"(inner), "r"(outer)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Until the issuing thread's bulk stores have read their shared memory.
__device__ __forceinline__ void wait_bulk_stores_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// Until the issuing thread's bulk stores are complete.
__device__ __forceinline__ void wait_bulk_stores_done() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Makes this thread's generic-proxy shared-memory writes visible to the TMA (async proxy).
__device__ __forceinline__ void fence_shared_for_tma() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ std::uint32_t cluster_rank() {
  std::uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}

// Arrives on the barrier at the same shared-memory offset in CTA `cta` of the cluster. The arrival
// only says that this warpgroup's wgmma have finished reading a stage (wgmma.wait_group already
// ordered that), so the default CTA-scope release is enough: `.release.cluster` compiles to a
// MEMBAR.ALL.GPU per arrival, which made every pipeline stage wait for the memory system and the
// cluster-of-2 mode run at half speed (h200-gate-cluster-release-2026-12-03.json).
__device__ __forceinline__ void mbarrier_arrive_in_cta(std::uint64_t* barrier, std::uint32_t cta) {
  std::uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(smem_address(barrier)), "r"(cta));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// A consumer warpgroup hands a stage back to the producers of every CTA of its cluster.
template <int ClusterSize>
__device__ __forceinline__ void release_stage(std::uint64_t* empty_barrier) {
  if constexpr (ClusterSize == 1) {
    mbarrier_arrive(empty_barrier);
  } else {
#pragma unroll
    for (std::uint32_t cta = 0; cta < ClusterSize; ++cta) mbarrier_arrive_in_cta(empty_barrier, cta);
  }
}

// Shared-memory accesses by shared-window address: generic pointers derived from the aligned
// dynamic shared memory compile to 64-bit generic loads and stores.
__device__ __forceinline__ void store_shared(std::uint32_t address, std::uint32_t value) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(address), "r"(value) : "memory");
}

__device__ __forceinline__ uint4 load_shared_v4(std::uint32_t address) {
  uint4 words;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(words.x), "=r"(words.y), "=r"(words.z), "=r"(words.w)
               : "r"(address)
               : "memory");
  return words;
}

__device__ __forceinline__ void warpgroup_barrier(int warpgroup) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(warpgroup + 1));
}

// ReLU(low), ReLU(high) rounded to nearest bf16, low in the lower 16 bits: the TwELL values of a
// column pair in one instruction, and a form that keeps a whole tile in 64 registers.
__device__ __forceinline__ std::uint32_t relu_bf16x2(float low, float high) {
  std::uint32_t pair;
  asm("cvt.rn.relu.bf16x2.f32 %0, %1, %2;\n" : "=r"(pair) : "f"(high), "f"(low));
  return pair;
}

// Which halves of a ReLU'd bf16 pair are entries: the low half's 16 bits set when the low (even
// column) value is, the high half's when the high one is. One bf16x2 `> 0` compare: zero (ReLU of a
// negative), -0 and NaN are not entries, subnormals are, as `value > 0` says of the rounded value
// (on H200 it agreed with the integer test 0x0001 <= bits <= 0x7F80 on all 65536 patterns). An
// fp32 value below bf16's smallest subnormal rounds to zero and is dropped, where the fp32
// predicate would keep it as a zero entry. Volatile, like the entry stores below: left to itself
// the compiler computes these for all 32 pairs up front and spills.
__device__ __forceinline__ std::uint32_t positive_halves(std::uint32_t pair) {
  std::uint32_t halves;
  asm volatile("set.gt.u32.bf16x2 %0, %1, %2;\n" : "=r"(halves) : "r"(pair), "r"(0u));
  return halves;
}

// Stores the TwELL entry ((column_base + offset) | bf16 << 16) of one half of a pair: the low
// half with ValueBytes 0x5410, the high half with 0x7610 (prmt byte selectors: the column's two
// low bytes, then the half's two bytes). The column is formed here too, or the compiler
// precomputes it for every pair and spills.
template <unsigned ValueBytes>
__device__ __forceinline__ void store_entry(std::uint32_t address, std::uint32_t column_base,
                                            std::uint32_t offset, std::uint32_t pair) {
  asm volatile(
      "{\n"
      ".reg .b32 entry;\n"
      "add.u32 entry, %1, %2;\n"
      "prmt.b32 entry, entry, %3, %4;\n"
      "st.shared.u32 [%0], entry;\n"
      "}\n" ::"r"(address),
      "r"(column_base), "r"(offset), "r"(pair), "n"(ValueBytes)
      : "memory");
}

// Stores the TwELL entry (column | bf16 << 16) of one half of a pair, the half chosen at run time by
// the prmt byte selector (0x5410: the low half, 0x7610: the high half), if `slot` is below the tile's
// capacity (the count may pass it; the store is predicated rather than branched around).
template <std::uint32_t Capacity>
__device__ __forceinline__ void store_entry_of_half(std::uint32_t address, std::uint32_t column,
                                                    std::uint32_t pair, std::uint32_t selector,
                                                    std::uint32_t slot) {
  asm volatile(
      "{\n"
      ".reg .b32 entry;\n"
      ".reg .pred below;\n"
      "setp.lt.u32 below, %4, %5;\n"
      "prmt.b32 entry, %1, %2, %3;\n"
      "@below st.shared.u32 [%0], entry;\n"
      "}\n" ::"r"(address),
      "r"(column), "r"(pair), "r"(selector), "r"(slot), "n"(Capacity)
      : "memory");
}

// What a consumer thread needs to place the entries of its two rows of a tile. Each row's 256
// values are spread over the 4 lanes of a quad: lane q holds the column pairs 8 j + 2 q + {0, 1},
// j = 0..31. The row of half 1 lies 8 rows below the row of half 0 (one address, not two, and one
// column base: registers are what the consumer lacks).
struct PackCursor {
  std::uint32_t half0_address;  // shared-window address of half 0's row count word
  std::uint32_t column_base;    // global column of this lane's pair j = 0
  std::uint32_t found[2];       // entries so far in each half's row: the same in the quad's lanes
};

// The shared-window address of word `word` (0: the count, 1 + s: slot s) of a half's row. In the
// TMA store's 128-byte swizzle a row's 16-byte chunks are permuted by the row's index mod 8, which
// is bits 7-9 of its 1024-byte aligned address.
template <int Compression>
__device__ __forceinline__ std::uint32_t slot_address(const PackCursor& cursor, int half,
                                                      std::uint32_t word) {
  const std::uint32_t row =
      cursor.half0_address + static_cast<std::uint32_t>(half) * 8u * staging_pitch_words(Compression) * 4u;
  if constexpr (stores_by_tma(Compression)) {
    return row + ((word * 4u) ^ ((cursor.half0_address >> 3) & 0x70u));
  } else {
    return row + word * 4u;
  }
}

// How many slices a tile's packing is cut into: one slice is placed per k-block of the next tile,
// between issuing that k-block's wgmma and waiting for the previous ones. 8 measured best on H200
// (gate / cuBLAS at M 131072, 0.5 %: 2 slices 1.15-1.16, 4: 1.14-1.15, 8: 1.13-1.14, 16: 1.22,
// 32: 2.13; resources/benchmarks/h200-gate-pack-slices-2026-12-04.json).
constexpr int kPackSlices = 8;
static_assert(kPackSlices == 2 || kPackSlices == 4 || kPackSlices == 8 || kPackSlices == 16 ||
                  kPackSlices == 32,
              "a slice covers a whole number of pairs of one row");

// A tile's entries wait in 64 ReLU'd bf16 pairs per thread (pairs [0, 32) for the row of half 0,
// [32, 64) for the row of half 1) and are placed during the next tile's first kPackSlices k-blocks,
// 8 pairs of one row per slice. Each lane first gathers which of its 16 values are entries into one
// word (bit i: the low half of pair i, bit 16 + i: the high half); an exclusive prefix of the quad's
// four counts gives the lane its first slot, and its entries take the slots from there. A row's
// entries are therefore in a fixed order (slice by slice, within a slice lane by lane, within a
// lane low halves before high halves, each by pair), the same every run, but not column order:
// TWELL_SPEC leaves the order within a tile open, and ranking each entry among the quad's in
// column order cost about 11 more instructions per entry, each taken from the wgmma's issue.
constexpr int kPairsPerSlice = 64 / kPackSlices;
static_assert(kPairsPerSlice == 8, "a slice's entry word holds 8 pairs");

// Pair i of a slice by a run-time index: a tree of selects keeps the pairs in registers.
__device__ __forceinline__ std::uint32_t select_pair(const std::uint32_t (&pairs)[kPairsPerSlice],
                                                     std::uint32_t i) {
  const std::uint32_t p01 = (i & 1u) ? pairs[1] : pairs[0];
  const std::uint32_t p23 = (i & 1u) ? pairs[3] : pairs[2];
  const std::uint32_t p45 = (i & 1u) ? pairs[5] : pairs[4];
  const std::uint32_t p67 = (i & 1u) ? pairs[7] : pairs[6];
  const std::uint32_t p03 = (i & 2u) ? p23 : p01;
  const std::uint32_t p47 = (i & 2u) ? p67 : p45;
  return (i & 4u) ? p47 : p03;
}

template <int Compression, int Slice>
__device__ __forceinline__ void place_slice(const std::uint32_t (&pairs)[64], PackCursor& cursor,
                                            std::uint32_t lane_in_quad) {
  constexpr int kFirst = Slice * kPairsPerSlice;
  constexpr int kHalf = kFirst / 32;
  constexpr int kFirstPair = kFirst % 32;
  constexpr std::uint32_t kCapacity = kTileN / Compression - 1;
  std::uint32_t slice_pairs[kPairsPerSlice];
  std::uint32_t entries = 0;
#pragma unroll
  for (int i = 0; i < kPairsPerSlice; ++i) {
    slice_pairs[i] = pairs[kHalf * 32 + kFirstPair + i];
    entries |= positive_halves(slice_pairs[i]) & (0x00010001u << i);
  }
  const std::uint32_t count = __popc(entries);
  std::uint32_t through_this_lane = count;
  std::uint32_t earlier = __shfl_up_sync(0xffffffffu, through_this_lane, 1, 4);
  if (lane_in_quad >= 1) through_this_lane += earlier;
  earlier = __shfl_up_sync(0xffffffffu, through_this_lane, 2, 4);
  if (lane_in_quad >= 2) through_this_lane += earlier;
  const std::uint32_t quad_count = __shfl_sync(0xffffffffu, through_this_lane, 3, 4);
  std::uint32_t& found = cursor.found[kHalf];
  std::uint32_t slot = found + through_this_lane - count;
  for (std::uint32_t rest = entries; rest != 0; rest &= rest - 1, ++slot) {
    const std::uint32_t bit = static_cast<std::uint32_t>(__ffs(static_cast<int>(rest))) - 1;
    const std::uint32_t i = bit & 15u;
    const std::uint32_t high_half = bit >> 4;
    store_entry_of_half<kCapacity>(slot_address<Compression>(cursor, kHalf, 1 + slot),
                                   cursor.column_base + 8 * (kFirstPair + i) + high_half,
                                   select_pair(slice_pairs, i), 0x5410u + high_half * 0x2200u, slot);
  }
  found += quad_count;
}

// For the tails, where the slice index is a run-time loop counter (fewer k-blocks than slices, the
// last tile): the pairs must stay in registers, so each slice is its own instantiation with
// constant indices, selected here. The main loop names its slices at compile time instead.
template <int Compression, int... Slices>
__device__ __forceinline__ void place_slice(int slice, const std::uint32_t (&pairs)[64], PackCursor& cursor,
                                            std::uint32_t lane_in_quad,
                                            std::integer_sequence<int, Slices...>) {
  ((slice == Slices ? place_slice<Compression, Slices>(pairs, cursor, lane_in_quad) : void()), ...);
}

template <int Compression>
__device__ __forceinline__ void place_slice(int slice, const std::uint32_t (&pairs)[64], PackCursor& cursor,
                                            std::uint32_t lane_in_quad) {
  place_slice<Compression>(slice, pairs, cursor, lane_in_quad,
                           std::make_integer_sequence<int, kPackSlices>{});
}
#endif  // TWELL_SM90A_DEVICE

struct GatePackArgs {
  std::uint32_t* packed;        // [M, padded_N / C]
  std::uint32_t* row_overflow;  // [M], set to 1 where a tile overflowed
  int tokens;                   // M
  int padded_neurons;           // N rounded up to 256
  int hidden;                   // K
};

#ifdef TWELL_SM90A_DEVICE
// Writes one consumer warpgroup's 64 staged rows of a tile: T_c words per row, 16 bytes per thread
// per step, coalesced along each row. A count past the capacity is clamped and the row flagged.
template <int Compression>
__device__ __forceinline__ void copy_out_rows(std::uint32_t staging_address, int first_token, int n_tile,
                                              int thread_in_group, const GatePackArgs& args) {
  constexpr int kSlots = kTileN / Compression;
  constexpr int kCapacity = kSlots - 1;
  constexpr int kPitch = staging_pitch_words(Compression);
  constexpr int kVectorsPerRow = kSlots / 4;
  const int row_words_global = args.padded_neurons / Compression;
  // Unrolled only for C = 8 (four steps): unrolled, the C = 4 and C = 2 kernels kept a value in
  // local memory.
#pragma unroll(Compression == 8 ? 4 : 1)
  for (int index = thread_in_group; index < 64 * kVectorsPerRow; index += 128) {
    const int row = index / kVectorsPerRow;
    const int vector = index % kVectorsPerRow;
    const int token = first_token + row;
    if (token >= args.tokens) continue;
    uint4 words = load_shared_v4(staging_address + 4 * (row * kPitch + vector * 4));
    if (vector == 0 && words.x > static_cast<std::uint32_t>(kCapacity)) {
      words.x = kCapacity;
      args.row_overflow[token] = 1u;
    }
    *reinterpret_cast<uint4*>(args.packed + static_cast<std::size_t>(token) * row_words_global +
                              n_tile * kSlots + vector * 4) = words;
  }
}
#endif  // TWELL_SM90A_DEVICE

template <int Compression, int ClusterSize>
__global__ void TWELL_GATE_CLUSTER_DIMS(ClusterSize) __launch_bounds__(kThreads, 1)
    twell_gate_pack_sm90_kernel(const __grid_constant__ CUtensorMap x_map,
                                const __grid_constant__ CUtensorMap w_map,
                                const __grid_constant__ CUtensorMap packed_map, GatePackArgs args) {
#ifdef TWELL_SM90A_DEVICE
  constexpr int kStages = stages_for(Compression);
  constexpr int kPitch = staging_pitch_words(Compression);
  constexpr int kClusterSize = ClusterSize;
  constexpr int kWeightRowsPerCta = kTileN / ClusterSize;

  extern __shared__ unsigned char shared_raw[];
  unsigned char* shared = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<std::uintptr_t>(shared_raw) + 1023) & ~static_cast<std::uintptr_t>(1023));
  unsigned char* stage_base = shared;
  std::uint32_t* staging = reinterpret_cast<std::uint32_t*>(shared + kStages * kStageBytes);
  std::uint64_t* full = reinterpret_cast<std::uint64_t*>(staging + kTileM * kPitch);
  std::uint64_t* empty = full + kStages;

  const int warpgroup = threadIdx.x / 128;
  const int thread_in_group = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], 2 * kClusterSize);  // both consumer warpgroups of both CTAs
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // The peer multicasts into this CTA's stages and arrives on its barriers: both must exist first.
  cluster_sync();

  const std::uint32_t rank = cluster_rank();
  const int m_tiles = (args.tokens + kTileM - 1) / kTileM;
  const int n_tiles = args.padded_neurons / kTileN;
  // A work item is a pair of token tiles (one per CTA of the cluster) times one neuron tile, walked
  // neuron-tile-fastest.
  const int m_pairs = (m_tiles + kClusterSize - 1) / kClusterSize;
  const int total_items = m_pairs * n_tiles;
  const int cluster_id = blockIdx.x / kClusterSize;
  const int clusters = gridDim.x / kClusterSize;
  const int k_blocks = args.hidden / kTileK;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (thread_in_group == 0) {
      int stage = 0;
      unsigned phase = 0;
      for (int item = cluster_id; item < total_items; item += clusters) {
        const int m0 = ((item / n_tiles) * kClusterSize + static_cast<int>(rank)) * kTileM;
        const int n0 = (item % n_tiles) * kTileN;
        for (int kb = 0; kb < k_blocks; ++kb) {
          // Free only when the consumers of both CTAs are done with this stage: the multicast
          // below writes into the peer too.
          mbarrier_wait(&empty[stage], phase ^ 1);
          mbarrier_expect_tx(&full[stage], kStageBytes);
          unsigned char* a_tile = stage_base + stage * kStageBytes;
          unsigned char* b_half = a_tile + kStageBytesA + rank * (kWeightRowsPerCta * kTileK * 2);
          tma_load_2d(a_tile, &x_map, &full[stage], kb * kTileK, m0);
          if constexpr (kClusterSize == 1) {
            tma_load_2d(b_half, &w_map, &full[stage], kb * kTileK, n0);
          } else {
            tma_load_2d_multicast(b_half, &w_map, &full[stage], kb * kTileK, n0 + rank * kWeightRowsPerCta,
                                  static_cast<std::uint16_t>((1u << kClusterSize) - 1));
          }
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int consumer = warpgroup - 1;  // owns rows [consumer * 64, consumer * 64 + 64) of the tile
    const int warp = thread_in_group / 32;
    const int lane = thread_in_group % 32;
    const std::uint32_t my_staging = smem_address(staging + consumer * 64 * kPitch);
    // This thread packs two rows of every tile (half 0: row warp * 16 + lane / 4; half 1: 8 rows
    // further), from ReLU'd bf16 pairs kept in 64 registers, during the next tile's first eight
    // k-blocks while the tensor cores run.
    constexpr int kSlices = kPackSlices;
    const std::uint32_t half0_address = my_staging + 4 * (warp * 16 + lane / 4) * kPitch;
    const std::uint32_t lane_in_quad = static_cast<std::uint32_t>(lane % 4);
    std::uint32_t deferred_pairs[64];
    PackCursor deferred{half0_address, 0, {0, 0}};
    int deferred_first_token = -1;  // < 0: no tile waits to be packed
    // The deferred tile is placed: its counts go in, and once every warp of the warpgroup has placed
    // its entries the tile is copied out.
    // The neuron tile is the column base's: a lane's offset in it is below 8.
    auto finish_deferred_tile = [&] {
      if constexpr (stores_by_tma(Compression)) {
        // A count past the capacity is clamped and its row flagged here, before the TMA copies
        // the rows as they are; rows past the last token are clipped by the store.
        if (lane % 4 == 0) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            std::uint32_t count = deferred.found[half];
            const int token = deferred_first_token + warp * 16 + lane / 4 + 8 * half;
            if (count > static_cast<std::uint32_t>(kTileN / Compression - 1)) {
              count = kTileN / Compression - 1;
              if (token < args.tokens) args.row_overflow[token] = 1u;
            }
            store_shared(slot_address<Compression>(deferred, half, 0), count);
          }
        }
        fence_shared_for_tma();
        warpgroup_barrier(consumer);
        if (thread_in_group == 0)
          tma_store_2d(&packed_map, my_staging,
                       static_cast<int>(deferred.column_base) / kTileN * (kTileN / Compression),
                       deferred_first_token);
      } else {
        if (lane % 4 == 0) {
          store_shared(slot_address<Compression>(deferred, 0, 0), deferred.found[0]);
          store_shared(slot_address<Compression>(deferred, 1, 0), deferred.found[1]);
        }
        warpgroup_barrier(consumer);
        copy_out_rows<Compression>(my_staging, deferred_first_token,
                                   static_cast<int>(deferred.column_base) / kTileN, thread_in_group, args);
      }
      deferred_first_token = -1;
    };
    int stage = 0;
    unsigned phase = 0;
    float acc[128];  // every tile's first wgmma overwrites it; zeroed once so that it is never read unset
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    // The first item read again here, not carried over from before setmaxnreg: carried over, ptxas
    // kept it in local memory for the whole loop.
    for (int item = static_cast<int>(blockIdx.x) / kClusterSize; item < total_items; item += clusters) {
      const int m0 = ((item / n_tiles) * kClusterSize + static_cast<int>(rank)) * kTileM;
      const int n_tile = item % n_tiles;
      int previous_stage = -1;
      // One k-block: its wgmma issued, then `place` while they run.
      auto k_block = [&](int kb, auto place) {
        mbarrier_wait(&full[stage], phase);
        const unsigned char* a_tile = stage_base + stage * kStageBytes + consumer * 64 * 128;
        const unsigned char* b_tile = stage_base + stage * kStageBytes + kStageBytesA;
        const std::uint64_t desc_a = swizzle128_descriptor(a_tile);
        const std::uint64_t desc_b = swizzle128_descriptor(b_tile);
        wgmma_fence();
#pragma unroll
        for (int k16 = 0; k16 < kTileK / 16; ++k16) {
          // Advancing 16 bf16 (32 bytes) along K inside a swizzled row: +2 in descriptor units. The
          // tile's first step overwrites what the previous tile left in acc.
          wgmma_m64n256k16<false>(acc, desc_a + 2 * k16, desc_b + 2 * k16, kb + k16 != 0);
        }
        wgmma_commit();
        place();
        // Keep this stage's wgmma in flight; the previous stage's are done once at most one group
        // is pending, so its buffers go back to the producer.
        wgmma_wait<1>();
        if (previous_stage >= 0 && thread_in_group == 0) release_stage<ClusterSize>(&empty[previous_stage]);
        previous_stage = stage;
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      };
      // The first kSlices k-blocks each place one slice of the previous tile, written out one by one
      // so that the slice is a constant. Chosen at run time, each slice went through a chain of
      // compares and branches; written out, the gate runs 3-5 % faster.
      [&]<int... Slices>(std::integer_sequence<int, Slices...>) {
        ((Slices < k_blocks ? k_block(Slices,
                                      [&] {
                                        if (deferred_first_token < 0) return;
                                        place_slice<Compression, Slices>(deferred_pairs, deferred,
                                                                         lane_in_quad);
                                        if (Slices == kSlices - 1) finish_deferred_tile();
                                      })
                            : void()),
         ...);
      }
      (std::make_integer_sequence<int, kSlices>{});
      for (int kb = kSlices; kb < k_blocks; ++kb) k_block(kb, [] {});
      wgmma_wait<0>();
      if (previous_stage >= 0 && thread_in_group == 0) release_stage<ClusterSize>(&empty[previous_stage]);
      if (deferred_first_token >= 0) {  // fewer k-blocks than slices
        for (int slice = k_blocks; slice < kSlices; ++slice)
          place_slice<Compression>(slice, deferred_pairs, deferred, lane_in_quad);
        finish_deferred_tile();
      }

      // The barrier first: the previous tile's copy-out must have read the staging rows before the
      // next slices write this tile's entries into them.
      if (stores_by_tma(Compression) && thread_in_group == 0) wait_bulk_stores_read();
      warpgroup_barrier(consumer);
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        deferred_pairs[j] = relu_bf16x2(acc[4 * j], acc[4 * j + 1]);
        deferred_pairs[32 + j] = relu_bf16x2(acc[4 * j + 2], acc[4 * j + 3]);
      }
      deferred.column_base = static_cast<std::uint32_t>(n_tile * kTileN + (lane % 4) * 2);
      deferred.found[0] = 0;
      deferred.found[1] = 0;
      deferred_first_token = m0 + consumer * 64;
    }
    if (deferred_first_token >= 0) {  // the last tile
#pragma unroll
      for (int slice = 0; slice < kSlices; ++slice)
        place_slice<Compression>(slice, deferred_pairs, deferred, lane_in_quad);
      finish_deferred_tile();
    }
    // The shared memory the stores read must outlive them.
    if (stores_by_tma(Compression) && thread_in_group == 0) wait_bulk_stores_done();
  }
  // Neither CTA may exit while its peer can still multicast into it or arrive on its barriers.
  cluster_sync();
#else
  (void)x_map;
  (void)w_map;
  (void)packed_map;
  (void)args;
#endif
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                 CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled_function() {
  static EncodeTiled function = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult query{};
    const cudaError_t status =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &query);
    if (status != cudaSuccess || query != cudaDriverEntryPointSuccess || entry == nullptr) {
      throw Error(Error::Kind::Device,
                  "twell_gate_pack_sm90: cuTensorMapEncodeTiled is not available from the driver");
    }
    return reinterpret_cast<EncodeTiled>(entry);
  }();
  return function;
}

// A row-major bf16 [rows, cols] matrix read in boxes of box_rows x 64 columns, 128-byte swizzled.
CUtensorMap make_bf16_map(const void* base, std::uint64_t rows, std::uint64_t cols, std::uint32_t box_rows,
                          const char* what) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * 2};
  const cuuint32_t box[2] = {kTileK, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result = encode_tiled_function()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    throw Error(Error::Kind::Device, std::string("twell_gate_pack_sm90: cuTensorMapEncodeTiled failed for ") +
                                         what + " (error " + std::to_string(static_cast<int>(result)) + ")");
  }
  return map;
}

// The packed output [tokens, words] of uint32, written in boxes of one TwELL tile's words x 64
// rows from 128-byte swizzled shared memory. Made for every compression (a box wider than 128
// bytes is unswizzled) though only C = 8 stores through it.
CUtensorMap make_packed_map(void* base, std::uint64_t rows, std::uint64_t words, std::uint32_t box_words) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {words, rows};
  const cuuint64_t strides[1] = {words * 4};
  const cuuint32_t box[2] = {box_words, 64};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode_tiled_function()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, base, dims, strides, box,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              box_words * 4 <= 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    throw Error(Error::Kind::Device,
                "twell_gate_pack_sm90: cuTensorMapEncodeTiled failed for the packed output (error " +
                    std::to_string(static_cast<int>(result)) + ")");
  }
  return map;
}

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    throw Error(status == cudaErrorMemoryAllocation ? Error::Kind::OutOfMemory : Error::Kind::Device,
                std::string("twell_gate_pack_sm90: ") + call + " failed: " + cudaGetErrorString(status));
  }
}

template <int Compression, int ClusterSize>
GatePackSm90Plan launch(const GatePackSm90Params& p, cudaStream_t stream, bool dry_run) {
  const int padded = (p.neurons + kTileN - 1) / kTileN * kTileN;
  constexpr int shared_bytes = shared_bytes_for(Compression);
  auto* kernel = twell_gate_pack_sm90_kernel<Compression, ClusterSize>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes),
        "cudaFuncSetAttribute(max dynamic shared memory)");
  const int m_tiles = (p.tokens + kTileM - 1) / kTileM;
  const int items = (m_tiles + ClusterSize - 1) / ClusterSize * (padded / kTileN);
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  // Persistent: as many clusters as fit on the device at once (a GPC may hold an odd number of
  // SMs, so ask the occupancy calculator rather than assume SMs / 2), never more than the work.
  config.gridDim = dim3(ClusterSize);
  int max_clusters = 0;
  check(cudaOccupancyMaxActiveClusters(&max_clusters, kernel, &config), "cudaOccupancyMaxActiveClusters");
  if (max_clusters <= 0) {
    throw Error(Error::Kind::Device,
                "twell_gate_pack_sm90: the device cannot schedule a cluster of this kernel");
  }
  if (p.max_ctas > 0) max_clusters = std::min(max_clusters, std::max(1, p.max_ctas / ClusterSize));
  const int clusters = items < max_clusters ? items : max_clusters;
  config.gridDim = dim3(clusters * ClusterSize);
  const GatePackSm90Plan plan{clusters * ClusterSize, ClusterSize, shared_bytes, stages_for(Compression)};
  if (dry_run) return plan;
  const CUtensorMap x_map = make_bf16_map(p.x, p.tokens, p.hidden, kTileM, "x");
  const CUtensorMap w_map = make_bf16_map(p.weight, p.neurons, p.hidden, kTileN / ClusterSize, "gate weight");
  const CUtensorMap packed_map =
      make_packed_map(p.packed, p.tokens, padded / Compression, kTileN / Compression);
  GatePackArgs args{p.packed, p.row_overflow, p.tokens, padded, p.hidden};
  check(cudaLaunchKernelEx(&config, kernel, x_map, w_map, packed_map, args),
        "cudaLaunchKernelEx(twell_gate_pack_sm90_kernel)");
  check(cudaGetLastError(), "twell_gate_pack_sm90_kernel launch");
  return plan;
}

template <int Compression>
GatePackSm90Plan launch_for_cluster(const GatePackSm90Params& p, cudaStream_t stream, bool dry_run) {
  switch (p.cluster_size) {
    case 1:
      return launch<Compression, 1>(p, stream, dry_run);
    case 2:
      return launch<Compression, 2>(p, stream, dry_run);
    default:
      throw Error(Error::Kind::Unsupported,
                  "twell_gate_pack_sm90: cluster size " + std::to_string(p.cluster_size) + " is not 1 or 2");
  }
}

GatePackSm90Plan dispatch(const GatePackSm90Params& params, cudaStream_t stream, bool dry_run) {
  if (params.hidden % kTileK != 0 || params.hidden <= 0) {
    throw Error(Error::Kind::Unsupported, "twell_gate_pack_sm90: hidden size " +
                                              std::to_string(params.hidden) +
                                              " is not a positive multiple of 64");
  }
  if (params.neurons <= 0 || params.neurons > 65536) {
    throw Error(Error::Kind::Unsupported, "twell_gate_pack_sm90: intermediate size " +
                                              std::to_string(params.neurons) + " is outside 1..65536");
  }
  if (params.max_ctas < 0) {
    throw Error(Error::Kind::Internal,
                "twell_gate_pack_sm90: max_ctas " + std::to_string(params.max_ctas) + " is negative");
  }
  // TMA needs 16-byte aligned bases and row pitches.
  if (reinterpret_cast<std::uintptr_t>(params.x) % 16 ||
      reinterpret_cast<std::uintptr_t>(params.weight) % 16 ||
      reinterpret_cast<std::uintptr_t>(params.packed) % 16) {
    throw Error(Error::Kind::Internal, "twell_gate_pack_sm90: x, weight and packed must be 16-byte aligned");
  }
  switch (params.compression) {
    case 8:
      return launch_for_cluster<8>(params, stream, dry_run);
    case 4:
      return launch_for_cluster<4>(params, stream, dry_run);
    case 2:
      return launch_for_cluster<2>(params, stream, dry_run);
    default:
      throw Error(Error::Kind::Unsupported, "twell_gate_pack_sm90: compression factor " +
                                                std::to_string(params.compression) + " is not 8, 4 or 2");
  }
}

}  // namespace

bool gate_pack_sm90_supported(int device) {
  int major = 0;
  int minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) return false;
  return major == 9 && minor == 0;
}

void gate_pack_sm90(const GatePackSm90Params& params, cudaStream_t stream) {
  if (params.tokens <= 0) return;
  dispatch(params, stream, false);
}

GatePackSm90Plan gate_pack_sm90_plan(const GatePackSm90Params& params) {
  return dispatch(params, nullptr, true);
}

}  // namespace twell::cuda
