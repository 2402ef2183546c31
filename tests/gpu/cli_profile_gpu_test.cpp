// SPDX-License-Identifier: GPL-3.0-or-later
// `twellscope-cli profile` with the CUDA backend and the CUPTI tracer on the tiny and
// sparselm-0.5b presets: the report must say cuda + cupti and hold GPU kernel timings.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "runtime.hpp"
#include "test_support.hpp"
#include "twell/kernel_variant.hpp"
#include "twell/model_generator.hpp"
#include "twell/report_io.hpp"
#include "twell/twell_kernel_request.hpp"

namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& path) {
  std::string text(1, '\'');  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "'" + string
  text += path.string();
  text += '\'';
  return text;
}

// The report is left in `kept` when given (ASSERT_* needs a void function).
void profile_preset_on_cuda(const std::string& preset, const std::string& extra_arguments,
                            twell::Report* kept = nullptr) {
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
  const std::set<std::string> ffn_ops = {"gate_up", "act_mul",        "down",           "gate_pack",
                                         "up_down", "overflow_dense", "overflow_sparse"};
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
  if (kept != nullptr) *kept = report;
}

#define TWELL_REQUIRE_CLI_CUDA()              \
  if (twell::runtime::cuda_devices().empty()) \
  GTEST_SKIP() << "no CUDA device: " << twell::runtime::no_cuda_reason()

}  // namespace

TEST(CliProfileGpu, TinyPresetOnCudaWithCupti) {
  TWELL_REQUIRE_CLI_CUDA();
  profile_preset_on_cuda("tiny", "--batch 2 --seq 64");
}

TEST(CliProfileGpu, SparseLm05bPresetOnCudaWithCupti) {
  TWELL_REQUIRE_CLI_CUDA();
  profile_preset_on_cuda("sparselm-0.5b", "--batch 4 --seq 512 --warmup 2 --reps 5");
}

// The kernels asked for are the kernels that ran: the cuBLAS gate + pack pass and one CTA per token
// where Auto would pick others, and the sparse overflow route.
TEST(CliProfileGpu, TheTwellKernelsAskedForAreTheOnesTimed) {
  TWELL_REQUIRE_CLI_CUDA();
  twell::Report report;
  profile_preset_on_cuda(
      "sparselm-0.5b",
      "--batch 4 --seq 512 --warmup 1 --reps 2 --twell-kernels cublas_pack/per_token_cta/sparse", &report);
  ASSERT_FALSE(report.layers.empty());
  EXPECT_EQ(twell::to_string(report.config.twell_kernels), "cublas_pack/per_token_cta/sparse");
  std::set<std::string> twell_functions;
  for (const auto& record : report.timeline)
    if (record.kind == "kernel" && (record.tag.op == "gate_pack" || record.tag.op == "up_down"))
      twell_functions.insert(std::string(twell::kernel_function_name(record.name)));
  EXPECT_TRUE(twell_functions.count("twell_pack_dense_kernel")) << "the cuBLAS gate's pack pass did not run";
  EXPECT_TRUE(twell_functions.count("twell_up_down_kernel"));
  for (const char* absent : {"twell_gate_pack_sm90_kernel", "twell_gate_pack_kernel",
                             "count_row_entries_kernel", "plan_pieces_kernel", "twell_up_down_warp_kernel"})
    EXPECT_FALSE(twell_functions.count(absent)) << absent << " ran, but was not asked for";
  // Layers whose few overflowing rows the sparse route takes time it instead of a dense pass.
  for (const auto& layer : report.layers) {
    const twell::PathTiming* twell_path = layer.find_path("twell");
    ASSERT_NE(twell_path, nullptr);
    if (twell_path->overflow_rows == 0 || twell_path->overflow_rows > 256) continue;
    bool sparse = false, dense = false;
    for (const auto& record : report.timeline) {
      if (record.tag.layer != layer.index || record.tag.path != "twell") continue;
      sparse = sparse || record.tag.op == "overflow_sparse";
      dense = dense || record.tag.op == "overflow_dense";
    }
    EXPECT_TRUE(sparse && !dense) << "layer " << layer.index << ": " << twell_path->overflow_rows << " rows";
  }
}
