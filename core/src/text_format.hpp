// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <charconv>
#include <cmath>
#include <string>

// Locale-independent number formatting for exports: printf follows LC_NUMERIC (a GUI that sets
// the user's locale would write "1,5" into a CSV), std::to_chars never does.
namespace twell::text {

/// Shortest text that reads back as the same double; "" for NaN/inf (an empty CSV field).
inline std::string shortest(double value) {
  if (!std::isfinite(value)) return {};
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

/// Fixed notation with `digits` decimals; "n/a" for NaN/inf.
inline std::string fixed(double value, int digits) {
  if (!std::isfinite(value)) return "n/a";
  char buffer[128];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed, digits);
  if (result.ec != std::errc()) return shortest(value);
  return std::string(buffer, result.ptr);
}

/// Scientific notation with `digits` decimals in the mantissa ("1.23e-04").
inline std::string scientific(double value, int digits) {
  if (!std::isfinite(value)) return "n/a";
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific, digits);
  return std::string(buffer, result.ptr);
}

/// A percentage with one decimal ("99.5 %" style without the space: "99.5%").
inline std::string percent(double fraction, int digits = 1) {
  return fixed(fraction * 100.0, digits) + "%";
}

}  // namespace twell::text
