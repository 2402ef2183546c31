// SPDX-License-Identifier: GPL-3.0-or-later
// FFN problems whose gate fires at a chosen density, built as MODELS.md §4 describes: column 0 of x
// is a constant "bias channel", and column 0 of each gate row is that neuron's bias weight, set
// from the quantile of the neuron's pre-activation distribution so it fires with probability p.
// Shared by the GPU tests and the FFN benchmark. Host code only; every value is bf16-exact.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "twell/matrix.hpp"

namespace twell::test {

struct ControlledFfnOptions {
  std::size_t tokens = 256;        ///< M
  std::size_t hidden = 256;        ///< D (>= 2)
  std::size_t intermediate = 768;  ///< N
  double density = 0.01;           ///< probability that a neuron fires on an ordinary token, in (0, 0.5)
  bool gated = true;               ///< false: the calibrated weight is `up` and there is no gate
  double heavy_row_fraction = 0;   ///< fraction of tokens that fire at heavy_row_density instead
  double heavy_row_density = 0.3;  ///< (e.g. enough to overflow a TwELL tile's capacity)
  double weight_std = 0.02;        ///< standard deviation of the random weights
  std::uint64_t seed = 1;
};

/// x [M, D]; gate, up [N, D]; down [D, N]; down_t = down^T [N, D]. Non-gated: gate is empty.
struct ControlledFfn {
  Matrix x, gate, up, down, down_t;
  std::vector<bool> heavy_rows;  ///< [M]: tokens drawn at heavy_row_density
};

/// How the construction works: z ~ N(0, 1) fills x[t, 1..D); x[t, 0] = 1 (mu_t for a heavy
/// token). For a fixed gate row w (w[0] = 0), w . z ~ N(0, |w|^2) exactly, so the pre-activation
/// w . z + beta x[t, 0] is positive with probability Phi(beta mu_t / |w|): the p-quantile of the
/// neuron's distribution gives beta = |w| Phi^-1(p), and mu_t = Phi^-1(q) / Phi^-1(p) makes token t
/// fire at density q. Weights are uniform with the requested standard deviation; x is Gaussian.
ControlledFfn make_controlled_ffn(const ControlledFfnOptions& options);

/// Re-targets an existing problem to another density: only the bias column of the calibrated
/// weight (gate, or up when non-gated) changes, so x and every other weight are kept.
void recalibrate_density(ControlledFfn& problem, double density);

/// Phi^-1: the standard normal quantile (bisection on erfc; |error| < 1e-12).
double normal_quantile(double probability);

/// bf16 bit patterns of a bf16-exact matrix (for uploads), row-major.
std::vector<std::uint16_t> to_bf16_bits(const Matrix& matrix);

/// Fraction of entries of a pre-activation matrix that are > 0.
double positive_fraction(const Matrix& preactivation);

}  // namespace twell::test
