// SPDX-License-Identifier: GPL-3.0-or-later
// The fused TwELL consumer. One CTA per token, or where few tokens share each resident CTA slot, one
// per piece of a token balanced by non-zeros (twell_up_down_balance.cuh). Thread t owns the 8
// contiguous elements [8t, 8t+8) of D, so the x row and the output accumulators live in registers (4 and 8
// per thread) and every weight access is a coalesced 16-byte load. The packed row is read once and compacted
// across tiles in shared memory. Then, per chunk of up to 64 non-zeros, two phases: every up dot product
// first (4 up rows in flight per step, each warp's partial sums to shared memory, warps at their own pace),
// one barrier, each entry's warp partials added once, a barrier, then every down accumulation (4 down rows in
// flight per step). The hidden activation never leaves the CTA. Adding the partials once instead of in every
// warp took up/down from 4.55 to 4.08 ms at M 131072, 0.5 % (8.04 -> 7.08 at 1 %, 15.2-15.4 -> 13.5 at 2 %)
// on H200, alternated (h200-gate-lane-placing-consumer-2026-12-05.json).
//
// The split form (UpDownArgs::h_packed, gated and default precision): a first kernel runs phase 1 and writes
// each non-zero's h, rounded to bf16 as phase 2 rounds it, as one list per token (in the balanced
// launch each piece writes its stretch of it); the non-gated kernel then accumulates the down rows from
// the lists.
// The output is the fused kernel's bit for bit. Each kernel then gathers rows of one matrix,
// 23 MB at D 2048, N 5632 instead of 46. On an H100, where the fused kernel keeps L2 97 % busy at a 52 %
// hit rate, the two took 4.11-4.13 ms against its 4.65-4.70 at M 131072, 0.5 % (0.996-0.998x at 1-2 %),
// and the FFN 0.964-0.966x of its time with the fused kernel (h100-up-down-split-form-2026-12-06.json).
// Lists instead of a copy in the packed layout took that to 0.920-0.933x on three H100s, the FFN 7.73-8.03
// ms (h100-up-down-split-lists-2026-12-06.json); lists per piece took the balanced split at M 4096,
// 0.5 %, from 1.002-1.009x to 0.971-0.974x (h100-up-down-split-piece-lists-2026-12-06.json).
//
// Why two phases: with one barrier per group of non-zeros, every group waited for the slowest warp's
// loads; probing on H200 (M 131072, 0.5 %) put that barrier at 0.6 ms of a 4.5 ms kernel and the
// pure gather of the same rows at 3.2 ms. Why the tensor cores in the dot products: the per-element
// ALU work (unpacking bf16 products to fp32 and summing them) was the other half of the gap. In
// default precision the products are still rounded to bf16 (HMUL2, as the reference's) and the
// tensor cores sum them in fp32: the dot products against a matrix of ones, the down accumulation
// with a selector that hands each lane its own sums (accumulate_four_bf16). Highest precision keeps
// fp32 FMAs throughout.
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "dependent_launch.cuh"
#include "mma_sync.cuh"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/kernels/twell_up_down_union.hpp"
#include "twell/twell_format.hpp"
#include "twell_up_down_balance.cuh"
#include "twell_up_down_math.cuh"

namespace twell::cuda {
namespace {

using up_down::accumulate8;
using up_down::dot8;
using up_down::load_streaming;
using up_down::load_weight;

// Tuned on H200 at D 2048, N 5632, M 131072: 4 rows per step in both phases. 4 CTAs of 256 threads
// per SM (64 registers, no spills): on 2026-12-03 it measured as fast as 5 CTAs per SM (48 registers,
// where ptxas spilled the loop bounds of the gated default-precision kernel): up/down 4.51 / 14.86 ms
// against 4.43 / 15.13 at 0.5 / 2 % in the same session. Earlier (2026-12-02): 6 CTAs per SM spilled
// more and was slower (4.66 / 15.5 ms), and 8 up rows per step spilled at every occupancy.
constexpr int kUpStep = 4;
constexpr int kDownStep = 4;
constexpr int kPhaseEntries = 64;  // non-zeros per chunk (bounds the partial sums in shared memory)
constexpr int kMinBlocks = up_down::kResidentConsumerCtasPerSm;
constexpr std::uint32_t kOnes = 0x3f803f80u;  // two bf16 1.0, one 32-bit MMA operand register
constexpr int kChunkWords = 1024;             // packed words staged per pass (32 tiles at C = 8)
constexpr int kPad =
    kUpStep > kDownStep ? kUpStep : kDownStep;  // zeros past the end: steps read whole vectors
static_assert(kUpStep % 4 == 0 && kDownStep % 4 == 0 && kPhaseEntries % kUpStep == 0 &&
              kPhaseEntries % kDownStep == 0);

struct UpDownParams {
  const __nv_bfloat16* x;
  const std::uint32_t* packed;
  const __nv_bfloat16* up;
  const __nv_bfloat16* down_t;
  const std::uint32_t* row_flags;
  __nv_bfloat16* out;
  // The split form: its first kernel writes h here, in the row of the token's packed words: the
  // token's i-th non-zero (packed order) at word 1 + i, whichever piece consumes it, and a whole
  // token's count at word 0 (a split token's pieces take theirs from the plan). The row holds them: a
  // token has at most tiles x capacity non-zeros. The second kernel (kCompactInput) reads each piece's
  // stretch of its token's list.
  std::uint32_t* h_packed;
  int hidden, chunks;  // chunks = D / 8 = threads doing work
  int tiles, slots_per_tile, words_per_row;
  int rows;
  // Balanced by non-zeros (twell_up_down_balance.cuh): the plan, the split tokens' partial outputs
  // [slots, hidden], and the number of CTAs before the tokens' first pieces. Null plan: one CTA a token.
  const std::uint32_t* plan;
  std::uint32_t* row_done;  // the plan's per-token count of finished pieces
  float* partials;
  int extra;
};

// The split form's list of a token: its row of h_packed. Computed where used, from the token in shared
// memory, so that no register holds it through the loops (see token_row).
__device__ __forceinline__ std::uint32_t* token_h_list(const UpDownParams& p, std::size_t row) {
  return p.h_packed + row * p.words_per_row;
}

// Lane l's inclusive prefix sum of `value` over lanes 0..l.
__device__ __forceinline__ std::uint32_t warp_inclusive_sum(std::uint32_t value, int lane) {
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const std::uint32_t other = __shfl_up_sync(0xffffffffu, value, offset);
    if (lane >= offset) value += other;
  }
  return value;
}

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
  const __nv_bfloat162 product = __hmul2(up_down::as_bf162(a), up_down::as_bf162(b));
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

// kMaxThreads bounds the CTA (D / 8 rounded up to warps).
template <bool kGated, bool kHighest, int kMaxThreads, bool kWritesH = false, bool kCompactInput = false>
__global__ void __launch_bounds__(kMaxThreads, kMaxThreads <= 256 ? kMinBlocks : 1)
    twell_up_down_kernel(const UpDownParams p) {
  static_assert(!kWritesH || (kGated && !kHighest), "the split form stores h as bf16");
  static_assert(!kCompactInput || (!kGated && !kWritesH),
                "only the split form's second kernel reads h lists");
  constexpr int kMaxWarps = kMaxThreads / 32;
  __shared__ __align__(16) std::uint32_t entries[kChunkWords + kPad];
  // A pass's tiles: where each one's staged entries go, how many, and how many of its entries before
  // them belong to earlier pieces of the token.
  __shared__ std::uint32_t tile_offset[32], tile_count[32], tile_skip[32];
  __shared__ std::uint32_t entry_total;
  __shared__ int pass_advance;  // pass0's step to the next pass: tiles, or (kCompactInput) entries
  __shared__ int pass_tiles;    // the tiles whose entries this pass stages
  __shared__ int list_length;   // kCompactInput: this CTA's entries
  __shared__ __align__(16) float partials[kGated ? kMaxWarps : 1][kPhaseEntries];
  // Set once, read where used: the token held in a register through the loops made ptxas spill the
  // gated default-precision kernel (blockIdx.x, the token before balancing, costs no register).
  __shared__ unsigned long long token_row;
  __shared__ std::uint32_t piece_entries[2];  // this CTA's non-zeros [begin, end) of its token
  __shared__ std::uint32_t entries_before;    // the token's non-zeros in the tiles before this pass
  // Split tokens: the token's first partial-output slot, this CTA's piece, the token's pieces (1: the
  // whole token is this CTA's, its output written directly).
  __shared__ unsigned first_slot, piece_index, piece_count;
  __shared__ bool sums_token;

  // Balanced, the kernel may be scheduled while the plan kernel finishes (launch_variant).
  wait_for_prior_grid();
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, warps = blockDim.x >> 5;
  const int slots = p.slots_per_tile;
  const std::uint32_t capacity = static_cast<std::uint32_t>(slots - 1);

  // This CTA's token and piece of it: the extra pieces' CTAs come first, then one per token.
  std::size_t row = blockIdx.x;
  int piece = 0, pieces = 1;
  up_down::BalancePlanView plan{};
  if (p.plan != nullptr) {
    plan = up_down::balance_plan_view(const_cast<std::uint32_t*>(p.plan), p.rows);
    if (blockIdx.x < static_cast<unsigned>(p.extra)) {
      if (blockIdx.x >= plan.header[3]) return;  // fewer extra pieces were planned
      const std::uint32_t item = plan.extra_items[blockIdx.x];
      row = item >> up_down::kPieceBits;
      piece = static_cast<int>(item & up_down::kPieceMask);
    } else {
      row = blockIdx.x - p.extra;
    }
    pieces = static_cast<int>(plan.row_pieces[row]);
  }
  if (p.row_flags != nullptr && p.row_flags[row] != 0u) return;  // recomputed densely afterwards
  if (t == 0) {
    up_down::EntryRange range{0u, 0xffffffffu};  // a whole token: all of its non-zeros
    if (pieces > 1) range = up_down::piece_entry_range(plan.row_entries[row], piece, pieces);
    if constexpr (kCompactInput)
      list_length = static_cast<int>(pieces > 1 ? range.end - range.begin : __ldcs(token_h_list(p, row)));
    token_row = row;
    piece_entries[0] = range.begin, piece_entries[1] = range.end;
    entries_before = 0u;
    piece_count = static_cast<unsigned>(pieces);
    piece_index = static_cast<unsigned>(piece);
    first_slot = pieces > 1 ? plan.row_slot[row] : 0u;
  }
  __syncthreads();

  const bool active = t < p.chunks;
  const unsigned column = static_cast<unsigned>(t) * 8u;

  const __nv_bfloat16* x_row = kGated ? p.x + token_row * p.hidden + column : nullptr;
  // Output accumulators: 8 fp32 in highest precision; in default precision the tensor-core
  // fragments of accumulate_four_bf16.
  float acc[8];
  float acc_mma[2][4];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.0f, acc_mma[i / 4][i % 4] = 0.0f;
  const OwnLaneSelectors own_lane = own_lane_selectors(lane);

  // Row j of an [N, D] matrix for the entry word j (its low 16 bits), zero where `live` is false.
  const auto load_row = [&](const __nv_bfloat16* matrix, std::uint32_t word, bool live) {
    return live && active ? load_weight(matrix + static_cast<std::size_t>(word & 0xffffu) * p.hidden + column)
                          : make_uint4(0, 0, 0, 0);
  };
  // The same for the up rows, from this thread's column of Wu and a 32-bit byte offset (N <= 65536
  // rows of at most 16 KiB): one wide multiply-add per row. Only phase 1 takes it: in phase 2 the
  // extra live pointer made the non-gated kernels spill.
  const unsigned char* const up_column =
      kGated ? reinterpret_cast<const unsigned char*>(p.up + column) : nullptr;
  const std::uint32_t row_bytes = static_cast<std::uint32_t>(p.hidden) * 2u;
  const auto load_up_row = [&](std::uint32_t word, bool live) {
    return live && active
               ? load_weight(reinterpret_cast<const __nv_bfloat16*>(up_column + (word & 0xffffu) * row_bytes))
               : make_uint4(0, 0, 0, 0);
  };

  // A pass stages up to kChunkWords of this piece's entries: those in the next tiles that fit (at most
  // 32, never none: a tile holds at most 256), copied without the tiles' empty slots, which in the
  // unbounded layout are most of the row; or (kCompactInput) entries of its list as they are. In the
  // split form's first kernel `written` counts the entries of earlier passes, where this pass's go in
  // the list.
  const int pass_end = kCompactInput ? list_length : p.tiles;
  int written = 0;
  for (int pass0 = 0; pass0 < pass_end;) {
    if constexpr (kCompactInput) {
      const int listed = min(kChunkWords, pass_end - pass0);
      const std::uint32_t* source = token_h_list(p, token_row) + 1 + piece_entries[0] + pass0;
      for (int e = t; e < listed; e += blockDim.x) entries[e] = __ldcs(source + e);
      if (t == 0) entry_total = static_cast<std::uint32_t>(listed), pass_advance = listed;
      if (t < kPad) entries[listed + t] = 0u;
      __syncthreads();
    } else {
      const std::uint32_t* const row_base = p.packed + token_row * p.words_per_row;
      if (warp == 0) {  // the (clamped) counts of up to 32 tiles, the piece's share of each, their scans
        const int tile = pass0 + lane;
        const std::uint32_t count =
            tile < p.tiles ? min(__ldcs(row_base + static_cast<std::size_t>(tile) * slots), capacity) : 0u;
        const std::uint32_t inclusive = warp_inclusive_sum(count, lane);
        const std::uint32_t first = entries_before + inclusive - count;  // the tile's first, in the token
        const std::uint32_t from = max(first, piece_entries[0]), to = min(first + count, piece_entries[1]);
        const std::uint32_t share = to > from ? to - from : 0u;
        const std::uint32_t staged = warp_inclusive_sum(share, lane);
        // The scan only grows, so the tiles that fit are a prefix; lane 0's always does.
        const unsigned fits = __ballot_sync(0xffffffffu, tile < p.tiles && staged <= kChunkWords);
        const int fitting = __popc(fits);
        tile_offset[lane] = staged - share, tile_count[lane] = share,
        tile_skip[lane] = share ? from - first : 0u;
        const std::uint32_t fitting_entries = __shfl_sync(0xffffffffu, staged, fitting - 1);
        const std::uint32_t through = entries_before + __shfl_sync(0xffffffffu, inclusive, fitting - 1);
        // Lane 0 overwrites entries_before, which every lane read: the barrier orders the reads first
        // (shuffles wait for the lanes but do not order shared memory).
        __syncwarp();
        if (lane == 0) {
          entry_total = fitting_entries, pass_tiles = fitting;
          // Past the piece's last entry no later tile holds any of its entries: the pass is the last.
          pass_advance = through >= piece_entries[1] ? p.tiles - pass0 : fitting;
          entries_before = through;
        }
      }
      __syncthreads();
      const int taken = pass_tiles;
      for (int i = warp; i < taken; i += warps) {  // one warp a tile, its entries in one coalesced run
        const std::uint32_t* source =
            row_base + static_cast<std::size_t>(pass0 + i) * slots + 1 + tile_skip[i];
        for (std::uint32_t e = lane; e < tile_count[i]; e += 32)
          entries[tile_offset[i] + e] = __ldcs(source + e);
      }
      if (t < kPad) entries[entry_total + t] = 0u;
      __syncthreads();
    }
    const int total = static_cast<int>(entry_total);

    for (int chunk0 = 0; chunk0 < total; chunk0 += kPhaseEntries) {
      const int chunk_entries = min(kPhaseEntries, total - chunk0);
      const std::uint32_t* chunk = entries + chunk0;
      if constexpr (kGated) {
        // Phase 1: u_j = <x, Wu[j]>, each warp's share to partials[warp][j]. x is (re)loaded per
        // chunk rather than held through phase 2, where its registers are short.
        const uint4 x = active ? load_streaming(x_row) : make_uint4(0, 0, 0, 0);
        for (int first = 0; first < chunk_entries; first += kUpStep) {
          // The step's words in one 16-byte load (the chunk is padded with zeros to whole steps).
          std::uint32_t words[kUpStep];
#pragma unroll
          for (int i = 0; i < kUpStep; i += 4) {
            const uint4 four = *reinterpret_cast<const uint4*>(chunk + first + i);
            words[i] = four.x, words[i + 1] = four.y, words[i + 2] = four.z, words[i + 3] = four.w;
          }
          uint4 up_rows[kUpStep];
#pragma unroll
          for (int i = 0; i < kUpStep; ++i) up_rows[i] = load_up_row(words[i], first + i < chunk_entries);
#pragma unroll
          for (int quad = 0; quad < kUpStep / 4; ++quad) {
            const uint4 four[4] = {up_rows[4 * quad], up_rows[4 * quad + 1], up_rows[4 * quad + 2],
                                   up_rows[4 * quad + 3]};
            const float total_of_row =
                kHighest ? warp_dot_four_fp32(x, four, lane) : warp_dot_four_bf16(x, four, lane);
            if ((lane & 7) == 0) partials[warp][first + 4 * quad + (lane >> 3)] = total_of_row;
          }
        }
        __syncthreads();
        // Each entry's warp partials are added once, in warp order, into warp 0's row: phase 2 reads
        // one total per entry instead of every warp adding every warp's partial again. Phase 1 wrote
        // zeros for the rows past the chunk's end up to its last whole step, which phase 2 reads.
        const int summed_entries = (chunk_entries + kDownStep - 1) / kDownStep * kDownStep;
        for (int entry = t; entry < summed_entries; entry += blockDim.x) {
          float u = 0.0f;
#pragma unroll
          for (int w = 0; w < kMaxWarps; ++w)
            if (w < warps) u += partials[w][entry];
          partials[0][entry] = u;
        }
        __syncthreads();
      }
      if constexpr (kWritesH) {  // h_j = bf16(gate_j * bf16(u_j)), next in this piece's stretch of the list
        std::uint32_t* const h_list = token_h_list(p, token_row) + 1 + piece_entries[0];
        for (int entry = t; entry < chunk_entries; entry += blockDim.x) {
          const std::uint32_t word = chunk[entry];
          const __nv_bfloat16 h = __hmul(__ushort_as_bfloat16(static_cast<unsigned short>(word >> 16)),
                                         __float2bfloat16_rn(partials[0][entry]));
          h_list[written + chunk0 + entry] =
              (word & 0xffffu) | (static_cast<std::uint32_t>(__bfloat16_as_ushort(h)) << 16);
        }
      } else {
        // Phase 2: out += h_j * Wd^T[j], h_j = gate_j * u_j (gated) or the packed value (non-gated).
        for (int first = 0; first < chunk_entries; first += kDownStep) {
          std::uint32_t words[kDownStep];
#pragma unroll
          for (int i = 0; i < kDownStep; i += 4) {
            const uint4 four = *reinterpret_cast<const uint4*>(chunk + first + i);
            words[i] = four.x, words[i + 1] = four.y, words[i + 2] = four.z, words[i + 3] = four.w;
          }
          float h[kDownStep];
          __nv_bfloat16 h_bf16[kDownStep];
#pragma unroll
          for (int i = 0; i < kDownStep; ++i) {
            const __nv_bfloat16 value = __ushort_as_bfloat16(static_cast<unsigned short>(words[i] >> 16));
            h_bf16[i] = value;
            h[i] = __bfloat162float(value);
          }
          if constexpr (kGated) {
            float u[kDownStep];
#pragma unroll
            for (int i = 0; i < kDownStep; i += 4) {
              const float4 four = *reinterpret_cast<const float4*>(&partials[0][first + i]);
              u[i] = four.x, u[i + 1] = four.y, u[i + 2] = four.z, u[i + 3] = four.w;
            }
#pragma unroll
            for (int i = 0; i < kDownStep; ++i) {
              if constexpr (kHighest) {
                h[i] *= u[i];
              } else {
                h_bf16[i] = __hmul(h_bf16[i], __float2bfloat16_rn(u[i]));
              }
            }
          }
          // The down rows are loaded after h is formed: fewer values live while they are in flight.
          uint4 down_rows[kDownStep];
#pragma unroll
          for (int i = 0; i < kDownStep; ++i)
            down_rows[i] = load_row(p.down_t, words[i], first + i < chunk_entries);
          if constexpr (kHighest) {
#pragma unroll
            for (int i = 0; i < kDownStep; ++i)
              if (first + i < chunk_entries) accumulate8<true>(acc, h[i], h_bf16[i], down_rows[i]);
          } else {  // rows past the end are zero with h zero: their products add nothing
#pragma unroll
            for (int i = 0; i < kDownStep; i += 4) {
              const uint4 four_rows[4] = {down_rows[i], down_rows[i + 1], down_rows[i + 2], down_rows[i + 3]};
              const __nv_bfloat16 four_h[4] = {h_bf16[i], h_bf16[i + 1], h_bf16[i + 2], h_bf16[i + 3]};
              accumulate_four_bf16(acc_mma, four_h, four_rows, own_lane);
            }
          }
        }
      }
      if (chunk0 + kPhaseEntries < total) __syncthreads();  // the partial sums: the next chunk's
    }
    written += total;
    pass0 += pass_advance;
    // The next pass rewrites the staged entries and the scan; every thread has read this pass's.
    if (pass0 < pass_end) __syncthreads();
  }
  if constexpr (kWritesH) {
    if (t == 0 && piece_count == 1) *token_h_list(p, token_row) = static_cast<std::uint32_t>(written);
    return;
  }

  if constexpr (!kHighest) {
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = acc_mma[i / 4][i % 4];
  }
  __nv_bfloat16* const out_row = p.out + token_row * p.hidden + column;
  const unsigned pieces_of_token = piece_count;
  if (pieces_of_token == 1) {
    if (active) __stcs(reinterpret_cast<uint4*>(out_row), up_down::round_to_bf16x8(acc));
    return;
  }
  // A piece of a split token: its fp32 partial, then the last of the token's pieces to finish adds
  // every piece's partial in piece order (the same sums whichever CTA finishes last).
  float* const token_partials = p.partials + static_cast<std::size_t>(first_slot) * p.hidden + column;
  if (active) {
    float4* partial =
        reinterpret_cast<float4*>(token_partials + static_cast<std::size_t>(piece_index) * p.hidden);
    partial[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    partial[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
  }
  __threadfence();
  __syncthreads();
  if (t == 0) sums_token = atomicAdd(&p.row_done[token_row], 1u) == pieces_of_token - 1;
  __syncthreads();
  if (!sums_token || !active) return;
  __threadfence();
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.0f;
  for (unsigned part = 0; part < pieces_of_token; ++part) {
    const float4* source =
        reinterpret_cast<const float4*>(token_partials + static_cast<std::size_t>(part) * p.hidden);
    const float4 low = __ldcg(source), high = __ldcg(source + 1);
    acc[0] += low.x, acc[1] += low.y, acc[2] += low.z, acc[3] += low.w;
    acc[4] += high.x, acc[5] += high.y, acc[6] += high.z, acc[7] += high.w;
  }
  __stcs(reinterpret_cast<uint4*>(out_row), up_down::round_to_bf16x8(acc));
}

template <int kMaxThreads>
void launch_variant(const UpDownParams& params, bool gated, bool highest, int ctas, int threads,
                    cudaStream_t stream, bool dependent_launch) {
  const dim3 grid(static_cast<unsigned>(ctas));
  // Balanced, the plan kernel runs just before: the consumer is scheduled while it finishes.
  const bool overlap = params.plan != nullptr && dependent_launch;
  const char* const name = "twell_up_down_kernel (CTAs per token or per balanced piece)";
  // The split form (h_packed is set only where it applies, gated and default precision): every h,
  // then the down rows.
  if (params.h_packed != nullptr) {
    // h as one list per token, which the second kernel reads without the packed rows' empty slots.
    launch_dependent(twell_up_down_kernel<true, false, kMaxThreads, true>, grid, dim3(threads), stream,
                     overlap, name, params);
    UpDownParams down = params;
    down.x = nullptr;
    down.up = nullptr;
    // Scheduled while the first finishes; it waits for every h before it reads one.
    launch_dependent(twell_up_down_kernel<false, false, kMaxThreads, false, true>, grid, dim3(threads),
                     stream, dependent_launch, name, down);
    return;
  }
  if (gated && highest) {
    launch_dependent(twell_up_down_kernel<true, true, kMaxThreads>, grid, dim3(threads), stream, overlap,
                     name, params);
  } else if (gated) {
    launch_dependent(twell_up_down_kernel<true, false, kMaxThreads>, grid, dim3(threads), stream, overlap,
                     name, params);
  } else if (highest) {
    launch_dependent(twell_up_down_kernel<false, true, kMaxThreads>, grid, dim3(threads), stream, overlap,
                     name, params);
  } else {
    launch_dependent(twell_up_down_kernel<false, false, kMaxThreads>, grid, dim3(threads), stream, overlap,
                     name, params);
  }
}

}  // namespace

const char* to_string(UpDownKernel kernel) noexcept {
  switch (kernel) {
    case UpDownKernel::Auto:
      return "auto";
    case UpDownKernel::PerTokenCta:
      return "per_token_cta";
    case UpDownKernel::BalancedCta:
      return "balanced_cta";
    case UpDownKernel::PerTokenWarp:
      return "per_token_warp";
    case UpDownKernel::UnionSm90:
      return "union_sm90";
  }
  return "unknown";
}

bool up_down_per_token_warp_supported(int hidden) {
  return hidden > 0 && hidden % 64 == 0 && hidden <= 2048;
}

// Auto is the CTA kernel everywhere, balanced where few tokens share a CTA slot: on H200
// (resources/benchmarks/h200-ffn-hopper-*.json) the warp-per-token kernel measured within noise of
// one CTA per token at M 131072 and 0.25-0.5 % density and 5-18 % slower at M 16384 and at 1-5 %; the
// balance at decode-sized M is h100-balanced-consumer-2026-12-05.json's.
UpDownKernel resolve_up_down_kernel(UpDownKernel requested, int /*hidden*/) {
  return requested == UpDownKernel::Auto ? UpDownKernel::BalancedCta : requested;
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
  const bool unbounded = args.compression == kTwellUnbounded;
  if (!twell_layout_supported(args.compression))
    fail("compression factor " + std::to_string(args.compression) + " is not 8, 4, 2 or unbounded");
  const bool gated = args.up != nullptr;
  if (!args.packed || !args.down_t || !args.out || (gated && !args.x))
    throw Error(Error::Kind::InvalidInput, "TwELL up/down kernel: a device pointer is null");

  const UpDownKernel kernel = resolve_up_down_kernel(args.kernel, args.hidden);
  if (kernel == UpDownKernel::PerTokenWarp) {
    if (unbounded) fail("the one-warp-per-token consumer does not read the unbounded layout");
    if (!up_down_per_token_warp_supported(args.hidden))
      fail("the one-warp-per-token consumer needs hidden <= 2048 (got " + std::to_string(args.hidden) + ")");
    launch_twell_up_down_per_token_warp(args, stream);
    return;
  }
  if (kernel == UpDownKernel::UnionSm90) {
    int device = 0;
    TWELL_CUDA_CHECK(cudaGetDevice(&device));
    if (!up_down_union_available(device))
      fail("the union consumer needs an sm_90a build on a compute capability 9.0 device");
    if (const std::string refusal = up_down_union_refusal(args); !refusal.empty()) fail(refusal);
    launch_twell_up_down_union(args, stream);
    return;
  }

  UpDownParams params{};
  params.x = args.x;
  params.packed = args.packed;
  params.up = args.up;
  params.down_t = args.down_t;
  params.row_flags = args.row_flags;
  params.out = args.out;
  // The split form halves the rows each kernel gathers from, which matters where L2 throughput bounds
  // the consumer. Balanced, both kernels run the same pieces: each piece's stretch of its token's
  // non-zeros is the plan's in both, and so is where the first kernel lists them.
  params.h_packed = gated && !args.highest_precision ? args.h_packed : nullptr;
  params.hidden = args.hidden;
  params.chunks = args.hidden / 8;
  params.tiles = args.padded_neurons / 256;
  params.slots_per_tile = static_cast<int>(twell_slots_per_tile(args.compression));
  params.words_per_row = params.tiles * params.slots_per_tile;
  params.rows = args.rows;

  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  // Queried once for the plan kernels and the consumer (each scheduled while the one before finishes).
  const bool overlap = dependent_launch_supported();
  const UpDownBalanceSizes balance = up_down_balance_sizes(args.rows, args.hidden, device);
  const bool balanced = kernel == UpDownKernel::BalancedCta && balance.extra_pieces > 0 &&
                        args.balance_plan != nullptr && args.balance_plan_words >= balance.plan_words &&
                        args.balance_partials != nullptr &&
                        args.balance_partial_elements >= balance.partial_elements;
  if (balanced) {
    params.plan = args.balance_plan;
    params.row_done = up_down::balance_plan_view(args.balance_plan, args.rows).row_done;
    params.partials = args.balance_partials;
    params.extra = balance.extra_pieces;
    up_down::BalanceParams plan;
    plan.packed = args.packed;
    plan.row_flags = args.row_flags;
    plan.plan = args.balance_plan;
    plan.rows = args.rows;
    plan.tiles = params.tiles;
    plan.slots = params.slots_per_tile;
    plan.words_per_row = params.words_per_row;
    plan.extra = balance.extra_pieces;
    plan.capacity = static_cast<std::uint32_t>(params.slots_per_tile - 1);
    up_down::launch_plan_balanced_pieces(plan, stream, overlap);
  }

  const int ctas = args.rows + params.extra;
  const int threads = (params.chunks + 31) / 32 * 32;
  if (threads <= 256) {
    launch_variant<256>(params, gated, args.highest_precision, ctas, threads, stream, overlap);
  } else if (threads <= 512) {
    launch_variant<512>(params, gated, args.highest_precision, ctas, threads, stream, overlap);
  } else {
    launch_variant<1024>(params, gated, args.highest_precision, ctas, threads, stream, overlap);
  }
  TWELL_CUDA_CHECK_LAUNCH("twell_up_down_kernel (CTAs per token or per balanced piece)");
}

}  // namespace twell::cuda
