// SPDX-License-Identifier: GPL-3.0-or-later
// The plan that cuts TwELL's consumer work into pieces of about equal non-zeros: a worked example,
// and over heavy-tailed random rows the invariants the GPU consumer relies on (extra pieces within
// the CTAs launched for them, pieces contiguous and covering every non-zero, bounded non-zeros a piece).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "twell/error.hpp"
#include "twell/twell_balance.hpp"
#include "twell/twell_format.hpp"

namespace {

using twell::TwellPacked;

// Rows of N 5632 (22 tiles, capacity 31 at C 8); row r fires on the first live[r] columns of every
// tile it reaches (`per_tile` each), so the counts are exact.
TwellPacked rows_with_counts(const std::vector<std::vector<std::uint32_t>>& per_tile_counts) {
  const std::uint32_t neurons = 5632;
  std::vector<float> pre(per_tile_counts.size() * neurons, -1.0f);
  for (std::size_t r = 0; r < per_tile_counts.size(); ++r)
    for (std::size_t tile = 0; tile < per_tile_counts[r].size(); ++tile)
      for (std::uint32_t i = 0; i < per_tile_counts[r][tile]; ++i) pre[r * neurons + tile * 256 + i] = 1.0f;
  return twell::twell_pack(pre.data(), static_cast<std::uint32_t>(per_tile_counts.size()), neurons, 8);
}

TEST(TwellBalance, WorkedExample) {
  // Row 0: 2 non-zeros; row 1: 22 tiles of 20 (440); row 2: overflows tile 0 (40 > 31); row 3: 10.
  std::vector<std::vector<std::uint32_t>> counts = {{2}, std::vector<std::uint32_t>(22, 20), {40}, {10}};
  const TwellPacked packed = rows_with_counts(counts);
  ASSERT_EQ(packed.overflow_rows, std::vector<std::uint32_t>{2});
  // 452 non-zeros over 8 extra CTAs: budget ceil(452 / 8) = 57; row 1 takes floor(440 / 57) = 7 pieces.
  const twell::TwellBalancedPieces plan = twell::twell_plan_balanced_pieces(packed, 8);
  EXPECT_EQ(plan.budget, 57u);
  EXPECT_EQ(plan.row_entries, (std::vector<std::uint32_t>{2, 440, 0, 10}));
  EXPECT_EQ(plan.row_pieces, (std::vector<std::uint32_t>{1, 7, 1, 1}));
  EXPECT_EQ(plan.row_slot, (std::vector<std::uint32_t>{0, 0, 7, 7}));
  EXPECT_EQ(plan.split_rows, std::vector<std::uint32_t>{1});
  ASSERT_EQ(plan.extra_items.size(), 6u);
  for (std::uint32_t piece = 1; piece < 7; ++piece)
    EXPECT_EQ(plan.extra_items[piece - 1], (1u << twell::kTwellPieceBits) | piece);
  // Piece k of row 1 takes its non-zeros [440 k / 7, 440 (k + 1) / 7), cut inside tiles of 20.
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> spans = {
      {0, 62}, {62, 125}, {125, 188}, {188, 251}, {251, 314}, {314, 377}, {377, 440}};
  for (std::uint32_t piece = 0; piece < 7; ++piece) {
    const twell::EntrySpan span = twell::twell_piece_entries(440, piece, 7);
    EXPECT_EQ(span.begin, spans[piece].first) << "piece " << piece;
    EXPECT_EQ(span.end, spans[piece].second) << "piece " << piece;
  }
  EXPECT_THROW(twell::twell_plan_balanced_pieces(packed, 0), twell::Error);
  EXPECT_THROW(twell::twell_piece_entries(440, 7, 7), twell::Error);
  EXPECT_THROW(twell::twell_piece_entries(440, 0, 0), twell::Error);
}

TEST(TwellBalance, MinimumPieceAndPieceCap) {
  // Few non-zeros over many extra CTAs: the budget floors at kTwellMinPieceEntries.
  const TwellPacked light = rows_with_counts({{3, 3, 3}});
  const twell::TwellBalancedPieces plan = twell::twell_plan_balanced_pieces(light, 1000);
  EXPECT_EQ(plan.budget, twell::kTwellMinPieceEntries);
  EXPECT_EQ(plan.row_pieces[0], 2u);  // floor(9 / 4)
  // One tile holding everything is cut as finely as any row: 7 pieces of 4 or 5 inside the tile.
  const TwellPacked one_tile = rows_with_counts({{31}});
  const twell::TwellBalancedPieces in_one_tile = twell::twell_plan_balanced_pieces(one_tile, 1000);
  EXPECT_EQ(in_one_tile.row_pieces[0], 7u);  // floor(31 / 4)
  for (std::uint32_t piece = 0; piece < 7; ++piece) {
    const twell::EntrySpan span = twell::twell_piece_entries(31, piece, 7);
    EXPECT_GE(span.end - span.begin, 4u);
    EXPECT_LE(span.end - span.begin, 5u);
  }
  // A whole row live in the unbounded layout (5632 non-zeros) is cut into at most kTwellMaxPieces.
  const std::vector<float> live(5632, 1.0f);
  const TwellPacked dense_row = twell::twell_pack(live.data(), 1, 5632, twell::kTwellUnbounded);
  const twell::TwellBalancedPieces capped = twell::twell_plan_balanced_pieces(dense_row, 10000);
  EXPECT_EQ(capped.row_entries[0], 5632u);
  EXPECT_EQ(capped.row_pieces[0], twell::kTwellMaxPieces);
  EXPECT_EQ(capped.extra_items.size(), twell::kTwellMaxPieces - 1);
}

TEST(TwellBalance, HeavyTailedRowsKeepTheInvariants) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const std::uint32_t rows = 1 + rng() % 300, extra = 1 + rng() % 600;
    std::vector<std::vector<std::uint32_t>> counts(rows, std::vector<std::uint32_t>(22));
    for (auto& row : counts) {
      const bool heavy = rng() % 16 == 0;
      for (auto& count : row) count = heavy ? rng() % 36 : (rng() % 8 == 0 ? 1 + rng() % 3 : 0);
    }
    const TwellPacked packed = rows_with_counts(counts);
    const twell::TwellBalancedPieces plan = twell::twell_plan_balanced_pieces(packed, extra);
    ASSERT_LE(plan.extra_items.size(), extra) << "trial " << trial;
    std::uint32_t slots = 0;
    for (std::uint32_t row = 0; row < rows; ++row) {
      const std::uint32_t pieces = plan.row_pieces[row];
      ASSERT_GE(pieces, 1u);
      ASSERT_LE(pieces, twell::kTwellMaxPieces);
      EXPECT_EQ(plan.row_slot[row], slots);
      if (pieces > 1) slots += pieces;
      const bool overflowing =
          std::binary_search(packed.overflow_rows.begin(), packed.overflow_rows.end(), row);
      std::uint32_t entries = 0;  // the row's clamped counts, as the consumer stages them
      for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile)
        entries += std::min(packed.words[row * packed.words_per_row() + tile * 32], packed.capacity());
      // Every piece holds floor or ceil of e / pieces non-zeros: under twice the budget unless the row
      // hit the cap on pieces.
      const std::uint32_t most = (plan.row_entries[row] + pieces - 1) / pieces;
      if (plan.row_entries[row] / plan.budget < twell::kTwellMaxPieces) {
        EXPECT_LT(most, 2 * plan.budget + 1);
      }
      std::uint32_t next = 0;
      for (std::uint32_t piece = 0; piece < pieces; ++piece) {
        const twell::EntrySpan span = twell::twell_piece_entries(plan.row_entries[row], piece, pieces);
        ASSERT_EQ(span.begin, next) << "trial " << trial << " row " << row << " piece " << piece;
        ASSERT_LE(span.end - span.begin, most);
        next = span.end;
      }
      EXPECT_EQ(next, plan.row_entries[row]);
      EXPECT_EQ(plan.row_entries[row], overflowing ? 0u : entries);
    }
  }
}

}  // namespace
