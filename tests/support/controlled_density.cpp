// SPDX-License-Identifier: GPL-3.0-or-later
#include "controlled_density.hpp"

#include <cmath>
#include <numbers>
#include <string>

#include "twell/error.hpp"
#include "twell/numeric.hpp"

namespace twell::test {
namespace {

// splitmix64 over a counter: any element can be drawn independently, and runs are reproducible.
std::uint64_t mix(std::uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

class CounterRng {
 public:
  CounterRng(std::uint64_t seed, std::uint64_t stream)
      : m_key(mix(seed) ^ mix(stream + 0x5851f42d4c957f2dull)) {}
  double uniform() {  // in (0, 1)
    return (static_cast<double>(mix(m_key + m_counter++) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
  double normal() {  // Box-Muller
    const double radius = std::sqrt(-2.0 * std::log(uniform()));
    return radius * std::cos(2.0 * std::numbers::pi * uniform());
  }

 private:
  std::uint64_t m_key;
  std::uint64_t m_counter = 0;
};

void fill_uniform(Matrix& matrix, double standard_deviation, CounterRng& rng) {
  const double half_width = standard_deviation * std::sqrt(3.0);
  for (float& value : matrix.data)
    value = round_to_bf16(static_cast<float>((2.0 * rng.uniform() - 1.0) * half_width));
}

Matrix transposed(const Matrix& matrix) {
  Matrix out(matrix.cols, matrix.rows);
  for (std::size_t r = 0; r < matrix.rows; ++r)
    for (std::size_t c = 0; c < matrix.cols; ++c) out.at(c, r) = matrix.at(r, c);
  return out;
}

// Column 0 of each row j becomes |w_j| * quantile, |w_j| taken over the other columns.
void set_bias_column(Matrix& calibrated, double quantile) {
  const std::size_t d = calibrated.cols;
  for (std::size_t j = 0; j < calibrated.rows; ++j) {
    float* row = calibrated.data.data() + j * d;
    double norm_sq = 0;
    for (std::size_t k = 1; k < d; ++k) norm_sq += static_cast<double>(row[k]) * row[k];
    row[0] = round_to_bf16(static_cast<float>(std::sqrt(norm_sq) * quantile));
  }
}

}  // namespace

void recalibrate_density(ControlledFfn& problem, double density) {
  if (!(density > 0.0 && density < 0.5))
    throw Error(Error::Kind::InvalidInput,
                "recalibrate_density: density must be in (0, 0.5), got " + std::to_string(density));
  set_bias_column(problem.gate.empty() ? problem.up : problem.gate, normal_quantile(density));
}

double normal_quantile(double probability) {
  if (!(probability > 0.0 && probability < 1.0))
    throw Error(Error::Kind::InvalidInput, "normal_quantile: probability must be in (0, 1)");
  double low = -40.0, high = 40.0;
  for (int i = 0; i < 200 && high - low > 1e-13; ++i) {
    const double middle = 0.5 * (low + high);
    const double cdf = 0.5 * std::erfc(-middle / std::numbers::sqrt2);
    (cdf < probability ? low : high) = middle;
  }
  return 0.5 * (low + high);
}

ControlledFfn make_controlled_ffn(const ControlledFfnOptions& options) {
  const std::size_t m = options.tokens, d = options.hidden, n = options.intermediate;
  if (m == 0 || d < 2 || n == 0) throw Error(Error::Kind::InvalidInput, "make_controlled_ffn: empty shape");
  if (!(options.density > 0.0 && options.density < 0.5))
    throw Error(Error::Kind::InvalidInput,
                "make_controlled_ffn: density must be in (0, 0.5), got " + std::to_string(options.density));
  if (options.heavy_row_fraction > 0 && !(options.heavy_row_density > 0 && options.heavy_row_density < 1))
    throw Error(Error::Kind::InvalidInput, "make_controlled_ffn: heavy_row_density must be in (0, 1)");

  ControlledFfn problem;
  CounterRng rng_x(options.seed, 1), rng_gate(options.seed, 2), rng_up(options.seed, 3),
      rng_down(options.seed, 4), rng_heavy(options.seed, 5);

  const double quantile = normal_quantile(options.density);  // < 0
  const double heavy_bias_input =
      options.heavy_row_fraction > 0 ? normal_quantile(options.heavy_row_density) / quantile : 1.0;
  problem.heavy_rows.assign(m, false);
  problem.x = Matrix(m, d);
  for (std::size_t t = 0; t < m; ++t) {
    const bool heavy = options.heavy_row_fraction > 0 && rng_heavy.uniform() < options.heavy_row_fraction;
    problem.heavy_rows[t] = heavy;
    float* row = problem.x.data.data() + t * d;
    row[0] = round_to_bf16(static_cast<float>(heavy ? heavy_bias_input : 1.0));
    for (std::size_t k = 1; k < d; ++k) row[k] = round_to_bf16(static_cast<float>(rng_x.normal()));
  }

  Matrix calibrated(n, d);
  fill_uniform(calibrated, options.weight_std, rng_gate);
  set_bias_column(calibrated, quantile);
  if (options.gated) {
    problem.gate = std::move(calibrated);
    problem.up = Matrix(n, d);
    fill_uniform(problem.up, options.weight_std, rng_up);
  } else {
    problem.up = std::move(calibrated);
  }
  problem.down = Matrix(d, n);
  fill_uniform(problem.down, options.weight_std, rng_down);
  problem.down_t = transposed(problem.down);
  return problem;
}

std::vector<std::uint16_t> to_bf16_bits(const Matrix& matrix) {
  std::vector<std::uint16_t> bits(matrix.data.size());
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = float_to_bf16_bits(matrix.data[i]);
  return bits;
}

double positive_fraction(const Matrix& preactivation) {
  if (preactivation.data.empty()) return 0;
  std::size_t positive = 0;
  for (float value : preactivation.data) positive += value > 0.0f ? 1 : 0;
  return static_cast<double>(positive) / static_cast<double>(preactivation.data.size());
}

}  // namespace twell::test
