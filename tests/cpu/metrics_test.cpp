// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "twell/error.hpp"
#include "twell/metrics.hpp"

namespace {

twell::Matrix row_vector(std::initializer_list<float> values) {
  twell::Matrix m(1, values.size());
  m.data.assign(values);
  return m;
}

TEST(Metrics, IdenticalOutputsHaveNoError) {
  const twell::Matrix a = row_vector({1.0f, -2.0f, 3.0f});
  const twell::ErrorMetrics e = twell::compare_outputs(a, a);
  EXPECT_EQ(e.rel_frobenius, 0.0);
  EXPECT_EQ(e.max_abs, 0.0);
  EXPECT_DOUBLE_EQ(e.cosine, 1.0);
}

TEST(Metrics, KnownVectors) {
  const twell::ErrorMetrics e = twell::compare_outputs(row_vector({3.0f, 4.0f}), row_vector({3.0f, 5.0f}));
  EXPECT_DOUBLE_EQ(e.rel_frobenius, 0.2);  // |(0, 1)| / |(3, 4)|
  EXPECT_DOUBLE_EQ(e.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(e.cosine, 29.0 / (5.0 * std::sqrt(34.0)));
  const twell::ErrorMetrics opposite =
      twell::compare_outputs(row_vector({1.0f, 2.0f}), row_vector({-1.0f, -2.0f}));
  EXPECT_DOUBLE_EQ(opposite.rel_frobenius, 2.0);
  EXPECT_DOUBLE_EQ(opposite.max_abs, 4.0);
  EXPECT_DOUBLE_EQ(opposite.cosine, -1.0);
}

TEST(Metrics, ZeroReferenceIsHandledWithoutNan) {
  const twell::Matrix zero = row_vector({0.0f, 0.0f});
  const twell::ErrorMetrics both = twell::compare_outputs(zero, zero);
  EXPECT_EQ(both.rel_frobenius, 0.0);
  EXPECT_EQ(both.cosine, 1.0);
  const twell::ErrorMetrics nonzero = twell::compare_outputs(zero, row_vector({0.0f, 0.5f}));
  EXPECT_TRUE(std::isinf(nonzero.rel_frobenius));
  EXPECT_EQ(nonzero.cosine, 0.0);
  EXPECT_EQ(nonzero.max_abs, 0.5);
}

TEST(Metrics, NanInTheCandidateFailsEveryCheck) {
  const twell::ErrorMetrics e = twell::compare_outputs(
      row_vector({1.0f, 2.0f, 3.0f}), row_vector({1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f}));
  EXPECT_TRUE(std::isnan(e.rel_frobenius));
  EXPECT_TRUE(std::isnan(e.max_abs));
  EXPECT_TRUE(std::isnan(e.cosine));
}

TEST(Metrics, FromSumsMatchesDirectComparison) {
  twell::ErrorSums sums;
  sums.reference_sq = 25;
  sums.candidate_sq = 34;
  sums.diff_sq = 1;
  sums.dot = 29;
  sums.max_abs = 1;
  const twell::ErrorMetrics e = twell::error_metrics_from_sums(sums);
  EXPECT_EQ(e, twell::compare_outputs(row_vector({3.0f, 4.0f}), row_vector({3.0f, 5.0f})));
}

TEST(Metrics, RejectsMismatchedShapes) {
  EXPECT_THROW(twell::compare_outputs(twell::Matrix(2, 3), twell::Matrix(3, 2)), twell::Error);
}

}  // namespace
