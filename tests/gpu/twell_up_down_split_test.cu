// SPDX-License-Identifier: GPL-3.0-or-later
// The CTA consumer's split form (UpDownArgs::h_packed): a kernel that writes every non-zero's h as a
// list per CTA (a whole token, or a piece of one in the balanced launch) into a buffer of the packed
// rows' size, then the non-gated kernel over the lists. It must write the fused kernel's output bit for bit,
// for every compression, with tokens of several chunks and passes and with flagged rows, in the balanced
// launch's pieces of tokens as well, and it must stay out of the way in highest precision. FfnRunner runs it
// where up_down_split_preferred says so, within its workspace plan, and Always and Never give the same output
// (bit for bit behind the sm_90a gate, whose entry order is fixed; within the rounding of reordered fp32 sums
// behind the portable one, whose order is not).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "controlled_density.hpp"
#include "gpu_test_support.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/twell_gate_pack.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/metrics.hpp"
#include "twell/numeric.hpp"
#include "twell/twell_balance.hpp"
#include "twell/twell_format.hpp"

namespace twell::test {
namespace {

constexpr std::uint32_t kPoisonWord = 0xa5a5a5a5u;

struct SplitShape {
  std::uint32_t compression;
  int hidden;
};

class TwellUpDownSplit : public ::testing::TestWithParam<SplitShape> {};

std::vector<std::uint16_t> download_bits(const cuda::DeviceBuffer<__nv_bfloat16>& buffer) {
  std::vector<std::uint16_t> bits(buffer.size());
  TWELL_CUDA_CHECK(cudaMemcpy(bits.data(), buffer.data(), buffer.bytes(), cudaMemcpyDeviceToHost));
  return bits;
}

// Every unflagged row's list in `h_lists`: from word 1, each of its entries in the packed rows' order,
// naming the packed entry's neuron, whichever of the row's `row_pieces[r]` pieces (1 where null) wrote
// it; a whole row's count at word 0.
void expect_h_lists(const TwellPacked& packed, const std::vector<std::uint32_t>& h_lists,
                    const std::vector<std::uint32_t>& flags, const std::vector<std::uint32_t>* row_pieces) {
  const std::uint32_t slots = packed.slots_per_tile(), capacity = packed.capacity();
  const std::size_t row_words = packed.words_per_row();
  for (std::uint32_t r = 0; r < packed.rows; ++r) {
    if (flags[r] != 0) continue;
    std::vector<std::uint32_t> neurons;
    for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile) {
      const std::size_t base = r * row_words + tile * slots;
      for (std::uint32_t slot = 1; slot <= std::min(packed.words[base], capacity); ++slot)
        neurons.push_back(packed.words[base + slot] & 0xffffu);
    }
    const std::uint32_t* list = h_lists.data() + r * row_words;
    const bool whole = row_pieces == nullptr || (*row_pieces)[r] == 1;
    if (whole) {
      ASSERT_EQ(list[0], neurons.size()) << "row " << r;
    }
    for (std::size_t i = 0; i < neurons.size(); ++i)
      ASSERT_EQ(list[1 + i] & 0xffffu, neurons[i]) << "row " << r;
  }
}

// The largest relative Frobenius error of any 256-wide row of `b` against the same row of `a`.
double max_row_error(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  constexpr std::size_t kRow = 256;
  Matrix row_a(1, kRow), row_b(1, kRow);
  double worst = 0;
  for (std::size_t begin = 0; begin + kRow <= a.size(); begin += kRow) {
    for (std::size_t d = 0; d < kRow; ++d) {
      row_a.at(0, d) = bf16_bits_to_float(a[begin + d]);
      row_b.at(0, d) = bf16_bits_to_float(b[begin + d]);
    }
    worst = std::max(worst, compare_outputs(row_a, row_b).rel_frobenius);
  }
  return worst;
}

TEST_P(TwellUpDownSplit, WritesTheFusedOutputBitForBit) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const SplitShape shape = GetParam();
  // 10 tiles: at C = 2 two passes of staged words; about 100 non-zeros a token: two chunks.
  const int rows = 160, neurons = 2560;
  ControlledFfnOptions options;
  options.tokens = rows;
  options.hidden = static_cast<std::size_t>(shape.hidden);
  options.intermediate = neurons;
  options.density = 0.04;
  options.heavy_row_fraction = 0.05;  // these overflow C = 8 and C = 4: flagged, skipped by both forms
  options.heavy_row_density = 0.4;
  options.seed = 23;
  const ControlledFfn problem = make_controlled_ffn(options);
  const DeviceFfn device_ffn(problem);
  const auto x = upload_bf16(problem.x);

  const PortablePacked packed = pack_with_portable_gate(x.data(), device_ffn, rows, shape.compression);
  const std::size_t words = packed.packed.size();
  cuda::DeviceBuffer<std::uint32_t> h_packed(words);
  const std::vector<std::uint32_t> flags = download_row_flags(packed, rows);
  const TwellPacked host_packed = download_twell_packed(packed, rows, neurons, shape.compression);
  const std::uint32_t slots = host_packed.slots_per_tile();
  int flagged = 0, two_chunks = 0;
  for (int r = 0; r < rows; ++r) {
    flagged += flags[r] != 0 ? 1 : 0;
    std::uint32_t entries = 0;
    for (std::uint32_t tile = 0; tile < host_packed.tiles(); ++tile)
      entries +=
          std::min(host_packed.words[r * host_packed.words_per_row() + tile * slots], host_packed.capacity());
    two_chunks += flags[r] == 0 && entries > 64 ? 1 : 0;
  }
  if (shape.compression != 2) ASSERT_GT(flagged, 0);
  ASSERT_GT(two_chunks, 0);

  const auto run = [&](bool split, bool highest, cuda::UpDownKernel kernel) {
    auto out = poisoned_bf16(static_cast<std::size_t>(rows) * shape.hidden);
    std::vector<std::uint32_t> poison(words, kPoisonWord);
    TWELL_CUDA_CHECK(cudaMemcpy(h_packed.data(), poison.data(), h_packed.bytes(), cudaMemcpyHostToDevice));
    cuda::UpDownArgs args =
        gated_consumer_args(x.data(), device_ffn, packed, out.data(), rows, shape.compression);
    args.highest_precision = highest;
    args.kernel = kernel;
    if (split) args.h_packed = h_packed.data();
    cuda::launch_twell_up_down(args, nullptr);
    TWELL_CUDA_CHECK(cudaDeviceSynchronize());
    return download_bits(out);
  };
  const auto h_packed_untouched = [&] {
    std::vector<std::uint32_t> host(words);
    TWELL_CUDA_CHECK(cudaMemcpy(host.data(), h_packed.data(), h_packed.bytes(), cudaMemcpyDeviceToHost));
    for (std::uint32_t word : host)
      if (word != kPoisonWord) return false;
    return true;
  };

  const std::vector<std::uint16_t> fused = run(false, false, cuda::UpDownKernel::PerTokenCta);
  const std::vector<std::uint16_t> split = run(true, false, cuda::UpDownKernel::PerTokenCta);
  EXPECT_EQ(split, fused);
  // One CTA a token: one list a token.
  std::vector<std::uint32_t> h_host(words);
  TWELL_CUDA_CHECK(cudaMemcpy(h_host.data(), h_packed.data(), h_packed.bytes(), cudaMemcpyDeviceToHost));
  expect_h_lists(host_packed, h_host, flags, nullptr);
  // A flagged row is written by neither form.
  for (int r = 0; r < rows; ++r)
    if (flags[r] != 0) EXPECT_EQ(split[static_cast<std::size_t>(r) * shape.hidden], 0xffffu) << "row " << r;

  // Highest precision keeps h in fp32: the fused kernel runs and the copy is not written.
  EXPECT_EQ(run(true, true, cuda::UpDownKernel::PerTokenCta),
            run(false, true, cuda::UpDownKernel::PerTokenCta));
  EXPECT_TRUE(h_packed_untouched());
}

INSTANTIATE_TEST_SUITE_P(Shapes, TwellUpDownSplit,
                         ::testing::Values(SplitShape{8, 2048}, SplitShape{4, 2048}, SplitShape{2, 2048},
                                           SplitShape{8, 4096}),
                         [](const ::testing::TestParamInfo<SplitShape>& info) {
                           return "C" + std::to_string(info.param.compression) + "_D" +
                                  std::to_string(info.param.hidden);
                         });

// Balanced, the split form's kernels run the same pieces as the fused kernel: the same output bit for
// bit, and one list a piece, from the word of the piece's first tile.
TEST(TwellUpDownSplit, BalancedLaunchWritesTheFusedOutputBitForBit) {
  TWELL_REQUIRE_CUDA_DEVICE();
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  const int rows = 64, hidden = 256, neurons = 2560;
  const cuda::UpDownBalanceSizes sizes = cuda::up_down_balance_sizes(rows, hidden, device);
  ASSERT_GT(sizes.extra_pieces, 0);
  ControlledFfnOptions options;
  options.tokens = rows;
  options.hidden = hidden;
  options.intermediate = neurons;
  options.density = 0.01;
  options.heavy_row_fraction = 0.1;  // heavy tokens, cut into several pieces
  options.heavy_row_density = 0.08;
  options.seed = 29;
  const ControlledFfn problem = make_controlled_ffn(options);
  const DeviceFfn device_ffn(problem);
  const auto x = upload_bf16(problem.x);
  const PortablePacked packed = pack_with_portable_gate(x.data(), device_ffn, rows);
  const std::size_t words = packed.packed.size();
  cuda::DeviceBuffer<std::uint32_t> h_packed(words), plan(sizes.plan_words);
  cuda::DeviceBuffer<float> partials(sizes.partial_elements);
  const auto run = [&](bool split) {
    auto out = poisoned_bf16(static_cast<std::size_t>(rows) * hidden);
    TWELL_CUDA_CHECK(cudaMemset(h_packed.data(), 0xa5, h_packed.bytes()));
    cuda::UpDownArgs args = gated_consumer_args(x.data(), device_ffn, packed, out.data(), rows);
    args.kernel = cuda::UpDownKernel::BalancedCta;
    args.balance_plan = plan.data();
    args.balance_plan_words = plan.size();
    args.balance_partials = partials.data();
    args.balance_partial_elements = partials.size();
    if (split) args.h_packed = h_packed.data();
    cuda::launch_twell_up_down(args, nullptr);
    TWELL_CUDA_CHECK(cudaDeviceSynchronize());
    return download_bits(out);
  };
  const std::vector<std::uint16_t> fused = run(false);
  const std::vector<std::uint16_t> split = run(true);
  EXPECT_EQ(split, fused);
  const TwellBalancedPieces pieces =
      cuda::download_up_down_balance_plan(plan.data(), rows, sizes.extra_pieces, nullptr);
  ASSERT_FALSE(pieces.split_rows.empty()) << "no token was cut into pieces";

  std::vector<std::uint32_t> h_host(words);
  TWELL_CUDA_CHECK(cudaMemcpy(h_host.data(), h_packed.data(), h_packed.bytes(), cudaMemcpyDeviceToHost));
  expect_h_lists(download_twell_packed(packed, rows, neurons), h_host, download_row_flags(packed, rows),
                 &pieces.row_pieces);
}

// FfnRunner: Auto takes the split form where this GPU model measured it faster, within the workspace
// plan; Always and Never write the same output bit for bit, with one CTA per token and balanced (below
// 8 tokens a resident CTA slot); highest precision never splits.
TEST(TwellUpDownSplit, RunnerSplitsWhereMeasuredFasterWithinItsPlan) {
  TWELL_REQUIRE_CUDA_DEVICE();
  int device = 0, multiprocessors = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  const int tokens = 8 * 4 * multiprocessors + 1;  // the first M with one CTA per token
  ASSERT_EQ(cuda::up_down_balance_sizes(tokens, 256, device).extra_pieces, 0);
  ASSERT_GT(cuda::up_down_balance_sizes(tokens - 1, 256, device).extra_pieces, 0);
  ControlledFfnOptions options;
  options.tokens = static_cast<std::size_t>(tokens);
  options.hidden = 256;
  options.intermediate = 512;
  options.density = 0.05;
  const ControlledFfn problem = make_controlled_ffn(options);
  const DeviceFfn device_ffn(problem);
  const auto x = upload_bf16(problem.x);
  auto out = poisoned_bf16(static_cast<std::size_t>(tokens) * 256);
  using Split = cuda::FfnRunner::SplitConsumer;
  // The sm_90a gate places a tile's entries in the same order every call; the portable gate does not.
  const bool deterministic_gate = cuda::gate_kernel_sm90_available(device);
  const cuda::GateKernel gate = deterministic_gate ? cuda::GateKernel::Sm90 : cuda::GateKernel::Portable;
  cuda::FfnRunner runner(nullptr);
  runner.set_twell_kernels({gate, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Auto});
  const auto run = [&](Split policy, const FfnOptions& ffn_options, int rows) {
    runner.set_split_consumer(policy);
    runner.twell(device_ffn.weights(), ffn_options, x.data(), rows, out.data(), nullptr, TraceTag{});
    TWELL_CUDA_CHECK(cudaDeviceSynchronize());
    return download_bits(out);
  };

  const std::vector<std::uint16_t> automatic = run(Split::Auto, FfnOptions{}, tokens);
  EXPECT_EQ(runner.last_up_down_split(), cuda::up_down_split_preferred(device, tokens));
  const cuda::FfnWorkspaceBytes held = runner.workspace_bytes();
  const cuda::FfnWorkspaceBytes plan = cuda::ffn_workspace_bytes({tokens, 256, 512, 8, true, {gate}}, device);
  EXPECT_EQ(held.packed, plan.packed);

  const std::vector<std::uint16_t> split = run(Split::Always, FfnOptions{}, tokens);
  EXPECT_TRUE(runner.last_up_down_split());
  const std::vector<std::uint16_t> fused = run(Split::Never, FfnOptions{}, tokens);
  EXPECT_FALSE(runner.last_up_down_split());
  if (deterministic_gate) {  // the same packed rows every call: the same bits
    EXPECT_EQ(split, fused);
    EXPECT_EQ(automatic, fused);
  } else {  // the portable gate's slot order varies by call, and with it the order of the fp32 sums
    EXPECT_LE(max_row_error(split, fused), 4e-3);
    EXPECT_LE(max_row_error(automatic, fused), 4e-3);
  }

  FfnOptions highest;
  highest.highest_precision = true;
  run(Split::Always, highest, tokens);
  EXPECT_FALSE(runner.last_up_down_split());

  // Balanced: pieces of tokens, split as well.
  const std::vector<std::uint16_t> balanced_split = run(Split::Always, FfnOptions{}, tokens - 1);
  EXPECT_TRUE(runner.last_up_down_split());
  const std::vector<std::uint16_t> balanced_fused = run(Split::Never, FfnOptions{}, tokens - 1);
  if (deterministic_gate)
    EXPECT_EQ(balanced_split, balanced_fused);
  else
    EXPECT_LE(max_row_error(balanced_split, balanced_fused), 4e-3);
}

TEST(FfnDispatch, UpDownSplitOnlyWhereItMeasuredFaster) {
  EXPECT_TRUE(cuda::up_down_split_preferred_for("NVIDIA H100 80GB HBM3", 131072));
  EXPECT_TRUE(cuda::up_down_split_preferred_for("NVIDIA H100 80GB HBM3", 6144));
  EXPECT_TRUE(cuda::up_down_split_preferred_for("NVIDIA H100 80GB HBM3", 4096));  // balanced, lists per piece
  EXPECT_FALSE(cuda::up_down_split_preferred_for("NVIDIA H100 80GB HBM3", 2048));  // balanced: slower
  EXPECT_FALSE(cuda::up_down_split_preferred_for("NVIDIA H100 80GB HBM3", 512));
  EXPECT_FALSE(cuda::up_down_split_preferred_for("NVIDIA H200", 131072));
  EXPECT_FALSE(cuda::up_down_split_preferred_for("NVIDIA A100-SXM4-80GB", 131072));
  EXPECT_FALSE(cuda::up_down_split_preferred_for("", 131072));
}

}  // namespace
}  // namespace twell::test
