// SPDX-License-Identifier: GPL-3.0-or-later
// The CTA-per-token consumer's work balanced by each token's non-zeros. At token counts that leave
// few tokens per resident CTA, one heavy token (hundreds of non-zeros where the mean is tens) is the
// kernel's critical path; a plan built on the device cuts every token into pieces of about the same
// number of its non-zeros, contiguous in the packed row's order and cut inside tiles where they fall,
// one CTA per piece. Pieces of one token write fp32 partial outputs; the last piece to finish sums
// them in piece order, so the result does not depend on scheduling.
//
// The plan is core's twell_plan_balanced_pieces (its CPU reference) in one array of 32-bit words,
// built after the gate by count_row_entries_kernel and plan_pieces_kernel:
//   [0] the piece budget   [1] non-zeros of all tokens   [2] split tokens   [3] extra pieces planned
//   ([2..3] one 64-bit counter)
//   row_entries[rows]   non-zeros of each token (0 for rows flagged for the dense recomputation)
//   row_pieces[rows]    pieces of each token (1 = not split)
//   row_slot[rows]      a split token's first partial-output slot (unset for whole tokens)
//   row_done[rows]      a split token's pieces finished so far (zeroed by the plan)
//   count_totals[count CTAs]  the non-zeros each counting CTA saw, summed by the plan kernel
//   extra_items[extra]  (row << 8 | piece) for every piece after a token's first
// The counting kernel clears [2..3] and the plan kernel writes [0..1], so no memset runs before them.
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
constexpr int kPlanThreads = 256;
constexpr int kRowsPerCountCta = kPlanThreads / 32;  // one warp per token
constexpr std::uint32_t kPieceBits = kTwellPieceBits;
constexpr std::uint32_t kPieceMask = (1u << kPieceBits) - 1u;

struct BalancePlanView {
  std::uint32_t* header;
  std::uint32_t* row_entries;
  std::uint32_t* row_pieces;
  std::uint32_t* row_slot;
  std::uint32_t* row_done;
  std::uint32_t* count_totals;
  std::uint32_t* extra_items;
};

__host__ __device__ constexpr int balance_count_ctas(int rows) {
  return (rows + kRowsPerCountCta - 1) / kRowsPerCountCta;
}

__host__ __device__ inline BalancePlanView balance_plan_view(std::uint32_t* plan, int rows) {
  const std::size_t m = static_cast<std::size_t>(rows);
  std::uint32_t* const count_totals = plan + 4 + 4 * m;
  return {plan,
          plan + 4,
          plan + 4 + m,
          plan + 4 + 2 * m,
          plan + 4 + 3 * m,
          count_totals,
          count_totals + balance_count_ctas(rows)};
}

__host__ __device__ constexpr std::size_t balance_plan_words(int rows, int extra) {
  return 4 + 4 * static_cast<std::size_t>(rows) + static_cast<std::size_t>(balance_count_ctas(rows)) +
         static_cast<std::size_t>(extra);
}

// Split tokens hold at least two pieces each, so the partial slots are at most twice the extra pieces.
__host__ __device__ constexpr std::size_t balance_partial_slots(int extra) {
  return 2 * static_cast<std::size_t>(extra);
}

// core's twell_piece_entries: the non-zeros [begin, end) of piece `piece` of `pieces` of a token with
// `entries` non-zeros, in the packed row's order.
struct EntryRange {
  std::uint32_t begin, end;
};
__device__ inline EntryRange piece_entry_range(std::uint32_t entries, int piece, int pieces) {
  const auto at = [&](int cut) {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(cut) * entries /
                                      static_cast<unsigned>(pieces));
  };
  return {at(piece), at(piece + 1)};
}

struct BalanceParams {
  const std::uint32_t* packed;
  const std::uint32_t* row_flags;  // may be null
  std::uint32_t* plan;
  int rows, tiles, slots, words_per_row, extra;
  std::uint32_t capacity;
};

/// Counts every token's non-zeros and plans its pieces on `stream`, both kernels overlapping the
/// kernel before each where `overlap` is set (dependent_launch.cuh).
void launch_plan_balanced_pieces(const BalanceParams& params, cudaStream_t stream, bool overlap);

}  // namespace twell::cuda::up_down
