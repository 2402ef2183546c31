// SPDX-License-Identifier: GPL-3.0-or-later
// TwELL pack/unpack (TWELL_SPEC.md §1). Unlike the reference's loop-overflow epilogue (§1.4), a
// tile never holds more than its capacity: the first `capacity` non-zeros (ascending columns) are
// kept, the count word says how many were kept, and the row is listed for dense recomputation.
#include <algorithm>
#include <bitset>
#include <string>
#include <vector>

#include "twell/error.hpp"
#include "twell/numeric.hpp"
#include "twell/twell_format.hpp"

namespace twell {
namespace {

constexpr std::uint32_t kMaxTwellNeurons = 65536;  // the entry's column field is 16 bits wide

void check_twell_shape(std::uint32_t neurons, std::uint32_t compression, const char* call) {
  if (!twell_layout_supported(compression)) {
    throw Error(Error::Kind::Unsupported,
                std::string(call) + ": TwELL compression factor must be 8, 4, 2 or 0 (unbounded), got " +
                    std::to_string(compression));
  }
  if (neurons == 0 || neurons > kMaxTwellNeurons) {
    throw Error(Error::Kind::Unsupported,
                std::string(call) + ": TwELL needs 1 <= N <= 65536 (16-bit column index), got N = " +
                    std::to_string(neurons));
  }
}

std::uint32_t round_up_to_tile(std::uint32_t neurons) {
  return (neurons + kTwellTileWidth - 1) / kTwellTileWidth * kTwellTileWidth;
}

[[noreturn]] void corrupt(std::uint32_t row, std::uint32_t tile, const std::string& what) {
  throw Error(Error::Kind::InvalidInput, "twell_unpack: corrupt TwELL buffer at row " + std::to_string(row) +
                                             ", tile " + std::to_string(tile) + ": " + what);
}

}  // namespace

TwellPacked twell_pack(const float* preactivations, std::uint32_t rows, std::uint32_t neurons,
                       std::uint32_t compression) {
  check_twell_shape(neurons, compression, "twell_pack");
  TwellPacked packed;
  packed.rows = rows;
  packed.neurons = neurons;
  packed.padded_neurons = round_up_to_tile(neurons);
  packed.compression = compression;
  const std::uint32_t row_words = packed.words_per_row();
  const std::uint32_t slots = packed.slots_per_tile();
  const std::uint32_t capacity = packed.capacity();
  packed.words.assign(static_cast<std::size_t>(rows) * row_words, 0u);

  for (std::uint32_t row = 0; row < rows; ++row) {
    const float* values = preactivations + static_cast<std::size_t>(row) * neurons;
    std::uint32_t* row_out = packed.words.data() + static_cast<std::size_t>(row) * row_words;
    bool row_overflowed = false;
    for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile) {
      std::uint32_t* tile_out = row_out + tile * slots;
      const std::uint32_t begin = tile * kTwellTileWidth;
      const std::uint32_t end = std::min(begin + kTwellTileWidth, neurons);
      std::uint32_t found = 0;
      for (std::uint32_t column = begin; column < end; ++column) {
        const float value = values[column];
        if (!(value > 0.0f)) continue;  // the ReLU predicate, on fp32 before rounding
        if (found < capacity) {
          tile_out[1 + found] = column | (static_cast<std::uint32_t>(float_to_bf16_bits(value)) << 16);
        }
        ++found;
      }
      tile_out[0] = std::min(found, capacity);
      if (found > capacity) {
        ++packed.overflow_tiles;
        row_overflowed = true;
      }
    }
    if (row_overflowed) packed.overflow_rows.push_back(row);
  }
  return packed;
}

Matrix twell_unpack(const TwellPacked& packed) {
  check_twell_shape(packed.neurons, packed.compression, "twell_unpack");
  if (packed.padded_neurons != round_up_to_tile(packed.neurons)) {
    throw Error(Error::Kind::InvalidInput,
                "twell_unpack: padded_neurons " + std::to_string(packed.padded_neurons) +
                    " is not N = " + std::to_string(packed.neurons) + " rounded up to a multiple of 256");
  }
  const std::uint32_t row_words = packed.words_per_row();
  if (packed.words.size() != static_cast<std::size_t>(packed.rows) * row_words) {
    throw Error(Error::Kind::InvalidInput,
                "twell_unpack: buffer holds " + std::to_string(packed.words.size()) +
                    " words, expected rows * tiles * slots per tile = " +
                    std::to_string(static_cast<std::size_t>(packed.rows) * row_words));
  }
  for (std::size_t i = 0; i < packed.overflow_rows.size(); ++i) {
    const bool ascending = i == 0 || packed.overflow_rows[i] > packed.overflow_rows[i - 1];
    if (packed.overflow_rows[i] >= packed.rows || !ascending) {
      throw Error(
          Error::Kind::InvalidInput,
          "twell_unpack: overflow_rows must be ascending row indices below " + std::to_string(packed.rows));
    }
  }

  const std::uint32_t slots = packed.slots_per_tile();
  const std::uint32_t capacity = packed.capacity();
  Matrix dense(packed.rows, packed.neurons);
  for (std::uint32_t row = 0; row < packed.rows; ++row) {
    const std::uint32_t* row_words_ptr = packed.words.data() + static_cast<std::size_t>(row) * row_words;
    float* out = dense.data.data() + static_cast<std::size_t>(row) * packed.neurons;
    for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile) {
      const std::uint32_t* tile_words = row_words_ptr + tile * slots;
      const std::uint32_t count = tile_words[0];
      if (count > capacity) {
        corrupt(row, tile,
                "count " + std::to_string(count) + " exceeds the capacity " + std::to_string(capacity) +
                    " of C = " + std::to_string(packed.compression));
      }
      const std::uint32_t begin = tile * kTwellTileWidth;
      const std::uint32_t end = std::min(begin + kTwellTileWidth, packed.neurons);
      std::bitset<kTwellTileWidth> seen;
      for (std::uint32_t slot = 1; slot <= count; ++slot) {
        const std::uint32_t word = tile_words[slot];
        const std::uint32_t column = word & 0xffffu;
        const std::uint16_t value_bits = static_cast<std::uint16_t>(word >> 16);
        if (column < begin || column >= end) {
          corrupt(row, tile,
                  "entry " + std::to_string(slot) + " has column " + std::to_string(column) +
                      ", outside the tile's columns [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ")");
        }
        const float value = bf16_bits_to_float(value_bits);
        // Only ReLU outputs are stored: a sign bit or a NaN cannot come from the packer.
        if ((value_bits & 0x8000u) != 0 || value != value) {
          corrupt(row, tile,
                  "entry " + std::to_string(slot) + " (column " + std::to_string(column) +
                      ") holds a negative or NaN value");
        }
        if (seen.test(column - begin))
          corrupt(row, tile, "column " + std::to_string(column) + " is stored twice");
        seen.set(column - begin);
        out[column] = value;
      }
    }
  }
  return dense;
}

}  // namespace twell
