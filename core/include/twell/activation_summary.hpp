// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <vector>

namespace twell {

/// TwELL's tile width along the FFN's hidden dimension N.
inline constexpr std::uint32_t kTwellTileWidth = 256;
/// The compression factors TwELL supports, in the order reports list them.
inline constexpr std::uint32_t kCompressionFactors[] = {8, 4, 2};
/// Non-zeros one (row, tile) can hold at compression factor C: T_c - 1 = 256 / C - 1.
constexpr std::uint32_t twell_tile_capacity(std::uint32_t compression) { return kTwellTileWidth / compression - 1; }

/// A token x neuron firing map reduced to at most rows x cols cells. A cell covers a block of
/// tokens x neurons; its value is 0 when nothing in the block fired, otherwise
/// 1 + round(254 * fired / block size), so an isolated firing neuron stays visible (max pooling).
struct TokenNeuronMap {
  std::uint32_t rows = 0, cols = 0;        ///< cells along tokens, along neurons
  std::uint32_t tokens = 0, neurons = 0;   ///< what the map covers
  std::vector<std::uint8_t> cells;         ///< rows * cols, row-major (token-major)
  bool operator==(const TokenNeuronMap&) const = default;
};

/// The raw firing data of one layer's FFN gate (ReLU mask: pre-activation > 0), reduced where the
/// activations live (on the GPU for the CUDA backend) so that no [M, N] tensor crosses to the host.
struct ActivationSummary {
  std::uint32_t tokens = 0;                         ///< M
  std::uint32_t neurons = 0;                        ///< N (unpadded)
  std::vector<std::uint32_t> nnz_per_token;         ///< [M]
  std::vector<std::uint32_t> neuron_fire_counts;    ///< [N]
  std::vector<std::uint64_t> tile_count_histogram;  ///< [257]: (row, tile) pairs with k non-zeros
  std::vector<std::uint64_t> row_max_tile_histogram;  ///< [257]: rows whose fullest tile had k
  TokenNeuronMap map;
};

/// Default bounds of the token x neuron map kept per layer.
struct MapShape {
  std::uint32_t max_rows = 256;
  std::uint32_t max_cols = 512;
  bool operator==(const MapShape&) const = default;
};

/// Builds a summary from a dense [M, N] pre-activation matrix (row-major): the CPU reference for
/// the GPU's statistics kernels.
ActivationSummary summarize_preactivations(const float* preactivations, std::uint32_t tokens,
                                           std::uint32_t neurons, const MapShape& map_shape);

/// Cell layout of a map: how many tokens and neurons each cell covers (ceil division).
struct MapGeometry {
  std::uint32_t rows, cols, tokens_per_cell, neurons_per_cell;
};
MapGeometry map_geometry(std::uint32_t tokens, std::uint32_t neurons, const MapShape& shape);
/// Encodes a cell from the count fired in it and its size (see TokenNeuronMap).
std::uint8_t encode_map_cell(std::uint64_t fired, std::uint64_t cell_size);

}  // namespace twell
