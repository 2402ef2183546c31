// SPDX-License-Identifier: GPL-3.0-or-later
// The CTA-per-token consumer balanced by non-zeros: the device plan equals core's
// twell_plan_balanced_pieces on the same packed rows, tokens left whole are written bit for bit as
// one CTA per token writes them, split tokens match it up to the order of the fp32 sums, flagged rows
// are left alone, and two runs agree bit for bit (the partials are summed in piece order, wherever
// the plan put them). The same consumers over the unbounded layout of the sparse overflow route.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "controlled_density.hpp"
#include "gpu_test_support.hpp"
#include "twell/error.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/twell_gate_pack.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/metrics.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/twell_balance.hpp"
#include "twell/twell_format.hpp"

namespace twell::test {
namespace {

int resident_consumer_wave() {
  int device = 0, multiprocessors = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  return 4 * multiprocessors;
}

TEST(TwellUpDownBalance, SizesFollowTheGpu) {
  TWELL_REQUIRE_CUDA_DEVICE();
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  const int wave = resident_consumer_wave();
  for (int rows : {1, 64, wave, 8 * wave}) {
    const cuda::UpDownBalanceSizes sizes = cuda::up_down_balance_sizes(rows, 2048, device);
    EXPECT_EQ(sizes.extra_pieces, wave) << rows;
    EXPECT_EQ(sizes.plan_words, 4 + 4 * static_cast<std::size_t>(rows) +
                                    static_cast<std::size_t>((rows + 7) / 8) +
                                    static_cast<std::size_t>(wave));
    EXPECT_EQ(sizes.partial_elements, 2 * static_cast<std::size_t>(wave) * 2048);
  }
  // From 8 tokens a resident CTA slot on, no plan: M 131072 runs one CTA per token.
  EXPECT_EQ(cuda::up_down_balance_sizes(8 * wave + 1, 2048, device).extra_pieces, 0);
  EXPECT_EQ(cuda::up_down_balance_sizes(131072, 2048, device).plan_words, 0u);
}

struct Scenario {
  const char* name;
  int rows;  // 0: two resident waves of the GPU
  double heavy_fraction, heavy_density;
  bool highest;
};

class TwellUpDownBalance : public ::testing::TestWithParam<Scenario> {};

TEST_P(TwellUpDownBalance, PlanMatchesCoreAndOutputMatchesOneCtaPerToken) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const Scenario scenario = GetParam();
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  const int hidden = 2048, neurons = 5632;
  const int rows = scenario.rows > 0 ? scenario.rows : 2 * resident_consumer_wave();
  ControlledFfnOptions options;
  options.tokens = static_cast<std::size_t>(rows);
  options.hidden = hidden;
  options.intermediate = neurons;
  options.density = 0.005;
  options.heavy_row_fraction = scenario.heavy_fraction;
  options.heavy_row_density = scenario.heavy_density;
  options.seed = 11;
  const ControlledFfn problem = make_controlled_ffn(options);
  const DeviceFfn device_ffn(problem);
  const auto x = upload_bf16(problem.x);

  // The packed rows and their overflow flags from the portable gate.
  const PortablePacked gate_output = pack_with_portable_gate(x.data(), device_ffn, rows);
  const TwellPacked host_packed = download_twell_packed(gate_output, rows, neurons);
  const std::vector<std::uint32_t> flags = download_row_flags(gate_output, rows);

  const cuda::UpDownBalanceSizes sizes = cuda::up_down_balance_sizes(rows, hidden, device);
  ASSERT_GT(sizes.extra_pieces, 0);
  const TwellBalancedPieces expected =
      twell_plan_balanced_pieces(host_packed, static_cast<std::uint32_t>(sizes.extra_pieces));
  ASSERT_FALSE(expected.split_rows.empty());
  if (scenario.heavy_density > 0.2) {
    ASSERT_FALSE(host_packed.overflow_rows.empty());
    ASSERT_LT(host_packed.overflow_rows.size(), static_cast<std::size_t>(rows));
  }

  cuda::DeviceBuffer<std::uint32_t> plan(sizes.plan_words);
  cuda::DeviceBuffer<float> partials(sizes.partial_elements);
  const auto run = [&](bool balanced) {
    auto out = poisoned_bf16(static_cast<std::size_t>(rows) * hidden);
    cuda::UpDownArgs args = gated_consumer_args(x.data(), device_ffn, gate_output, out.data(), rows);
    args.highest_precision = scenario.highest;
    args.kernel = balanced ? cuda::UpDownKernel::BalancedCta : cuda::UpDownKernel::PerTokenCta;
    if (balanced) {
      args.balance_plan = plan.data();
      args.balance_plan_words = plan.size();
      args.balance_partials = partials.data();
      args.balance_partial_elements = partials.size();
    }
    cuda::launch_twell_up_down(args, nullptr);
    TWELL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> bits(out.size());
    TWELL_CUDA_CHECK(cudaMemcpy(bits.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost));
    return bits;
  };
  const std::vector<std::uint16_t> whole = run(false), balanced = run(true);
  const TwellBalancedPieces built =
      cuda::download_up_down_balance_plan(plan.data(), rows, sizes.extra_pieces, nullptr);
  EXPECT_EQ(built.budget, expected.budget);
  EXPECT_EQ(built.row_entries, expected.row_entries);
  EXPECT_EQ(built.row_pieces, expected.row_pieces);
  EXPECT_EQ(built.extra_items, expected.extra_items);
  EXPECT_EQ(built.split_rows, expected.split_rows);
  // Slots are claimed in scheduling order: each split row's [slot, slot + pieces) must be its own.
  std::vector<int> slot_owner(2 * static_cast<std::size_t>(sizes.extra_pieces), -1);
  for (std::uint32_t row : built.split_rows) {
    for (std::uint32_t piece = 0; piece < built.row_pieces[row]; ++piece) {
      const std::size_t slot = built.row_slot[row] + piece;
      ASSERT_LT(slot, slot_owner.size()) << "row " << row;
      ASSERT_EQ(slot_owner[slot], -1) << "slot " << slot << " of row " << row << " is taken";
      slot_owner[slot] = static_cast<int>(row);
    }
  }
  EXPECT_EQ(run(true), balanced) << "two balanced runs differ";

  constexpr std::uint16_t kPoison = 0xffffu;  // poisoned_bf16's bytes
  Matrix a(1, hidden), b(1, hidden);
  for (int r = 0; r < rows; ++r) {
    const std::size_t begin = static_cast<std::size_t>(r) * hidden;
    if (flags[r] != 0) {  // neither consumer writes a flagged row
      for (int d = 0; d < hidden; ++d) ASSERT_EQ(balanced[begin + d], kPoison) << "row " << r;
      continue;
    }
    if (expected.row_pieces[r] == 1) {
      ASSERT_TRUE(std::equal(whole.begin() + begin, whole.begin() + begin + hidden, balanced.begin() + begin))
          << "row " << r << " is whole but differs";
      continue;
    }
    for (int d = 0; d < hidden; ++d) {
      a.at(0, d) = bf16_bits_to_float(whole[begin + d]);
      b.at(0, d) = bf16_bits_to_float(balanced[begin + d]);
    }
    // Only the order of the fp32 sums differs: within the output's bf16 rounding.
    EXPECT_LE(compare_outputs(a, b).rel_frobenius, 4e-3) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, TwellUpDownBalance,
                         ::testing::Values(Scenario{"decode_overflowing", 37, 0.1, 0.35, false},
                                           Scenario{"decode_overflowing_highest", 37, 0.1, 0.35, true},
                                           Scenario{"two_waves_heavy", 0, 0.03, 0.06, false},
                                           Scenario{"two_waves_heavy_highest", 0, 0.03, 0.06, true}),
                         [](const ::testing::TestParamInfo<Scenario>& info) {
                           return std::string(info.param.name);
                         });

// The sparse overflow route's consumer: tokens that overflow C = 8 (35 % density) packed in the
// unbounded layout on the host from the reference's own pre-activations, so the GPU sees exactly the
// reference's entries. Both CTA consumers match reference::twell_ffn at kTwellUnbounded (bf16
// emulated) up to the order of the fp32 sums, the device plan equals core's, and whole tokens are
// written bit for bit as one CTA per token writes them.
TEST(TwellUpDownUnbounded, ConsumesTokensThatOverflowEveryCompression) {
  TWELL_REQUIRE_CUDA_DEVICE();
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  const int rows = 29, hidden = 2048, neurons = 5632;
  for (const bool gated : {true, false}) {
    SCOPED_TRACE(gated ? "gated" : "non-gated");
    ControlledFfnOptions options;
    options.tokens = rows;
    options.hidden = hidden;
    options.intermediate = neurons;
    options.density = 0.05;
    options.gated = gated;
    options.heavy_row_fraction = 0.5;
    options.heavy_row_density = 0.6;  // past C = 2's capacity of 127 in many tiles
    options.seed = 12;
    const ControlledFfn problem = make_controlled_ffn(options);
    const DeviceFfn device_ffn(problem);
    const auto x = upload_bf16(problem.x);
    reference::FfnWeights weights;
    weights.gate = gated ? &problem.gate : nullptr;
    weights.up = &problem.up;
    weights.down = &problem.down;
    weights.down_t = &problem.down_t;
    Matrix preactivation;
    const reference::TwellFfnResult expected = reference::twell_ffn(
        problem.x, weights, kTwellUnbounded, reference::Precision::Bf16Emulated, 0, &preactivation);
    const reference::TwellFfnResult expected_highest =
        reference::twell_ffn(problem.x, weights, kTwellUnbounded, reference::Precision::Highest);
    ASSERT_TRUE(expected.packed.overflow_rows.empty());
    ASSERT_FALSE(twell_pack(preactivation.data.data(), rows, neurons, 2).overflow_rows.empty());

    cuda::DeviceBuffer<std::uint32_t> packed(expected.packed.words.size());
    TWELL_CUDA_CHECK(
        cudaMemcpy(packed.data(), expected.packed.words.data(), packed.bytes(), cudaMemcpyHostToDevice));
    const cuda::UpDownBalanceSizes sizes = cuda::up_down_balance_sizes(rows, hidden, device);
    ASSERT_GT(sizes.extra_pieces, 0);
    cuda::DeviceBuffer<std::uint32_t> plan(sizes.plan_words);
    cuda::DeviceBuffer<float> partials(sizes.partial_elements);
    const auto run = [&](cuda::UpDownKernel kernel, bool highest) {
      auto out = poisoned_bf16(static_cast<std::size_t>(rows) * hidden);
      cuda::UpDownArgs args;
      args.x = x.data();
      args.packed = packed.data();
      args.up = gated ? device_ffn.up.data() : nullptr;
      args.down_t = device_ffn.down_t.data();
      args.out = out.data();
      args.rows = rows;
      args.hidden = hidden;
      args.padded_neurons = static_cast<int>(expected.packed.padded_neurons);
      args.compression = kTwellUnbounded;
      args.highest_precision = highest;
      args.kernel = kernel;
      args.balance_plan = plan.data();
      args.balance_plan_words = plan.size();
      args.balance_partials = partials.data();
      args.balance_partial_elements = partials.size();
      cuda::launch_twell_up_down(args, nullptr);
      TWELL_CUDA_CHECK(cudaDeviceSynchronize());
      return download_bf16(out.data(), rows, hidden);
    };
    for (const bool highest : {false, true}) {
      SCOPED_TRACE(highest ? "highest precision" : "default precision");
      const Matrix whole = run(cuda::UpDownKernel::PerTokenCta, highest);
      const Matrix balanced = run(cuda::UpDownKernel::BalancedCta, highest);
      const TwellBalancedPieces built =
          cuda::download_up_down_balance_plan(plan.data(), rows, sizes.extra_pieces, nullptr);
      const TwellBalancedPieces core_plan =
          twell_plan_balanced_pieces(expected.packed, static_cast<std::uint32_t>(sizes.extra_pieces));
      EXPECT_EQ(built.row_entries, core_plan.row_entries);
      EXPECT_EQ(built.row_pieces, core_plan.row_pieces);
      EXPECT_EQ(built.extra_items, core_plan.extra_items);
      ASSERT_FALSE(core_plan.split_rows.empty());
      // Same rounding points as the reference's in each precision: only the order of the fp32 sums
      // differs (TwellFfn's bounds at C = 8).
      const Matrix& reference_out = highest ? expected_highest.out : expected.out;
      for (const Matrix* gpu : {&whole, &balanced}) {
        const ErrorMetrics error = compare_outputs(reference_out, *gpu);
        EXPECT_LE(error.rel_frobenius, highest ? 2e-3 : 1e-2);
        EXPECT_GE(error.cosine, 0.9999);
      }
      for (int r = 0; r < rows; ++r) {
        if (core_plan.row_pieces[r] != 1) continue;
        for (int d = 0; d < hidden; ++d)
          ASSERT_EQ(whole.at(r, d), balanced.at(r, d)) << "whole row " << r << " differs at " << d;
      }
    }
    // The one-warp-per-token consumer does not read the unbounded layout: refused, not misread.
    EXPECT_THROW(run(cuda::UpDownKernel::PerTokenWarp, false), Error);
  }
}

}  // namespace
}  // namespace twell::test
