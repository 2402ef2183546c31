// SPDX-License-Identifier: GPL-3.0-or-later
// Activation summaries and layer statistics on hand-built masks, with every expected number
// worked out by hand.
#include <gtest/gtest.h>

#include <vector>

#include "twell/activation_summary.hpp"
#include "twell/error.hpp"
#include "twell/sparsity_stats.hpp"

namespace {

/// A pre-activation matrix that is -1 everywhere except the listed (token, neuron) cells.
struct Mask {
  std::uint32_t tokens, neurons;
  std::vector<float> values;
  Mask(std::uint32_t t, std::uint32_t n)
      : tokens(t), neurons(n), values(static_cast<std::size_t>(t) * n, -1.0f) {}
  void fire(std::uint32_t token, std::uint32_t neuron) {
    values[static_cast<std::size_t>(token) * neurons + neuron] = 0.5f;
  }
  void fire_run(std::uint32_t token, std::uint32_t first, std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i) fire(token, first + i);
  }
};

TEST(ActivationSummary, CountsFiringPerTokenNeuronAndTile) {
  // 4 tokens x 300 neurons: tile 0 = neurons 0..255, tile 1 = 256..299 (padded).
  Mask mask(4, 300);
  mask.fire(0, 0);
  mask.fire(0, 299);
  mask.values[1] = 0.0f;  // zero does not fire
  mask.fire_run(1, 10, 5);
  mask.fire(1, 260);
  mask.fire(3, 0);
  const twell::ActivationSummary s = twell::summarize_preactivations(mask.values.data(), 4, 300, {2, 3});
  EXPECT_EQ(s.tokens, 4u);
  EXPECT_EQ(s.neurons, 300u);
  EXPECT_EQ(s.nnz_per_token, (std::vector<std::uint32_t>{2, 6, 0, 1}));
  std::vector<std::uint32_t> fire_counts(300, 0);
  fire_counts[0] = 2;
  fire_counts[299] = 1;
  for (int n = 10; n < 15; ++n) fire_counts[n] = 1;
  fire_counts[260] = 1;
  EXPECT_EQ(s.neuron_fire_counts, fire_counts);
  // (row, tile) counts: row 0 {1, 1}, row 1 {5, 1}, row 2 {0, 0}, row 3 {1, 0}.
  std::vector<std::uint64_t> tiles(257, 0);
  tiles[0] = 3;
  tiles[1] = 4;
  tiles[5] = 1;
  EXPECT_EQ(s.tile_count_histogram, tiles);
  std::vector<std::uint64_t> row_max(257, 0);
  row_max[0] = 1;
  row_max[1] = 2;
  row_max[5] = 1;
  EXPECT_EQ(s.row_max_tile_histogram, row_max);

  // Map 2 x 3 cells of 2 tokens x 100 neurons (200 entries each).
  EXPECT_EQ(s.map.rows, 2u);
  EXPECT_EQ(s.map.cols, 3u);
  EXPECT_EQ(s.map.tokens, 4u);
  EXPECT_EQ(s.map.neurons, 300u);
  const std::uint8_t one_in_200 = 1 + 1;  // 1 + round(254 / 200) = 2
  const std::uint8_t six_in_200 = 1 + 8;  // 1 + round(7.62) = 9
  const std::uint8_t two_in_200 = 1 + 3;  // 1 + round(2.54) = 4
  EXPECT_EQ(s.map.cells, (std::vector<std::uint8_t>{six_in_200, 0, two_in_200, one_in_200, 0, 0}));
}

TEST(ActivationSummary, MapGeometryCoversEveryTokenAndNeuron) {
  const twell::MapGeometry g = twell::map_geometry(1000, 5632, {256, 512});
  EXPECT_EQ(g.tokens_per_cell, 4u);
  EXPECT_EQ(g.rows, 250u);
  EXPECT_EQ(g.neurons_per_cell, 11u);
  EXPECT_EQ(g.cols, 512u);
  const twell::MapGeometry small = twell::map_geometry(3, 5, {256, 512});
  EXPECT_EQ(small.rows, 3u);
  EXPECT_EQ(small.cols, 5u);
  EXPECT_EQ(small.tokens_per_cell, 1u);
  const twell::MapGeometry ragged = twell::map_geometry(257, 1025, {256, 512});  // 2 tokens, 3 neurons a cell
  EXPECT_EQ(ragged.rows, 129u);
  EXPECT_EQ(ragged.cols, 342u);
  EXPECT_THROW(twell::map_geometry(10, 10, {0, 4}), twell::Error);
}

TEST(ActivationSummary, MapCellsKeepIsolatedFiringVisible) {
  EXPECT_EQ(twell::encode_map_cell(0, 100), 0);
  EXPECT_EQ(twell::encode_map_cell(1, 1000000), 1);  // one neuron in a million still shows
  EXPECT_EQ(twell::encode_map_cell(100, 100), 255);
  EXPECT_EQ(twell::encode_map_cell(1, 2), 128);
  EXPECT_EQ(twell::encode_map_cell(1, 4), 65);  // 63.5 rounds half up to 64
  EXPECT_EQ(twell::encode_map_cell(0, 0), 0);
  // Edge cells are encoded against their own size: 3 tokens x 5 neurons into 2 x 2 cells.
  Mask mask(3, 5);
  mask.fire(2, 4);  // alone in the bottom-right cell: 1 token x 2 neurons (cells are 2 x 3)
  const twell::ActivationSummary s = twell::summarize_preactivations(mask.values.data(), 3, 5, {2, 2});
  ASSERT_EQ(s.map.rows, 2u);
  ASSERT_EQ(s.map.cols, 2u);
  EXPECT_EQ(s.map.cells, (std::vector<std::uint8_t>{0, 0, 0, twell::encode_map_cell(1, 2)}));
}

TEST(SparsityStats, DerivesDensityDistributionDeadNeuronsAndCapacity) {
  // 5 tokens x 512 neurons (two full tiles).
  Mask mask(5, 512);
  mask.fire_run(0, 0, 40);    // 40 in tile 0: over C = 8's 31
  mask.fire_run(1, 256, 70);  // 70 in tile 1: over 31 and 63
  mask.fire_run(2, 0, 130);   // 130 in tile 0 and 2 in tile 1: over 31, 63 and 127
  mask.fire_run(2, 300, 2);
  mask.fire_run(3, 0, 31);  // exactly at C = 8's capacity in both tiles
  mask.fire_run(3, 256, 31);
  // token 4 fires nothing
  const twell::ActivationSummary summary = twell::summarize_preactivations(mask.values.data(), 5, 512, {});
  const twell::LayerSparsityStats stats = twell::compute_sparsity_stats(summary);

  EXPECT_EQ(stats.tokens, 5u);
  EXPECT_EQ(stats.neurons, 512u);
  const double total = 40 + 70 + 132 + 62;
  EXPECT_DOUBLE_EQ(stats.density, total / (5.0 * 512.0));
  EXPECT_DOUBLE_EQ(stats.nnz_per_token.mean, total / 5.0);
  // Sorted nnz: 0, 40, 62, 70, 132. Nearest rank: p50 -> 3rd, p90 -> 5th, p99 -> 5th.
  EXPECT_EQ(stats.nnz_per_token.p50, 62.0);
  EXPECT_EQ(stats.nnz_per_token.p90, 132.0);
  EXPECT_EQ(stats.nnz_per_token.p99, 132.0);
  EXPECT_EQ(stats.nnz_per_token.max, 132.0);
  ASSERT_EQ(stats.nnz_histogram.size(), 133u);
  EXPECT_EQ(stats.nnz_histogram[0], 1u);
  EXPECT_EQ(stats.nnz_histogram[62], 1u);
  EXPECT_EQ(stats.nnz_histogram[132], 1u);
  // Fired somewhere: 0..129 (token 2), 256..325 (token 1), 300..301 inside that. Dead: 512 - 130 - 70.
  EXPECT_EQ(stats.dead_neurons, 512u - 130u - 70u);
  EXPECT_EQ(stats.neuron_fire_counts[0], 3u);
  EXPECT_EQ(stats.neuron_fire_counts[300], 2u);
  EXPECT_EQ(stats.tile_max, 130u);
  ASSERT_EQ(stats.capacity.size(), 3u);
  EXPECT_EQ(stats.capacity[0], (twell::CapacityCheck{8, 31, 3, 3}));
  EXPECT_EQ(stats.capacity[1], (twell::CapacityCheck{4, 63, 2, 2}));
  EXPECT_EQ(stats.capacity[2], (twell::CapacityCheck{2, 127, 1, 1}));
  EXPECT_EQ(stats.map, summary.map);
}

TEST(SparsityStats, CountsOverflowRowsOncePerRow) {
  Mask mask(2, 768);
  mask.fire_run(0, 0, 32);  // two overflowing tiles in one row
  mask.fire_run(0, 512, 33);
  mask.fire_run(1, 256, 20);
  const auto stats =
      twell::compute_sparsity_stats(twell::summarize_preactivations(mask.values.data(), 2, 768, {}));
  EXPECT_EQ(stats.capacity[0].overflow_tiles, 2u);
  EXPECT_EQ(stats.capacity[0].overflow_rows, 1u);
  EXPECT_EQ(stats.capacity[1].overflow_tiles, 0u);
}

TEST(SparsityStats, HandlesAnEmptyBatchAndRejectsInconsistentSummaries) {
  const twell::ActivationSummary empty = twell::summarize_preactivations(nullptr, 0, 10, {});
  const auto stats = twell::compute_sparsity_stats(empty);
  EXPECT_EQ(stats.density, 0.0);
  EXPECT_TRUE(stats.nnz_histogram.empty());
  EXPECT_EQ(stats.dead_neurons, 10u);
  twell::ActivationSummary broken = empty;
  broken.tile_count_histogram.resize(10);
  EXPECT_THROW(twell::compute_sparsity_stats(broken), twell::Error);
  broken = empty;
  broken.nnz_per_token.push_back(1);
  EXPECT_THROW(twell::compute_sparsity_stats(broken), twell::Error);
}

TEST(HistogramQuantile, UsesNearestRank) {
  std::vector<std::uint64_t> one_to_ten(11, 1);
  one_to_ten[0] = 0;
  EXPECT_EQ(twell::histogram_quantile(one_to_ten, 0.0), 1.0);
  EXPECT_EQ(twell::histogram_quantile(one_to_ten, 0.5), 5.0);
  EXPECT_EQ(twell::histogram_quantile(one_to_ten, 0.9), 9.0);
  EXPECT_EQ(twell::histogram_quantile(one_to_ten, 0.91), 10.0);
  EXPECT_EQ(twell::histogram_quantile(one_to_ten, 0.99), 10.0);
  EXPECT_EQ(twell::histogram_quantile(one_to_ten, 1.0), 10.0);
  std::vector<std::uint64_t> hundred(2, 0);
  hundred[0] = 99;
  hundred[1] = 1;
  EXPECT_EQ(twell::histogram_quantile(hundred, 0.99), 0.0);  // 99th of 100 values is still 0
  EXPECT_EQ(twell::histogram_quantile(hundred, 0.995), 1.0);
  EXPECT_EQ(twell::histogram_quantile({}, 0.5), 0.0);
  EXPECT_EQ(twell::histogram_quantile({0, 0}, 0.5), 0.0);
}

}  // namespace
