// SPDX-License-Identifier: GPL-3.0-or-later
// CPU dense FFN vs CPU TwELL FFN (fp32, C = 8) at a chosen gate density, SparseLM shapes by default.
// The gate fires with probability p per (token, neuron): x carries a constant bias channel in
// column 0 (MODELS.md §4.1) and gate column 0 holds -z * ||w_j||, z the standard normal's
// (1 - p)-quantile, so with the other inputs ~ N(0, 1) the pre-activation exceeds 0 with probability p.
//
//   bench_cpu_ffn [--tokens 256,512,1024] [--density 0.005] [--hidden 2048] [--intermediate 5632]
//                 [--threads 0] [--repeats 3]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "twell/error.hpp"
#include "twell/metrics.hpp"
#include "twell/reference_ffn.hpp"

namespace {

struct Options {
  std::vector<std::size_t> tokens{256, 512, 1024};
  double density = 0.005;
  std::size_t hidden = 2048;
  std::size_t intermediate = 5632;
  unsigned threads = 0;
  int repeats = 3;
};

void add_options(CLI::App& app, Options& options) {
  app.add_option("--tokens", options.tokens, "token counts")->delimiter(',')->check(CLI::PositiveNumber);
  app.add_option("--density", options.density, "gate density, a fraction")->check(CLI::Range(1e-6, 0.999999));
  app.add_option("--hidden", options.hidden, "D")->check(CLI::PositiveNumber);
  app.add_option("--intermediate", options.intermediate, "N")->check(CLI::PositiveNumber);
  app.add_option("--threads", options.threads, "worker threads (0: all cores)");
  app.add_option("--repeats", options.repeats)->check(CLI::PositiveNumber);
}

/// z with P(N(0, 1) > z) = p, by bisection on the normal tail.
double normal_upper_quantile(double p) {
  double low = -10, high = 10;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (low + high);
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > p ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

twell::Matrix random_matrix(std::size_t rows, std::size_t cols, float stddev, std::mt19937& rng) {
  twell::Matrix m(rows, cols);
  std::normal_distribution<float> normal(0.0f, stddev);
  for (float& v : m.data) v = normal(rng);
  return m;
}

struct Timing {
  double wall_ms = 0;
  double cpu_ms = 0;  ///< process CPU time over all threads: steadier than wall time on a busy machine
};

template <typename Run>
Timing median_timing(int repeats, Run&& run) {
  run();  // warm-up: first-touch page faults, thread start-up
  std::vector<double> wall, cpu;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    run();
    cpu.push_back(1000.0 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"The CPU TwELL FFN against the CPU dense FFN"};
  add_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    const std::size_t max_tokens = *std::max_element(options.tokens.begin(), options.tokens.end());
    const std::size_t d = options.hidden, n = options.intermediate;
    std::mt19937 rng(2603);
    const float weight_std = 0.02f;
    twell::Matrix gate = random_matrix(n, d, weight_std, rng);
    const twell::Matrix up = random_matrix(n, d, weight_std, rng);
    const twell::Matrix down = random_matrix(d, n, weight_std, rng);
    twell::Matrix down_t(n, d);
    for (std::size_t r = 0; r < d; ++r)
      for (std::size_t c = 0; c < n; ++c) down_t.at(c, r) = down.at(r, c);
    const double z = normal_upper_quantile(options.density);
    for (std::size_t j = 0; j < n; ++j) {
      double norm_sq = 0;
      for (std::size_t k = 1; k < d; ++k) norm_sq += double(gate.at(j, k)) * gate.at(j, k);
      gate.at(j, 0) = static_cast<float>(-z * std::sqrt(norm_sq));
    }
    twell::Matrix x_all = random_matrix(max_tokens, d, 1.0f, rng);
    for (std::size_t m = 0; m < max_tokens; ++m) x_all.at(m, 0) = 1.0f;
    const twell::reference::FfnWeights weights{&gate, &up, &down, &down_t};

    std::printf("CPU FFN, fp32, D=%zu N=%zu, target density %.3f %%, threads %u (0 = all), median of %d\n", d,
                n, 100 * options.density, options.threads, options.repeats);
    std::printf("%8s %10s %9s %10s %10s %7s %14s %14s %9s %10s\n", "tokens", "density%", "overflow",
                "dense ms", "twell ms", "ratio", "dense cpu ms", "twell cpu ms", "cpu ratio", "rel err");
    for (const std::size_t tokens : options.tokens) {
      twell::Matrix x(tokens, d);
      std::copy_n(x_all.data.begin(), tokens * d, x.data.begin());
      twell::Matrix dense_out;
      twell::reference::TwellFfnResult twell_out;
      const Timing dense = median_timing(options.repeats, [&] {
        dense_out = twell::reference::dense_ffn(x, weights, twell::Activation::Relu,
                                                twell::reference::Precision::Fp32, nullptr, options.threads);
      });
      const Timing twell = median_timing(options.repeats, [&] {
        twell_out =
            twell::reference::twell_ffn(x, weights, 8, twell::reference::Precision::Fp32, options.threads);
      });
      std::uint64_t stored = 0;
      const auto& packed = twell_out.packed;
      for (std::size_t w = 0; w < packed.words.size(); w += packed.slots_per_tile())
        stored += packed.words[w];
      const double density = 100.0 * static_cast<double>(stored) / (static_cast<double>(tokens) * n);
      const twell::ErrorMetrics error = twell::compare_outputs(dense_out, twell_out.out);
      std::printf("%8zu %10.3f %9llu %10.1f %10.1f %6.2fx %14.1f %14.1f %8.2fx %10.2e\n", tokens, density,
                  static_cast<unsigned long long>(twell_out.overflow_rows), dense.wall_ms, twell.wall_ms,
                  dense.wall_ms / twell.wall_ms, dense.cpu_ms, twell.cpu_ms, dense.cpu_ms / twell.cpu_ms,
                  error.rel_frobenius);
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_cpu_ffn: %s\n", error.what());
    return 1;
  }
}
