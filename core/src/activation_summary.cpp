// SPDX-License-Identifier: GPL-3.0-or-later
// The CPU reference of the GPU statistics kernels: one pass over a dense pre-activation matrix.
#include "twell/activation_summary.hpp"

#include <algorithm>
#include <string>

#include "twell/error.hpp"

namespace twell {
namespace {

std::uint32_t ceil_div(std::uint32_t a, std::uint32_t b) {
  return (a + b - 1) / b;
}

}  // namespace

MapGeometry map_geometry(std::uint32_t tokens, std::uint32_t neurons, const MapShape& shape) {
  if (shape.max_rows == 0 || shape.max_cols == 0) {
    throw Error(Error::Kind::InvalidInput, "map_geometry: the map bounds must be positive, got " +
                                               std::to_string(shape.max_rows) + " x " +
                                               std::to_string(shape.max_cols));
  }
  MapGeometry geometry{};
  geometry.tokens_per_cell = std::max(1u, ceil_div(tokens, shape.max_rows));
  geometry.neurons_per_cell = std::max(1u, ceil_div(neurons, shape.max_cols));
  geometry.rows = ceil_div(tokens, geometry.tokens_per_cell);
  geometry.cols = ceil_div(neurons, geometry.neurons_per_cell);
  return geometry;
}

std::uint8_t encode_map_cell(std::uint64_t fired, std::uint64_t cell_size) {
  if (fired == 0 || cell_size == 0) return 0;
  fired = std::min(fired, cell_size);
  // 1 + round(254 * fired / size), rounding halves up, in integers so the GPU can match it bit for bit.
  return static_cast<std::uint8_t>(1 + (508 * fired + cell_size) / (2 * cell_size));
}

ActivationSummary summarize_preactivations(const float* preactivations, std::uint32_t tokens,
                                           std::uint32_t neurons, const MapShape& map_shape) {
  ActivationSummary summary;
  summary.tokens = tokens;
  summary.neurons = neurons;
  summary.nnz_per_token.assign(tokens, 0);
  summary.neuron_fire_counts.assign(neurons, 0);
  summary.tile_count_histogram.assign(kTwellTileWidth + 1, 0);
  summary.row_max_tile_histogram.assign(kTwellTileWidth + 1, 0);

  const MapGeometry geometry = map_geometry(tokens, neurons, map_shape);
  std::vector<std::uint64_t> fired_per_cell(static_cast<std::size_t>(geometry.rows) * geometry.cols, 0);
  const std::uint32_t tiles = ceil_div(neurons, kTwellTileWidth);

  for (std::uint32_t token = 0; token < tokens; ++token) {
    const float* values = preactivations + static_cast<std::size_t>(token) * neurons;
    std::uint64_t* cell_row =
        fired_per_cell.data() + static_cast<std::size_t>(token / geometry.tokens_per_cell) * geometry.cols;
    std::uint32_t row_nnz = 0;
    std::uint32_t row_max_tile = 0;
    for (std::uint32_t tile = 0; tile < tiles; ++tile) {
      const std::uint32_t end = std::min((tile + 1) * kTwellTileWidth, neurons);
      std::uint32_t tile_nnz = 0;
      for (std::uint32_t neuron = tile * kTwellTileWidth; neuron < end; ++neuron) {
        if (!(values[neuron] > 0.0f)) continue;
        ++tile_nnz;
        ++summary.neuron_fire_counts[neuron];
        ++cell_row[neuron / geometry.neurons_per_cell];
      }
      ++summary.tile_count_histogram[tile_nnz];
      row_max_tile = std::max(row_max_tile, tile_nnz);
      row_nnz += tile_nnz;
    }
    summary.nnz_per_token[token] = row_nnz;
    if (tiles > 0) ++summary.row_max_tile_histogram[row_max_tile];
  }

  TokenNeuronMap& map = summary.map;
  map.rows = geometry.rows;
  map.cols = geometry.cols;
  map.tokens = tokens;
  map.neurons = neurons;
  map.cells.resize(fired_per_cell.size());
  for (std::uint32_t r = 0; r < geometry.rows; ++r) {
    // Edge cells cover fewer tokens or neurons; each is encoded against its own size.
    const std::uint64_t cell_tokens =
        std::min(geometry.tokens_per_cell, tokens - r * geometry.tokens_per_cell);
    for (std::uint32_t c = 0; c < geometry.cols; ++c) {
      const std::uint64_t cell_neurons =
          std::min(geometry.neurons_per_cell, neurons - c * geometry.neurons_per_cell);
      const std::size_t index = static_cast<std::size_t>(r) * geometry.cols + c;
      map.cells[index] = encode_map_cell(fired_per_cell[index], cell_tokens * cell_neurons);
    }
  }
  return summary;
}

}  // namespace twell
