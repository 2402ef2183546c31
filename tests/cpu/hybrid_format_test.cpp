// SPDX-License-Identifier: GPL-3.0-or-later
// The hybrid ELL + dense-tail format (TWELL_SPEC §3.2): routing by row nnz, the tail capacity,
// dropped rows counted, round trips, and rejection of corrupt buffers.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "twell/error.hpp"
#include "twell/numeric.hpp"
#include "twell/twell_format.hpp"

namespace {

/// Rows with the given non-zero counts (positives at every third column), N = 40.
std::vector<float> rows_with_nnz(const std::vector<std::uint32_t>& nnz, std::uint32_t neurons) {
  std::vector<float> pre(nnz.size() * neurons, -1.0f);
  for (std::size_t r = 0; r < nnz.size(); ++r)
    for (std::uint32_t i = 0; i < nnz[r]; ++i) pre[r * neurons + (i * 3) % neurons] = 0.1f * (i + 1) + r;
  return pre;
}

TEST(HybridFormat, RoutesRowsByNnzAndCountsDroppedRows) {
  const std::uint32_t neurons = 40;
  // ELL width 4, tail of 2 rows: rows 1, 3 and 4 are heavy; row 4 finds the tail full.
  const std::vector<std::uint32_t> nnz{4, 5, 0, 13, 6, 1};
  const std::vector<float> pre = rows_with_nnz(nnz, neurons);
  const twell::HybridPacked packed = twell::hybrid_pack(pre.data(), 6, neurons, 4, 2);
  EXPECT_EQ(packed.row_nnz, nnz);
  EXPECT_EQ(packed.tail_row_of, (std::vector<std::int32_t>{-1, 0, -1, 1, -1, -1}));
  EXPECT_EQ(packed.tail_rows, 2u);
  EXPECT_EQ(packed.dropped_rows, 1u);
  EXPECT_EQ(packed.tail.size(), 2u * neurons);
  EXPECT_EQ(packed.ell_columns[0 * 4 + 3], 9u);  // row 0's fourth positive is column 9
  EXPECT_EQ(packed.ell_values[5 * 4 + 0], twell::float_to_bf16_bits(5.1f));

  const twell::Matrix dense = twell::hybrid_unpack(packed);
  for (std::uint32_t r = 0; r < 6; ++r) {
    for (std::uint32_t n = 0; n < neurons; ++n) {
      const float v = pre[r * neurons + n];
      const float expected = (r == 4 || v <= 0.0f) ? 0.0f : twell::round_to_bf16(v);  // row 4 was dropped
      ASSERT_EQ(dense.at(r, n), expected) << "row " << r << " col " << n;
    }
  }
}

TEST(HybridFormat, RoundTripsRandomMatricesWhenTheTailIsLargeEnough) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(-1.2f, 1.0f);  // about 11 % positive
  for (std::uint32_t neurons : {1u, 77u, 256u, 513u}) {
    for (std::uint32_t width : {0u, 3u, 16u, 128u}) {
      const std::uint32_t rows = 9;
      std::vector<float> pre(rows * neurons);
      for (float& v : pre) v = normal(rng);
      const twell::HybridPacked packed = twell::hybrid_pack(pre.data(), rows, neurons, width, rows);
      EXPECT_EQ(packed.dropped_rows, 0u);
      const twell::Matrix dense = twell::hybrid_unpack(packed);
      for (std::size_t i = 0; i < pre.size(); ++i) {
        ASSERT_EQ(dense.data[i], pre[i] > 0.0f ? twell::round_to_bf16(pre[i]) : 0.0f)
            << "N " << neurons << " W " << width;
      }
    }
  }
}

TEST(HybridFormat, UnpackRejectsCorruptBuffers) {
  const std::vector<float> pre = rows_with_nnz({2, 9, 3}, 30);
  const twell::HybridPacked valid = twell::hybrid_pack(pre.data(), 3, 30, 4, 1);
  ASSERT_NO_THROW(twell::hybrid_unpack(valid));
  {
    twell::HybridPacked p = valid;
    p.ell_columns[1] = 30;  // past N
    EXPECT_THROW(twell::hybrid_unpack(p), twell::Error);
  }
  {
    twell::HybridPacked p = valid;
    p.ell_columns[1] = p.ell_columns[0];  // duplicate
    EXPECT_THROW(twell::hybrid_unpack(p), twell::Error);
  }
  {
    twell::HybridPacked p = valid;
    p.tail_row_of[1] = 3;  // no such tail row
    EXPECT_THROW(twell::hybrid_unpack(p), twell::Error);
  }
  {
    twell::HybridPacked p = valid;
    p.dropped_rows = 1;  // nothing was dropped
    EXPECT_THROW(twell::hybrid_unpack(p), twell::Error);
  }
  {
    twell::HybridPacked p = valid;
    p.ell_values[0] |= 0x8000u;  // negative
    EXPECT_THROW(twell::hybrid_unpack(p), twell::Error);
  }
  {
    twell::HybridPacked p = valid;
    p.tail.pop_back();
    EXPECT_THROW(twell::hybrid_unpack(p), twell::Error);
  }
  EXPECT_THROW(twell::hybrid_pack(pre.data(), 1, 0, 4, 1), twell::Error);
}

}  // namespace
