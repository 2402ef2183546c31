// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/twell_block_union.hpp"

#include <algorithm>
#include <string>

#include "twell/error.hpp"

namespace twell {

std::vector<TwellBlockUnion> twell_block_unions(const TwellPacked& packed,
                                                const std::vector<std::uint32_t>& row_flags) {
  if (!row_flags.empty() && row_flags.size() != packed.rows)
    throw Error(Error::Kind::InvalidInput, "twell_block_unions: " + std::to_string(row_flags.size()) +
                                               " row flags for " + std::to_string(packed.rows) + " rows");
  const std::uint32_t blocks = (packed.rows + kTwellUnionBlockTokens - 1) / kTwellUnionBlockTokens;
  const std::uint32_t slots = packed.slots_per_tile(), capacity = packed.capacity();
  std::vector<TwellBlockUnion> unions(blocks);
  std::vector<std::vector<std::uint32_t>> by_neuron(packed.padded_neurons);
  for (std::uint32_t block = 0; block < blocks; ++block) {
    for (auto& list : by_neuron) list.clear();
    const std::uint32_t first = block * kTwellUnionBlockTokens;
    const std::uint32_t end = std::min(packed.rows, first + kTwellUnionBlockTokens);
    for (std::uint32_t row = first; row < end; ++row) {
      if (!row_flags.empty() && row_flags[row] != 0) continue;
      const std::uint32_t* words =
          packed.words.data() + static_cast<std::size_t>(row) * packed.words_per_row();
      for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile) {
        const std::uint32_t* tile_words = words + static_cast<std::size_t>(tile) * slots;
        const std::uint32_t count = std::min(tile_words[0], capacity);
        for (std::uint32_t slot = 1; slot <= count; ++slot) {
          const std::uint32_t word = tile_words[slot];
          const std::uint32_t neuron = word & 0xffffu;
          if (neuron >= packed.padded_neurons)
            throw Error(Error::Kind::InvalidInput, "twell_block_unions: row " + std::to_string(row) +
                                                       " names neuron " + std::to_string(neuron) +
                                                       " past the padded width");
          by_neuron[neuron].push_back((word & 0xffff0000u) | (row - first));  // the position comes later
        }
      }
    }
    TwellBlockUnion& result = unions[block];
    result.column_start.push_back(0);
    for (std::uint32_t neuron = 0; neuron < packed.padded_neurons; ++neuron) {
      auto& list = by_neuron[neuron];
      if (list.empty()) continue;
      std::sort(list.begin(), list.end(),
                [](std::uint32_t a, std::uint32_t b) { return (a & 0xffffu) < (b & 0xffffu); });
      const auto position = static_cast<std::uint32_t>(result.neurons.size());
      result.neurons.push_back(neuron);
      for (const std::uint32_t word : list)
        result.entries.push_back(twell_union_entry(word & 0xffffu, position, word >> 16));
      result.column_start.push_back(static_cast<std::uint32_t>(result.entries.size()));
    }
  }
  return unions;
}

}  // namespace twell
