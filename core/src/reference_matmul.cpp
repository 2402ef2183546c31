// SPDX-License-Identifier: GPL-3.0-or-later
// matmul_nt: out = a * b^T, the CPU reference's only GEMM. Cache-blocked: each work item owns a
// block of output rows x columns; per depth block it copies b's block into column panels
// ([depth][kPanelCols], zero-padded) so the register-tiled inner kernel streams contiguous
// memory and auto-vectorises across the panel's columns (no reduction inside the hot loop).
// Each output element is summed in a fixed order (depth blocks in sequence, k ascending within
// one), so results do not depend on the thread count.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "cpu_vector.hpp"
#include "reference_parallel.hpp"
#include "twell/error.hpp"
#include "twell/reference_ffn.hpp"

// The hot kernel and the packing are compiled for AVX-512 and AVX2 as well as the baseline
// (TWELL_CPU_CLONES).

namespace twell::reference {
namespace {

constexpr std::size_t kKernelRows = 6;    // output rows per inner-kernel call
constexpr std::size_t kPanelCols = 32;    // output columns per inner-kernel call
constexpr std::size_t kDepthBlock = 256;  // k extent of one packed block of b
constexpr std::size_t kColBlock = 256;    // output columns per work item (a multiple of kPanelCols)
constexpr std::size_t kRowBlock = 192;    // output rows per work item (a multiple of kKernelRows)
constexpr std::size_t kSerialFlops = std::size_t{1} << 20;  // below this, threads cost more than they save

struct Problem {
  const float* a;
  const float* b;
  float* out;
  std::size_t rows, cols, depth;  // M, N, K
};

using cpu_vector::Float8;
using cpu_vector::load8;
using cpu_vector::store8;

/// out[j] = the j-th elements of rows[0..7]: an 8 x 8 transpose in three rounds of shuffles.
inline __attribute__((always_inline)) void transpose8x8(const Float8 (&rows)[8], Float8 (&out)[8]) {
  Float8 a[8], b[8];
  for (int i = 0; i < 4; ++i) {  // pairs of rows, element by element
    a[2 * i] = __builtin_shufflevector(rows[2 * i], rows[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    a[2 * i + 1] = __builtin_shufflevector(rows[2 * i], rows[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int h = 0; h < 2; ++h) {  // pairs of pairs, two elements at a time
    for (int i = 0; i < 2; ++i) {
      const Float8& x = a[4 * h + i];
      const Float8& y = a[4 * h + i + 2];
      b[4 * h + 2 * i] = __builtin_shufflevector(x, y, 0, 1, 8, 9, 4, 5, 12, 13);
      b[4 * h + 2 * i + 1] = __builtin_shufflevector(x, y, 2, 3, 10, 11, 6, 7, 14, 15);
    }
  }
  for (int i = 0; i < 4; ++i) {  // halves of 4
    out[i] = __builtin_shufflevector(b[i], b[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    out[i + 4] = __builtin_shufflevector(b[i], b[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

/// Copies b[n0 .. n0+n_count) x [k0 .. k0+k_count) into panels of kPanelCols columns, each laid out
/// [k][column], columns past N zero. Whole 8 x 8 tiles are transposed in registers; the rest (a
/// panel's last columns past N, a depth not a multiple of 8) element by element.
TWELL_CPU_CLONES void pack_b_block(const Problem& p, std::size_t n0, std::size_t n_count, std::size_t k0,
                                   std::size_t k_count, float* packed) {
  const std::size_t panels = (n_count + kPanelCols - 1) / kPanelCols;
  for (std::size_t panel = 0; panel < panels; ++panel) {
    float* panel_out = packed + panel * k_count * kPanelCols;
    std::array<const float*, kPanelCols> sources{};
    std::size_t live = 0;
    for (std::size_t c = 0; c < kPanelCols; ++c) {
      const std::size_t n = n0 + panel * kPanelCols + c;
      if (n < n0 + n_count) sources[live++] = p.b + n * p.depth + k0;
    }
    const std::size_t tiled_columns = live / 8 * 8;
    const std::size_t tiled_depth = k_count / 8 * 8;
    for (std::size_t c0 = 0; c0 < tiled_columns; c0 += 8) {
      for (std::size_t k = 0; k < tiled_depth; k += 8) {
        Float8 rows[8], columns[8];
        for (std::size_t i = 0; i < 8; ++i) load8(rows[i], sources[c0 + i] + k);
        transpose8x8(rows, columns);
        for (std::size_t j = 0; j < 8; ++j) store8(panel_out + (k + j) * kPanelCols + c0, columns[j]);
      }
    }
    for (std::size_t k = 0; k < k_count; ++k) {
      float* row = panel_out + k * kPanelCols;
      for (std::size_t c = k < tiled_depth ? tiled_columns : 0; c < live; ++c) row[c] = sources[c][k];
      for (std::size_t c = live; c < kPanelCols; ++c) row[c] = 0.0f;
    }
  }
}

/// tile[r][c] = sum_k a_rows[r][k] * panel[k][c] over one depth block.
inline __attribute__((always_inline)) void panel_kernel(const std::array<const float*, kKernelRows>& a_rows,
                                                        const float* panel, std::size_t k_count,
                                                        float (&tile)[kKernelRows][kPanelCols]) {
  float acc[kKernelRows][kPanelCols] = {};
  for (std::size_t k = 0; k < k_count; ++k) {
    const float* b_row = panel + k * kPanelCols;
    for (std::size_t r = 0; r < kKernelRows; ++r) {
      const float a_value = a_rows[r][k];
      for (std::size_t c = 0; c < kPanelCols; ++c) acc[r][c] += a_value * b_row[c];
    }
  }
  for (std::size_t r = 0; r < kKernelRows; ++r)
    for (std::size_t c = 0; c < kPanelCols; ++c) tile[r][c] = acc[r][c];
}

TWELL_CPU_CLONES void compute_block(const Problem& p, std::size_t m0, std::size_t m_count, std::size_t n0,
                                    std::size_t n_count, float* packed, const float* zero_row) {
  const std::size_t panels = (n_count + kPanelCols - 1) / kPanelCols;
  for (std::size_t k0 = 0; k0 < p.depth; k0 += kDepthBlock) {
    const std::size_t k_count = std::min(kDepthBlock, p.depth - k0);
    pack_b_block(p, n0, n_count, k0, k_count, packed);
    for (std::size_t m = m0; m < m0 + m_count; m += kKernelRows) {
      const std::size_t rows_here = std::min(kKernelRows, m0 + m_count - m);
      std::array<const float*, kKernelRows> a_rows;
      for (std::size_t r = 0; r < kKernelRows; ++r)
        a_rows[r] = r < rows_here ? p.a + (m + r) * p.depth + k0 : zero_row;
      for (std::size_t panel = 0; panel < panels; ++panel) {
        float tile[kKernelRows][kPanelCols];
        panel_kernel(a_rows, packed + panel * k_count * kPanelCols, k_count, tile);
        const std::size_t col0 = n0 + panel * kPanelCols;
        const std::size_t cols_here = std::min(kPanelCols, n0 + n_count - col0);
        for (std::size_t r = 0; r < rows_here; ++r) {
          float* out_row = p.out + (m + r) * p.cols + col0;
          for (std::size_t c = 0; c < cols_here; ++c) out_row[c] += tile[r][c];
        }
      }
    }
  }
}

}  // namespace

void matmul_nt(const Matrix& a, const Matrix& b, Matrix& out, unsigned threads) {
  if (a.cols != b.cols) {
    throw Error(Error::Kind::InvalidInput, "matmul_nt: a is [" + std::to_string(a.rows) + ", " +
                                               std::to_string(a.cols) + "] but b is [" +
                                               std::to_string(b.rows) + ", " + std::to_string(b.cols) +
                                               "]: their columns must agree");
  }
  if (&out == &a || &out == &b) throw Error(Error::Kind::Internal, "matmul_nt: out may not alias an input");
  out.rows = a.rows;
  out.cols = b.rows;
  out.data.assign(a.rows * b.rows, 0.0f);
  if (a.rows == 0 || b.rows == 0 || a.cols == 0) return;

  const Problem problem{a.data.data(), b.data.data(), out.data.data(), a.rows, b.rows, a.cols};
  const std::size_t row_blocks = (a.rows + kRowBlock - 1) / kRowBlock;
  const std::size_t col_blocks = (b.rows + kColBlock - 1) / kColBlock;
  if (2 * a.rows * b.rows * a.cols < kSerialFlops) threads = 1;
  threads = detail::effective_threads(threads, row_blocks * col_blocks);
  // An item packs its block of b once per depth block and runs it against all its rows, so items
  // take as many row blocks as still leaves about two items per thread.
  const std::size_t row_groups = std::min(
      row_blocks, std::max<std::size_t>(1, (2 * std::size_t{threads} + col_blocks - 1) / col_blocks));
  const std::size_t rows_per_group = (row_blocks + row_groups - 1) / row_groups * kRowBlock;
  const std::size_t items = col_blocks * row_groups;

  std::vector<std::vector<float>> packed(threads, std::vector<float>(kColBlock * kDepthBlock));
  const std::vector<float> zero_row(kDepthBlock, 0.0f);
  // Column blocks outermost so concurrent items share one block of b in the last-level cache.
  detail::parallel_for(items, threads, [&](std::size_t item, unsigned worker) {
    const std::size_t col_block = item / row_groups;
    const std::size_t m0 = item % row_groups * rows_per_group;
    if (m0 >= a.rows) return;
    const std::size_t n0 = col_block * kColBlock;
    compute_block(problem, m0, std::min(rows_per_group, a.rows - m0), n0, std::min(kColBlock, b.rows - n0),
                  packed[worker].data(), zero_row.data());
  });
}

}  // namespace twell::reference
