// SPDX-License-Identifier: GPL-3.0-or-later
// Size and speed of the JSON report for a SparseLM-2B-shaped run (38 layers x 5632 neurons,
// token x neuron maps of 256 x 512 cells, 8 x 2048 tokens). Budget (issue 9): under 20 MB on
// disk and under 1 s to load. Exits 1 when over budget.
//   bench_report_io [layers neurons tokens]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "../support/report_fixture.hpp"
#include "twell/report_io.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

/// Median wall and CPU time of `runs` calls. CPU time is printed too because a shared CI machine
/// inflates wall time with other processes' work.
struct Timing {
  double wall_s = 0, cpu_s = 0;
};
template <typename F>
Timing median_timing(int runs, F&& f) {
  std::vector<double> wall, cpu;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_seconds();
    f();
    wall.push_back(seconds_since(start));
    cpu.push_back(cpu_seconds() - cpu_start);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  twell::test::SyntheticReportShape shape;
  shape.layers = 38;
  shape.neurons = 5632;
  shape.tokens = 8 * 2048;
  CLI::App app{"Writing and loading a SparseLM-2B-shaped report"};
  app.add_option("layers", shape.layers)->check(CLI::PositiveNumber);
  app.add_option("neurons", shape.neurons)->check(CLI::PositiveNumber);
  app.add_option("tokens", shape.tokens)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  shape.hidden = 2048;
  shape.map = {256, 512};
  // Six kernels per path and layer, with the long template names cuBLASLt and CUTLASS produce.
  shape.kernel_names = {
      "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNT",
      "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, "
      "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, "
      "cute::tuple<cute::C<2>, cute::C<1>, cute::C<1>>>>>>(Params)",
      "twell::kernels::gate_pack_sm90<128, 8, true>(twell::kernels::GatePackParams)",
      "twell::kernels::fused_up_down<8>(twell::kernels::UpDownParams)",
      "twell::kernels::overflow_rows_dense(float const*, int)",
      "void at::native::elementwise_kernel<128, 4>(int, Functor)"};

  const auto build_start = std::chrono::steady_clock::now();
  const twell::Report report = twell::test::make_synthetic_report(shape);
  const double build_s = seconds_since(build_start);

  const auto dir = std::filesystem::temp_directory_path() / ("bench_report_io_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "report.json";

  std::string text;
  const Timing serialize = median_timing(3, [&] { text = twell::report_to_json_text(report); });
  const Timing save = median_timing(3, [&] { twell::save_report(report, path); });
  twell::Report loaded;
  const Timing load = median_timing(5, [&] { loaded = twell::load_report(path); });
  const auto bytes = std::filesystem::file_size(path);
  std::filesystem::remove_all(dir);

  const bool same = loaded == report;
  std::printf(
      "report: %d layers x %u neurons, %u tokens, map %ux%u, %zu timeline records, %zu kernel stats\n",
      shape.layers, shape.neurons, shape.tokens, shape.map.max_rows, shape.map.max_cols,
      report.timeline.size(), report.kernels.size());
  std::printf("built in %.3f s\n", build_s);
  std::printf("size:       %.2f MB (budget 20 MB)\n", static_cast<double>(bytes) / 1e6);
  std::printf("serialize:  %.3f s wall, %.3f s CPU\n", serialize.wall_s, serialize.cpu_s);
  std::printf("save:       %.3f s wall, %.3f s CPU (serialize + atomic write + fsync)\n", save.wall_s,
              save.cpu_s);
  std::printf("load:       %.3f s wall, %.3f s CPU (read + parse + validate; budget 1 s)\n", load.wall_s,
              load.cpu_s);
  std::printf("round trip: %s\n", same ? "identical" : "DIFFERENT");
  const bool within_budget = bytes < 20'000'000 && load.wall_s < 1.0 && same;
  std::printf("%s\n", within_budget ? "within budget" : "OVER BUDGET");
  return within_budget ? 0 : 1;
}
