// SPDX-License-Identifier: GPL-3.0-or-later
// The reference FFNs: matmul_nt against a naive product, the dense FFN against a double-precision
// oracle, the TwELL FFN against the dense FFN (with and without overflowing rows, gated and not),
// and the bf16 emulation's rounding points pinned bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "twell/error.hpp"
#include "twell/metrics.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/twell_format.hpp"

namespace {

using twell::Activation;
using twell::Matrix;
using twell::reference::FfnWeights;
using twell::reference::Precision;

Matrix random_matrix(std::size_t rows, std::size_t cols, float stddev, std::mt19937& rng) {
  Matrix m(rows, cols);
  std::normal_distribution<float> normal(0.0f, stddev);
  for (float& v : m.data) v = normal(rng);
  return m;
}

Matrix transpose(const Matrix& m) {
  Matrix t(m.cols, m.rows);
  for (std::size_t r = 0; r < m.rows; ++r)
    for (std::size_t c = 0; c < m.cols; ++c) t.at(c, r) = m.at(r, c);
  return t;
}

Matrix rounded(Matrix m) {
  for (float& v : m.data) v = twell::round_to_bf16(v);
  return m;
}

bool all_bf16_exact(const Matrix& m) {
  for (float v : m.data)
    if (twell::round_to_bf16(v) != v) return false;
  return true;
}

/// An FFN whose gate fires with a chosen probability: column 0 of x is a constant bias channel
/// (MODELS.md §4.1) and gate column 0 holds -z * ||w_j||, so with x ~ N(0, 1) neuron j fires when a
/// standard normal exceeds z. Rows listed in `dense_rows` get bias input 0, so half their gates fire.
struct FfnCase {
  Matrix x, gate, up, down, down_t;

  FfnCase(std::size_t tokens, std::size_t hidden, std::size_t neurons, float z, std::uint32_t seed,
          std::size_t dense_row_period = 0) {
    std::mt19937 rng(seed);
    x = random_matrix(tokens, hidden, 1.0f, rng);
    gate = random_matrix(neurons, hidden, 1.0f / std::sqrt(static_cast<float>(hidden)), rng);
    up = random_matrix(neurons, hidden, 1.0f / std::sqrt(static_cast<float>(hidden)), rng);
    down = random_matrix(hidden, neurons, 1.0f / std::sqrt(static_cast<float>(neurons)), rng);
    for (std::size_t m = 0; m < tokens; ++m) {
      x.at(m, 0) = (dense_row_period != 0 && m % dense_row_period == 0) ? 0.0f : 1.0f;
    }
    for (std::size_t j = 0; j < neurons; ++j) {
      double norm_sq = 0;
      for (std::size_t k = 1; k < hidden; ++k) norm_sq += double(gate.at(j, k)) * gate.at(j, k);
      gate.at(j, 0) = static_cast<float>(-z * std::sqrt(norm_sq));
    }
    down_t = transpose(down);
  }
  FfnWeights gated() const { return {&gate, &up, &down, &down_t}; }
  FfnWeights non_gated() const { return {nullptr, &gate, &down, &down_t}; }
};

/// The FFN in double from the definition, for the fp32 tests.
Matrix naive_ffn(const Matrix& x, const FfnWeights& w, Activation activation) {
  const std::size_t tokens = x.rows, hidden = x.cols, neurons = w.up->rows;
  Matrix out(tokens, hidden);
  std::vector<double> h(neurons);
  for (std::size_t m = 0; m < tokens; ++m) {
    for (std::size_t j = 0; j < neurons; ++j) {
      double u = 0, g = 0;
      for (std::size_t k = 0; k < hidden; ++k) {
        u += double(x.at(m, k)) * w.up->at(j, k);
        if (w.gate != nullptr) g += double(x.at(m, k)) * w.gate->at(j, k);
      }
      const auto act = [&](double v) {
        return activation == Activation::Relu ? (v > 0 ? v : 0) : v / (1 + std::exp(-v));
      };
      h[j] = w.gate != nullptr ? act(g) * u : act(u);
    }
    for (std::size_t d = 0; d < hidden; ++d) {
      double y = 0;
      for (std::size_t j = 0; j < neurons; ++j) y += h[j] * w.down->at(d, j);
      out.at(m, d) = static_cast<float>(y);
    }
  }
  return out;
}

/// Rows with a (row, tile) holding more positives than the capacity, counted from the pre-activations.
std::uint64_t rows_with_overflow(const Matrix& pre, std::uint32_t compression) {
  std::uint64_t rows = 0;
  for (std::size_t m = 0; m < pre.rows; ++m) {
    bool overflow = false;
    for (std::size_t t0 = 0; t0 < pre.cols; t0 += 256) {
      std::uint32_t count = 0;
      for (std::size_t n = t0; n < std::min(pre.cols, t0 + 256); ++n) count += pre.at(m, n) > 0.0f;
      overflow = overflow || count > twell::twell_tile_capacity(compression);
    }
    rows += overflow;
  }
  return rows;
}

TEST(MatmulNt, MatchesANaiveProductAndIgnoresTheThreadCount) {
  std::mt19937 rng(3);
  struct Shape {
    std::size_t m, n, k;
  };
  // The second shape spans several row, column and depth blocks, with ragged edges.
  for (const Shape s : {Shape{13, 37, 70}, Shape{200, 300, 300}, Shape{1, 1, 1}}) {
    const Matrix a = random_matrix(s.m, s.k, 1.0f, rng);
    const Matrix b = random_matrix(s.n, s.k, 1.0f, rng);
    Matrix one_thread, three_threads;
    twell::reference::matmul_nt(a, b, one_thread, 1);
    twell::reference::matmul_nt(a, b, three_threads, 3);
    ASSERT_EQ(one_thread.rows, s.m);
    ASSERT_EQ(one_thread.cols, s.n);
    EXPECT_EQ(one_thread.data, three_threads.data);
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t j = 0; j < s.n; ++j) {
        double exact = 0, magnitude = 0;
        for (std::size_t k = 0; k < s.k; ++k) {
          exact += double(a.at(i, k)) * b.at(j, k);
          magnitude += std::abs(double(a.at(i, k)) * b.at(j, k));
        }
        ASSERT_NEAR(one_thread.at(i, j), exact, 1e-6 * magnitude + 1e-30) << i << "," << j;
      }
    }
  }
  Matrix out;
  EXPECT_THROW(twell::reference::matmul_nt(Matrix(2, 3), Matrix(2, 4), out), twell::Error);
}

TEST(DenseFfn, Fp32MatchesTheDefinitionForEveryVariant) {
  const FfnCase c(20, 48, 70, 0.5f, 11);
  for (const bool gated : {true, false}) {
    for (const Activation activation : {Activation::Relu, Activation::Silu}) {
      const FfnWeights w = gated ? c.gated() : c.non_gated();
      const Matrix out = twell::reference::dense_ffn(c.x, w, activation, Precision::Fp32);
      const twell::ErrorMetrics e = twell::compare_outputs(naive_ffn(c.x, w, activation), out);
      EXPECT_LT(e.rel_frobenius, 1e-5) << "gated " << gated << " silu " << (activation == Activation::Silu);
    }
  }
}

TEST(DenseFfn, Bf16EmulationRoundsStoredTensorsAndStaysWithinSpecTolerance) {
  const FfnCase c(32, 64, 300, 0.3f, 12);
  for (const bool gated : {true, false}) {
    const FfnWeights w = gated ? c.gated() : c.non_gated();
    Matrix gate_pre;
    const Matrix out =
        twell::reference::dense_ffn(c.x, w, Activation::Relu, Precision::Bf16Emulated, &gate_pre);
    EXPECT_TRUE(all_bf16_exact(out));
    EXPECT_TRUE(all_bf16_exact(gate_pre));
    const Matrix xr = rounded(c.x), gr = rounded(c.gate), ur = rounded(c.up), dr = rounded(c.down);
    const FfnWeights wr{gated ? &gr : nullptr, gated ? &ur : &gr, &dr, nullptr};
    const Matrix oracle = naive_ffn(xr, wr, Activation::Relu);
    const twell::ErrorMetrics e = twell::compare_outputs(oracle, out);
    EXPECT_LT(e.rel_frobenius, 2e-2) << "gated " << gated;
    EXPECT_GT(e.cosine, 0.999) << "gated " << gated;
    const Matrix highest = twell::reference::dense_ffn(c.x, w, Activation::Relu, Precision::Highest);
    EXPECT_TRUE(all_bf16_exact(highest));
    EXPECT_LT(twell::compare_outputs(oracle, highest).rel_frobenius, 2e-3) << "gated " << gated;
  }
}

TEST(DenseFfn, AcceptsEitherDownLayoutAndRejectsMismatchedShapes) {
  const FfnCase c(8, 32, 50, 0.0f, 13);
  const Matrix with_down =
      twell::reference::dense_ffn(c.x, {&c.gate, &c.up, &c.down, nullptr}, Activation::Relu, Precision::Fp32);
  const Matrix with_down_t = twell::reference::dense_ffn(c.x, {&c.gate, &c.up, nullptr, &c.down_t},
                                                         Activation::Relu, Precision::Fp32);
  EXPECT_EQ(with_down.data, with_down_t.data);
  EXPECT_THROW(
      twell::reference::dense_ffn(c.x, {&c.gate, &c.up, nullptr, nullptr}, Activation::Relu, Precision::Fp32),
      twell::Error);
  EXPECT_THROW(
      twell::reference::dense_ffn(c.x, {&c.up, &c.down, &c.down, nullptr}, Activation::Relu, Precision::Fp32),
      twell::Error);
  const Matrix wrong_x(8, 31);
  EXPECT_THROW(twell::reference::dense_ffn(wrong_x, c.gated(), Activation::Relu, Precision::Fp32),
               twell::Error);
}

TEST(TwellFfn, Fp32EqualsTheDenseFfnAtEveryCompression) {
  const FfnCase c(64, 96, 600, 1.645f, 21);  // about 5 % density; N is not a multiple of 256
  const Matrix dense = twell::reference::dense_ffn(c.x, c.gated(), Activation::Relu, Precision::Fp32);
  for (std::uint32_t compression : twell::kCompressionFactors) {
    Matrix pre;
    const auto result = twell::reference::twell_ffn(c.x, c.gated(), compression, Precision::Fp32, 0, &pre);
    EXPECT_EQ(result.overflow_rows, rows_with_overflow(pre, compression));
    EXPECT_EQ(result.packed.compression, compression);
    EXPECT_LT(twell::compare_outputs(dense, result.out).rel_frobenius, 1e-5) << "C " << compression;
  }
}

TEST(TwellFfn, RecomputesOverflowingRowsDenselyAndCountsThem) {
  // Every third row has no bias input: half its gates fire (about 128 per tile), which overflows
  // C = 8 and 4 and sometimes 2; the other rows stay near 5 %.
  const FfnCase c(48, 64, 700, 1.645f, 22, 3);
  for (const bool gated : {true, false}) {
    const FfnWeights w = gated ? c.gated() : c.non_gated();
    const Matrix dense = twell::reference::dense_ffn(c.x, w, Activation::Relu, Precision::Fp32);
    for (std::uint32_t compression : twell::kCompressionFactors) {
      Matrix pre;
      const auto result = twell::reference::twell_ffn(c.x, w, compression, Precision::Fp32, 0, &pre);
      const std::uint64_t expected = rows_with_overflow(pre, compression);
      EXPECT_EQ(result.overflow_rows, expected) << "C " << compression;
      EXPECT_EQ(result.packed.overflow_rows.size(), expected);
      if (compression != 2) {
        EXPECT_GE(expected, 16u) << "C " << compression;
      }
      EXPECT_LT(expected, 48u);
      EXPECT_LT(twell::compare_outputs(dense, result.out).rel_frobenius, 1e-5)
          << "gated " << gated << " C " << compression;
    }
  }
}

TEST(TwellFfn, FullDensityOverflowsEveryRowAndStillMatches) {
  const FfnCase c(10, 32, 300, -40.0f, 23);  // a huge positive bias: every gate fires
  const Matrix dense = twell::reference::dense_ffn(c.x, c.gated(), Activation::Relu, Precision::Fp32);
  const auto result = twell::reference::twell_ffn(c.x, c.gated(), 2, Precision::Fp32);
  EXPECT_EQ(result.overflow_rows, 10u);
  EXPECT_EQ(result.packed.overflow_tiles, 10u);  // the full 256-wide tile; the 44-wide one fits 127
  EXPECT_LT(twell::compare_outputs(dense, result.out).rel_frobenius, 1e-5);
}

TEST(TwellFfn, TheUnboundedLayoutConsumesEveryRowSparsely) {
  // What the GPU's sparse overflow route computes: no row is recomputed densely, overflowing rows
  // included (every gate fires in the full-density case), and the rows C = 8 holds get the same
  // entries, hence the same bits, as at C = 8.
  const FfnCase c(48, 64, 700, 1.645f, 22, 3);
  const FfnCase full(10, 32, 300, -40.0f, 23);
  for (const FfnCase* problem : {&c, &full}) {
    const Matrix dense =
        twell::reference::dense_ffn(problem->x, problem->gated(), Activation::Relu, Precision::Fp32);
    const auto unbounded =
        twell::reference::twell_ffn(problem->x, problem->gated(), twell::kTwellUnbounded, Precision::Fp32);
    EXPECT_EQ(unbounded.overflow_rows, 0u);
    EXPECT_TRUE(unbounded.packed.overflow_rows.empty());
    EXPECT_LT(twell::compare_outputs(dense, unbounded.out).rel_frobenius, 1e-5);
  }
  for (const Precision precision : {Precision::Bf16Emulated, Precision::Highest}) {
    const auto c8 = twell::reference::twell_ffn(c.x, c.gated(), 8, precision);
    const auto unbounded = twell::reference::twell_ffn(c.x, c.gated(), twell::kTwellUnbounded, precision);
    ASSERT_FALSE(c8.packed.overflow_rows.empty());
    std::vector<bool> overflowing(c.x.rows, false);
    for (std::uint32_t row : c8.packed.overflow_rows) overflowing[row] = true;
    for (std::size_t row = 0; row < c.x.rows; ++row) {
      if (overflowing[row]) continue;
      for (std::size_t col = 0; col < c.x.cols; ++col)
        ASSERT_EQ(unbounded.out.at(row, col), c8.out.at(row, col)) << "row " << row << " col " << col;
    }
  }
}

TEST(TwellFfn, Bf16AndHighestPrecisionStayWithinSpecTolerances) {
  const FfnCase c(64, 128, 600, 1.645f, 24, 5);
  const Matrix xr = rounded(c.x), gr = rounded(c.gate), ur = rounded(c.up), dr = rounded(c.down);
  for (const bool gated : {true, false}) {
    const FfnWeights w = gated ? c.gated() : c.non_gated();
    const FfnWeights wr{gated ? &gr : nullptr, gated ? &ur : &gr, &dr, nullptr};
    const Matrix oracle = naive_ffn(xr, wr, Activation::Relu);
    const auto bf16 = twell::reference::twell_ffn(c.x, w, 8, Precision::Bf16Emulated);
    EXPECT_GT(bf16.overflow_rows, 0u);
    EXPECT_TRUE(all_bf16_exact(bf16.out));
    const twell::ErrorMetrics e = twell::compare_outputs(oracle, bf16.out);
    EXPECT_LT(e.rel_frobenius, 2e-2) << "gated " << gated;
    EXPECT_GT(e.cosine, 0.999) << "gated " << gated;
    const auto highest = twell::reference::twell_ffn(c.x, w, 8, Precision::Highest);
    EXPECT_TRUE(all_bf16_exact(highest.out));
    EXPECT_LT(twell::compare_outputs(oracle, highest.out).rel_frobenius, 2e-3) << "gated " << gated;
  }
}

/// One token, D = 16, N = 256, neurons 7 and 200 firing. With 16 inputs each dot-product lane holds
/// one product, so the expected values below follow the documented rounding points exactly.
struct TinyCase {
  Matrix x{1, 16}, gate{256, 16}, up{256, 16}, down_t{256, 16};
  TinyCase() {
    std::mt19937 rng(99);
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    for (float& v : x.data) v = twell::round_to_bf16(value(rng));
    x.at(0, 0) = 1.0f;
    x.at(0, 1) = twell::round_to_bf16(1.3f);
    for (float& v : up.data) v = twell::round_to_bf16(value(rng));
    for (float& v : down_t.data) v = twell::round_to_bf16(value(rng));
    // Gate: exact fp32 sums (dyadic weights on two inputs) that need rounding to bf16 when packed.
    for (std::size_t j = 0; j < 256; ++j) gate.at(j, 0) = -1.0f;
    for (std::size_t j : {std::size_t{7}, std::size_t{200}}) {
      gate.at(j, 0) = 0.5f + 0.0078125f * j;
      gate.at(j, 1) = 0.25f;
    }
  }
  float gate_value(std::size_t j) const { return gate.at(j, 0) + 0.25f * x.at(0, 1); }
};

TEST(TwellFfn, Bf16EmulationRoundsExactlyWhereTheGpuKernelsRound) {
  const TinyCase c;
  const Matrix down = transpose(c.down_t);
  const auto result =
      twell::reference::twell_ffn(c.x, {&c.gate, &c.up, &down, &c.down_t}, 8, Precision::Bf16Emulated);
  float h[2];
  const std::size_t firing[2] = {7, 200};
  for (int i = 0; i < 2; ++i) {
    const std::size_t j = firing[i];
    float u = 0.0f;
    for (std::size_t k = 0; k < 16; ++k) u += twell::round_to_bf16(c.x.at(0, k) * c.up.at(j, k));
    const float g = twell::round_to_bf16(c.gate_value(j));
    h[i] = twell::round_to_bf16(g * twell::round_to_bf16(u));
  }
  for (std::size_t d = 0; d < 16; ++d) {
    float acc = 0.0f;
    acc += twell::round_to_bf16(h[0] * c.down_t.at(7, d));
    acc += twell::round_to_bf16(h[1] * c.down_t.at(200, d));
    EXPECT_EQ(result.out.at(0, d), twell::round_to_bf16(acc)) << "d " << d;
  }
  EXPECT_EQ(result.packed.words[0], 2u);
  EXPECT_EQ(result.packed.words[1] >> 16, twell::float_to_bf16_bits(c.gate_value(7)));
}

TEST(TwellFfn, HighestAndFp32KeepUpAndHiddenInFp32) {
  TinyCase c;
  c.gate.at(200, 0) = -1.0f;  // only neuron 7 fires: one term per output, no summation order
  c.gate.at(200, 1) = 0.0f;
  const Matrix down = transpose(c.down_t);
  const FfnWeights w{&c.gate, &c.up, &down, &c.down_t};
  float u = 0.0f;
  for (std::size_t k = 0; k < 16; ++k) u += c.x.at(0, k) * c.up.at(7, k);
  const auto highest = twell::reference::twell_ffn(c.x, w, 4, Precision::Highest);
  const auto fp32 = twell::reference::twell_ffn(c.x, w, 4, Precision::Fp32);
  const float h_highest = twell::round_to_bf16(c.gate_value(7)) * u;  // packed (bf16) gate, fp32 u and h
  const float h_fp32 = c.gate_value(7) * u;                           // the fp32 gate value itself
  for (std::size_t d = 0; d < 16; ++d) {
    EXPECT_EQ(highest.out.at(0, d), twell::round_to_bf16(h_highest * c.down_t.at(7, d))) << "d " << d;
    EXPECT_EQ(fp32.out.at(0, d), h_fp32 * c.down_t.at(7, d)) << "d " << d;
  }
}

TEST(TwellFfn, ResultDoesNotDependOnThreadsOrTheDownLayoutGiven) {
  const FfnCase c(40, 64, 512, 1.645f, 25, 4);
  const auto one = twell::reference::twell_ffn(c.x, c.gated(), 8, Precision::Bf16Emulated, 1);
  const auto three = twell::reference::twell_ffn(c.x, c.gated(), 8, Precision::Bf16Emulated, 3);
  const auto no_down_t =
      twell::reference::twell_ffn(c.x, {&c.gate, &c.up, &c.down, nullptr}, 8, Precision::Bf16Emulated, 2);
  EXPECT_EQ(one.out.data, three.out.data);
  EXPECT_EQ(one.out.data, no_down_t.out.data);
  EXPECT_EQ(one.packed.words, three.packed.words);
  EXPECT_THROW(twell::reference::twell_ffn(c.x, c.gated(), 16, Precision::Fp32), twell::Error);
}

}  // namespace
