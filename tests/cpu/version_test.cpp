// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <string>

#include "runtime.hpp"
#include "test_support.hpp"
#include "twell/version.hpp"

TEST(CliVersion, PrintsVersionAndCommit) {
  const auto result = twell::test::run_command(std::string(TWELLSCOPE_CLI_PATH) + " --version");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find(twell::version()), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(twell::git_commit()), std::string::npos) << result.output;
}

TEST(CliDevices, AnswersWithoutAGpu) {
  const auto result = twell::test::run_command(std::string(TWELLSCOPE_CLI_PATH) + " devices");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  // Either a device list or the clear no-device line; never a crash.
  const bool listed = result.output.find("compute capability") != std::string::npos;
  const bool none = result.output.find("No CUDA device") != std::string::npos;
  EXPECT_TRUE(listed || none) << result.output;
}

TEST(CliDevices, ListsEachBackendsFfnKernelsWithoutNeedingAGpu) {
  const auto result = twell::test::run_command(std::string(TWELLSCOPE_CLI_PATH) + " devices --kernels");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("cpu:up_down  [twell up_down;"), std::string::npos) << result.output;
  const bool cuda_listed =
      result.output.find("twell_up_down_kernel  [twell up_down; sm_80+]") != std::string::npos;
  EXPECT_EQ(cuda_listed, twell::runtime::built_with_cuda()) << result.output;
  const auto plain = twell::test::run_command(std::string(TWELLSCOPE_CLI_PATH) + " devices");
  EXPECT_EQ(plain.output.find("cpu:up_down"), std::string::npos) << plain.output;
}

TEST(CliUsage, UnknownSubcommandIsAUsageError) {
  const auto result = twell::test::run_command(std::string(TWELLSCOPE_CLI_PATH) + " no-such-command");
  EXPECT_EQ(result.exit_code, 2) << result.output;
}
