// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include "test_support.hpp"
#include "tiny_checkpoint.hpp"

namespace twell {
namespace {

using test::run_command;

std::string inspect(const std::filesystem::path& dir, const std::string& extra = "") {
  return std::string(TWELLSCOPE_CLI_PATH) + " inspect '" + dir.string() + "'" + extra;
}

void expect_contains(const std::string& output, const std::string& fragment) {
  EXPECT_NE(output.find(fragment), std::string::npos) << "missing \"" << fragment << "\" in:\n" << output;
}

TEST(CliInspect, DescribesASparseReluCheckpoint) {
  test::TempDir dir;
  test::TinyCheckpointOptions options;
  options.model_type = "llama_sparse_relu";
  options.ffn_spelling = test::FfnSpelling::DownTransposed;
  options.extra = {{"tracker.counts", "I64", {2}}};
  test::write_tiny_llama_checkpoint(dir.path(), options);

  const auto result = run_command(inspect(dir.path()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_contains(result.output, "Architecture  llama_sparse_relu (LlamaForCausalLM)");
  expect_contains(result.output,
                  "hidden_size 64, intermediate_size 256, layers 2, heads 4 (kv 2, head_dim 16)");
  expect_contains(result.output,
                  "Activation    relu: model_type llama_sparse_relu uses ReLU (config says hidden_act silu)");
  expect_contains(result.output, "Dtype         BF16 (config.json says bfloat16)");
  expect_contains(result.output, "Parameters    135488 ");
  expect_contains(result.output, "model.layers.1.mlp.down_proj.weight");
  // The stored [N, D] down projection is recognised as transposed.
  const auto down = result.output.find("model.layers.1.mlp.down_proj.weight");
  const auto line_end = result.output.find('\n', down);
  const std::string down_line = result.output.substr(down, line_end - down);
  expect_contains(down_line, "[256, 64]");
  EXPECT_EQ(down_line.substr(down_line.size() - 3), "yes") << down_line;
  expect_contains(result.output, "Unused tensors (1, ignored)\n  tracker.counts");
}

TEST(CliInspect, ActivationOverrideIsShownWithItsReason) {
  test::TempDir dir;
  test::write_tiny_llama_checkpoint(dir.path());
  const auto result = run_command(inspect(dir.path(), " --activation relu"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_contains(result.output,
                  "Activation    relu: --activation relu given by the user (config says hidden_act silu)");
}

TEST(CliInspect, BadInputGivesAClearMessageAndExitCode) {
  test::TempDir dir;
  auto result = run_command(inspect(dir.path()));
  EXPECT_EQ(result.exit_code, 3) << result.output;
  expect_contains(result.output, "no config.json");

  result = run_command(inspect(dir.path() / "does-not-exist"));
  EXPECT_EQ(result.exit_code, 3) << result.output;
  expect_contains(result.output, "not a directory");

  test::TinyCheckpointOptions gpt2;
  gpt2.model_type = "gpt2";
  test::write_tiny_llama_checkpoint(dir.path() / "gpt2", gpt2);
  result = run_command(inspect(dir.path() / "gpt2"));
  EXPECT_EQ(result.exit_code, 4) << result.output;
  expect_contains(result.output, "supported: llama, llama_sparse_relu, mistral, qwen2");

  result = run_command(inspect(dir.path() / "gpt2", " --activation gelu"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
}

}  // namespace
}  // namespace twell
