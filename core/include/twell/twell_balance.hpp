// SPDX-License-Identifier: GPL-3.0-or-later
// How TwELL's consumer cuts tokens into pieces of about equal non-zeros at token counts where a few
// heavy tokens would otherwise be its critical path: the CPU reference of the plan the GPU builds.
#pragma once
#include <cstdint>
#include <vector>

#include "twell/twell_format.hpp"

namespace twell {

/// A piece is never cut below this many non-zeros (each piece re-reads its token's tile counts).
constexpr std::uint32_t kTwellMinPieceEntries = 4;
/// Bits of a piece index in an extra item (a token has at most 256 tiles).
constexpr std::uint32_t kTwellPieceBits = 8;

struct TwellBalancedPieces {
  std::uint32_t budget = 0;                ///< most non-zeros a piece may hold (before tile rounding)
  std::vector<std::uint32_t> row_entries;  ///< non-zeros consumed per row; 0 for overflowing rows
  std::vector<std::uint32_t> row_pieces;   ///< pieces per row (1: not split)
  std::vector<std::uint32_t> row_slot;     ///< partial-output slots of the split rows before this row
                                           ///< (the GPU claims slots in scheduling order instead)
  std::vector<std::uint32_t> extra_items;  ///< row << kTwellPieceBits | piece, for pieces 1.. of each row
  std::vector<std::uint32_t> split_rows;   ///< ascending rows with more than one piece
};

/// The plan for `packed` with `extra_pieces` CTAs beyond one per row (one wave of resident CTAs): with
/// budget = max(kTwellMinPieceEntries, ceil(total non-zeros / extra_pieces)), the average work of a
/// CTA slot, a row with e non-zeros gets floor(e / budget) pieces, at least 1 and at most one a tile.
/// Rounding down keeps every piece under twice the budget and all pieces of the light rows within the
/// wave (rounding up cut the rows of a uniform M 256 into more CTAs than the wave and measured slower);
/// it also keeps the extra items within extra_pieces. Overflowing rows are not consumed (they are
/// recomputed densely) and count no non-zeros. Throws twell::Error when extra_pieces is 0.
TwellBalancedPieces twell_plan_balanced_pieces(const TwellPacked& packed, std::uint32_t extra_pieces);

/// The tiles [begin, end) of piece `piece` of a row cut into `pieces`: tile t belongs to the piece
/// its first non-zero falls in, by the exclusive prefix e_t of the row's counts: min(pieces - 1,
/// e_t * pieces / entries). Pieces are contiguous, may be empty, and together cover every tile.
struct TileSpan {
  std::uint32_t begin = 0, end = 0;
};
TileSpan twell_piece_tiles(const TwellPacked& packed, std::uint32_t row, std::uint32_t piece,
                           std::uint32_t pieces);

}  // namespace twell
