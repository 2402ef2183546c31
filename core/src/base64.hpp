// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace twell::base64 {

/// RFC 4648 standard alphabet with '=' padding.
std::string encode(const std::uint8_t* bytes, std::size_t size);
/// Strict decode: padding required, no whitespace. nullopt on any malformed input.
std::optional<std::vector<std::uint8_t>> decode(std::string_view text);

}  // namespace twell::base64
