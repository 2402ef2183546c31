// SPDX-License-Identifier: GPL-3.0-or-later
// The order in which a benchmark times its contenders, shared by the GPU benchmarks. Interleaved
// (the default), every repetition runs each contender once, so slow drift over the run (clocks under
// the card's power cap, other tenants) falls on all of them alike, though a contender also inherits
// the power headroom its predecessor left. Blocked, every repetition of one contender runs before the
// next, each at its own steady state. The two orders bracket a comparison; records say which was used.
#pragma once
#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace twell::test {

inline void add_timing_order_option(CLI::App& app, std::string& order) {
  app.add_option("--order", order,
                 "interleaved: every repetition runs each contender once; blocked: all repetitions of one "
                 "contender, then the next")
      ->check(CLI::IsMember({"interleaved", "blocked"}));
}

/// Calls run(contender, keep) warmup + repetitions times for each of `contenders` contenders, in
/// `order`; keep is false for the warm-up runs.
template <typename Run>
void run_in_order(const std::string& order, int warmup, int repetitions, std::size_t contenders, Run run) {
  if (order == "interleaved") {
    for (int rep = 0; rep < warmup + repetitions; ++rep)
      for (std::size_t c = 0; c < contenders; ++c) run(c, rep >= warmup);
  } else {
    for (std::size_t c = 0; c < contenders; ++c)
      for (int rep = 0; rep < warmup + repetitions; ++rep) run(c, rep >= warmup);
  }
}

}  // namespace twell::test
