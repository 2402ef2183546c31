// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/ffn_dispatch.hpp"

namespace twell {

FfnBreakEven conservative_break_even(const std::string& why) {
  return {kConservativeTwellBreakEven, false, "conservative default (" + why + ")"};
}

FfnPath choose_ffn_path(double measured_density, const FfnBreakEven& break_even) {
  if (!(measured_density >= 0.0)) return FfnPath::Dense;
  return measured_density < break_even.density ? FfnPath::Twell : FfnPath::Dense;
}

std::vector<FfnPath> choose_ffn_paths(const std::vector<double>& layer_densities,
                                      const FfnBreakEven& break_even) {
  std::vector<FfnPath> paths;
  paths.reserve(layer_densities.size());
  for (const double density : layer_densities) paths.push_back(choose_ffn_path(density, break_even));
  return paths;
}

bool is_settable_break_even(double density) {
  return density > 0.0 && density < 1.0;
}

}  // namespace twell
