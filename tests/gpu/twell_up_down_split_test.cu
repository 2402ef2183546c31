// SPDX-License-Identifier: GPL-3.0-or-later
// The CTA-per-token consumer with a token's tiles split over several CTAs (decode-sized M): the same
// output as one CTA per token up to the order of the fp32 sums, flagged rows left alone, and the
// split count following the GPU's size.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "controlled_density.hpp"
#include "gpu_test_support.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/twell_gate_pack.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/metrics.hpp"
#include "twell/numeric.hpp"

namespace twell::test {
namespace {

TEST(TwellUpDownSplit, SplitCountFillsOneWaveOfResidentCtas) {
  TWELL_REQUIRE_CUDA_DEVICE();
  int device = 0, multiprocessors = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  const int wave = 4 * multiprocessors;
  EXPECT_EQ(cuda::up_down_cta_splits(wave, 5632, device), 1);
  EXPECT_EQ(cuda::up_down_cta_splits(wave / 2, 5632, device), 1);  // 2 CTAs a token: not worth a second pass
  EXPECT_EQ(cuda::up_down_cta_splits(wave / 4, 5632, device), 4);
  EXPECT_EQ(cuda::up_down_cta_splits(wave / 5, 5632, device), 5);
  EXPECT_EQ(cuda::up_down_cta_splits(1, 5632, device), 8);
  EXPECT_EQ(cuda::up_down_cta_splits(1, 1024, device), 4);  // one CTA per 256-neuron tile at most
  EXPECT_EQ(cuda::up_down_cta_splits(1, 768, device), 1);
  EXPECT_EQ(cuda::up_down_cta_splits(1 << 20, 5632, device), 1);
}

class TwellUpDownSplit : public ::testing::TestWithParam<bool> {};  // highest precision

TEST_P(TwellUpDownSplit, MatchesOneCtaPerTokenAndSkipsFlaggedRows) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const bool highest = GetParam();
  int device = 0, multiprocessors = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  ControlledFfnOptions options;
  options.tokens = static_cast<std::size_t>(std::min(37, multiprocessors));  // at least 4 CTAs a token
  options.hidden = 2048;
  options.intermediate = 5632;
  options.density = 0.02;
  options.heavy_row_fraction = 0.1;  // a few rows overflow: flagged, their output left to the dense path
  options.heavy_row_density = 0.35;
  options.seed = 11;
  const ControlledFfn problem = make_controlled_ffn(options);
  const DeviceFfn device_ffn(problem);
  const auto x = upload_bf16(problem.x);
  const int rows = static_cast<int>(options.tokens), hidden = 2048, padded = cuda::twell_padded_neurons(5632);

  // The packed rows and their overflow flags from the portable gate.
  cuda::DeviceBuffer<std::uint32_t> packed(static_cast<std::size_t>(rows) * padded / 8), state(2 + rows),
      list(rows);
  TWELL_CUDA_CHECK(cudaMemset(state.data(), 0, state.bytes()));
  cuda::GatePackArgs pack;
  pack.x = x.data();
  pack.weight = device_ffn.gate.data();
  pack.rows = rows;
  pack.hidden = hidden;
  pack.neurons = 5632;
  pack.packed = packed.data();
  pack.overflow = {state.data(), state.data() + 2, list.data()};
  cuda::launch_twell_gate_pack(pack, nullptr);
  std::vector<std::uint32_t> flags(rows);
  TWELL_CUDA_CHECK(cudaMemcpy(flags.data(), state.data() + 2, rows * 4, cudaMemcpyDeviceToHost));
  int flagged = 0;
  for (std::uint32_t f : flags) flagged += f != 0;
  ASSERT_GT(flagged, 0);
  ASSERT_LT(flagged, rows);

  const int splits = cuda::up_down_cta_splits(rows, padded, device);
  ASSERT_GT(splits, 1);
  cuda::DeviceBuffer<float> partials(static_cast<std::size_t>(splits) * rows * hidden);
  const auto run = [&](bool split) {
    auto out = poisoned_bf16(static_cast<std::size_t>(rows) * hidden);
    cuda::UpDownArgs args;
    args.x = x.data();
    args.packed = packed.data();
    args.up = device_ffn.up.data();
    args.down_t = device_ffn.down_t.data();
    args.row_flags = state.data() + 2;
    args.out = out.data();
    args.rows = rows;
    args.hidden = hidden;
    args.padded_neurons = padded;
    args.highest_precision = highest;
    args.kernel = cuda::UpDownKernel::PerTokenCta;
    if (split) {
      args.split_partials = partials.data();
      args.split_partials_capacity = partials.size();
    }
    cuda::launch_twell_up_down(args, nullptr);
    TWELL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> bits(out.size());
    TWELL_CUDA_CHECK(cudaMemcpy(bits.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost));
    return bits;
  };
  const std::vector<std::uint16_t> whole = run(false), split = run(true);
  constexpr std::uint16_t kPoison = 0xffffu;  // poisoned_bf16's bytes

  Matrix a(1, hidden), b(1, hidden);
  for (int r = 0; r < rows; ++r) {
    if (flags[r] != 0) {  // neither consumer writes a flagged row
      for (int d = 0; d < hidden; ++d) ASSERT_EQ(split[r * hidden + d], kPoison) << "row " << r;
      continue;
    }
    for (int d = 0; d < hidden; ++d) {
      a.at(0, d) = bf16_bits_to_float(whole[r * hidden + d]);
      b.at(0, d) = bf16_bits_to_float(split[r * hidden + d]);
    }
    // Only the order of the fp32 sums differs: within the output's bf16 rounding.
    EXPECT_LE(compare_outputs(a, b).rel_frobenius, 4e-3) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, TwellUpDownSplit, ::testing::Values(false, true));

}  // namespace
}  // namespace twell::test
