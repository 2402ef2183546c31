// SPDX-License-Identifier: GPL-3.0-or-later
// A real sticky GPU fault in the middle of a profiling session: a kernel of this test writes
// through a wild pointer while layer 1 is being profiled. The error must name the lost context and
// the restart, the session must keep the layers that finished as a valid report, nothing may
// crash or hang while the broken backend and tracer are torn down or a new one is tried in the
// same process (CUDA documents that only a new process recovers from a sticky error), and a new
// process (the CLI) must profile on the GPU again. ctest runs each test in its own process, so
// the fault touches no other test.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "gpu_test_support.hpp"
#include "runtime.hpp"
#include "test_support.hpp"
#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/kernels/cuda_backend.hpp"
#include "twell/model_generator.hpp"
#include "twell/report_io.hpp"
#include "twell/session.hpp"
#include "twell/tokens.hpp"

namespace twell {
namespace {

__global__ void write_through_wild_pointer(int* wild) {
  *wild = 1;
}

/// Delegates to a real backend; launches the faulting kernel on its stream when `fault_layer` is
/// profiled, before that layer's first FFN run.
class FaultingBackend final : public Backend {
 public:
  FaultingBackend(Backend& inner, std::size_t fault_layer) : m_inner(inner), m_fault_layer(fault_layer) {}

  DeviceInfo device() const override { return m_inner.device(); }
  void load(const Checkpoint& checkpoint) override { m_inner.load(checkpoint); }
  const ModelConfig& config() const override { return m_inner.config(); }
  Activation activation() const override { return m_inner.activation(); }
  ForwardResult forward(const TokenBatch& tokens, const ForwardOptions& options, Tracer* tracer,
                        const TraceTag& base_tag, const LayerHook& hook) override {
    return m_inner.forward(tokens, options, tracer, base_tag, hook);
  }
  std::uint64_t run_layer_ffn(std::size_t layer, FfnPath path, const FfnOptions& options, Tracer* tracer,
                              const TraceTag& tag) override {
    if (layer == m_fault_layer && !m_faulted) {
      m_faulted = true;
      auto* wild = reinterpret_cast<int*>(std::uintptr_t{0x10});
      write_through_wild_pointer<<<1, 1, 0, static_cast<cudaStream_t>(m_inner.native_stream())>>>(wild);
    }
    return m_inner.run_layer_ffn(layer, path, options, tracer, tag);
  }
  ErrorMetrics compare_layer_ffn_outputs(FfnPath reference, FfnPath candidate) override {
    return m_inner.compare_layer_ffn_outputs(reference, candidate);
  }
  Matrix ffn(std::size_t layer, const Matrix& input, FfnPath path, const FfnOptions& options) override {
    return m_inner.ffn(layer, input, path, options);
  }
  void* native_stream() const override { return m_inner.native_stream(); }
  void flush_cache() override { m_inner.flush_cache(); }

 private:
  Backend& m_inner;
  std::size_t m_fault_layer;
  bool m_faulted = false;
};

std::string quoted(const std::filesystem::path& path) {
  return "'" + path.string() + "'";
}

TEST(GpuFaults, StickyFaultKeepsTheFinishedLayersAndARestartRecovers) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const test::TempDir directory("twellscope-gpu-fault");
  const Checkpoint checkpoint = Checkpoint::open(test::generated_tiny_model());
  const TokenBatch tokens = random_tokens(2, 64, std::uint32_t(checkpoint.config().vocab_size), 9);
  ForwardOptions plain;
  plain.keep_final_hidden = true;

  Matrix before;
  {
    runtime::Runtime runtime = runtime::make_runtime(runtime::BackendChoice::Cuda, 0);
    runtime.backend->load(checkpoint);
    before = runtime.backend->forward(tokens, plain, nullptr, TraceTag{}, {}).final_hidden;

    FaultingBackend faulting(*runtime.backend, 1);
    Session session(faulting, *runtime.tracer, summarize_model(checkpoint, "tiny"));
    ProfileConfig config;
    config.warmup = 1;
    config.repetitions = 2;
    config.map_shape = {8, 16};
    try {
      session.run(config, tokens);
      FAIL() << "a kernel wrote through a wild pointer and the session did not notice";
    } catch (const IncompleteRunError& e) {
      EXPECT_EQ(e.kind(), Error::Kind::Device) << e.what();
      const std::string message = e.what();
      EXPECT_NE(message.find("cudaErrorIllegalAddress"), std::string::npos) << message;
      EXPECT_NE(message.find("restart twellscope"), std::string::npos) << message;
      const Report& partial = e.partial_report();
      ASSERT_EQ(partial.layers.size(), 1u);
      EXPECT_EQ(partial.layers[0].index, 0);
      ASSERT_EQ(partial.layers[0].paths.size(), 2u);
      for (const auto& path : partial.layers[0].paths) EXPECT_GT(path.total.median_us, 0.0) << path.path;
      ASSERT_TRUE(partial.layers[0].twell_vs_dense.has_value());
      EXPECT_NE(partial.warnings.front().find("INCOMPLETE"), std::string::npos);
      const auto saved = directory.path() / "partial.json";
      save_report(partial, saved);
      EXPECT_EQ(load_report(saved).layers.size(), 1u);
    }
    // Leaving the scope tears down the backend and the tracer on the broken context: no crash.
  }

  // The same process: either the context works again or every attempt is a clear device error.
  try {
    runtime::Runtime again = runtime::make_runtime(runtime::BackendChoice::Cuda, 0);
    again.backend->load(checkpoint);
    const Matrix after = again.backend->forward(tokens, plain, nullptr, TraceTag{}, {}).final_hidden;
    EXPECT_EQ(after.data, before.data);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::Device) << e.what();
  }

  // A restart: a new process profiles on the GPU.
  const auto out = directory.path() / "after-restart.json";
  const auto result = test::run_command(
      std::string("'") + TWELLSCOPE_CLI_PATH + "' profile " + quoted(test::generated_tiny_model()) +
      " --backend cuda --batch 2 --seq 64 " + "--warmup 1 --reps 1 --out " + quoted(out));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(load_report(out).layers.size(), std::size_t(checkpoint.config().num_hidden_layers));
}

}  // namespace
}  // namespace twell
