// SPDX-License-Identifier: GPL-3.0-or-later
// Baseline comparison: per-layer deltas, the geometric-mean summary, slower/faster layers and the
// caveats that make a comparison less meaningful.
#include <gtest/gtest.h>

#include <cmath>

#include "report_fixture.hpp"
#include "twell/report_compare.hpp"

namespace {

void set_medians(twell::LayerReport& layer, double dense_us, double twell_us) {
  for (auto& path : layer.paths) path.total.median_us = path.path == "dense" ? dense_us : twell_us;
}

}  // namespace

TEST(ReportCompare, LayerDeltasSummaryAndChangedLayers) {
  twell::Report a = twell::test::make_synthetic_report();
  twell::Report b = a;
  for (auto& layer : a.layers) set_medians(layer, 100.0, 50.0);
  set_medians(b.layers[0], 100.0, 50.0);  // unchanged
  set_medians(b.layers[1], 100.0, 60.0);  // TwELL 20 % slower
  set_medians(b.layers[2], 100.0, 40.0);  // TwELL 20 % faster
  b.layers[1].sparsity.density = a.layers[1].sparsity.density + 0.01;
  b.end_to_end[1].tokens_per_ms = a.end_to_end[1].tokens_per_ms * 1.1;
  b.end_to_end.push_back({twell::kDispatchForwardPath, b.end_to_end[1].forward, 321.0});

  const twell::ReportComparison c = twell::compare_reports(a, b, "a.json", "b.json");
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_DOUBLE_EQ(*c.layers[1].twell_ratio(), 1.2);
  EXPECT_DOUBLE_EQ(*c.layers[1].dense_ratio(), 1.0);
  EXPECT_NEAR(*c.layers[1].density_delta(), 0.01, 1e-12);
  EXPECT_DOUBLE_EQ(*c.layers[0].speedup_b, 2.0);
  EXPECT_NEAR(*c.twell_time_ratio, std::cbrt(1.0 * 1.2 * 0.8), 1e-12);
  EXPECT_DOUBLE_EQ(*c.dense_time_ratio, 1.0);
  EXPECT_EQ(c.slower_layers, std::vector<int>{1});
  EXPECT_EQ(c.faster_layers, std::vector<int>{2});
  ASSERT_EQ(c.end_to_end.size(), 3u);
  EXPECT_NEAR(*c.end_to_end[1].ratio(), 1.1, 1e-12);
  EXPECT_EQ(c.end_to_end[2].path, "dispatch");  // in B only: no ratio, but listed
  EXPECT_FALSE(c.end_to_end[2].tokens_per_ms_a);
  EXPECT_DOUBLE_EQ(*c.end_to_end[2].tokens_per_ms_b, 321.0);
  EXPECT_FALSE(c.end_to_end[2].ratio());
  EXPECT_TRUE(c.caveats.empty()) << c.caveats.front();

  const std::string text = twell::comparison_text(c);
  EXPECT_NE(text.find("slower in B by more than 5%: layers 1"), std::string::npos) << text;
  EXPECT_NE(text.find("faster in B by more than 5%: layers 2"), std::string::npos);
  const std::string markdown = twell::comparison_markdown(c);
  EXPECT_EQ(markdown.rfind("# twellscope comparison\n", 0), 0u);
  EXPECT_NE(markdown.find("| 1 | "), std::string::npos);
  EXPECT_NE(markdown.find("1.200x"), std::string::npos);
}

TEST(ReportCompare, SaysWhichReportsForwardsWereLaunchBound) {
  twell::Report a = twell::test::make_synthetic_report();
  twell::Report b = a;
  for (twell::EndToEndPath& forward : b.end_to_end) {
    forward.occupied = forward.forward;
    forward.occupied->median_us *= 0.95;
  }
  a.end_to_end[0].occupied = a.end_to_end[0].forward;
  a.end_to_end[0].occupied->median_us *= 0.4;
  const twell::ReportComparison c = twell::compare_reports(a, b, "small.json", "large.json");
  ASSERT_EQ(c.caveats.size(), 1u) << ::testing::PrintToString(c.caveats);
  EXPECT_EQ(c.caveats[0].rfind("end-to-end forwards of A kept the device busy for only part of their time "
                               "(dense 40%): ",
                               0),
            0u)
      << c.caveats[0];

  // The same shares on the CPU are no device left idle.
  a.device = {"cpu", "Some CPU", "", 2, 0, "", "", "cpu-reference"};
  a.tracer = {"cpu-clock", "cpu", "", false};
  for (const auto& caveat : twell::compare_reports(a, b, "small.json", "large.json").caveats)
    EXPECT_EQ(caveat.find("kept the device busy"), std::string::npos) << caveat;
}

TEST(ReportCompare, NamesWhatDiffersBetweenTheRunsAndMissingLayers) {
  twell::Report a = twell::test::make_synthetic_report();
  twell::Report b = a;
  b.tracer = {"cpu-clock", "cpu", "", false};
  b.device = {"cpu", "Some CPU", "", 2, 0, "", "", "cpu-reference"};
  b.config.compression = 4;
  b.config.twell_kernels.overflow = "sparse";
  b.dispatch_break_even = twell::FfnBreakEven{0.013, false, "set for this run"};
  b.layers.pop_back();
  b.config.layers = {0, 1};
  const twell::ReportComparison c = twell::compare_reports(a, b, "gpu.json", "cpu.json");
  auto has = [&](const std::string& needle) {
    for (const auto& caveat : c.caveats)
      if (caveat.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("timing clocks differ: A has gpu timings, B has cpu timings"));
  EXPECT_TRUE(has("device differs: NVIDIA H200 [cuda] (A) vs Some CPU [cpu] (B)"));
  EXPECT_TRUE(has("compression factor differs: C=8 (A) vs C=4 (B)"));
  EXPECT_TRUE(has("dispatch break-even differs: none (A) vs 1.30% (B)"));
  EXPECT_TRUE(has("TwELL kernels differs: auto (A) vs auto/auto/sparse (B)"));
  EXPECT_TRUE(has("layers only in A: 2"));
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_TRUE(c.layers[2].in_a);
  EXPECT_FALSE(c.layers[2].in_b);
  EXPECT_FALSE(c.layers[2].twell_ratio());
  EXPECT_NE(twell::comparison_text(c).find("\n2 "), std::string::npos);
}

TEST(ReportCompare, NamesTheFfnKernelsThatRanInOneReportOnly) {
  const twell::Report a = twell::test::make_synthetic_report();
  twell::test::SyntheticReportShape shape;
  shape.kernel_names = {"void twell_gate_pack_sm90_kernel<8, 2>(P)", "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"};
  twell::Report b = twell::test::make_synthetic_report(shape);
  b.kernel_variants.push_back(
      {"twell_gate_pack_sm90_kernel", false, "twell", "gate_pack", "sm_90a", "Hopper gate"});

  const auto c = twell::compare_reports(a, b, "a.json", "b.json");
  EXPECT_EQ(c.kernels_only_a, std::vector<std::string>{"twell_gate_pack"});
  EXPECT_EQ(c.kernels_only_b, std::vector<std::string>{"twell_gate_pack_sm90_kernel"});
  EXPECT_EQ(twell::kernel_change_lines(c),
            (std::vector<std::string>{"FFN kernels that ran only in A: twell_gate_pack",
                                      "FFN kernels that ran only in B: twell_gate_pack_sm90_kernel"}));
  EXPECT_NE(twell::comparison_text(c).find("FFN kernels that ran only in B: twell_gate_pack_sm90_kernel"),
            std::string::npos);
  EXPECT_NE(twell::comparison_markdown(c).find("- FFN kernels that ran only in A: twell_gate_pack"),
            std::string::npos);

  // The same kernels, or a report that does not describe its kernels (before 1.3): nothing to say.
  EXPECT_TRUE(twell::kernel_change_lines(twell::compare_reports(a, a, "a", "a")).empty());
  twell::Report undescribed = b;
  undescribed.kernel_variants.clear();
  const auto unknown = twell::compare_reports(a, undescribed, "a", "old");
  EXPECT_TRUE(unknown.kernels_only_a.empty() && unknown.kernels_only_b.empty());
}
