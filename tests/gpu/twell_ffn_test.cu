// SPDX-License-Identifier: GPL-3.0-or-later
// The whole TwELL FFN on the GPU (gate-pack, fused up/down, overflowing rows recomputed densely or
// consumed sparsely) against core's CPU references, with TWELL_SPEC §6's tolerances: relative
// Frobenius error <= 2e-2 and cosine >= 0.999 against the fp32 FFN (<= 2e-3 in highest precision),
// every C, gated and non-gated, M not a multiple of anything, overflowing rows handled and counted.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controlled_density.hpp"
#include "gpu_test_support.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/stream.hpp"
#include "twell/metrics.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/twell_format.hpp"
#include "twell/twell_kernel_request.hpp"

namespace twell::test {
namespace {

struct FfnCase {
  std::size_t tokens, hidden, intermediate;
  double density;
  double heavy_fraction;  // tokens firing at 35 %: they overflow C = 8 (and C = 4 for wide N)
  bool gated;
};

std::string describe(const FfnCase& c) {
  return "M=" + std::to_string(c.tokens) + " D=" + std::to_string(c.hidden) +
         " N=" + std::to_string(c.intermediate) + (c.gated ? " gated" : " non-gated");
}

Matrix select_rows(const Matrix& matrix, const std::vector<bool>& keep) {
  std::size_t kept = 0;
  for (bool k : keep) kept += k ? 1 : 0;
  Matrix out(kept, matrix.cols);
  std::size_t next = 0;
  for (std::size_t r = 0; r < matrix.rows; ++r)
    if (keep[r])
      std::copy_n(matrix.data.data() + r * matrix.cols, matrix.cols, out.data.data() + next++ * matrix.cols);
  return out;
}

// Cosine per block of 64 rows, skipping blocks where nothing fired.
void expect_block_cosines(const Matrix& reference, const Matrix& candidate, double minimum) {
  const std::size_t block = 64;
  for (std::size_t first = 0; first < reference.rows; first += block) {
    const std::size_t rows = std::min(block, reference.rows - first);
    Matrix a(rows, reference.cols), b(rows, reference.cols);
    std::copy_n(reference.data.data() + first * reference.cols, rows * reference.cols, a.data.data());
    std::copy_n(candidate.data.data() + first * reference.cols, rows * reference.cols, b.data.data());
    double norm = 0;
    for (float v : a.data) norm += static_cast<double>(v) * v;
    if (norm == 0) continue;
    EXPECT_GE(compare_outputs(a, b).cosine, minimum) << "rows " << first << ".." << first + rows;
  }
}

// Every kernel combination this device runs: every consumer with the portable gate, with cuBLASLt's
// GEMM + the pack pass, and with the Hopper gate where the device and build have it.
std::vector<cuda::TwellKernels> kernel_combinations(int hidden) {
  std::vector<cuda::GateKernel> gates = {cuda::GateKernel::Portable};
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  if (cuda::gate_kernel_sm90_available(device)) gates.push_back(cuda::GateKernel::Sm90);
  gates.push_back(cuda::GateKernel::CublasPack);
  std::vector<cuda::UpDownKernel> consumers = {cuda::UpDownKernel::PerTokenCta,
                                               cuda::UpDownKernel::BalancedCta};
  if (cuda::up_down_per_token_warp_supported(hidden)) consumers.push_back(cuda::UpDownKernel::PerTokenWarp);
  std::vector<cuda::TwellKernels> combinations;
  for (auto gate : gates)
    for (auto consumer : consumers) combinations.push_back({gate, consumer, cuda::OverflowRoute::Dense});
  // The sparse overflow route behind every gate (where its pre-activations come from differs),
  // with the consumer Auto runs.
  for (auto gate : gates)
    combinations.push_back({gate, cuda::UpDownKernel::BalancedCta, cuda::OverflowRoute::Sparse});
  // No overflow at all: every row in the unbounded layout, behind the cuBLAS gate, either CTA consumer.
  for (auto consumer : {cuda::UpDownKernel::PerTokenCta, cuda::UpDownKernel::BalancedCta})
    combinations.push_back({cuda::GateKernel::CublasPack, consumer, cuda::OverflowRoute::Unbounded});
  return combinations;
}

std::string describe(const cuda::TwellKernels& kernels) {
  return std::string("gate ") + cuda::to_string(kernels.gate) + ", up_down " +
         cuda::to_string(kernels.up_down) + ", overflow " + cuda::to_string(kernels.overflow);
}

class TwellFfn : public ::testing::TestWithParam<FfnCase> {};

TEST_P(TwellFfn, MatchesFp32ReferenceForEveryCompression) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const FfnCase c = GetParam();
  SCOPED_TRACE(describe(c));
  ControlledFfnOptions options;
  options.tokens = c.tokens;
  options.hidden = c.hidden;
  options.intermediate = c.intermediate;
  options.density = c.density;
  options.gated = c.gated;
  options.heavy_row_fraction = c.heavy_fraction;
  options.heavy_row_density = 0.35;
  options.seed = 7 + c.tokens + c.hidden;
  const ControlledFfn problem = make_controlled_ffn(options);

  reference::FfnWeights weights;
  weights.gate = c.gated ? &problem.gate : nullptr;
  weights.up = &problem.up;
  weights.down = &problem.down;
  weights.down_t = &problem.down_t;
  Matrix preactivation;
  const Matrix fp32 =
      reference::dense_ffn(problem.x, weights, Activation::Relu, reference::Precision::Fp32, &preactivation);
  const Matrix emulated_c8 =
      reference::twell_ffn(problem.x, weights, 8, reference::Precision::Bf16Emulated).out;
  const Matrix highest_c8 = reference::twell_ffn(problem.x, weights, 8, reference::Precision::Highest).out;
  // The sparse overflow route consumes every row as TwELL: the unbounded layout's reference.
  const Matrix emulated_unbounded =
      reference::twell_ffn(problem.x, weights, kTwellUnbounded, reference::Precision::Bf16Emulated).out;
  const Matrix highest_unbounded =
      reference::twell_ffn(problem.x, weights, kTwellUnbounded, reference::Precision::Highest).out;

  const DeviceFfn device(problem);
  const auto x = upload_bf16(problem.x);
  cuda::Stream stream;
  cuda::FfnRunner runner(stream.get());
  const std::size_t elements = c.tokens * c.hidden;

  for (const cuda::TwellKernels& kernels : kernel_combinations(static_cast<int>(c.hidden))) {
    SCOPED_TRACE(describe(kernels));
    runner.set_twell_kernels(kernels);
    for (std::uint32_t compression : {8u, 4u, 2u}) {
      const TwellPacked reference_pack =
          twell_pack(preactivation.data.data(), static_cast<std::uint32_t>(c.tokens),
                     static_cast<std::uint32_t>(c.intermediate), compression);
      for (bool highest : {false, true}) {
        SCOPED_TRACE("C=" + std::to_string(compression) +
                     (highest ? " highest precision" : " default precision"));
        auto out = poisoned_bf16(elements);
        FfnOptions ffn;
        ffn.compression = compression;
        ffn.highest_precision = highest;
        runner.twell(device.weights(), ffn, x.data(), static_cast<int>(c.tokens), out.data(), nullptr,
                     TraceTag{});
        EXPECT_EQ(runner.last_overflow_rows(), reference_pack.overflow_rows.size());
        EXPECT_EQ(runner.last_overflow_row_indices(), reference_pack.overflow_rows);
        EXPECT_EQ(runner.last_twell_kernels().gate, kernels.gate);
        EXPECT_EQ(runner.last_twell_kernels().up_down, kernels.up_down);
        ASSERT_LE(reference_pack.overflow_rows.size(),
                  static_cast<std::size_t>(cuda::kMaxSparseOverflowRows));
        EXPECT_EQ(runner.last_twell_kernels().overflow, kernels.overflow);
        // Both routes consume the rows over capacity as TwELL rows, whole.
        const bool sparse_overflow = kernels.overflow == cuda::OverflowRoute::Sparse ||
                                     kernels.overflow == cuda::OverflowRoute::Unbounded;
        if (kernels.gate != cuda::GateKernel::Sm90) {
          EXPECT_EQ(runner.last_overflow_tiles(),
                    std::optional<std::uint64_t>(reference_pack.overflow_tiles));
        } else {
          EXPECT_FALSE(runner.last_overflow_tiles().has_value());  // the Hopper kernel flags rows only
        }
        const Matrix gpu = download_bf16(out.data(), c.tokens, c.hidden);

        const ErrorMetrics all = compare_outputs(fp32, gpu);
        EXPECT_LE(all.rel_frobenius, 2e-2);
        EXPECT_GE(all.cosine, 0.999);
        expect_block_cosines(fp32, gpu, 0.999);
        if (highest) {
          // The TwELL rows themselves (overflowing rows follow the dense bf16 path unless the sparse
          // route takes them). Against fp32 the floor is the bf16 rounding of the output and of the
          // stored gate values, about 2e-3 together.
          std::vector<bool> sparse_rows(c.tokens, true);
          if (!sparse_overflow)
            for (std::uint32_t r : reference_pack.overflow_rows) sparse_rows[r] = false;
          const ErrorMetrics sparse =
              compare_outputs(select_rows(fp32, sparse_rows), select_rows(gpu, sparse_rows));
          EXPECT_LE(sparse.rel_frobenius, 3e-3);
        }
        if (sparse_overflow) {  // every row consumed sparsely: the unbounded layout's reference
          EXPECT_LE(compare_outputs(highest ? highest_unbounded : emulated_unbounded, gpu).rel_frobenius,
                    highest ? 2e-3 : 1e-2);
        } else if (compression == 8) {  // same rounding points as the GPU: only the summation order differs
          if (highest) {  // overflowing rows: the GPU's dense recomputation rounds g, u and h to bf16
            std::vector<bool> sparse_rows(c.tokens, true);
            for (std::uint32_t r : reference_pack.overflow_rows) sparse_rows[r] = false;
            EXPECT_LE(compare_outputs(select_rows(highest_c8, sparse_rows), select_rows(gpu, sparse_rows))
                          .rel_frobenius,
                      2e-3);
          } else {
            EXPECT_LE(compare_outputs(emulated_c8, gpu).rel_frobenius, 1e-2);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TwellFfn,
    ::testing::Values(FfnCase{1, 64, 172, 0.05, 0, true}, FfnCase{77, 64, 172, 0.05, 0.05, true},
                      FfnCase{1000, 64, 172, 0.05, 0.05, true}, FfnCase{1000, 256, 768, 0.03, 0.03, true},
                      FfnCase{333, 512, 1000, 0.03, 0.03, true}, FfnCase{77, 2048, 5632, 0.02, 0.05, true},
                      FfnCase{77, 4096, 11008, 0.01, 0.05, true}, FfnCase{35, 8192, 1024, 0.02, 0.05, true},
                      FfnCase{77, 64, 172, 0.05, 0.05, false}, FfnCase{129, 1024, 2816, 0.02, 0.05, false},
                      FfnCase{77, 2048, 5632, 0.02, 0.05, false}));

// N 512 at 5 % density, with a fraction of the tokens firing at 40 %: those overflow C = 8.
ControlledFfn problem_with_heavy_rows(std::size_t tokens, std::size_t hidden, double heavy_fraction) {
  ControlledFfnOptions options;
  options.tokens = tokens;
  options.hidden = hidden;
  options.intermediate = 512;
  options.density = 0.05;
  options.heavy_row_fraction = heavy_fraction;
  options.heavy_row_density = 0.4;
  return make_controlled_ffn(options);
}

// Records which ops the runner tagged.
class RecordingTracer : public Tracer {
 public:
  TracerInfo info() const override { return {"recording", "gpu", "", false}; }
  void push(const TraceTag& tag) override { ops.push_back(tag.op); }
  void pop() override {}
  std::vector<KernelRecord> collect() override { return {}; }
  std::vector<std::string> ops;
};

TEST(TwellFfnRunner, TagsEachLaunchGroup) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const ControlledFfn problem = problem_with_heavy_rows(64, 128, 0.1);
  const DeviceFfn device(problem);
  const auto x = upload_bf16(problem.x);
  auto out = poisoned_bf16(64 * 128);
  cuda::FfnRunner runner(nullptr);
  runner.set_twell_kernels({cuda::GateKernel::Auto, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Dense});
  RecordingTracer tracer;
  TraceTag tag;
  tag.layer = 3;
  runner.twell(device.weights(), FfnOptions{}, x.data(), 64, out.data(), &tracer, tag);
  ASSERT_GT(runner.last_overflow_rows(), 0u);
  EXPECT_EQ(tracer.ops, (std::vector<std::string>{"gate_pack", "up_down", "overflow_dense"}));
  tracer.ops.clear();
  runner.dense(device.weights(), Activation::Relu, x.data(), 64, out.data(), &tracer, tag);
  EXPECT_EQ(tracer.ops, (std::vector<std::string>{"gate_up", "act_mul", "down"}));
}

// The unbounded route recomputes nothing, so it tags no overflow group, yet it counts the rows over
// C's capacity: when asked (after the gate), and in the caller's host memory where a forward gives it.
TEST(TwellFfnRunner, TheUnboundedRouteRecomputesNothingAndStillCountsTheRowsOverCapacity) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const ControlledFfn problem =
      problem_with_heavy_rows(300, 128, 0.6);  // more rows over C = 8 than the sparse route would take
  const DeviceFfn device(problem);
  reference::FfnWeights weights{&problem.gate, &problem.up, &problem.down, &problem.down_t};
  Matrix preactivation;
  const Matrix fp32 =
      reference::dense_ffn(problem.x, weights, Activation::Relu, reference::Precision::Fp32, &preactivation);
  const TwellPacked at_c8 = twell_pack(preactivation.data.data(), 300, 512, 8);
  ASSERT_GT(at_c8.overflow_rows.size(), static_cast<std::size_t>(cuda::kMaxSparseOverflowRows) / 2);
  const auto x = upload_bf16(problem.x);
  auto out = poisoned_bf16(300 * 128);
  cuda::Stream stream;
  cuda::FfnRunner runner(stream.get());
  runner.set_twell_kernels(
      {cuda::GateKernel::Auto, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Unbounded});
  RecordingTracer tracer;
  cuda::PinnedBuffer<std::uint32_t> counters(2);
  counters.data()[0] = counters.data()[1] = 0xdeadbeefu;
  runner.twell(device.weights(), FfnOptions{}, x.data(), 300, out.data(), &tracer, TraceTag{},
               counters.data());
  EXPECT_EQ(tracer.ops, (std::vector<std::string>{"gate_pack", "up_down"}));
  EXPECT_EQ(runner.last_twell_kernels().gate, cuda::GateKernel::CublasPack);  // Auto: the gate it needs
  EXPECT_EQ(runner.last_twell_kernels().overflow, cuda::OverflowRoute::Unbounded);
  EXPECT_EQ(runner.last_overflow_rows(), at_c8.overflow_rows.size());
  EXPECT_EQ(runner.last_overflow_tiles(), std::optional<std::uint64_t>(at_c8.overflow_tiles));
  EXPECT_EQ(runner.last_overflow_row_indices(), at_c8.overflow_rows);
  TWELL_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  EXPECT_EQ(counters.data()[0], at_c8.overflow_rows.size());
  EXPECT_EQ(counters.data()[1], at_c8.overflow_tiles);
  const ErrorMetrics error = compare_outputs(fp32, download_bf16(out.data(), 300, 128));
  EXPECT_LE(error.rel_frobenius, 2e-2);
  EXPECT_GE(error.cosine, 0.999);

  // A bounded route's counts are there when twell() returns: it read them to size the recomputation.
  runner.set_twell_kernels(
      {cuda::GateKernel::CublasPack, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Dense});
  counters.data()[0] = counters.data()[1] = 0xdeadbeefu;
  runner.twell(device.weights(), FfnOptions{}, x.data(), 300, out.data(), nullptr, TraceTag{},
               counters.data());
  EXPECT_EQ(counters.data()[0], at_c8.overflow_rows.size());
  EXPECT_EQ(counters.data()[1], at_c8.overflow_tiles);
  EXPECT_EQ(runner.last_overflow_rows(), at_c8.overflow_rows.size());

  // It packs the cuBLAS gate's pre-activations, and only a CTA consumer reads the unbounded layout.
  int ordinal = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&ordinal));
  std::vector<cuda::TwellKernels> refused = {
      {cuda::GateKernel::Portable, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Unbounded},
      {cuda::GateKernel::CublasPack, cuda::UpDownKernel::PerTokenWarp, cuda::OverflowRoute::Unbounded}};
  if (cuda::gate_kernel_sm90_available(ordinal))
    refused.push_back({cuda::GateKernel::Sm90, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Unbounded});
  for (const cuda::TwellKernels& kernels : refused) {
    SCOPED_TRACE(describe(kernels));
    runner.set_twell_kernels(kernels);
    try {
      runner.twell(device.weights(), FfnOptions{}, x.data(), 300, out.data(), nullptr, TraceTag{});
      ADD_FAILURE() << "ran";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::Unsupported);
      EXPECT_NE(std::string(e.what()).find("unbounded"), std::string::npos) << e.what();
    }
  }
}

TEST(TwellFfnRunner, TheSparseOverflowRouteTagsItsOwnGroupAndLeavesManyRowsToTheDenseOne) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const ControlledFfn problem =
      problem_with_heavy_rows(600, 128, 0.6);  // about 360 overflowing rows: more than the sparse route takes
  const DeviceFfn device(problem);
  reference::FfnWeights weights{&problem.gate, &problem.up, &problem.down, &problem.down_t};
  const Matrix fp32 = reference::dense_ffn(problem.x, weights, Activation::Relu, reference::Precision::Fp32);
  cuda::FfnRunner runner(nullptr);
  runner.set_twell_kernels({cuda::GateKernel::Auto, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Sparse});
  RecordingTracer tracer;
  for (const int tokens : {64, 600}) {
    SCOPED_TRACE("M " + std::to_string(tokens));
    std::vector<bool> first_rows(problem.x.rows, false);
    std::fill_n(first_rows.begin(), tokens, true);
    const auto x = upload_bf16(select_rows(problem.x, first_rows));
    auto out = poisoned_bf16(static_cast<std::size_t>(tokens) * 128);
    tracer.ops.clear();
    runner.twell(device.weights(), FfnOptions{}, x.data(), tokens, out.data(), &tracer, TraceTag{});
    const std::uint64_t overflowing = runner.last_overflow_rows();
    const bool sparse = tokens == 64;
    if (sparse) {
      ASSERT_GT(overflowing, 0u);
      ASSERT_LE(overflowing, static_cast<std::uint64_t>(cuda::kMaxSparseOverflowRows));
    } else {
      ASSERT_GT(overflowing, static_cast<std::uint64_t>(cuda::kMaxSparseOverflowRows));
    }
    EXPECT_EQ(runner.last_twell_kernels().overflow,
              sparse ? cuda::OverflowRoute::Sparse : cuda::OverflowRoute::Dense);
    EXPECT_EQ(tracer.ops, (std::vector<std::string>{"gate_pack", "up_down",
                                                    sparse ? "overflow_sparse" : "overflow_dense"}));
    const ErrorMetrics error =
        compare_outputs(select_rows(fp32, first_rows), download_bf16(out.data(), tokens, 128));
    EXPECT_LE(error.rel_frobenius, 2e-2);
    EXPECT_GE(error.cosine, 0.999);
  }
}

// CudaBackend refuses a forward that cannot fit from ffn_workspace_bytes's plan before anything is
// allocated: every workspace group the runner then allocates must lie within that plan, for every
// gate, consumer and overflow route, at a decode-sized M (balanced consumer, cuBLAS gate where Auto
// takes it, the sparse route) and past the sparse route's row limit.
TEST(TwellFfnRunner, AllocatesNoMoreThanItsWorkspacePlan) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const ControlledFfn problem =
      problem_with_heavy_rows(600, 256, 0.6);  // rows that overflow C = 8: the overflow workspaces are used
  const DeviceFfn device(problem);
  const auto x = upload_bf16(problem.x);
  auto out = poisoned_bf16(600 * 256);
  int ordinal = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&ordinal));
  std::vector<cuda::TwellKernels> combinations = {
      {},
      {cuda::GateKernel::CublasPack, cuda::UpDownKernel::BalancedCta, cuda::OverflowRoute::Sparse},
      {cuda::GateKernel::Portable, cuda::UpDownKernel::PerTokenCta, cuda::OverflowRoute::Sparse},
      {cuda::GateKernel::Portable, cuda::UpDownKernel::PerTokenWarp, cuda::OverflowRoute::Dense},
      {cuda::GateKernel::Auto, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Unbounded}};
  if (cuda::gate_kernel_sm90_available(ordinal))
    combinations.push_back({cuda::GateKernel::Sm90, cuda::UpDownKernel::Auto, cuda::OverflowRoute::Sparse});
  for (const cuda::TwellKernels& kernels : combinations) {
    for (const int tokens : {64, 600}) {
      SCOPED_TRACE(std::string(cuda::to_string(kernels.gate)) + "/" + cuda::to_string(kernels.up_down) + "/" +
                   cuda::to_string(kernels.overflow) + ", M " + std::to_string(tokens));
      cuda::FfnRunner runner(nullptr);
      runner.set_twell_kernels(kernels);
      runner.twell(device.weights(), FfnOptions{}, x.data(), tokens, out.data(), nullptr, TraceTag{});
      ASSERT_GT(runner.last_overflow_rows(), 0u);
      runner.dense(device.weights(), Activation::Relu, x.data(), tokens, out.data(), nullptr, TraceTag{});
      TWELL_CUDA_CHECK(cudaDeviceSynchronize());
      const cuda::FfnWorkspaceBytes held = runner.workspace_bytes();
      const cuda::FfnWorkspaceBytes plan =
          cuda::ffn_workspace_bytes({tokens, 256, 512, 8, true, kernels}, ordinal);
      EXPECT_LE(held.dense, plan.dense);
      EXPECT_LE(held.packed, plan.packed);
      EXPECT_LE(held.overflow_rows, plan.overflow_rows);
      EXPECT_LE(held.gate_output, plan.gate_output);
      EXPECT_LE(held.balance, plan.balance);
      EXPECT_LE(held.sparse_route, plan.sparse_route);
      EXPECT_EQ(cuda::ffn_workspace_growth(held, plan), plan.total() - held.total());
      EXPECT_GT(held.dense, 0u);
      EXPECT_EQ(held.packed, plan.packed);  // sized by M alone
      const cuda::TwellKernels ran = runner.last_twell_kernels();
      if (ran.overflow == cuda::OverflowRoute::Sparse) EXPECT_GT(held.sparse_route, 0u);
      if (ran.gate == cuda::GateKernel::CublasPack) EXPECT_EQ(held.gate_output, plan.gate_output);
      // The dense path alone plans only its own [M, N] buffers.
      const cuda::FfnWorkspaceBytes dense_only =
          cuda::ffn_workspace_bytes({tokens, 256, 512, 8, false, kernels}, ordinal);
      EXPECT_EQ(dense_only.total(), dense_only.dense);
    }
  }
}

// Core names the kernels a run may ask for; every name must map onto the kernel whose to_string it is.
TEST(TwellFfnRunner, EveryKernelNameCoreOffersMapsOntoAKernel) {
  for (const std::string_view name : twell_gate_kernel_names()) {
    TwellKernelRequest request;
    request.gate = std::string(name);
    EXPECT_EQ(cuda::to_string(cuda::twell_kernels_from_request(request).gate), name);
  }
  for (const std::string_view name : twell_up_down_kernel_names()) {
    TwellKernelRequest request;
    request.up_down = std::string(name);
    EXPECT_EQ(cuda::to_string(cuda::twell_kernels_from_request(request).up_down), name);
  }
  for (const std::string_view name : twell_overflow_route_names()) {
    TwellKernelRequest request;
    request.overflow = std::string(name);
    EXPECT_EQ(cuda::to_string(cuda::twell_kernels_from_request(request).overflow), name);
  }
}

TEST(TwellFfnRunner, RejectsUnsupportedOptions) {
  TWELL_REQUIRE_CUDA_DEVICE();
  cuda::FfnRunner runner(nullptr);
  cuda::FfnDeviceWeights weights;
  weights.hidden = 96;
  weights.intermediate = 256;
  const auto dummy = poisoned_bf16(1024);
  weights.gate = weights.up = weights.down = weights.down_t = dummy.data();
  EXPECT_THROW(runner.twell(weights, FfnOptions{}, dummy.data(), 1, nullptr, nullptr, TraceTag{}), Error);
  weights.hidden = 64;
  FfnOptions options;
  options.compression = 3;
  EXPECT_THROW(runner.twell(weights, options, dummy.data(), 1, nullptr, nullptr, TraceTag{}), Error);
}

TEST(TwellFfnRunner, AutoPicksTheKernelsMeasuredFastestThatRunHere) {
  TWELL_REQUIRE_CUDA_DEVICE();
  ControlledFfnOptions options;
  options.tokens = 33;
  options.hidden = 256;
  options.intermediate = 512;
  options.density = 0.05;
  const ControlledFfn problem = make_controlled_ffn(options);
  const DeviceFfn device(problem);
  const auto x = upload_bf16(problem.x);
  auto out = poisoned_bf16(33 * 256);
  cuda::FfnRunner runner(nullptr);
  runner.twell(device.weights(), FfnOptions{}, x.data(), 33, out.data(), nullptr, TraceTag{});
  int ordinal = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&ordinal));
  const bool hopper = cuda::gate_kernel_sm90_available(ordinal);
  const cuda::GateKernel expected = cuda::gate_cublas_pack_preferred(ordinal, 33)
                                        ? cuda::GateKernel::CublasPack
                                    : hopper ? cuda::GateKernel::Sm90
                                             : cuda::GateKernel::Portable;
  EXPECT_EQ(runner.last_twell_kernels().gate, expected);
  EXPECT_EQ(runner.last_twell_kernels().up_down, cuda::UpDownKernel::BalancedCta);
  const bool unbounded =
      expected == cuda::GateKernel::CublasPack && cuda::overflow_unbounded_preferred(ordinal, 33);
  EXPECT_EQ(runner.last_twell_kernels().overflow,
            unbounded ? cuda::OverflowRoute::Unbounded : cuda::OverflowRoute::Dense);  // measured faster
  if (!hopper) {  // asking for the Hopper kernel where it cannot run is an error, not a silent fallback
    runner.set_twell_kernels({cuda::GateKernel::Sm90, cuda::UpDownKernel::Auto});
    EXPECT_THROW(runner.twell(device.weights(), FfnOptions{}, x.data(), 33, out.data(), nullptr, TraceTag{}),
                 Error);
  }
  // The warp consumer holds D / 32 accumulators per lane in registers: wider layers are refused
  // before anything is launched.
  EXPECT_TRUE(cuda::up_down_per_token_warp_supported(2048));
  EXPECT_FALSE(cuda::up_down_per_token_warp_supported(4096));
  runner.set_twell_kernels({cuda::GateKernel::Auto, cuda::UpDownKernel::PerTokenWarp});
  cuda::FfnDeviceWeights wide = device.weights();
  wide.hidden = 4096;
  EXPECT_THROW(runner.twell(wide, FfnOptions{}, x.data(), 1, out.data(), nullptr, TraceTag{}), Error);
}

TEST(FfnDispatch, ChoosesTwellOnlyBelowTheBreakEven) {
  TWELL_REQUIRE_CUDA_DEVICE();
  int ordinal = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&ordinal));
  const cuda::FfnShape sparse_lm{131072, 2048, 5632, 8, true};
  const cuda::FfnBreakEven measured = cuda::twell_break_even(sparse_lm, ordinal);
  EXPECT_GT(measured.density, 0.0);
  EXPECT_LT(measured.density, 0.2);
  EXPECT_FALSE(measured.basis.empty());
  EXPECT_EQ(cuda::choose_ffn_path(0.0, sparse_lm, ordinal), FfnPath::Twell);
  EXPECT_EQ(cuda::choose_ffn_path(0.5 * measured.density, sparse_lm, ordinal), FfnPath::Twell);
  EXPECT_EQ(cuda::choose_ffn_path(measured.density, sparse_lm, ordinal), FfnPath::Dense);
  EXPECT_EQ(cuda::choose_ffn_path(0.3, sparse_lm, ordinal), FfnPath::Dense);
  EXPECT_EQ(cuda::choose_ffn_path(std::nan(""), sparse_lm, ordinal), FfnPath::Dense);
  // A shape nobody measured gets the conservative default.
  const cuda::FfnShape unmeasured{1000, 192, 640, 8, true};
  const cuda::FfnBreakEven fallback = cuda::twell_break_even(unmeasured, ordinal);
  EXPECT_FALSE(fallback.measured);
  EXPECT_EQ(fallback.density, kConservativeTwellBreakEven);
  EXPECT_EQ(cuda::choose_ffn_path(0.9 * kConservativeTwellBreakEven, unmeasured, ordinal), FfnPath::Twell);
  EXPECT_EQ(cuda::choose_ffn_path(0.01, unmeasured, ordinal), FfnPath::Dense);
  // At decode-sized M TwELL gains less (the gate fills few SMs, a few heavy tokens are the consumer's
  // critical path): wherever anything was measured, the crossing there lies at or below the large-M one.
  const cuda::FfnShape decode{64, 2048, 5632, 8, true};
  EXPECT_LE(cuda::twell_break_even(decode, ordinal).density, measured.density);
}

TEST(FfnDispatch, CublasGateOnlyWhereItMeasuredFaster) {
  // cuBLASLt's GEMM + the pack pass at the decode-sized token counts where it beat the fused gate on
  // that GPU model (nearest measured token count, log scale); nowhere on a model never measured.
  EXPECT_TRUE(cuda::gate_cublas_pack_preferred_for("NVIDIA H200", 1));
  EXPECT_TRUE(cuda::gate_cublas_pack_preferred_for("NVIDIA H200", 64));
  EXPECT_TRUE(cuda::gate_cublas_pack_preferred_for("NVIDIA H200", 1024));
  EXPECT_TRUE(cuda::gate_cublas_pack_preferred_for("NVIDIA H200", 1400));  // nearer 1024 than 2048
  EXPECT_FALSE(cuda::gate_cublas_pack_preferred_for("NVIDIA H200", 1500));
  EXPECT_FALSE(cuda::gate_cublas_pack_preferred_for("NVIDIA H200", 2048));
  EXPECT_FALSE(cuda::gate_cublas_pack_preferred_for("NVIDIA H200", 131072));
  EXPECT_FALSE(cuda::gate_cublas_pack_preferred_for("NVIDIA H200 ", 64));
  EXPECT_FALSE(cuda::gate_cublas_pack_preferred_for("", 64));
}

TEST(FfnDispatch, UnboundedRouteOnlyWhereItMeasuredFaster) {
  // Every row in the unbounded layout where the forward measured it faster end to end on that GPU
  // model (nearest measured token count, log scale); nowhere on a model never measured.
  EXPECT_TRUE(cuda::overflow_unbounded_preferred_for("NVIDIA H100 80GB HBM3", 1));  // nearest 64
  EXPECT_TRUE(cuda::overflow_unbounded_preferred_for("NVIDIA H100 80GB HBM3", 64));
  EXPECT_TRUE(cuda::overflow_unbounded_preferred_for("NVIDIA H100 80GB HBM3", 128));
  EXPECT_TRUE(cuda::overflow_unbounded_preferred_for("NVIDIA H100 80GB HBM3", 200));
  EXPECT_TRUE(cuda::overflow_unbounded_preferred_for("NVIDIA H100 80GB HBM3", 256));
  EXPECT_TRUE(cuda::overflow_unbounded_preferred_for("NVIDIA H100 80GB HBM3", 512));
  EXPECT_TRUE(cuda::overflow_unbounded_preferred_for("NVIDIA H100 80GB HBM3", 1024));
  EXPECT_FALSE(cuda::overflow_unbounded_preferred_for("NVIDIA H200", 64));
  EXPECT_FALSE(cuda::overflow_unbounded_preferred_for("NVIDIA H200", 256));
  EXPECT_FALSE(cuda::overflow_unbounded_preferred_for("", 256));
}

// Where Auto's gate is cuBLAS's and the table prefers it, Auto packs every row in the unbounded layout:
// nothing recomputed, the rows over C's capacity still counted, the output the unbounded layout's.
TEST(TwellFfnRunner, AutoTakesTheUnboundedRouteWhereItMeasuredFaster) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const ControlledFfn problem = problem_with_heavy_rows(300, 128, 0.2);
  const DeviceFfn device(problem);
  reference::FfnWeights weights{&problem.gate, &problem.up, &problem.down, &problem.down_t};
  Matrix preactivation;
  const Matrix fp32 =
      reference::dense_ffn(problem.x, weights, Activation::Relu, reference::Precision::Fp32, &preactivation);
  const TwellPacked at_c8 = twell_pack(preactivation.data.data(), 300, 512, 8);
  ASSERT_GT(at_c8.overflow_rows.size(), 0u);
  const Matrix unbounded_reference =
      reference::twell_ffn(problem.x, weights, kTwellUnbounded, reference::Precision::Bf16Emulated).out;
  const auto x = upload_bf16(problem.x);
  auto out = poisoned_bf16(300 * 128);
  int ordinal = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&ordinal));
  cuda::FfnRunner runner(nullptr);
  RecordingTracer tracer;
  runner.twell(device.weights(), FfnOptions{}, x.data(), 300, out.data(), &tracer, TraceTag{});
  const bool unbounded = runner.last_twell_kernels().gate == cuda::GateKernel::CublasPack &&
                         cuda::overflow_unbounded_preferred(ordinal, 300);
  EXPECT_EQ(runner.last_twell_kernels().overflow,
            unbounded ? cuda::OverflowRoute::Unbounded : cuda::OverflowRoute::Dense);
  std::vector<std::string> expected_ops = {"gate_pack", "up_down"};
  if (!unbounded) expected_ops.push_back("overflow_dense");
  EXPECT_EQ(tracer.ops, expected_ops);
  EXPECT_EQ(runner.last_overflow_rows(), at_c8.overflow_rows.size());
  EXPECT_EQ(runner.last_overflow_row_indices(), at_c8.overflow_rows);
  const Matrix gpu = download_bf16(out.data(), 300, 128);
  // Whichever route ran, every row's output is the FFN's: the heavy rows are not truncated to C's capacity.
  const ErrorMetrics against_fp32 = compare_outputs(fp32, gpu);
  EXPECT_LE(against_fp32.rel_frobenius, 2e-2);
  EXPECT_GE(against_fp32.cosine, 0.999);
  expect_block_cosines(fp32, gpu, 0.999);
  if (unbounded) EXPECT_LE(compare_outputs(unbounded_reference, gpu).rel_frobenius, 1e-2);
  // Its workspace is what ffn_workspace_bytes planned for the same request.
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());
  const cuda::FfnWorkspaceRequest request{300, 128, 512, 8, true, cuda::TwellKernels{}};
  EXPECT_EQ(runner.workspace_bytes().packed, cuda::ffn_workspace_bytes(request, ordinal).packed);
}

TEST(FfnDispatch, GateClusterSizeFollowsTheGpuModelAndTokenCount) {
  // Pairs of CTAs only where a benchmark measured them faster, at the nearest token count measured
  // (on a log scale); any other name keeps one CTA.
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("NVIDIA H100 80GB HBM3", 1), 2);
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("NVIDIA H100 80GB HBM3", 1 << 20), 2);
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("NVIDIA H200", 1), 2);
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("NVIDIA H200", 16384), 2);
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("NVIDIA H200", 40000), 2);  // nearer 16384
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("NVIDIA H200", 50000), 1);  // nearer 131072
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("NVIDIA H200", 131072), 1);
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("NVIDIA H100 80GB HBM3 ", 16384), 1);
  EXPECT_EQ(cuda::sm90_gate_cluster_size_for("", 16384), 1);
  TWELL_REQUIRE_CUDA_DEVICE();
  int ordinal = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&ordinal));
  cudaDeviceProp properties{};
  TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, ordinal));
  for (const int tokens : {1, 16384, 131072})
    EXPECT_EQ(cuda::sm90_gate_cluster_size(ordinal, tokens),
              cuda::sm90_gate_cluster_size_for(properties.name, tokens));
  EXPECT_THROW(cuda::sm90_gate_cluster_size(-1, 16384), Error);
}

}  // namespace
}  // namespace twell::test
