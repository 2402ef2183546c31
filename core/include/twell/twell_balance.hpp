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
/// Bits of a piece index in an extra item.
constexpr std::uint32_t kTwellPieceBits = 8;
/// The most pieces a token is cut into. The last of a split token's pieces to finish sums every
/// piece's fp32 partial alone, and one SM reads them at about 8 KiB (D 2048) per 0.08 us: a heavy
/// token of the 0.5B checkpoint cut into 123 pieces spent 10 us there, half the consumer's time at
/// M 64. On an H100 the consumer in that forward took 17.7-18.2 us at most 32 pieces against 21.2-21.4
/// at 256 (19.3-19.5 at 16, 19.5-19.7 at 64), and 25.1 against 26.1-26.3 us at M 256
/// (h100-piece-cap-2026-12-07.json).
constexpr std::uint32_t kTwellMaxPieces = 32;
static_assert(kTwellMaxPieces <= 1u << kTwellPieceBits, "a piece index fits its bits of an extra item");

struct TwellBalancedPieces {
  std::uint32_t budget = 0;                ///< the non-zeros a piece holds, at most twice over
  std::vector<std::uint32_t> row_entries;  ///< non-zeros consumed per row; 0 for overflowing rows
  std::vector<std::uint32_t> row_pieces;   ///< pieces per row (1: not split)
  std::vector<std::uint32_t> row_slot;     ///< partial-output slots of the split rows before this row
                                           ///< (the GPU claims slots in scheduling order instead)
  std::vector<std::uint32_t> extra_items;  ///< row << kTwellPieceBits | piece, for pieces 1.. of each row
  std::vector<std::uint32_t> split_rows;   ///< ascending rows with more than one piece
};

/// The plan for `packed` with `extra_pieces` CTAs beyond one per row (one wave of resident CTAs): with
/// budget = max(kTwellMinPieceEntries, ceil(total non-zeros / extra_pieces)), the average work of a
/// CTA slot, a row with e non-zeros gets floor(e / budget) pieces, at least 1 and at most
/// kTwellMaxPieces. Rounding down keeps every piece under twice the budget and all pieces of the light
/// rows within the wave (rounding up cut the rows of a uniform M 256 into more CTAs than the wave and
/// measured slower); it also keeps the extra items within extra_pieces. Overflowing rows are not
/// consumed (they are recomputed densely) and count no non-zeros. Throws twell::Error when
/// extra_pieces is 0.
TwellBalancedPieces twell_plan_balanced_pieces(const TwellPacked& packed, std::uint32_t extra_pieces);

/// The non-zeros [begin, end) of piece `piece` of a row of `entries` cut into `pieces`, counted in the
/// packed row's order (tile by tile, each tile's entries up to its capacity): [floor(piece e / pieces),
/// floor((piece + 1) e / pieces)). A piece may start and end inside a tile, so a heavy token's pieces
/// are as even as a light one's (cut at tiles, a token's longest piece held up to a tile's capacity
/// and more, the consumer's critical path at decode-sized M). Throws twell::Error for piece >= pieces.
struct EntrySpan {
  std::uint32_t begin = 0, end = 0;
};
EntrySpan twell_piece_entries(std::uint32_t entries, std::uint32_t piece, std::uint32_t pieces);

}  // namespace twell
