// SPDX-License-Identifier: GPL-3.0-or-later
// The CTA-per-token consumer's work balanced by each token's non-zeros. At token counts that leave
// few tokens per resident CTA, one heavy token (hundreds of non-zeros where the mean is tens) is the
// kernel's critical path; a plan built on the device cuts every token into pieces of contiguous
// tiles holding about the same number of non-zeros, one CTA per piece. Pieces of one token write
// fp32 partial outputs; the last piece to finish sums them in piece order, so the result does not
// depend on scheduling.
//
// The plan is core's twell_plan_balanced_pieces (its CPU reference) in one array of 32-bit words,
// built after the gate by count_row_entries_kernel and plan_pieces_kernel:
//   [0] the piece budget   [1] non-zeros of all tokens   [2] split tokens   [3] extra pieces planned
//   ([2..3] one 64-bit counter)
//   row_entries[rows]   non-zeros of each token (0 for rows flagged for the dense recomputation)
//   row_pieces[rows]    pieces of each token (1 = not split)
//   row_slot[rows]      a split token's first partial-output slot (unset for whole tokens)
//   row_done[rows]      a split token's pieces finished so far (zeroed by the plan)
//   extra_items[extra]  (row << 8 | piece) for every piece after a token's first
// Slots and items are placed in the order warps claimed their space, which varies between runs.
// The consumer runs `extra` CTAs for the extra pieces (those past the planned count exit) and then
// one CTA per token for its first piece.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "twell/twell_balance.hpp"

namespace twell::cuda::up_down {

constexpr int kResidentConsumerCtasPerSm = 4;  // the consumer's launch bounds (256 threads)
constexpr std::uint32_t kPieceBits = kTwellPieceBits;
constexpr std::uint32_t kPieceMask = (1u << kPieceBits) - 1u;

struct BalancePlanView {
  std::uint32_t* header;
  std::uint32_t* row_entries;
  std::uint32_t* row_pieces;
  std::uint32_t* row_slot;
  std::uint32_t* row_done;
  std::uint32_t* extra_items;
};

__host__ __device__ inline BalancePlanView balance_plan_view(std::uint32_t* plan, int rows) {
  const std::size_t m = static_cast<std::size_t>(rows);
  return {plan, plan + 4, plan + 4 + m, plan + 4 + 2 * m, plan + 4 + 3 * m, plan + 4 + 4 * m};
}

__host__ __device__ constexpr std::size_t balance_plan_words(int rows, int extra) {
  return 4 + 4 * static_cast<std::size_t>(rows) + static_cast<std::size_t>(extra);
}

// Split tokens hold at least two pieces each, so the partial slots are at most twice the extra pieces.
__host__ __device__ constexpr std::size_t balance_partial_slots(int extra) {
  return 2 * static_cast<std::size_t>(extra);
}

// core's twell_piece_tiles for one warp: the tiles [begin, end) of piece `piece` of `pieces` of a token
// with `entries` non-zeros. Every lane returns the range.
struct TileRange {
  int begin, end;
};
__device__ inline TileRange piece_tile_range(const std::uint32_t* row_words, int tiles, int slots,
                                             std::uint32_t capacity, std::uint32_t entries, int piece,
                                             int pieces, int lane) {
  int begin = 0, end = 0;
  std::uint32_t before = 0;  // non-zeros in the tiles of earlier rounds
  for (int tile0 = 0; tile0 < tiles; tile0 += 32) {
    const int tile = tile0 + lane;
    const bool valid = tile < tiles;
    const std::uint32_t count = valid ? min(row_words[static_cast<std::size_t>(tile) * slots], capacity) : 0u;
    std::uint32_t inclusive = count;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const std::uint32_t other = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += other;
    }
    const std::uint64_t first = before + inclusive - count;
    const std::uint64_t share = first * static_cast<std::uint64_t>(pieces) / entries;
    const int owner = share < static_cast<std::uint64_t>(pieces) ? static_cast<int>(share) : pieces - 1;
    begin += __popc(__ballot_sync(0xffffffffu, valid && owner < piece));
    end += __popc(__ballot_sync(0xffffffffu, valid && owner <= piece));
    before += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  return {begin, end};
}

struct BalanceParams {
  const std::uint32_t* packed;
  const std::uint32_t* row_flags;  // may be null
  std::uint32_t* plan;
  int rows, tiles, slots, words_per_row, extra;
  std::uint32_t capacity;
};

/// Counts every token's non-zeros and plans its pieces (the header zeroed first, on `stream`).
void launch_plan_balanced_pieces(const BalanceParams& params, cudaStream_t stream);

}  // namespace twell::cuda::up_down
