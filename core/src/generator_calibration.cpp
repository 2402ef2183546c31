// SPDX-License-Identifier: GPL-3.0-or-later
#include "generator_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "counter_rng.hpp"
#include "reference_parallel.hpp"
#include "twell/error.hpp"

namespace twell::generator {
namespace {

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double mean_rate(const std::vector<double>& z, const std::vector<bool>& dead, double location, double sigma,
                 double max_rate) {
  double sum = 0;
  for (std::size_t j = 0; j < z.size(); ++j)
    if (!dead[j]) sum += std::min(max_rate, std::exp(location + sigma * z[j]));
  return sum / static_cast<double>(z.size());
}

}  // namespace

std::vector<double> layer_density_profile(double mean, std::size_t layers, double spread) {
  std::vector<double> densities(layers, mean);
  if (layers < 2) return densities;
  for (std::size_t l = 0; l < layers; ++l) {
    const double position = static_cast<double>(l) / static_cast<double>(layers - 1);  // 0 .. 1
    densities[l] = mean * (1.0 + spread * (1.0 - 2.0 * position));
  }
  return densities;
}

std::vector<double> neuron_rates(std::size_t neurons, const RateOptions& options, std::uint64_t seed,
                                 std::size_t layer) {
  const std::string stream = "layers." + std::to_string(layer) + ".rates";
  const detail::CounterRng rate_rng(seed, stream);
  const detail::CounterRng dead_rng(seed, stream + ".dead");

  // The dead set: the neurons with the smallest random keys, so exactly round(f * N) of them.
  const auto dead_count =
      static_cast<std::size_t>(std::llround(options.dead_fraction * static_cast<double>(neurons)));
  std::vector<std::size_t> order(neurons);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto ka = dead_rng.bits(a), kb = dead_rng.bits(b);
    return ka != kb ? ka < kb : a < b;
  });
  std::vector<bool> dead(neurons, false);
  for (std::size_t i = 0; i < dead_count; ++i) dead[order[i]] = true;

  const double reachable =
      options.max_rate * static_cast<double>(neurons - dead_count) / static_cast<double>(neurons);
  if (!(options.density > 0) || options.density >= reachable) {
    throw Error(Error::Kind::InvalidInput, "layer " + std::to_string(layer) + " density " +
                                               std::to_string(options.density) + " cannot be reached with " +
                                               std::to_string(dead_count) + " of " + std::to_string(neurons) +
                                               " neurons dead and rates capped at " +
                                               std::to_string(options.max_rate));
  }
  std::vector<double> z(neurons);
  for (std::size_t j = 0; j < neurons; ++j) z[j] = rate_rng.normal(j);

  // mean_rate is increasing in the location, so bisection finds it to double precision.
  double low = -60.0, high = std::log(options.max_rate) + 10.0 * options.log_sigma;
  for (int iteration = 0; iteration < 200; ++iteration) {
    const double middle = 0.5 * (low + high);
    (mean_rate(z, dead, middle, options.log_sigma, options.max_rate) < options.density ? low : high) = middle;
  }
  std::vector<double> rates(neurons, 0.0);
  for (std::size_t j = 0; j < neurons; ++j)
    if (!dead[j]) rates[j] = std::min(options.max_rate, std::exp(high + options.log_sigma * z[j]));
  return rates;
}

double normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0)) {
    throw Error(Error::Kind::Internal, "normal_quantile: p = " + std::to_string(p) + " is outside (0, 1)");
  }
  double low = -40.0, high = 40.0;
  for (int iteration = 0; iteration < 200 && high - low > 1e-13; ++iteration) {
    const double middle = 0.5 * (low + high);
    (normal_cdf(middle) < p ? low : high) = middle;
  }
  return 0.5 * (low + high);
}

void sort_rows(Matrix& thresholds, unsigned threads) {
  reference::detail::parallel_for(thresholds.rows, threads, [&](std::size_t j, unsigned) {
    auto row = thresholds.row(j);
    std::sort(row.begin(), row.end());
  });
}

std::vector<float> calibrate_bias(const Matrix& thresholds, const std::vector<double>& rates,
                                  unsigned threads) {
  const std::size_t neurons = thresholds.rows;
  const std::size_t tokens = thresholds.cols;
  if (rates.size() != neurons || tokens < 2) {
    throw Error(Error::Kind::Internal, "calibrate_bias: " + std::to_string(rates.size()) + " rates for " +
                                           std::to_string(neurons) + " neurons over " +
                                           std::to_string(tokens) + " tokens");
  }
  const double count = static_cast<double>(tokens);
  // The k-th smallest of T samples sits, on average, at quantile k / (T + 1) of the distribution
  // they come from; the first and last are where the sample's resolution ends.
  const double edge_quantile = normal_quantile(1.0 / (count + 1.0));
  std::vector<float> bias(neurons);
  reference::detail::parallel_for(neurons, threads, [&](std::size_t j, unsigned) {
    const auto sorted = thresholds.row(j);
    const double smallest = sorted.front(), largest = sorted.back();
    const double p = rates[j];
    if (p <= 0.0) {
      // Dead: far below any threshold this layer's inputs produce.
      bias[j] = static_cast<float>(-16.0 * std::max({std::abs(smallest), std::abs(largest), 1e-6}));
      return;
    }
    // Unseen tokens should fire at rate p on average: the order statistic whose expected quantile
    // is p, k = p (T + 1) (1-based). A median-style position (p T - 0.5) overshoots by 0.5 / T,
    // a third of the rate of a typical rare neuron when T is a few hundred tokens.
    const double position = p * (count + 1.0) - 1.0;
    if (position >= 0.0 && position <= count - 1.0) {
      const auto below = static_cast<std::size_t>(position);
      const std::size_t above = std::min(below + 1, tokens - 1);
      const double fraction = position - static_cast<double>(below);
      bias[j] = static_cast<float>(sorted[below] + fraction * (sorted[above] - sorted[below]));
      return;
    }
    double mean = 0;
    for (const float r : sorted) mean += r;
    mean /= count;
    double variance = 0;
    for (const float r : sorted) variance += (r - mean) * (r - mean);
    const double sigma = std::sqrt(variance / (count - 1.0));
    bias[j] = position < 0.0 ? static_cast<float>(smallest + sigma * (normal_quantile(p) - edge_quantile))
                             : static_cast<float>(largest + sigma * (normal_quantile(p) + edge_quantile));
  });
  return bias;
}

}  // namespace twell::generator
