// SPDX-License-Identifier: GPL-3.0-or-later
// CudaBackend and the transformer kernels against core's fp32 CPU reference: the whole forward of
// the tiny generated model, attention on odd lengths with grouped KV heads, the statistics and
// comparison kernels, and the out-of-memory refusals (running, loading) that leave the backend usable.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "gpu_test_support.hpp"
#include "test_support.hpp"
#include "twell/activation_summary.hpp"
#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/kernels/activation_stats.hpp"
#include "twell/kernels/cuda_backend.hpp"
#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/output_compare.hpp"
#include "twell/kernels/transformer_ops.hpp"
#include "twell/metrics.hpp"
#include "twell/model_generator.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/reference_forward.hpp"
#include "twell/tokens.hpp"
#include "twell/twell_kernel_request.hpp"

namespace twell {
namespace {

using Bf16 = __nv_bfloat16;

const std::filesystem::path& tiny_model() {
  return test::generated_tiny_model();
}

double cosine(const Matrix& reference, const Matrix& candidate) {
  return compare_outputs(reference, candidate).cosine;
}

Matrix random_bf16_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  Matrix m(rows, cols);
  for (float& v : m.data) v = round_to_bf16(normal(rng));
  return m;
}

/// The CPU reference forward of a checkpoint (fp32, dense ReLU-or-SiLU FFN), keeping each layer's
/// output hidden state and gate pre-activations.
struct CpuForward {
  std::vector<Matrix> hidden;
  std::vector<Matrix> gate_preactivation;
  Matrix final_hidden;
};

CpuForward cpu_forward(const Checkpoint& checkpoint, const TokenBatch& tokens) {
  const reference::ModelWeights weights = reference::load_model_weights(checkpoint);
  CpuForward out;
  out.hidden.resize(weights.layers.size());
  out.gate_preactivation.resize(weights.layers.size());
  auto ffn = [&](std::size_t layer, const Matrix& x) {
    const auto& w = weights.layers[layer];
    const reference::FfnWeights view{&w.gate, &w.up, &w.down, &w.down_t};
    return reference::dense_ffn(x, view, weights.activation, reference::Precision::Fp32,
                                &out.gate_preactivation[layer]);
  };
  auto observer = [&](std::size_t layer, const Matrix& hidden) { out.hidden[layer] = hidden; };
  out.final_hidden = reference::forward_backbone(weights, tokens, ffn, observer, nullptr, TraceTag{});
  return out;
}

/// A CUDA backend with the generated tiny model loaded, for the tests that run it whole.
class CudaBackendOnTinyModel : public ::testing::Test {
 protected:
  void SetUp() override {
    TWELL_REQUIRE_CUDA_DEVICE();  // before any work: without a device the tests skip at once
    tiny.emplace(Checkpoint::open(tiny_model()));
    backend = cuda::make_cuda_backend(0);
    backend->load(*tiny);
  }
  const Checkpoint& checkpoint() const { return *tiny; }
  TokenBatch random_batch(std::uint32_t batch, std::uint32_t sequence, std::uint64_t seed) const {
    return random_tokens(batch, sequence, static_cast<std::uint32_t>(checkpoint().config().vocab_size), seed);
  }

  std::optional<Checkpoint> tiny;
  std::unique_ptr<Backend> backend;
};

/// Keeps every tag pushed; times nothing.
struct TagRecorder final : Tracer {
  std::vector<TraceTag> tags;
  TracerInfo info() const override { return {"tags", "none", "", false}; }
  void push(const TraceTag& tag) override { tags.push_back(tag); }
  void pop() override {}
  std::vector<KernelRecord> collect() override { return {}; }
};

TEST_F(CudaBackendOnTinyModel, ForwardMatchesCpuReferenceOnBothFfnPathsAndPerLayerPaths) {
  const auto& config = checkpoint().config();
  const TokenBatch tokens = random_batch(3, 77, 5);
  const CpuForward expected = cpu_forward(checkpoint(), tokens);

  ForwardOptions options;
  options.keep_layer_hidden = true;
  options.keep_final_hidden = true;
  options.capture_statistics = true;
  const auto tokens_count = static_cast<std::uint32_t>(tokens.count());
  const auto neurons = static_cast<std::uint32_t>(config.intermediate_size);
  options.map_shape = {tokens_count, neurons};  // one cell per (token, neuron): the exact firing mask

  // Every layer dense, every layer TwELL, then layer by layer alternating (the dispatch forward).
  std::vector<FfnPath> alternating(checkpoint().layer_count());
  for (std::size_t l = 0; l < alternating.size(); ++l)
    alternating[l] = l % 2 ? FfnPath::Dense : FfnPath::Twell;
  for (const std::vector<FfnPath>& layer_paths :
       {std::vector<FfnPath>(alternating.size(), FfnPath::Dense),
        std::vector<FfnPath>(alternating.size(), FfnPath::Twell), alternating}) {
    const bool mixed = layer_paths == alternating;
    SCOPED_TRACE(mixed ? "per-layer paths" : to_string(layer_paths[0]));
    options.ffn_path = layer_paths[0];
    options.layer_paths = mixed ? layer_paths : std::vector<FfnPath>{};
    TagRecorder tracer;
    TraceTag base;
    base.path = mixed ? "dispatch" : "";
    const ForwardResult result = backend->forward(tokens, options, &tracer, base, {});
    std::set<int> ffn_layers_seen;
    for (const TraceTag& tag : tracer.tags) {
      if (tag.layer < 0 || (tag.op != "gate_pack" && tag.op != "gate_up")) continue;
      ffn_layers_seen.insert(tag.layer);
      // Each layer's FFN ran on its own path, under the forward's name when it has one.
      EXPECT_EQ(tag.op == "gate_pack", layer_paths[std::size_t(tag.layer)] == FfnPath::Twell) << tag.layer;
      if (mixed) {
        EXPECT_EQ(tag.path, "dispatch");
      }
    }
    EXPECT_EQ(ffn_layers_seen.size(), layer_paths.size());
    ASSERT_EQ(result.layers.size(), expected.hidden.size());
    for (std::size_t l = 0; l < result.layers.size(); ++l) {
      SCOPED_TRACE("layer " + std::to_string(l));
      const Matrix& gpu_hidden = result.layers[l].hidden_out;
      ASSERT_EQ(gpu_hidden.rows, expected.hidden[l].rows);
      ASSERT_EQ(gpu_hidden.cols, expected.hidden[l].cols);
      EXPECT_GE(cosine(gpu_hidden, expected.hidden[l]), 0.999);

      // Firing patterns, away from the ReLU boundary: entries whose CPU pre-activation is within
      // 2 % of the row's RMS of zero may flip under bf16 rounding and are not counted.
      const Matrix& pre = expected.gate_preactivation[l];
      const ActivationSummary& summary = result.layers[l].summary;
      ASSERT_EQ(summary.map.rows, tokens_count);
      ASSERT_EQ(summary.map.cols, neurons);
      std::uint64_t counted = 0, agreed = 0;
      for (std::size_t t = 0; t < pre.rows; ++t) {
        double sum_sq = 0;
        for (float v : pre.row(t)) sum_sq += static_cast<double>(v) * v;
        const double margin = 0.02 * std::sqrt(sum_sq / static_cast<double>(pre.cols));
        for (std::size_t n = 0; n < pre.cols; ++n) {
          const float v = pre.at(t, n);
          if (std::fabs(v) <= margin) continue;
          ++counted;
          agreed += (v > 0.0f) == (summary.map.cells[t * pre.cols + n] != 0);
        }
      }
      ASSERT_GT(counted, pre.data.size() / 2);
      EXPECT_GE(static_cast<double>(agreed) / static_cast<double>(counted), 0.999);
    }
    EXPECT_GE(cosine(result.final_hidden, expected.final_hidden), 0.999);
  }

  ForwardOptions wrong_count;
  wrong_count.layer_paths.assign(checkpoint().layer_count() + 1, FfnPath::Twell);
  EXPECT_THROW(backend->forward(tokens, wrong_count, nullptr, TraceTag{}, {}), Error);
}

TEST_F(CudaBackendOnTinyModel, LayerHookRunsBothPathsAndComparesOnTheDevice) {
  EXPECT_THROW(backend->run_layer_ffn(0, FfnPath::Dense, FfnOptions{}, nullptr, TraceTag{}), Error);
  std::vector<ErrorMetrics> metrics;
  auto hook = [&](std::size_t layer) {
    backend->run_layer_ffn(layer, FfnPath::Dense, FfnOptions{}, nullptr, TraceTag{});
    backend->run_layer_ffn(layer, FfnPath::Twell, FfnOptions{}, nullptr, TraceTag{});
    metrics.push_back(backend->compare_layer_ffn_outputs(FfnPath::Dense, FfnPath::Twell));
  };
  backend->forward(random_batch(2, 128, 9), ForwardOptions{}, nullptr, TraceTag{}, hook);
  ASSERT_EQ(metrics.size(), checkpoint().layer_count());
  for (const ErrorMetrics& m : metrics) {
    EXPECT_LT(m.rel_frobenius, 2e-2);
    EXPECT_GT(m.cosine, 0.999);
  }
  EXPECT_THROW(backend->compare_layer_ffn_outputs(FfnPath::Dense, FfnPath::Twell), Error);
}

// A forward reads its TwELL layers' overflow counts only once it is done (the unbounded route does
// not hold the host per layer): each must still be the count of that layer's FFN on that layer's
// input, which the hook's run of the same kernels on the same input returns at once.
TEST_F(CudaBackendOnTinyModel, ForwardKeepsEachTwellLayersOverflowCount) {
  const TokenBatch tokens = random_batch(2, 96, 11);
  std::vector<Matrix> final_hidden;
  for (const char* kernels : {"cublas_pack/auto/dense", "cublas_pack/auto/unbounded"}) {
    SCOPED_TRACE(kernels);
    ForwardOptions options;
    options.ffn_path = FfnPath::Twell;
    options.ffn.twell_kernels = parse_twell_kernel_request(kernels);
    options.keep_final_hidden = true;
    std::vector<std::uint64_t> hook_counts;
    auto hook = [&](std::size_t layer) {
      hook_counts.push_back(backend->run_layer_ffn(layer, FfnPath::Twell, options.ffn, nullptr, TraceTag{}));
    };
    const ForwardResult result = backend->forward(tokens, options, nullptr, TraceTag{}, hook);
    ASSERT_EQ(hook_counts.size(), result.layers.size());
    std::uint64_t total = 0;
    for (std::size_t l = 0; l < result.layers.size(); ++l) {
      EXPECT_EQ(result.layers[l].overflow_rows, hook_counts[l]) << "layer " << l;
      total += hook_counts[l];
    }
    EXPECT_GT(total, 0u);  // the tiny model's rows overflow C = 8: the counts are not all zero
    final_hidden.push_back(result.final_hidden);
  }
  EXPECT_GE(cosine(final_hidden[0], final_hidden[1]), 0.999);

  // Kernels the unbounded route cannot run behind are refused before anything runs.
  for (const char* accepted : {"auto/auto/unbounded", "cublas_pack/balanced_cta/unbounded"}) {
    FfnOptions options;
    options.twell_kernels = parse_twell_kernel_request(accepted);
    EXPECT_NO_THROW(backend->check_ffn_options(options)) << accepted;
  }
  for (const char* refused :
       {"portable/auto/unbounded", "sm90/auto/unbounded", "auto/per_token_warp/unbounded"}) {
    FfnOptions options;
    options.twell_kernels = parse_twell_kernel_request(refused);
    try {
      backend->check_ffn_options(options);
      ADD_FAILURE() << refused << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the unbounded overflow route"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaBackend, StatesTheBreakEvenItsDispatchApplies) {
  TWELL_REQUIRE_CUDA_DEVICE();
  auto backend = cuda::make_cuda_backend(0);
  EXPECT_THROW((void)backend->ffn_break_even(256, FfnOptions{}), Error);  // nothing loaded
  const Checkpoint checkpoint = Checkpoint::open(tiny_model());
  backend->load(checkpoint);
  // No GPU was measured on the tiny model's shape: the conservative default, saying so.
  const std::optional<FfnBreakEven> break_even = backend->ffn_break_even(256, FfnOptions{});
  ASSERT_TRUE(break_even);
  EXPECT_FALSE(break_even->measured);
  EXPECT_EQ(break_even->density, kConservativeTwellBreakEven);
  EXPECT_NE(break_even->basis.find("conservative default"), std::string::npos) << break_even->basis;
}

TEST_F(CudaBackendOnTinyModel, FfnOnHostInputMatchesReference) {
  const reference::ModelWeights weights = reference::load_model_weights(checkpoint());
  const auto& w = weights.layers[1];
  const Matrix x = random_bf16_matrix(45, static_cast<std::size_t>(checkpoint().config().hidden_size), 4);
  const Matrix expected = reference::dense_ffn(x, {&w.gate, &w.up, &w.down, &w.down_t}, weights.activation,
                                               reference::Precision::Fp32);
  for (FfnPath path : {FfnPath::Dense, FfnPath::Twell}) {
    const Matrix got = backend->ffn(1, x, path, FfnOptions{});
    EXPECT_GE(cosine(got, expected), 0.999) << to_string(path);
  }
}

TEST_F(CudaBackendOnTinyModel, TooLargeInputGivesOutOfMemoryAndTheBackendStaysUsable) {
  const TokenBatch small = random_batch(2, 64, 1);
  ForwardOptions options;
  options.keep_final_hidden = true;
  const Matrix before = backend->forward(small, options, nullptr, TraceTag{}, {}).final_hidden;

  std::size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  // Per token, where no fixed workspace (the balanced consumer's, the cuBLAS gate's) changes with M.
  int ordinal = 0;
  ASSERT_EQ(cudaGetDevice(&ordinal), cudaSuccess);
  constexpr std::uint64_t kLarge = 1u << 16;
  const std::uint64_t per_token =
      cuda::planned_forward_bytes(checkpoint().config(), kLarge + 1, options, false, ordinal) -
      cuda::planned_forward_bytes(checkpoint().config(), kLarge, options, false, ordinal);
  ASSERT_GT(per_token, 0u);
  constexpr std::uint32_t kSequence = 256;
  TokenBatch huge;
  huge.sequence = kSequence;
  huge.batch = static_cast<std::uint32_t>(free_bytes / per_token / kSequence + 16);
  huge.ids.assign(static_cast<std::size_t>(huge.batch) * kSequence, 1);
  huge.source = "a batch sized past the free memory";
  try {
    backend->forward(huge, options, nullptr, TraceTag{}, {});
    FAIL() << "a forward larger than the device's free memory did not fail";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), Error::Kind::OutOfMemory) << error.what();
    const std::string message = error.what();
    EXPECT_NE(message.find("bytes"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(huge.batch)), std::string::npos) << message;
  }
  const Matrix after = backend->forward(small, options, nullptr, TraceTag{}, {}).final_hidden;
  EXPECT_EQ(after.data, before.data);
}

TEST(CudaBackend, OutOfMemoryWhileLoadingSaysSoReleasesItAndTheBackendStaysUsable) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const Checkpoint checkpoint = Checkpoint::open(tiny_model());
  auto backend = cuda::make_cuda_backend(0);
  std::size_t free_before = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total_bytes), cudaSuccess);

  // Another tenant takes nearly all of the device's memory.
  std::vector<void*> hog;
  for (std::size_t chunk : {std::size_t{1} << 30, std::size_t{64} << 20, std::size_t{1} << 20}) {
    void* block = nullptr;
    while (cudaMalloc(&block, chunk) == cudaSuccess) hog.push_back(block);
    (void)cudaGetLastError();
  }
  try {
    backend->load(checkpoint);
    ADD_FAILURE() << "loading with the device full did not fail";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), Error::Kind::OutOfMemory) << error.what();
    EXPECT_NE(std::string(error.what()).find("MiB free"), std::string::npos) << error.what();
  }
  for (void* block : hog) ASSERT_EQ(cudaFree(block), cudaSuccess);

  std::size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total_bytes), cudaSuccess);
  EXPECT_GE(free_after + (std::size_t{8} << 20), free_before) << "the failed load kept device memory";
  backend->load(checkpoint);
  const TokenBatch tokens =
      random_tokens(2, 32, static_cast<std::uint32_t>(checkpoint.config().vocab_size), 4);
  ForwardOptions options;
  options.keep_final_hidden = true;
  const Matrix hidden = backend->forward(tokens, options, nullptr, TraceTag{}, {}).final_hidden;
  ASSERT_EQ(hidden.rows, 64u);
  for (float value : hidden.data) ASSERT_TRUE(std::isfinite(value));
}

struct AttentionCase {
  int batch, sequence, q_heads, kv_heads, head_dim;
};

TEST(TransformerKernels, AttentionMatchesCpuReferenceOnOddLengthsAndGroupedHeads) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const AttentionCase cases[] = {{2, 1, 4, 2, 64},   {2, 37, 4, 2, 64},    {1, 130, 4, 4, 64},
                                 {3, 257, 8, 2, 64}, {1, 1000, 2, 1, 128}, {2, 129, 4, 2, 128},
                                 {1, 75, 2, 2, 32},  {1, 200, 3, 1, 96}};
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(std::to_string(c.batch) + " x " + std::to_string(c.sequence) + ", heads " +
                 std::to_string(c.q_heads) + "/" + std::to_string(c.kv_heads) + ", head_dim " +
                 std::to_string(c.head_dim));
    const std::size_t m = static_cast<std::size_t>(c.batch) * c.sequence;
    const std::size_t q_cols = static_cast<std::size_t>(c.q_heads) * c.head_dim;
    const std::size_t kv_cols = static_cast<std::size_t>(c.kv_heads) * c.head_dim;
    const Matrix qkv = random_bf16_matrix(m, q_cols + 2 * kv_cols, 100 + c.sequence, 1.5f);
    Matrix q(m, q_cols), k(m, kv_cols), v(m, kv_cols);
    for (std::size_t t = 0; t < m; ++t) {
      for (std::size_t j = 0; j < q_cols; ++j) q.at(t, j) = qkv.at(t, j);
      for (std::size_t j = 0; j < kv_cols; ++j) {
        k.at(t, j) = qkv.at(t, q_cols + j);
        v.at(t, j) = qkv.at(t, q_cols + kv_cols + j);
      }
    }
    reference::AttentionGeometry geometry;
    geometry.batch = static_cast<std::uint32_t>(c.batch);
    geometry.sequence = static_cast<std::uint32_t>(c.sequence);
    geometry.heads = static_cast<std::uint32_t>(c.q_heads);
    geometry.kv_heads = static_cast<std::uint32_t>(c.kv_heads);
    geometry.head_dim = static_cast<std::uint32_t>(c.head_dim);
    geometry.inverse_frequencies.assign(static_cast<std::size_t>(c.head_dim / 2), 0.0);
    const Matrix expected = reference::causal_attention(q, k, v, geometry);

    auto device_qkv = test::upload_bf16(qkv);
    auto device_out = test::poisoned_bf16(m * q_cols);
    cuda::flash_attention(device_qkv.data(), {c.batch, c.sequence, c.q_heads, c.kv_heads, c.head_dim},
                          device_out.data(), nullptr);
    const Matrix got = test::download_bf16(device_out.data(), m, q_cols);
    const ErrorMetrics error = compare_outputs(expected, got);
    EXPECT_LT(error.rel_frobenius, 1e-2);
    EXPECT_LT(error.max_abs, 0.1);
  }
}

TEST(TransformerKernels, RopeAndNormsMatchCpuReference) {
  TWELL_REQUIRE_CUDA_DEVICE();
  constexpr int kBatch = 2, kSequence = 33, kHeads = 4, kKvHeads = 2, kHeadDim = 64;
  const std::size_t m = kBatch * kSequence;
  const std::size_t cols = (kHeads + 2 * kKvHeads) * kHeadDim;
  ModelConfig config;
  config.hidden_size = kHeads * kHeadDim;
  config.num_attention_heads = kHeads;
  config.num_key_value_heads = kKvHeads;
  config.head_dim = kHeadDim;
  config.rope_theta = 1e5;
  const reference::AttentionGeometry geometry = reference::attention_geometry(config, kBatch, kSequence);
  const Matrix qkv = random_bf16_matrix(m, cols, 7);
  Matrix expected_q(m, kHeads * kHeadDim), expected_k(m, kKvHeads * kHeadDim);
  for (std::size_t t = 0; t < m; ++t) {
    for (std::size_t j = 0; j < expected_q.cols; ++j) expected_q.at(t, j) = qkv.at(t, j);
    for (std::size_t j = 0; j < expected_k.cols; ++j) expected_k.at(t, j) = qkv.at(t, expected_q.cols + j);
  }
  reference::apply_rope(expected_q, kHeads, geometry);
  reference::apply_rope(expected_k, kKvHeads, geometry);
  std::vector<float2> table(kSequence * kHeadDim / 2);
  cuda::rope_table(kSequence, geometry.inverse_frequencies, table.data());
  cuda::DeviceBuffer<float2> device_table(table.size());
  ASSERT_EQ(
      cudaMemcpy(device_table.data(), table.data(), table.size() * sizeof(float2), cudaMemcpyHostToDevice),
      cudaSuccess);
  auto device_qkv = test::upload_bf16(qkv);
  cuda::apply_rope(device_qkv.data(), m, kSequence, kHeads, kKvHeads, kHeadDim, device_table.data(), nullptr);
  const Matrix got = test::download_bf16(device_qkv.data(), m, cols);
  for (std::size_t t = 0; t < m; ++t) {
    for (std::size_t j = 0; j < cols; ++j) {
      const float want = j < expected_q.cols                     ? expected_q.at(t, j)
                         : j < expected_q.cols + expected_k.cols ? expected_k.at(t, j - expected_q.cols)
                                                                 : qkv.at(t, j);
      ASSERT_NEAR(got.at(t, j), want, 1e-2f + 8e-3f * std::fabs(want)) << "token " << t << " column " << j;
    }
  }

  // RMSNorm, then the fused residual add + RMSNorm.
  constexpr int kHidden = 2048;
  const Matrix x = random_bf16_matrix(m, kHidden, 8, 3.0f);
  const Matrix delta = random_bf16_matrix(m, kHidden, 9);
  const Matrix weight = random_bf16_matrix(1, kHidden, 10);
  Matrix sum(m, kHidden);
  for (std::size_t i = 0; i < sum.data.size(); ++i) sum.data[i] = round_to_bf16(x.data[i] + delta.data[i]);
  Matrix expected_norm, expected_fused;
  reference::rms_norm(x, weight.data, 1e-5, expected_norm);
  reference::rms_norm(sum, weight.data, 1e-5, expected_fused);
  auto device_x = test::upload_bf16(x);
  auto device_delta = test::upload_bf16(delta);
  auto device_weight = test::upload_bf16(weight);
  auto device_out = test::poisoned_bf16(m * kHidden);
  cuda::rms_norm(device_x.data(), device_weight.data(), m, kHidden, 1e-5f, device_out.data(), nullptr);
  EXPECT_GT(cosine(test::download_bf16(device_out.data(), m, kHidden), expected_norm), 0.99999);
  cuda::add_rms_norm(device_x.data(), device_delta.data(), device_weight.data(), m, kHidden, 1e-5f,
                     device_out.data(), nullptr);
  EXPECT_EQ(test::download_bf16(device_x.data(), m, kHidden).data,
            sum.data);  // the residual, rounded to bf16
  EXPECT_GT(cosine(test::download_bf16(device_out.data(), m, kHidden), expected_fused), 0.99999);
}

TEST(TransformerKernels, StatisticsEqualSummarizePreactivations) {
  TWELL_REQUIRE_CUDA_DEVICE();
  struct Case {
    std::size_t tokens, neurons, stride;
    MapShape map;
  };
  const Case cases[] = {{1000, 700, 700, {64, 50}},
                        {333, 1024, 1032, {333, 1024}},
                        {5, 3, 3, {256, 512}},
                        {4097, 5632, 5632, {256, 512}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.tokens) + " x " + std::to_string(c.neurons));
    std::mt19937_64 rng(c.tokens * 31 + c.neurons);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    // Per-token densities from very sparse to dense, so every histogram bin region is exercised.
    Matrix pre(c.tokens, c.neurons);
    std::vector<std::uint16_t> bits(c.tokens * c.stride, float_to_bf16_bits(-1.0f));
    for (std::size_t t = 0; t < c.tokens; ++t) {
      const float density = t % 17 == 0 ? 0.6f : 0.01f * static_cast<float>(t % 5);
      for (std::size_t n = 0; n < c.neurons; ++n) {
        const float value =
            uniform(rng) < density ? round_to_bf16(0.1f + uniform(rng)) : -round_to_bf16(uniform(rng));
        pre.at(t, n) = value;
        bits[t * c.stride + n] = float_to_bf16_bits(value);
      }
    }
    const ActivationSummary expected = summarize_preactivations(
        pre.data.data(), static_cast<std::uint32_t>(c.tokens), static_cast<std::uint32_t>(c.neurons), c.map);
    cuda::DeviceBuffer<Bf16> device(bits.size());
    ASSERT_EQ(cudaMemcpy(device.data(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    cuda::ActivationStatsCollector collector;
    const ActivationSummary got =
        collector.summarize(device.data(), static_cast<std::int64_t>(c.tokens), static_cast<int>(c.neurons),
                            static_cast<std::int64_t>(c.stride), c.map, nullptr);
    EXPECT_EQ(got.tokens, expected.tokens);
    EXPECT_EQ(got.neurons, expected.neurons);
    EXPECT_EQ(got.nnz_per_token, expected.nnz_per_token);
    EXPECT_EQ(got.neuron_fire_counts, expected.neuron_fire_counts);
    EXPECT_EQ(got.tile_count_histogram, expected.tile_count_histogram);
    EXPECT_EQ(got.row_max_tile_histogram, expected.row_max_tile_histogram);
    EXPECT_EQ(got.map, expected.map);
  }
}

TEST(TransformerKernels, OutputErrorSumsMatchHostMetrics) {
  TWELL_REQUIRE_CUDA_DEVICE();
  for (std::size_t count : {std::size_t{1}, std::size_t{13}, std::size_t{4096 * 256 + 5}}) {
    const Matrix a = random_bf16_matrix(1, count, count);
    Matrix b = a;
    std::mt19937_64 rng(count + 1);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    for (float& v : b.data) v = round_to_bf16(v + noise(rng));
    auto device_a = test::upload_bf16(a);
    auto device_b = test::upload_bf16(b);
    cuda::DeviceBuffer<unsigned char> scratch(cuda::kErrorSumsScratchBytes);
    const ErrorMetrics got = error_metrics_from_sums(cuda::output_error_sums(
        device_a.data(), device_b.data(), static_cast<std::int64_t>(count), scratch.data(), nullptr));
    const ErrorMetrics expected = compare_outputs(a, b);
    EXPECT_NEAR(got.rel_frobenius, expected.rel_frobenius, 1e-9 + 1e-9 * expected.rel_frobenius);
    EXPECT_DOUBLE_EQ(got.max_abs, expected.max_abs);
    EXPECT_NEAR(got.cosine, expected.cosine, 1e-9);
  }
}

}  // namespace
}  // namespace twell
