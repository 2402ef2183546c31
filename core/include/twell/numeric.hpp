// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>

namespace twell {

/// fp32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN. Matches __float2bfloat16_rn.
inline std::uint16_t float_to_bf16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

/// bf16 bits -> fp32, exact.
inline float bf16_bits_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// Rounds an fp32 value to the nearest bf16 and back: where the GPU kernels store bf16.
inline float round_to_bf16(float value) noexcept { return bf16_bits_to_float(float_to_bf16_bits(value)); }

/// IEEE half bits -> fp32, exact (subnormals, infinities and NaN included).
float f16_bits_to_float(std::uint16_t bits) noexcept;

/// fp32 -> IEEE half bits, round to nearest even.
std::uint16_t float_to_f16_bits(float value) noexcept;

}  // namespace twell
