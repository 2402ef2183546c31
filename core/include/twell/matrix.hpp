// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstddef>
#include <span>
#include <vector>

namespace twell {

/// A dense row-major fp32 matrix on the host: the currency of the CPU reference and of tests.
struct Matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<float> data;  ///< rows * cols values, row-major

  Matrix() = default;
  Matrix(std::size_t r, std::size_t c, float fill = 0.0f) : rows(r), cols(c), data(r * c, fill) {}

  float& at(std::size_t r, std::size_t c) { return data[r * cols + c]; }
  float at(std::size_t r, std::size_t c) const { return data[r * cols + c]; }
  std::span<float> row(std::size_t r) { return {data.data() + r * cols, cols}; }
  std::span<const float> row(std::size_t r) const { return {data.data() + r * cols, cols}; }
  bool empty() const { return data.empty(); }
};

}  // namespace twell
