// SPDX-License-Identifier: GPL-3.0-or-later
// The per-layer choice between the dense and the TwELL FFN: TwELL below the density at which the
// two take the same time on a device and layer shape (its break-even), dense from there on.
#pragma once
#include <string>
#include <vector>

namespace twell {

enum class FfnPath { Dense, Twell };
const char* to_string(FfnPath path) noexcept;  ///< "dense", "twell"

/// Where a device's break-even density for one FFN shape comes from.
struct FfnBreakEven {
  double density = 0;     ///< fraction of gate activations > 0 at which dense and TwELL take as long
  bool measured = false;  ///< from a benchmark of this device and shape, not the conservative default
  std::string basis;      ///< e.g. "NVIDIA H200, D 2048, N 5632, C 8, M 131072 (bench_ffn, H200, 2026-12-04)"
  bool operator==(const FfnBreakEven&) const = default;
};

/// The end-to-end forward whose layers each run on the path this dispatch chooses; the name
/// reports and traces give it beside "dense" and "twell".
inline constexpr const char* kDispatchForwardPath = "dispatch";

/// Below every break-even measured with the Hopper kernels so far; where TwELL with the portable
/// kernels is still near dense. Used where nothing was measured for the device and shape.
inline constexpr double kConservativeTwellBreakEven = 0.0025;

/// The conservative default, its basis saying why it applies.
FfnBreakEven conservative_break_even(const std::string& why);

/// TwELL when the measured density is below the break-even, else dense (also for a density that
/// is negative or not a number: nothing to trust).
FfnPath choose_ffn_path(double measured_density, const FfnBreakEven& break_even);

/// choose_ffn_path for every layer's measured density, in layer order.
std::vector<FfnPath> choose_ffn_paths(const std::vector<double>& layer_densities,
                                      const FfnBreakEven& break_even);

/// Whether `density` can be a break-even set for a run: a fraction strictly inside (0, 1).
bool is_settable_break_even(double density);

}  // namespace twell
