// SPDX-License-Identifier: GPL-3.0-or-later
// The per-layer dispatch rule of core: TwELL strictly below the break-even, dense from it on.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "twell/ffn_dispatch.hpp"

using twell::FfnPath;

TEST(FfnDispatch, ChoosesTwellStrictlyBelowTheBreakEvenForEveryLayer) {
  const twell::FfnBreakEven break_even{0.0105, true, "test"};
  EXPECT_EQ(
      twell::choose_ffn_paths({0.005, 0.0105, 0.02, -0.1, std::nan("")}, break_even),
      (std::vector<FfnPath>{FfnPath::Twell, FfnPath::Dense, FfnPath::Dense, FfnPath::Dense, FfnPath::Dense}));
  EXPECT_TRUE(twell::choose_ffn_paths({}, break_even).empty());
}

TEST(FfnDispatch, ASettableBreakEvenIsAFractionStrictlyInsideZeroToOne) {
  EXPECT_TRUE(twell::is_settable_break_even(0.013));
  for (const double outside : {0.0, 1.0, -0.01, 1.5, std::nan("")})
    EXPECT_FALSE(twell::is_settable_break_even(outside)) << outside;
}
