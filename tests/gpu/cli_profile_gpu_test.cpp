// SPDX-License-Identifier: GPL-3.0-or-later
// `twellscope-cli profile` with the CUDA backend and the CUPTI tracer on the tiny and
// sparselm-0.5b presets: the report must say cuda + cupti and hold GPU kernel timings.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "runtime.hpp"
#include "test_support.hpp"
#include "twell/model_generator.hpp"
#include "twell/report_io.hpp"

namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& path) {
  std::string text(1, '\'');  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "'" + string
  text += path.string();
  text += '\'';
  return text;
}

void profile_preset_on_cuda(const std::string& preset, const std::string& extra_arguments) {
  if (twell::runtime::cuda_devices().empty())
    GTEST_SKIP() << "no CUDA device: " << twell::runtime::no_cuda_reason();
  twell::test::TempDir dir("twellscope-gpu-profile");
  twell::GeneratorOptions options;
  options.preset = preset;
  twell::generate_model(options, dir.path() / preset);
  const fs::path out = dir.path() / "report.json";
  const auto result = twell::test::run_command(std::string("'") + TWELLSCOPE_CLI_PATH + "' profile " +
                                               quoted(dir.path() / preset) + " --backend cuda " +
                                               extra_arguments + " --out " + quoted(out));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const twell::Report report = twell::load_report(out);
  EXPECT_EQ(report.device.backend, "cuda");
  EXPECT_EQ(report.tracer.name, "cupti") << "fallback: " << report.tracer.fallback_reason;
  EXPECT_EQ(report.tracer.clock, "gpu");
  EXPECT_TRUE(report.tracer.per_kernel);
  EXPECT_EQ(report.layers.size(), std::size_t(report.model.config.num_hidden_layers));
  for (const auto& layer : report.layers) {
    for (const char* path : {"dense", "twell"}) {
      const twell::PathTiming* timing = layer.find_path(path);
      ASSERT_NE(timing, nullptr) << "layer " << layer.index << " " << path;
      EXPECT_GT(timing->total.median_us, 0.0) << "layer " << layer.index << " " << path;
    }
    ASSERT_TRUE(layer.twell_vs_dense);
    EXPECT_LT(layer.twell_vs_dense->rel_frobenius, 2e-2) << "layer " << layer.index;
  }
  ASSERT_FALSE(report.timeline.empty());
  std::size_t kernels = 0;
  for (const auto& record : report.timeline) kernels += record.kind == "kernel";
  EXPECT_GT(kernels, 0u);
  EXPECT_FALSE(report.kernels.empty());
  // Every kernel of an FFN op is one the report describes (a kernel added to the FFN without a
  // line in kernels/src/kernel_registry.cpp fails here).
  const std::set<std::string> ffn_ops = {"gate_up",   "act_mul", "down",
                                         "gate_pack", "up_down", "overflow_dense"};
  for (const auto& record : report.timeline)
    if (record.kind == "kernel" && ffn_ops.count(record.tag.op))
      EXPECT_NE(twell::find_kernel_variant(report.kernel_variants, record), nullptr)
          << record.name << " (" << record.tag.op << ")";
  // Dense, TwELL, and the forward that follows the per-layer dispatch (the CUDA backend always
  // states a break-even), each with its own kernels in the timeline.
  ASSERT_EQ(report.end_to_end.size(), 3u);
  EXPECT_EQ(report.end_to_end[2].path, twell::kDispatchForwardPath);
  for (const auto& forward : report.end_to_end) EXPECT_GT(forward.tokens_per_ms, 0.0) << forward.path;
  ASSERT_TRUE(report.dispatch_end_to_end_speedup());
  EXPECT_NE(result.output.find("per-layer dispatch/dense "), std::string::npos) << result.output;
  std::size_t dispatch_kernels = 0;
  for (const auto& record : report.timeline)
    dispatch_kernels += record.kind == "kernel" && record.tag.path == twell::kDispatchForwardPath;
  EXPECT_GT(dispatch_kernels, 0u);
  ASSERT_TRUE(report.dispatch_break_even);
  // 0 where the table says dense at every density (up to M 2048 at the SparseLM shapes).
  EXPECT_GE(report.dispatch_break_even->density, 0.0);
  EXPECT_LT(report.dispatch_break_even->density, 1.0);
  EXPECT_FALSE(report.dispatch_break_even->basis.empty());
  EXPECT_NE(result.output.find("Dispatch: TwELL in "), std::string::npos) << result.output;
}

}  // namespace

TEST(CliProfileGpu, TinyPresetOnCudaWithCupti) {
  profile_preset_on_cuda("tiny", "--batch 2 --seq 64");
}

TEST(CliProfileGpu, SparseLm05bPresetOnCudaWithCupti) {
  profile_preset_on_cuda("sparselm-0.5b", "--batch 4 --seq 512 --warmup 2 --reps 5");
}
