// SPDX-License-Identifier: GPL-3.0-or-later
// TwELL pack/unpack: the worked example of TWELL_SPEC §1.5 bit for bit, property round trips over
// shapes, densities and every C, capacity edges, and rejection of corrupt buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "twell/error.hpp"
#include "twell/numeric.hpp"
#include "twell/twell_format.hpp"

namespace {

using twell::TwellPacked;

TEST(TwellFormat, WorkedExampleOfSpecSection15) {
  std::vector<float> pre(5632, -1.0f);
  pre[3] = 1.5f;
  pre[300] = 0.25f;
  pre[301] = 2.0f;
  pre[302] = 0.0f;
  pre[303] = -0.0f;
  const TwellPacked packed = twell::twell_pack(pre.data(), 1, 5632, 8);
  ASSERT_EQ(packed.words.size(), 704u);
  EXPECT_EQ(packed.tiles(), 22u);
  EXPECT_EQ(packed.capacity(), 31u);
  EXPECT_EQ(packed.words[0], 1u);
  EXPECT_EQ(packed.words[1], 0x3FC00003u);
  EXPECT_EQ(packed.words[32], 2u);
  const std::set<std::uint32_t> tile1{packed.words[33], packed.words[34]};
  EXPECT_EQ(tile1, (std::set<std::uint32_t>{0x3E80012Cu, 0x4000012Du}));
  for (std::uint32_t tile = 2; tile < 22; ++tile) EXPECT_EQ(packed.words[tile * 32], 0u) << "tile " << tile;
  EXPECT_TRUE(packed.overflow_rows.empty());
  EXPECT_EQ(packed.overflow_tiles, 0u);
}

TEST(TwellFormat, StoresStrictlyPositiveFp32ValuesRoundedToNearestEvenBf16) {
  const float denormal = std::numeric_limits<float>::denorm_min();  // > 0, rounds to bf16 +0
  const float tie = 1.0f + 1.0f / 256.0f;                           // halfway: rounds to even (1.0)
  const float above_tie = std::nextafter(tie, 2.0f);                // rounds up to 1 + 2^-7
  std::vector<float> pre{0.0f,     -0.0f, -3.0f,    std::numeric_limits<float>::quiet_NaN(),
                         denormal, tie,   above_tie};
  const TwellPacked packed = twell::twell_pack(pre.data(), 1, static_cast<std::uint32_t>(pre.size()), 8);
  ASSERT_EQ(packed.words[0], 3u);
  EXPECT_EQ(packed.words[1], 4u);  // column 4, value bits 0: the test is > 0 before rounding
  EXPECT_EQ(packed.words[2], 5u | (0x3F80u << 16));
  EXPECT_EQ(packed.words[3], 6u | (0x3F81u << 16));
  const twell::Matrix dense = twell::twell_unpack(packed);
  EXPECT_EQ(dense.at(0, 5), 1.0f);
  EXPECT_EQ(dense.at(0, 6), 1.0f + 1.0f / 128.0f);
}

/// The expected content of one row: per tile the positive columns, ascending.
std::vector<std::vector<std::uint32_t>> positive_columns_per_tile(const float* row, std::uint32_t neurons) {
  std::vector<std::vector<std::uint32_t>> tiles((neurons + 255) / 256);
  for (std::uint32_t n = 0; n < neurons; ++n)
    if (row[n] > 0.0f) tiles[n / 256].push_back(n);
  return tiles;
}

/// Checks a packing against an independent model of the format, and that unpack returns exactly
/// the stored values.
void expect_packed_matches(const std::vector<float>& pre, std::uint32_t rows, std::uint32_t neurons,
                           std::uint32_t compression) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " N " + std::to_string(neurons) + " C " +
               std::to_string(compression));
  const TwellPacked packed = twell::twell_pack(pre.data(), rows, neurons, compression);
  const std::uint32_t padded = (neurons + 255) / 256 * 256;
  ASSERT_EQ(packed.padded_neurons, padded);
  const std::uint32_t slots = compression == twell::kTwellUnbounded ? 512 : 256 / compression;
  const std::size_t words_per_row = static_cast<std::size_t>(padded / 256) * slots;
  ASSERT_EQ(packed.words.size(), rows * words_per_row);
  const std::uint32_t capacity = slots - 1;
  std::vector<std::uint32_t> expected_overflow_rows;
  std::uint64_t expected_overflow_tiles = 0;
  const twell::Matrix dense = twell::twell_unpack(packed);
  ASSERT_EQ(dense.rows, rows);
  ASSERT_EQ(dense.cols, neurons);
  for (std::uint32_t r = 0; r < rows; ++r) {
    const float* row = pre.data() + static_cast<std::size_t>(r) * neurons;
    const auto tiles = positive_columns_per_tile(row, neurons);
    bool overflowed = false;
    std::vector<float> expected_dense(neurons, 0.0f);
    for (std::size_t t = 0; t < tiles.size(); ++t) {
      const std::uint32_t* tile_words =
          packed.words.data() + static_cast<std::size_t>(r) * words_per_row + t * slots;
      const std::size_t kept = std::min<std::size_t>(tiles[t].size(), capacity);
      ASSERT_EQ(tile_words[0], kept) << "row " << r << " tile " << t;
      for (std::size_t i = 0; i < kept; ++i) {
        const std::uint32_t column = tiles[t][i];
        const std::uint32_t expected_word =
            column | (static_cast<std::uint32_t>(twell::float_to_bf16_bits(row[column])) << 16);
        ASSERT_EQ(tile_words[1 + i], expected_word) << "row " << r << " tile " << t << " slot " << i + 1;
        expected_dense[column] = twell::round_to_bf16(row[column]);
      }
      if (tiles[t].size() > capacity) {
        overflowed = true;
        ++expected_overflow_tiles;
      }
    }
    if (overflowed) expected_overflow_rows.push_back(r);
    for (std::uint32_t n = 0; n < neurons; ++n)
      ASSERT_EQ(dense.at(r, n), expected_dense[n]) << "row " << r << " col " << n;
  }
  EXPECT_EQ(packed.overflow_rows, expected_overflow_rows);
  EXPECT_EQ(packed.overflow_tiles, expected_overflow_tiles);
}

TEST(TwellFormat, RoundTripsRandomShapesAndDensitiesForEveryCompression) {
  std::mt19937 rng(20260101);
  std::uniform_real_distribution<float> magnitude(1e-3f, 8.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const std::uint32_t neuron_counts[] = {1, 100, 255, 256, 257, 600, 1024, 1300};
  const double densities[] = {0.0, 0.005, 0.05, 0.13, 0.3, 0.6, 1.0};
  std::vector<std::uint32_t> layouts(std::begin(twell::kCompressionFactors),
                                     std::end(twell::kCompressionFactors));
  layouts.push_back(twell::kTwellUnbounded);
  for (std::uint32_t compression : layouts) {
    for (std::uint32_t neurons : neuron_counts) {
      for (double density : densities) {
        const std::uint32_t rows = 1 + static_cast<std::uint32_t>(rng() % 7);
        std::vector<float> pre(static_cast<std::size_t>(rows) * neurons);
        for (float& v : pre) {
          const bool fires = unit(rng) < density;
          v = fires ? magnitude(rng) : (unit(rng) < 0.2f ? 0.0f : -magnitude(rng));
        }
        expect_packed_matches(pre, rows, neurons, compression);
      }
    }
  }
}

TEST(TwellFormat, TilesExactlyAtCapacityFitAndOneOverOverflows) {
  for (std::uint32_t compression : twell::kCompressionFactors) {
    const std::uint32_t capacity = twell::twell_tile_capacity(compression);
    const std::uint32_t neurons = 600;  // three tiles, the last one partial
    std::vector<float> pre(4 * neurons, -1.0f);
    // Row 0: tile 0 exactly at capacity. Row 1: tile 1 one over. Row 2: the partial tile full.
    // Row 3: every tile at capacity.
    for (std::uint32_t i = 0; i < capacity; ++i) pre[0 * neurons + 2 * i % 256] = 1.0f + i;
    for (std::uint32_t i = 0; i < capacity + 1; ++i) pre[1 * neurons + 256 + i] = 0.5f + i;
    for (std::uint32_t n = 512; n < neurons; ++n) pre[2 * neurons + n] = 2.0f;
    for (std::uint32_t t = 0; t < 3; ++t)
      for (std::uint32_t i = 0; i < std::min(capacity, 88u); ++i) pre[3 * neurons + t * 256 + i] = 3.0f;
    expect_packed_matches(pre, 4, neurons, compression);
    const TwellPacked packed = twell::twell_pack(pre.data(), 4, neurons, compression);
    const bool partial_tile_overflows = neurons - 512 > capacity;  // 88 non-zeros: over 31 and 63, under 127
    std::vector<std::uint32_t> expected{1};
    if (partial_tile_overflows) expected.push_back(2);
    EXPECT_EQ(packed.overflow_rows, expected) << "C " << compression;
    EXPECT_EQ(packed.overflow_tiles, expected.size()) << "C " << compression;
  }
}

TEST(TwellFormat, TheUnboundedLayoutHoldsFullTilesWithoutOverflow) {
  const std::uint32_t neurons = 600;          // three tiles, the last one partial
  std::vector<float> pre(2 * neurons, 1.0f);  // row 0: every column positive
  for (std::uint32_t n = 0; n < neurons; ++n) pre[neurons + n] = n % 3 == 0 ? 0.5f : -0.5f;
  expect_packed_matches(pre, 2, neurons, twell::kTwellUnbounded);
  const TwellPacked packed = twell::twell_pack(pre.data(), 2, neurons, twell::kTwellUnbounded);
  EXPECT_EQ(packed.slots_per_tile(), 512u);
  EXPECT_EQ(packed.capacity(), 511u);
  EXPECT_EQ(packed.words_per_row(), 3u * 512u);
  EXPECT_EQ(packed.words[0], 256u);
  EXPECT_EQ(packed.words[512], 256u);
  EXPECT_EQ(packed.words[1024], 88u);
  EXPECT_EQ(packed.words[256], 0xFFu | (0x3F80u << 16));  // the tile's last column, slot 256
  EXPECT_EQ(packed.words[257], 0u);                       // the padding past it stays zero
  EXPECT_TRUE(packed.overflow_rows.empty());
  EXPECT_EQ(packed.overflow_tiles, 0u);
}

TEST(TwellFormat, AcceptsTheLargestIndexableWidth) {
  std::vector<float> pre(65536, 0.0f);
  pre[65535] = 1.0f;
  const TwellPacked packed = twell::twell_pack(pre.data(), 1, 65536, 2);
  const std::uint32_t last_tile = 255 * 128;
  EXPECT_EQ(packed.words[last_tile], 1u);
  EXPECT_EQ(packed.words[last_tile + 1], 0xFFFFu | (0x3F80u << 16));
  EXPECT_EQ(twell::twell_unpack(packed).at(0, 65535), 1.0f);
}

TEST(TwellFormat, RejectsUnsupportedParameters) {
  const std::vector<float> pre(70000, 1.0f);
  EXPECT_THROW(twell::twell_pack(pre.data(), 1, 256, 16), twell::Error);
  EXPECT_THROW(twell::twell_pack(pre.data(), 1, 256, 3), twell::Error);
  EXPECT_THROW(twell::twell_pack(pre.data(), 1, 65537, 8), twell::Error);
  EXPECT_THROW(twell::twell_pack(pre.data(), 1, 0, 8), twell::Error);
}

/// A valid two-row buffer to corrupt: N = 300 (two tiles, the second partial), C = 8.
TwellPacked valid_buffer() {
  std::vector<float> pre(600, -1.0f);
  pre[5] = 1.0f;
  pre[7] = 2.0f;
  pre[290] = 3.0f;
  pre[300 + 260] = 4.0f;
  return twell::twell_pack(pre.data(), 2, 300, 8);
}

void expect_corrupt(const TwellPacked& packed, const std::string& message_part) {
  try {
    twell::twell_unpack(packed);
    ADD_FAILURE() << "unpack accepted a corrupt buffer (" << message_part << ")";
  } catch (const twell::Error& error) {
    EXPECT_EQ(error.kind(), twell::Error::Kind::InvalidInput);
    EXPECT_NE(std::string(error.what()).find(message_part), std::string::npos) << error.what();
  }
}

TEST(TwellFormat, UnpackRejectsCorruptBuffers) {
  ASSERT_NO_THROW(twell::twell_unpack(valid_buffer()));
  {
    TwellPacked p = valid_buffer();
    p.words[0] = 32;  // above the capacity 31
    expect_corrupt(p, "exceeds the capacity");
  }
  {
    TwellPacked p = valid_buffer();
    p.words[1] = (p.words[1] & 0xffff0000u) | 256u;  // tile 0 entry pointing into tile 1
    expect_corrupt(p, "outside the tile");
  }
  {
    TwellPacked p = valid_buffer();
    p.words[33] = (p.words[33] & 0xffff0000u) | 310u;  // tile 1 entry in the padding (N = 300)
    expect_corrupt(p, "outside the tile");
  }
  {
    TwellPacked p = valid_buffer();
    p.words[2] = (p.words[2] & 0xffff0000u) | 5u;  // column 5 twice
    expect_corrupt(p, "stored twice");
  }
  {
    TwellPacked p = valid_buffer();
    p.words[1] |= 0x80000000u;  // negative value
    expect_corrupt(p, "negative or NaN");
  }
  {
    TwellPacked p = valid_buffer();
    p.words.pop_back();
    expect_corrupt(p, "buffer holds");
  }
  {
    TwellPacked p = valid_buffer();
    p.padded_neurons = 256;
    expect_corrupt(p, "padded_neurons");
  }
  {
    TwellPacked p = valid_buffer();
    p.overflow_rows = {1, 0};
    expect_corrupt(p, "overflow_rows");
  }
  {
    TwellPacked p = valid_buffer();
    p.compression = 5;
    EXPECT_THROW(twell::twell_unpack(p), twell::Error);
  }
}

}  // namespace
