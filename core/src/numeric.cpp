// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/numeric.hpp"

#include <cmath>

namespace twell {

float f16_bits_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out = 0;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {
    // Subnormal half: renormalise into an fp32 normal.
    std::uint32_t shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    out = sign | ((113u - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t float_to_f16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (abs_bits >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs_bits < 0x38800000u) {
    // Result is subnormal (or zero) in half: scale so rounding happens at the half ulp.
    const float magnitude = std::bit_cast<float>(abs_bits);
    const float scaled = magnitude * 16777216.0f;  // 2^24: half subnormal ulp becomes 1
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
  }
  const std::uint32_t rounded = abs_bits + 0xfffu + ((abs_bits >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace twell
