// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/twell_balance.hpp"

#include <algorithm>
#include <string>

#include "twell/error.hpp"

namespace twell {
namespace {

std::uint32_t tile_count(const TwellPacked& packed, std::uint32_t row, std::uint32_t tile) {
  const std::size_t word = static_cast<std::size_t>(row) * packed.words_per_row() +
                           static_cast<std::size_t>(tile) * packed.slots_per_tile();
  return std::min(packed.words[word], packed.capacity());
}

std::uint32_t pieces_of(std::uint32_t entries, std::uint32_t budget) {
  return std::clamp(entries / budget, 1u, kTwellMaxPieces);
}

}  // namespace

TwellBalancedPieces twell_plan_balanced_pieces(const TwellPacked& packed, std::uint32_t extra_pieces) {
  if (extra_pieces == 0)
    throw Error(Error::Kind::InvalidInput, "twell_plan_balanced_pieces: extra_pieces must be positive");
  if (packed.words.size() != static_cast<std::size_t>(packed.rows) * packed.words_per_row())
    throw Error(Error::Kind::InvalidInput,
                "twell_plan_balanced_pieces: the packed buffer's size does not match "
                "its shape");
  TwellBalancedPieces plan;
  plan.row_entries.assign(packed.rows, 0);
  std::vector<bool> overflowing(packed.rows, false);
  for (std::uint32_t row : packed.overflow_rows) overflowing.at(row) = true;
  std::uint64_t total = 0;
  for (std::uint32_t row = 0; row < packed.rows; ++row) {
    if (overflowing[row]) continue;
    for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile)
      plan.row_entries[row] += tile_count(packed, row, tile);
    total += plan.row_entries[row];
  }
  plan.budget = std::max<std::uint32_t>(
      kTwellMinPieceEntries, static_cast<std::uint32_t>((total + extra_pieces - 1) / extra_pieces));
  plan.row_pieces.resize(packed.rows);
  plan.row_slot.resize(packed.rows);
  std::uint32_t slots = 0;
  for (std::uint32_t row = 0; row < packed.rows; ++row) {
    const std::uint32_t pieces = pieces_of(plan.row_entries[row], plan.budget);
    plan.row_pieces[row] = pieces;
    plan.row_slot[row] = slots;
    if (pieces == 1) continue;
    for (std::uint32_t piece = 1; piece < pieces; ++piece)
      plan.extra_items.push_back(row << kTwellPieceBits | piece);
    plan.split_rows.push_back(row);
    slots += pieces;
  }
  return plan;
}

EntrySpan twell_piece_entries(std::uint32_t entries, std::uint32_t piece, std::uint32_t pieces) {
  if (pieces == 0 || piece >= pieces)
    throw Error(Error::Kind::InvalidInput, "twell_piece_entries: piece " + std::to_string(piece) + " of " +
                                               std::to_string(pieces) + " is out of range");
  const auto at = [&](std::uint32_t cut) {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(cut) * entries / pieces);
  };
  return {at(piece), at(piece + 1)};
}

}  // namespace twell
