// SPDX-License-Identifier: GPL-3.0-or-later
// core's block unions (the union consumer's CPU reference): per block of 128 rows, the ascending live
// neurons, each position's entries (token, position modulo 256, value bits) ascending by token, flagged
// rows and slots past a tile's capacity left out, the last block cut short by M.
#include <gtest/gtest.h>

#include <vector>

#include "twell/error.hpp"
#include "twell/matrix.hpp"
#include "twell/numeric.hpp"
#include "twell/twell_block_union.hpp"
#include "twell/twell_format.hpp"

namespace twell {
namespace {

std::uint32_t entry(std::uint32_t token, std::uint32_t position, float value) {
  return token | position << 7 | static_cast<std::uint32_t>(float_to_bf16_bits(value)) << 16;
}

TEST(TwellBlockUnions, ListEachBlocksLiveNeuronsWithTheirEntriesByToken) {
  const std::uint32_t rows = 130, neurons = 600;  // two blocks, the second of 2 rows; 3 tiles
  Matrix pre(rows, neurons);
  pre.at(0, 5) = 1.0f;
  pre.at(3, 5) = 2.0f;
  pre.at(3, 300) = 3.0f;
  pre.at(127, 599) = 4.0f;
  pre.at(64, 7) = 5.0f;  // flagged below
  pre.at(128, 300) = 6.0f;
  pre.at(129, 5) = 7.0f;
  pre.at(129, 300) = -1.0f;  // not positive: not stored
  const TwellPacked packed = twell_pack(pre.data.data(), rows, neurons, 8);
  std::vector<std::uint32_t> flags(rows, 0);
  flags[64] = 1;
  const std::vector<TwellBlockUnion> unions = twell_block_unions(packed, flags);
  ASSERT_EQ(unions.size(), 2u);
  EXPECT_EQ(unions[0].neurons, (std::vector<std::uint32_t>{5, 300, 599}));
  EXPECT_EQ(unions[0].column_start, (std::vector<std::uint32_t>{0, 2, 3, 4}));
  EXPECT_EQ(unions[0].entries, (std::vector<std::uint32_t>{entry(0, 0, 1.0f), entry(3, 0, 2.0f),
                                                           entry(3, 1, 3.0f), entry(127, 2, 4.0f)}));
  EXPECT_EQ(unions[1].neurons, (std::vector<std::uint32_t>{5, 300}));
  EXPECT_EQ(unions[1].column_start, (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_EQ(unions[1].entries, (std::vector<std::uint32_t>{entry(1, 0, 7.0f), entry(0, 1, 6.0f)}));

  // Positions past 255 keep their low 8 bits.
  EXPECT_EQ(twell_union_entry(5, 300, 0x3f80), 5u | 44u << 7 | 0x3f80u << 16);
  // Without flags row 64's neuron joins the first block's union.
  EXPECT_EQ(twell_block_unions(packed, {})[0].neurons, (std::vector<std::uint32_t>{5, 7, 300, 599}));
}

TEST(TwellBlockUnions, ReadOnlyUpToEachTilesCapacity) {
  Matrix pre(1, 256);
  for (std::size_t c = 0; c < 256; ++c) pre.at(0, c) = 1.0f;  // 256 live, capacity 127 at C = 2
  const TwellPacked packed = twell_pack(pre.data.data(), 1, 256, 2);
  const std::vector<TwellBlockUnion> unions = twell_block_unions(packed, {});
  ASSERT_EQ(unions.size(), 1u);
  EXPECT_EQ(unions[0].neurons.size(), packed.capacity());
  EXPECT_EQ(unions[0].entries.size(), packed.capacity());
}

TEST(TwellBlockUnions, RefuseFlagsOfAnotherLength) {
  Matrix pre(3, 256);
  const TwellPacked packed = twell_pack(pre.data.data(), 3, 256, 8);
  EXPECT_THROW(twell_block_unions(packed, {0, 0}), Error);
}

}  // namespace
}  // namespace twell
