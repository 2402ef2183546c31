// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <string>

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

TEST(CliUsage, UnknownSubcommandIsAUsageError) {
  const auto result = twell::test::run_command(std::string(TWELLSCOPE_CLI_PATH) + " no-such-command");
  EXPECT_EQ(result.exit_code, 2) << result.output;
}
