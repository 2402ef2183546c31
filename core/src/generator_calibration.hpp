// SPDX-License-Identifier: GPL-3.0-or-later
// Private to the synthetic-model generator: per-layer density profiles, per-neuron firing rates,
// and the quantile calibration of the gate's bias column (docs MODELS.md §4.1).
#pragma once
#include <cstdint>
#include <vector>

#include "twell/matrix.hpp"

namespace twell::generator {

/// Target density of each layer: earlier layers denser, as in trained models. A linear ramp from
/// (1 + spread) x mean at the first layer to (1 - spread) x mean at the last; its mean is `mean`.
std::vector<double> layer_density_profile(double mean, std::size_t layers, double spread);

struct RateOptions {
  double density = 0.02;        ///< mean rate over all neurons (dead ones included)
  double dead_fraction = 0.03;  ///< neurons that never fire
  double log_sigma = 1.2;       ///< spread of log p_j: a heavy tail of hot neurons
  double max_rate = 0.9;
};
/// Per-neuron firing rates: round(dead_fraction * N) neurons at 0, the rest lognormal, clipped to
/// max_rate, with the location solved so the mean is exactly `density`. Deterministic from
/// (seed, layer). Throws twell::Error when the density cannot be reached.
std::vector<double> neuron_rates(std::size_t neurons, const RateOptions& options, std::uint64_t seed,
                                 std::size_t layer);

/// Inverse of the standard normal CDF.
double normal_quantile(double p);

/// Sorts each row (one neuron's thresholds over the calibration tokens) ascending.
void sort_rows(Matrix& thresholds, unsigned threads);

/// The bias weight per neuron so that neuron j fires (beta_j > r_tj) at rate rates[j] on tokens
/// like the calibration tokens, where r_tj = -(w_j . x_t) / x_t[u] is given as `sorted_thresholds`
/// [N, T] (neuron-major, rows sorted). The order statistic whose expected quantile is the rate;
/// below the sample's resolution a Gaussian tail fitted to that neuron's thresholds; dead neurons
/// get a bias far below every threshold.
std::vector<float> calibrate_bias(const Matrix& sorted_thresholds, const std::vector<double>& rates,
                                  unsigned threads);

}  // namespace twell::generator
