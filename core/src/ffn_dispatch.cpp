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

}  // namespace twell
