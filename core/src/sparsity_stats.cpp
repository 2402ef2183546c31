// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/sparsity_stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "twell/error.hpp"

namespace twell {
namespace {

void check_summary(const ActivationSummary& summary) {
  const auto fail = [](const std::string& what) {
    throw Error(Error::Kind::InvalidInput,
                "compute_sparsity_stats: inconsistent activation summary: " + what);
  };
  if (summary.nnz_per_token.size() != summary.tokens) fail("nnz_per_token does not have one entry per token");
  if (summary.neuron_fire_counts.size() != summary.neurons)
    fail("neuron_fire_counts does not have one entry per neuron");
  if (summary.tile_count_histogram.size() != kTwellTileWidth + 1 ||
      summary.row_max_tile_histogram.size() != kTwellTileWidth + 1) {
    fail("the tile histograms must have 257 bins");
  }
}

}  // namespace

double histogram_quantile(const std::vector<std::uint64_t>& histogram, double p) {
  const std::uint64_t total = std::accumulate(histogram.begin(), histogram.end(), std::uint64_t{0});
  if (total == 0) return 0.0;
  p = std::clamp(p, 0.0, 1.0);
  // Nearest rank: the smallest value whose cumulative count reaches ceil(p * total); the small
  // slack keeps p * total from landing just above an integer through rounding (0.9 * 10).
  const double exact_rank = std::ceil(p * static_cast<double>(total) - 1e-9);
  const std::uint64_t rank =
      std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::max(exact_rank, 1.0)), 1, total);
  std::uint64_t cumulative = 0;
  for (std::size_t value = 0; value < histogram.size(); ++value) {
    cumulative += histogram[value];
    if (cumulative >= rank) return static_cast<double>(value);
  }
  return static_cast<double>(histogram.size() - 1);
}

LayerSparsityStats compute_sparsity_stats(const ActivationSummary& summary) {
  check_summary(summary);
  LayerSparsityStats stats;
  stats.tokens = summary.tokens;
  stats.neurons = summary.neurons;

  std::uint64_t total_nnz = 0;
  std::uint32_t max_nnz = 0;
  for (std::uint32_t nnz : summary.nnz_per_token) {
    total_nnz += nnz;
    max_nnz = std::max(max_nnz, nnz);
  }
  if (summary.tokens > 0) {
    stats.nnz_histogram.assign(static_cast<std::size_t>(max_nnz) + 1, 0);
    for (std::uint32_t nnz : summary.nnz_per_token) ++stats.nnz_histogram[nnz];
    stats.nnz_per_token.mean = static_cast<double>(total_nnz) / summary.tokens;
    stats.nnz_per_token.p50 = histogram_quantile(stats.nnz_histogram, 0.50);
    stats.nnz_per_token.p90 = histogram_quantile(stats.nnz_histogram, 0.90);
    stats.nnz_per_token.p99 = histogram_quantile(stats.nnz_histogram, 0.99);
    stats.nnz_per_token.max = max_nnz;
  }
  const double cells = static_cast<double>(summary.tokens) * summary.neurons;
  stats.density = cells > 0 ? static_cast<double>(total_nnz) / cells : 0.0;

  stats.neuron_fire_counts = summary.neuron_fire_counts;
  stats.dead_neurons = static_cast<std::uint32_t>(
      std::count(summary.neuron_fire_counts.begin(), summary.neuron_fire_counts.end(), 0u));

  stats.tile_count_histogram = summary.tile_count_histogram;
  for (std::size_t k = summary.tile_count_histogram.size(); k-- > 0;) {
    if (summary.tile_count_histogram[k] != 0) {
      stats.tile_max = static_cast<std::uint32_t>(k);
      break;
    }
  }
  for (std::uint32_t compression : kCompressionFactors) {
    CapacityCheck check;
    check.compression = compression;
    check.capacity = twell_tile_capacity(compression);
    for (std::size_t k = check.capacity + 1; k <= kTwellTileWidth; ++k) {
      check.overflow_tiles += summary.tile_count_histogram[k];
      check.overflow_rows += summary.row_max_tile_histogram[k];
    }
    stats.capacity.push_back(check);
  }
  stats.map = summary.map;
  return stats;
}

}  // namespace twell
