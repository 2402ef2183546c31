// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace twell {

/// batch x sequence token ids, row-major (sequence-major within a batch row).
struct TokenBatch {
  std::uint32_t batch = 0;
  std::uint32_t sequence = 0;
  std::vector<std::int32_t> ids;  ///< batch * sequence
  std::string source;             ///< "random(seed=…)" or the file it came from
  std::size_t count() const { return ids.size(); }
};

/// Seeded uniform random ids in [0, vocab): the paper's benchmark protocol.
TokenBatch random_tokens(std::uint32_t batch, std::uint32_t sequence, std::uint32_t vocab, std::uint64_t seed);

/// Whitespace-separated integers, one sequence per line, all lines the same length, every id in
/// [0, vocab). Errors name the line and the reason.
TokenBatch parse_token_text(const std::string& text, std::uint32_t vocab, const std::string& source);
TokenBatch read_token_file(const std::filesystem::path& path, std::uint32_t vocab);

}  // namespace twell
