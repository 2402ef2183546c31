// SPDX-License-Identifier: GPL-3.0-or-later
// What the CPU hot loops share: compiling a function for AVX-512 and AVX2 as well as the baseline
// (picked at load time; release builds target the generic x86-64 baseline), and eight floats as one
// vector (GCC and Clang vector extensions), so the compiler keeps per-lane sums in vector lanes
// instead of reordering or serialising them.
#pragma once
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TWELL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TWELL_CPU_CLONES
#endif

namespace twell::cpu_vector {

using Float8 = float __attribute__((vector_size(32)));

// Vectors by reference only: one passed or returned by value changes the calling convention
// between the clones and the baseline (-Wpsabi). memcpy: rows are not 32-byte aligned.
inline void load8(Float8& value, const float* address) {
  std::memcpy(&value, address, sizeof value);
}

inline void store8(float* address, const Float8& value) {
  std::memcpy(address, &value, sizeof value);
}

inline float horizontal_sum(const Float8& v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

}  // namespace twell::cpu_vector
