// SPDX-License-Identifier: GPL-3.0-or-later
// The TwELL packed format (TWELL_SPEC.md §1), the CPU reference of what the GPU gate kernel writes.
#pragma once
#include <cstdint>
#include <vector>

#include "twell/activation_summary.hpp"
#include "twell/matrix.hpp"

namespace twell {

/// The compression value of TwELL's unbounded layout: 512 slots per tile, room for the count and all
/// 256 columns (padded to a power of two), so no tile overflows. Not a factor users choose: the GPU
/// packs the rows that overflowed C into it from their gate pre-activations and consumes them sparsely.
constexpr std::uint32_t kTwellUnbounded = 0;
constexpr std::uint32_t kTwellUnboundedSlots = 2 * kTwellTileWidth;

/// Whether `compression` names a layout the packers and consumers read: C in {8, 4, 2}, or unbounded.
constexpr bool twell_layout_supported(std::uint32_t compression) {
  return compression == 8 || compression == 4 || compression == 2 || compression == kTwellUnbounded;
}

/// Words per 256-column tile (the count word and the entry slots) at compression factor C, or in the
/// unbounded layout.
constexpr std::uint32_t twell_slots_per_tile(std::uint32_t compression) {
  return compression == kTwellUnbounded ? kTwellUnboundedSlots : kTwellTileWidth / compression;
}

/// One uint32 matrix [rows, tiles * slots per tile]. Per (row, 256-column tile) word 0 is the count,
/// words 1..count are entries (global column in bits 0-15, bf16 value bits in 16-31). Unlike the
/// reference, a tile never holds more than its capacity: the count word is clamped to capacity,
/// and the rows that had more are listed in `overflow_rows` so consumers recompute them densely.
struct TwellPacked {
  std::uint32_t rows = 0;
  std::uint32_t neurons = 0;                 ///< N as given
  std::uint32_t padded_neurons = 0;          ///< N rounded up to a multiple of 256 (padding never fires)
  std::uint32_t compression = 8;             ///< C in {8, 4, 2}, or kTwellUnbounded
  std::vector<std::uint32_t> words;          ///< rows * words_per_row()
  std::vector<std::uint32_t> overflow_rows;  ///< ascending row indices with an overflowing tile
  std::uint64_t overflow_tiles = 0;

  std::uint32_t tiles() const { return padded_neurons / kTwellTileWidth; }
  std::uint32_t slots_per_tile() const { return twell_slots_per_tile(compression); }
  std::uint32_t capacity() const { return slots_per_tile() - 1; }
  std::uint32_t words_per_row() const { return tiles() * slots_per_tile(); }
};

/// Packs ReLU(pre-activations) [rows, neurons] row-major: a value is stored iff it is > 0 in fp32,
/// rounded to bf16 (nearest even). Entries within a tile are in ascending column order.
/// Throws twell::Error for C not in {8, 4, 2, kTwellUnbounded} or N > 65536.
TwellPacked twell_pack(const float* preactivations, std::uint32_t rows, std::uint32_t neurons,
                       std::uint32_t compression);

/// Dense [rows, neurons] of the stored values (bf16-exact floats), zeros elsewhere. Validates the
/// buffer (counts within capacity, indices inside their tile, no duplicates) and throws on violation.
Matrix twell_unpack(const TwellPacked& packed);

/// The hybrid format of TWELL_SPEC.md §3: rows with at most `ell_width` non-zeros in ELL form
/// (uint16 column + bf16 value), heavier rows as dense tail rows, at most `tail_capacity` of them.
struct HybridPacked {
  std::uint32_t rows = 0, neurons = 0, ell_width = 128, tail_capacity = 2048;
  std::vector<std::uint16_t> ell_columns;  ///< rows * ell_width
  std::vector<std::uint16_t> ell_values;   ///< bf16 bits, rows * ell_width
  std::vector<std::uint32_t> row_nnz;      ///< true non-zeros per row
  std::vector<std::int32_t> tail_row_of;   ///< row -> tail row, or -1
  std::vector<float> tail;                 ///< tail rows * neurons (bf16-exact values)
  std::uint32_t tail_rows = 0;
  std::uint32_t dropped_rows = 0;  ///< heavy rows that did not fit the tail (counted, never silent)
};
HybridPacked hybrid_pack(const float* preactivations, std::uint32_t rows, std::uint32_t neurons,
                         std::uint32_t ell_width, std::uint32_t tail_capacity);
Matrix hybrid_unpack(const HybridPacked& packed);

}  // namespace twell
