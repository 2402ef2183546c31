// SPDX-License-Identifier: GPL-3.0-or-later
// The union of live neurons over each block of tokens: what TwELL's union consumer computes before its
// tensor-core GEMMs, as the CPU reference of the GPU's union pass. A block of T tokens runs its up and
// down projections over every neuron live anywhere in the block (N (1 - (1 - d)^T) of them at density d),
// reading each such weight row once per block instead of once per non-zero.
#pragma once
#include <cstdint>
#include <vector>

#include "twell/twell_format.hpp"

namespace twell {

/// Tokens per block of the union consumer: one 128-row wgmma tile.
constexpr std::uint32_t kTwellUnionBlockTokens = 128;
static_assert(kTwellUnionBlockTokens <= 128, "a token within its block fits an entry's 7 bits");

/// One block's union. Entries are grouped by union position: those of position p are
/// entries[column_start[p], column_start[p + 1]), each twell_union_entry(token within the block, p, bf16
/// value bits), ascending by token within a position. The low bits of p let a GEMM tile place the entries
/// of a contiguous range of positions without looking up where each position's group starts.
/// An entry word: the token (bits 0-6), the position modulo 256 (bits 7-14), the bf16 value (bits 16-31).
constexpr std::uint32_t twell_union_entry(std::uint32_t token, std::uint32_t position,
                                          std::uint32_t value_bits) {
  return token | (position & 0xffu) << 7 | value_bits << 16;
}
struct TwellBlockUnion {
  std::vector<std::uint32_t> neurons;       ///< ascending live neurons (the union positions' neurons)
  std::vector<std::uint32_t> column_start;  ///< neurons.size() + 1 offsets into entries
  std::vector<std::uint32_t> entries;
};

/// The unions of `packed`'s rows in blocks of kTwellUnionBlockTokens (the last block may be short).
/// Rows whose `row_flags` entry is non-zero contribute nothing (they are recomputed densely); empty
/// `row_flags` flags none. Reads each tile's entries up to its capacity. Throws twell::Error when
/// row_flags is neither empty nor one entry per row.
std::vector<TwellBlockUnion> twell_block_unions(const TwellPacked& packed,
                                                const std::vector<std::uint32_t>& row_flags);

}  // namespace twell
