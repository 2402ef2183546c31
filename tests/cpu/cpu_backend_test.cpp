// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <set>

#include "test_support.hpp"
#include "twell/backend.hpp"
#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/metrics.hpp"
#include "twell/model_generator.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/reference_forward.hpp"

namespace {

using twell::FfnPath;
using twell::Matrix;

/// One tiny synthetic checkpoint for the whole suite.
const std::filesystem::path& tiny_model() {
  static twell::test::TempDir dir("twellscope-cpu-backend");
  static const std::filesystem::path path = [] {
    twell::GeneratorOptions options;
    options.preset = "tiny";
    options.seed = 11;
    twell::generate_model(options, dir.path() / "tiny");
    return dir.path() / "tiny";
  }();
  return path;
}

std::unique_ptr<twell::Backend> loaded_backend(const twell::Checkpoint::Options& options = {}) {
  auto backend = twell::make_cpu_backend(2);
  backend->load(twell::Checkpoint::open(tiny_model(), options));
  return backend;
}

/// Records every tag it sees; a region is one record.
class RecordingTracer final : public twell::Tracer {
 public:
  twell::TracerInfo info() const override { return {"recording", "cpu", "", false}; }
  void push(const twell::TraceTag& tag) override { m_tags.push_back(tag); }
  void pop() override {}
  std::vector<twell::KernelRecord> collect() override { return {}; }
  const std::vector<twell::TraceTag>& tags() const { return m_tags; }

 private:
  std::vector<twell::TraceTag> m_tags;
};

TEST(CpuBackend, DescribesTheCpu) {
  const auto backend = twell::make_cpu_backend(2);
  const auto device = backend->device();
  EXPECT_EQ(device.backend, "cpu");
  EXPECT_EQ(device.kernel_family, "cpu-reference");
  EXPECT_EQ(device.multiprocessor_count, 2);
  EXPECT_FALSE(device.name.empty());
  EXPECT_THROW(backend->config(), twell::Error);  // nothing loaded yet
}

TEST(CpuBackend, ForwardCapturesStatisticsAndHiddenStates) {
  const auto backend = loaded_backend();
  EXPECT_EQ(backend->config().hidden_size, 256);
  EXPECT_EQ(backend->activation(), twell::Activation::Relu);
  const auto tokens = twell::random_tokens(2, 64, 512, 3);
  twell::ForwardOptions options;
  options.capture_statistics = true;
  options.keep_layer_hidden = true;
  options.keep_final_hidden = true;
  options.map_shape = {32, 64};
  const auto result = backend->forward(tokens, options, nullptr, {}, {});
  ASSERT_EQ(result.layers.size(), 2u);
  for (const auto& layer : result.layers) {
    EXPECT_EQ(layer.summary.tokens, 128u);
    EXPECT_EQ(layer.summary.neurons, 768u);
    ASSERT_EQ(layer.summary.nnz_per_token.size(), 128u);
    ASSERT_EQ(layer.summary.neuron_fire_counts.size(), 768u);
    const auto nnz =
        std::accumulate(layer.summary.nnz_per_token.begin(), layer.summary.nnz_per_token.end(), 0ull);
    const auto fired = std::accumulate(layer.summary.neuron_fire_counts.begin(),
                                       layer.summary.neuron_fire_counts.end(), 0ull);
    EXPECT_EQ(nnz, fired);
    EXPECT_GT(nnz, 0u);
    EXPECT_LT(static_cast<double>(nnz) / (128.0 * 768.0), 0.1);  // a sparse model
    EXPECT_LE(layer.summary.map.rows, 32u);
    EXPECT_LE(layer.summary.map.cols, 64u);
    EXPECT_EQ(layer.hidden_out.rows, 128u);
    EXPECT_EQ(layer.hidden_out.cols, 256u);
    EXPECT_EQ(layer.overflow_rows, 0u);  // dense path
  }
  EXPECT_EQ(result.final_hidden.rows, 128u);
  EXPECT_EQ(result.final_hidden.cols, 256u);

  const auto lean = backend->forward(tokens, {}, nullptr, {}, {});
  EXPECT_TRUE(lean.final_hidden.empty());
  EXPECT_TRUE(lean.layers[0].hidden_out.empty());
  EXPECT_EQ(lean.layers[0].summary.tokens, 0u);
}

TEST(CpuBackend, ForwardMatchesTheReferenceForwardWithTheReferenceFfn) {
  const auto checkpoint = twell::Checkpoint::open(tiny_model());
  const auto weights = twell::reference::load_model_weights(checkpoint);
  const auto tokens = twell::random_tokens(1, 96, 512, 8);
  auto ffn = [&](std::size_t layer, const Matrix& x) {
    const auto& w = weights.layers[layer];
    const twell::reference::FfnWeights f{&w.gate, &w.up, &w.down, &w.down_t};
    return twell::reference::dense_ffn(x, f, weights.activation, twell::reference::Precision::Fp32);
  };
  const Matrix expected = twell::reference::forward_backbone(weights, tokens, ffn, {}, nullptr, {});

  const auto backend = loaded_backend();
  for (const FfnPath path : {FfnPath::Dense, FfnPath::Twell}) {
    twell::ForwardOptions options;
    options.ffn_path = path;
    options.keep_final_hidden = true;
    const auto result = backend->forward(tokens, options, nullptr, {}, {});
    const auto error = twell::compare_outputs(expected, result.final_hidden);
    EXPECT_LT(error.rel_frobenius, 1e-5) << twell::to_string(path);
  }
}

TEST(CpuBackend, ForwardRunsEachLayerOnItsOwnPathWhenGivenOne) {
  const auto backend = loaded_backend();
  const auto tokens = twell::random_tokens(1, 96, 512, 8);
  twell::ForwardOptions dense;
  dense.keep_final_hidden = true;
  const Matrix expected = backend->forward(tokens, dense, nullptr, {}, {}).final_hidden;

  for (const auto& paths : {std::vector<FfnPath>{FfnPath::Twell, FfnPath::Dense},
                            std::vector<FfnPath>{FfnPath::Dense, FfnPath::Twell}}) {
    twell::ForwardOptions options;
    options.ffn_path = FfnPath::Dense;  // overridden by layer_paths
    options.layer_paths = paths;
    options.keep_final_hidden = true;
    options.capture_statistics = true;
    options.map_shape = {8, 16};
    RecordingTracer tracer;
    twell::TraceTag base;
    base.phase = "end_to_end";
    base.path = "dispatch";
    const auto result = backend->forward(tokens, options, &tracer, base, {});
    EXPECT_LT(twell::compare_outputs(expected, result.final_hidden).rel_frobenius, 1e-5);
    std::set<std::string> ffn_ops[2];
    for (const auto& tag : tracer.tags()) {
      EXPECT_EQ(tag.path, "dispatch") << tag.op;  // the forward's own name stays on every op
      if (tag.layer >= 0) ffn_ops[tag.layer].insert(tag.op);
    }
    for (std::size_t layer = 0; layer < 2; ++layer) {
      const bool twell_layer = paths[layer] == FfnPath::Twell;
      EXPECT_EQ(ffn_ops[layer].count("gate_pack"), twell_layer ? 1u : 0u) << layer;
      EXPECT_EQ(ffn_ops[layer].count("gate_up"), twell_layer ? 0u : 1u) << layer;
      EXPECT_EQ(result.layers[layer].summary.tokens, 96u) << layer;  // statistics on either path
    }
  }

  twell::ForwardOptions short_list;
  short_list.layer_paths = {FfnPath::Twell};
  try {
    backend->forward(tokens, short_list, nullptr, {}, {});
    ADD_FAILURE() << "a path list for 1 of 2 layers was accepted";
  } catch (const twell::Error& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("FFN paths for 1 layers, but the model has 2"), std::string::npos)
        << e.what();
  }
}

TEST(CpuBackend, RunLayerFfnInTheHookAgreesAcrossPathsAndIsTagged) {
  const auto backend = loaded_backend();
  RecordingTracer tracer;
  std::vector<twell::ErrorMetrics> errors;
  auto hook = [&](std::size_t layer) {
    twell::TraceTag tag;
    tag.phase = "layer_ffn";
    EXPECT_EQ(backend->run_layer_ffn(layer, FfnPath::Dense, {}, &tracer, tag), 0u);
    backend->run_layer_ffn(layer, FfnPath::Twell, {}, &tracer, tag);
    errors.push_back(backend->compare_layer_ffn_outputs(FfnPath::Dense, FfnPath::Twell));
  };
  twell::TraceTag base;
  base.phase = "capture";
  backend->forward(twell::random_tokens(1, 128, 512, 4), {}, &tracer, base, hook);
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors) {
    EXPECT_LT(e.rel_frobenius, 1e-5);
    EXPECT_GT(e.cosine, 0.99999);
  }
  std::set<std::string> layer_ffn_ops, forward_ops;
  for (const auto& tag : tracer.tags()) {
    if (tag.phase == "layer_ffn") {
      EXPECT_GE(tag.layer, 0);
      EXPECT_TRUE(tag.path == "dense" || tag.path == "twell") << tag.path;
      layer_ffn_ops.insert(tag.path + ":" + tag.op);
    } else {
      EXPECT_EQ(tag.phase, "capture");
      forward_ops.insert(tag.op);
    }
  }
  // overflow_dense appears only when a row overflowed (position 0 of this model is dense).
  layer_ffn_ops.erase("twell:overflow_dense");
  EXPECT_EQ(layer_ffn_ops,
            (std::set<std::string>{"dense:gate_up", "dense:down", "twell:gate_pack", "twell:up_down"}));
  for (const char* op : {"embedding", "attn_norm", "qkv", "rope", "attention", "o_proj", "ffn_norm",
                         "gate_up", "down", "final_norm"})
    EXPECT_TRUE(forward_ops.count(op)) << op;

  // Outside a hook there is no current layer.
  EXPECT_THROW(backend->run_layer_ffn(0, FfnPath::Dense, {}, nullptr, {}), twell::Error);
  EXPECT_THROW(backend->compare_layer_ffn_outputs(FfnPath::Dense, FfnPath::Twell), twell::Error);
}

TEST(CpuBackend, TwellFfnRoutesOverflowingRowsDensely) {
  const auto backend = loaded_backend();
  // Random inputs put the bias channel anywhere: about half the neurons fire, far beyond a tile's
  // capacity at every C, so every row overflows; a few sparse rows stay on the TwELL path.
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Matrix input(24, 256);
  for (float& v : input.data) v = normal(rng);
  // Few overflowing rows take the matrix-vector fallback (four rows at a time, then one by one),
  // many the GEMM.
  Matrix three(3, 256), seven(7, 256);
  for (Matrix* few : {&three, &seven})
    std::copy(input.data.begin(), input.data.begin() + few->data.size(), few->data.begin());
  for (const Matrix* x : {&three, &seven, &input}) {
    for (const std::uint32_t c : {8u, 4u, 2u}) {
      twell::FfnOptions options;
      options.compression = c;
      const Matrix dense = backend->ffn(1, *x, FfnPath::Dense, options);
      const Matrix twell_out = backend->ffn(1, *x, FfnPath::Twell, options);
      EXPECT_LT(twell::compare_outputs(dense, twell_out).rel_frobenius, 1e-5)
          << "C=" << c << " rows " << x->rows;
    }
  }
  // The same through the reference TwELL FFN, which reports the overflowing rows.
  const auto checkpoint = twell::Checkpoint::open(tiny_model());
  const auto weights = twell::reference::load_model_weights(checkpoint);
  const auto& w = weights.layers[1];
  const auto reference = twell::reference::twell_ffn(input, {&w.gate, &w.up, &w.down, &w.down_t}, 8,
                                                     twell::reference::Precision::Fp32);
  EXPECT_GT(reference.overflow_rows, 0u);
  EXPECT_LT(twell::compare_outputs(reference.out, backend->ffn(1, input, FfnPath::Twell, {})).rel_frobenius,
            1e-5);
}

TEST(CpuBackend, TwellPathCountsOverflowRowsInTheForward) {
  const auto backend = loaded_backend();
  twell::ForwardOptions options;
  options.ffn_path = FfnPath::Twell;
  options.ffn.compression = 2;  // capacity 127 of 256: holds this model's rows
  const auto result = backend->forward(twell::random_tokens(1, 64, 512, 6), options, nullptr, {}, {});
  for (const auto& layer : result.layers) EXPECT_EQ(layer.overflow_rows, 0u);
}

TEST(CpuBackend, RejectsBadUse) {
  const auto backend = loaded_backend();
  EXPECT_THROW(backend->ffn(2, Matrix(1, 256), FfnPath::Dense, {}), twell::Error);  // no layer 2
  EXPECT_THROW(backend->ffn(0, Matrix(1, 128), FfnPath::Dense, {}), twell::Error);  // wrong width
  twell::FfnOptions bad_c;
  bad_c.compression = 3;
  EXPECT_THROW(backend->ffn(0, Matrix(1, 256), FfnPath::Twell, bad_c), twell::Error);
  twell::TokenBatch out_of_vocab = twell::random_tokens(1, 4, 512, 1);
  out_of_vocab.ids[2] = 512;
  EXPECT_THROW(backend->forward(out_of_vocab, {}, nullptr, {}, {}), twell::Error);
}

TEST(CpuBackend, TwellNeedsAReluGate) {
  twell::Checkpoint::Options options;
  options.activation_override = twell::Activation::Silu;
  const auto backend = loaded_backend(options);
  EXPECT_EQ(backend->activation(), twell::Activation::Silu);
  EXPECT_NO_THROW(backend->ffn(0, Matrix(2, 256, 0.5f), FfnPath::Dense, {}));
  try {
    backend->ffn(0, Matrix(2, 256, 0.5f), FfnPath::Twell, {});
    ADD_FAILURE() << "TwELL ran a SiLU gate";
  } catch (const twell::Error& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::Unsupported);
  }
}

}  // namespace
