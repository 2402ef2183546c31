// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer: token files (whitespace-separated ids, one sequence per line) on arbitrary text.
#include <cstdint>
#include <string>

#include "twell/error.hpp"
#include "twell/tokens.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // The first two bytes pick the vocabulary size, so small and large vocabularies are both explored.
  const std::uint32_t vocab = 1u + (static_cast<std::uint32_t>(data[0]) << 8 | data[1]);
  const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    const auto tokens = twell::parse_token_text(text, vocab, "fuzz/tokens.txt");
    if (tokens.ids.size() != static_cast<std::size_t>(tokens.batch) * tokens.sequence) __builtin_trap();
    for (const auto id : tokens.ids)
      if (id < 0 || static_cast<std::uint32_t>(id) >= vocab) __builtin_trap();
  } catch (const twell::Error&) {
  }
  return 0;
}
