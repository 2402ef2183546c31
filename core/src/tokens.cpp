// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/tokens.hpp"

#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

#include "counter_rng.hpp"
#include "twell/error.hpp"

namespace twell {
namespace {

Error bad_line(const std::string& source, std::size_t line, const std::string& reason) {
  return Error(Error::Kind::InvalidInput, source + " line " + std::to_string(line) + ": " + reason);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/// The whitespace-separated fields of one line.
std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    const std::size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

std::int32_t parse_id(std::string_view field, std::uint32_t vocab, const std::string& source,
                      std::size_t line) {
  const std::string shown(field.substr(0, 40));
  if (field.front() == '-') {
    throw bad_line(source, line,
                   "token '" + shown + "' is negative; ids must be in [0, " + std::to_string(vocab) + ")");
  }
  std::uint64_t value = 0;
  const auto [end, status] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (status == std::errc::result_out_of_range) {
    throw bad_line(source, line,
                   "token '" + shown + "' is too large; ids must be in [0, " + std::to_string(vocab) + ")");
  }
  if (status != std::errc() || end != field.data() + field.size()) {
    throw bad_line(source, line, "'" + shown + "' is not a token id (expected a non-negative integer)");
  }
  if (value >= vocab) {
    throw bad_line(
        source, line,
        "token " + std::to_string(value) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  return static_cast<std::int32_t>(value);
}

}  // namespace

TokenBatch random_tokens(std::uint32_t batch, std::uint32_t sequence, std::uint32_t vocab,
                         std::uint64_t seed) {
  if (vocab == 0) throw Error(Error::Kind::InvalidInput, "random_tokens: the vocabulary is empty");
  if (batch == 0 || sequence == 0) {
    throw Error(Error::Kind::InvalidInput, "random_tokens: batch (" + std::to_string(batch) +
                                               ") and sequence (" + std::to_string(sequence) +
                                               ") must both be positive");
  }
  TokenBatch tokens;
  tokens.batch = batch;
  tokens.sequence = sequence;
  tokens.source = "random(seed=" + std::to_string(seed) + ")";
  const detail::CounterRng rng(seed, "token-ids");
  const std::size_t count = static_cast<std::size_t>(batch) * sequence;
  tokens.ids.resize(count);
  for (std::size_t i = 0; i < count; ++i) tokens.ids[i] = static_cast<std::int32_t>(rng.below(i, vocab));
  return tokens;
}

TokenBatch parse_token_text(const std::string& text, std::uint32_t vocab, const std::string& source) {
  if (vocab == 0) throw Error(Error::Kind::InvalidInput, source + ": the vocabulary is empty");
  if (vocab > static_cast<std::uint32_t>(std::numeric_limits<std::int32_t>::max())) {
    throw Error(Error::Kind::Unsupported,
                source + ": vocabulary of " + std::to_string(vocab) + " ids is too large");
  }
  TokenBatch tokens;
  tokens.source = source;
  std::size_t first_line = 0;
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_number;
    const auto fields = split_fields(std::string_view(text).substr(start, end - start));
    start = end + 1;
    if (fields.empty()) continue;  // blank lines (a trailing newline, spacing) separate nothing
    if (tokens.batch == 0) {
      tokens.sequence = static_cast<std::uint32_t>(fields.size());
      first_line = line_number;
    } else if (fields.size() != tokens.sequence) {
      throw bad_line(source, line_number,
                     std::to_string(fields.size()) + " tokens, but line " + std::to_string(first_line) +
                         " has " + std::to_string(tokens.sequence) +
                         " (every sequence must have the same length)");
    }
    for (const auto field : fields) tokens.ids.push_back(parse_id(field, vocab, source, line_number));
    ++tokens.batch;
  }
  if (tokens.batch == 0) {
    throw Error(Error::Kind::InvalidInput,
                source + ": no token ids (expected whitespace-separated integers, one sequence per line)");
  }
  return tokens;
}

TokenBatch read_token_file(const std::filesystem::path& path, std::uint32_t vocab) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(Error::Kind::Io, "cannot open token file " + path.string());
  std::ostringstream content;
  content << file.rdbuf();
  if (file.bad()) throw Error(Error::Kind::Io, "cannot read token file " + path.string());
  return parse_token_text(content.str(), vocab, path.string());
}

}  // namespace twell
