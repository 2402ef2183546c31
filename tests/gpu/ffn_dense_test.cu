// SPDX-License-Identifier: GPL-3.0-or-later
// The dense cuBLASLt FFN against core's CPU references: bf16-emulating (same rounding points) and
// fp32, gated (ReLU and SiLU) and non-gated, with the down projection from either layout.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "controlled_density.hpp"
#include "gpu_test_support.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/stream.hpp"
#include "twell/metrics.hpp"
#include "twell/reference_ffn.hpp"

namespace twell::test {
namespace {

struct DenseCase {
  std::size_t tokens, hidden, intermediate;
  bool gated;
  Activation activation;
  bool down_t_only;  // the weights carry only TwELL's [N, D] down layout
};

class FfnDense : public ::testing::TestWithParam<DenseCase> {};

TEST_P(FfnDense, MatchesReferences) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const DenseCase c = GetParam();
  SCOPED_TRACE("M=" + std::to_string(c.tokens) + " D=" + std::to_string(c.hidden) +
               " N=" + std::to_string(c.intermediate));
  ControlledFfnOptions options;
  options.tokens = c.tokens;
  options.hidden = c.hidden;
  options.intermediate = c.intermediate;
  options.density = 0.2;
  options.gated = c.gated;
  options.seed = 11 + c.tokens;
  const ControlledFfn problem = make_controlled_ffn(options);
  reference::FfnWeights weights;
  weights.gate = c.gated ? &problem.gate : nullptr;
  weights.up = &problem.up;
  weights.down = &problem.down;
  weights.down_t = &problem.down_t;
  Matrix reference_preactivation;
  const Matrix emulated = reference::dense_ffn(problem.x, weights, c.activation,
                                               reference::Precision::Bf16Emulated, &reference_preactivation);
  const Matrix fp32 = reference::dense_ffn(problem.x, weights, c.activation, reference::Precision::Fp32);

  const DeviceFfn device(problem);
  cuda::FfnDeviceWeights device_weights = device.weights();
  if (c.down_t_only) device_weights.down = nullptr;
  const auto x = upload_bf16(problem.x);
  auto out = poisoned_bf16(c.tokens * c.hidden);
  cuda::Stream stream;
  cuda::FfnRunner runner(stream.get());
  const __nv_bfloat16* preactivation = nullptr;
  runner.dense(device_weights, c.activation, x.data(), static_cast<int>(c.tokens), out.data(), nullptr,
               TraceTag{}, &preactivation);
  stream.synchronize();
  const Matrix gpu = download_bf16(out.data(), c.tokens, c.hidden);

  const ErrorMetrics against_emulated = compare_outputs(emulated, gpu);
  EXPECT_LE(against_emulated.rel_frobenius, 5e-3);
  const ErrorMetrics against_fp32 = compare_outputs(fp32, gpu);
  EXPECT_LE(against_fp32.rel_frobenius, 2e-2);
  EXPECT_GE(against_fp32.cosine, 0.999);

  ASSERT_NE(preactivation, nullptr);
  const Matrix gpu_preactivation = download_bf16(preactivation, c.tokens, c.intermediate);
  EXPECT_LE(compare_outputs(reference_preactivation, gpu_preactivation).rel_frobenius, 5e-3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FfnDense,
                         ::testing::Values(DenseCase{1, 64, 172, true, Activation::Relu, false},
                                           DenseCase{77, 64, 172, true, Activation::Silu, false},
                                           DenseCase{1000, 256, 768, true, Activation::Relu, true},
                                           DenseCase{77, 2048, 5632, true, Activation::Relu, false},
                                           DenseCase{77, 4096, 11008, true, Activation::Silu, false},
                                           DenseCase{333, 512, 1000, false, Activation::Relu, false},
                                           DenseCase{129, 1024, 2816, false, Activation::Relu, true}));

TEST(FfnDenseRunner, NonGatedWithoutStatisticsUsesTheReluEpilogue) {
  TWELL_REQUIRE_CUDA_DEVICE();
  ControlledFfnOptions options;
  options.tokens = 100;
  options.hidden = 128;
  options.intermediate = 300;
  options.density = 0.2;
  options.gated = false;
  const ControlledFfn problem = make_controlled_ffn(options);
  reference::FfnWeights weights;
  weights.up = &problem.up;
  weights.down = &problem.down;
  const Matrix emulated =
      reference::dense_ffn(problem.x, weights, Activation::Relu, reference::Precision::Bf16Emulated);
  const DeviceFfn device(problem);
  const auto x = upload_bf16(problem.x);
  auto out = poisoned_bf16(100 * 128);
  cuda::FfnRunner runner(nullptr);
  runner.dense(device.weights(), Activation::Relu, x.data(), 100, out.data(), nullptr, TraceTag{});
  EXPECT_LE(compare_outputs(emulated, download_bf16(out.data(), 100, 128)).rel_frobenius, 5e-3);
}

}  // namespace
}  // namespace twell::test
