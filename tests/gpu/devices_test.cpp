// SPDX-License-Identifier: GPL-3.0-or-later
// `twellscope-cli devices` on a machine with a GPU names each device and the kernel family it gets.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_support.hpp"
#include "test_support.hpp"

namespace twell {
namespace {

std::string expected_family(int major, int minor) {
  if (major == 9 && minor == 0) return "hopper-sm90a";
  if (major >= 8) return "portable-sm80";
  return "unsupported";
}

TEST(DevicesCommand, NamesEachGpuAndItsKernelFamily) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const test::CommandResult result = test::run_command(TWELLSCOPE_CLI_PATH " devices");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp properties{};
    ASSERT_EQ(cudaGetDeviceProperties(&properties, device), cudaSuccess);
    EXPECT_NE(result.output.find(properties.name), std::string::npos) << result.output;
    const std::string capability = std::to_string(properties.major) + "." + std::to_string(properties.minor);
    EXPECT_NE(result.output.find("compute capability " + capability), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("kernel family: " + expected_family(properties.major, properties.minor)),
              std::string::npos)
        << result.output;
  }
  EXPECT_EQ(result.output.find("No CUDA device"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace twell
