// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <vector>

#include "twell/activation_summary.hpp"

namespace twell {

struct Distribution {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  bool operator==(const Distribution&) const = default;
};

/// Whether TwELL's per-tile capacity at one compression factor holds for this layer's data.
struct CapacityCheck {
  std::uint32_t compression = 8;
  std::uint32_t capacity = 31;          ///< T_c - 1
  std::uint64_t overflow_tiles = 0;     ///< (row, tile) pairs with more non-zeros than capacity
  std::uint64_t overflow_rows = 0;      ///< rows with at least one such tile (recomputed densely)
  bool operator==(const CapacityCheck&) const = default;
};

/// Everything twellscope reports about one layer's activation sparsity.
struct LayerSparsityStats {
  std::uint64_t tokens = 0;
  std::uint32_t neurons = 0;
  double density = 0;                          ///< non-zeros / (tokens * neurons)
  Distribution nnz_per_token;
  std::vector<std::uint64_t> nnz_histogram;    ///< [max nnz + 1]: tokens with k non-zeros
  std::vector<std::uint32_t> neuron_fire_counts;  ///< [N]
  std::uint32_t dead_neurons = 0;              ///< never fired in the batch
  std::uint32_t tile_max = 0;                  ///< fullest (row, tile)
  std::vector<std::uint64_t> tile_count_histogram;  ///< [257]
  std::vector<CapacityCheck> capacity;         ///< one per C in kCompressionFactors order
  TokenNeuronMap map;
  bool operator==(const LayerSparsityStats&) const = default;
};

/// Turns a layer's raw summary into its statistics.
LayerSparsityStats compute_sparsity_stats(const ActivationSummary& summary);

/// The p-quantile (0..1) of a histogram (index = value, entry = count), nearest-rank.
double histogram_quantile(const std::vector<std::uint64_t>& histogram, double p);

}  // namespace twell
