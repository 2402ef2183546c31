// SPDX-License-Identifier: GPL-3.0-or-later
// Private to core: a counter-based random source. Every value is a pure function of (key, index),
// so any element of a tensor can be produced alone, in any order, on any number of threads, and the
// same seed always gives the same bytes.
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace twell::detail {

/// The splitmix64 finaliser: a bijective 64-bit mix with good avalanche.
constexpr std::uint64_t splitmix64_mix(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// 64-bit FNV-1a, to derive a stream key from a name ("model.layers.3.mlp.up_proj.weight").
constexpr std::uint64_t fnv1a64(std::string_view text) noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

class CounterRng {
 public:
  constexpr CounterRng(std::uint64_t seed, std::string_view stream) noexcept
      : m_key(splitmix64_mix(seed ^ splitmix64_mix(fnv1a64(stream)))) {}

  /// 64 random bits for `index` (the splitmix64 sequence, addressed directly).
  constexpr std::uint64_t bits(std::uint64_t index) const noexcept {
    return splitmix64_mix(m_key + (index + 1) * 0x9e3779b97f4a7c15ull);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform(std::uint64_t index) const noexcept {
    return static_cast<double>(bits(index) >> 11) * 0x1.0p-53;
  }
  /// Uniform integer in [0, bound) (multiply-high; the bias is below 2^-32 for bounds < 2^32).
  std::uint64_t below(std::uint64_t index, std::uint64_t bound) const noexcept {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(bits(index)) * bound) >> 64);
  }
  /// Standard normal number `index`: Box-Muller on the uniform pair index / 2, even indices take
  /// the cosine branch and odd ones the sine branch, so a pair costs one log and one sincos.
  void normal_pair(std::uint64_t pair, double& first, double& second) const noexcept {
    const double u1 = (static_cast<double>(bits(2 * pair) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = uniform(2 * pair + 1);
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    first = radius * std::cos(angle);
    second = radius * std::sin(angle);
  }
  double normal(std::uint64_t index) const noexcept {
    double first = 0, second = 0;
    normal_pair(index / 2, first, second);
    return (index % 2 == 0) ? first : second;
  }

 private:
  std::uint64_t m_key;
};

}  // namespace twell::detail
