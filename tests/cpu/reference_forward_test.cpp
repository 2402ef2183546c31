// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "twell/error.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/reference_forward.hpp"

namespace {

using twell::Matrix;
using twell::reference::LayerWeights;
using twell::reference::ModelWeights;

Matrix random_matrix(std::size_t rows, std::size_t cols, std::mt19937& rng, float sigma = 0.3f) {
  std::normal_distribution<float> normal(0.0f, sigma);
  Matrix m(rows, cols);
  for (float& value : m.data) value = normal(rng);
  return m;
}

Matrix transposed(const Matrix& m) {
  Matrix t(m.cols, m.rows);
  for (std::size_t r = 0; r < m.rows; ++r)
    for (std::size_t c = 0; c < m.cols; ++c) t.at(c, r) = m.at(r, c);
  return t;
}

/// A small random Llama: D 16, 4 heads of 4, `kv_heads` KV heads, N 32, vocab 11, 2 layers.
ModelWeights small_model(std::uint32_t kv_heads, unsigned seed = 5) {
  std::mt19937 rng(seed);
  ModelWeights model;
  auto& c = model.config;
  c.model_type = "llama";
  c.hidden_size = 16;
  c.intermediate_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = kv_heads;
  c.head_dim = 4;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.vocab_size = 11;
  model.activation = twell::Activation::Relu;
  model.embedding = random_matrix(11, 16, rng, 1.0f);
  for (int l = 0; l < 2; ++l) {
    LayerWeights layer;
    layer.q = random_matrix(16, 16, rng);
    layer.k = random_matrix(kv_heads * 4, 16, rng);
    layer.v = random_matrix(kv_heads * 4, 16, rng);
    layer.o = random_matrix(16, 16, rng);
    layer.input_norm.assign(16, 1.1f);
    layer.post_attention_norm.assign(16, 0.9f);
    layer.gate = random_matrix(32, 16, rng);
    layer.up = random_matrix(32, 16, rng);
    layer.down = random_matrix(16, 32, rng);
    layer.down_t = transposed(layer.down);
    model.layers.push_back(std::move(layer));
  }
  model.final_norm.assign(16, 1.0f);
  return model;
}

/// The forward with the reference dense FFN; `per_layer` receives each layer's residual stream.
Matrix run_forward(const ModelWeights& model, const twell::TokenBatch& tokens,
                   std::vector<Matrix>* per_layer = nullptr) {
  auto ffn = [&](std::size_t layer, const Matrix& x) {
    const auto& w = model.layers[layer];
    const twell::reference::FfnWeights weights{&w.gate, &w.up, &w.down, &w.down_t};
    return twell::reference::dense_ffn(x, weights, model.activation, twell::reference::Precision::Fp32);
  };
  auto observer = [&](std::size_t, const Matrix& hidden) {
    if (per_layer) per_layer->push_back(hidden);
  };
  return twell::reference::forward_backbone(model, tokens, ffn, observer, nullptr, twell::TraceTag{}, 2);
}

twell::TokenBatch batch_of(std::uint32_t batch, std::uint32_t sequence, std::vector<std::int32_t> ids) {
  twell::TokenBatch tokens;
  tokens.batch = batch;
  tokens.sequence = sequence;
  tokens.ids = std::move(ids);
  return tokens;
}

TEST(ReferenceForward, ZeroAttentionAndFfnWeightsKeepTheResidualStream) {
  auto model = small_model(2);
  for (auto& layer : model.layers) {
    for (Matrix* m :
         {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down, &layer.down_t})
      std::fill(m->data.begin(), m->data.end(), 0.0f);
  }
  const auto tokens = batch_of(2, 3, {1, 4, 7, 10, 0, 4});
  std::vector<Matrix> per_layer;
  const Matrix final_hidden = run_forward(model, tokens, &per_layer);
  ASSERT_EQ(per_layer.size(), 2u);
  for (const auto& hidden : per_layer) {
    for (std::size_t t = 0; t < tokens.count(); ++t)
      for (std::size_t c = 0; c < 16; ++c) EXPECT_EQ(hidden.at(t, c), model.embedding.at(tokens.ids[t], c));
  }
  // The final norm is then RMSNorm of the embedding rows.
  const auto row = model.embedding.row(7);
  double sum = 0;
  for (const float v : row) sum += static_cast<double>(v) * v;
  const double rms = std::sqrt(sum / 16 + 1e-5);
  EXPECT_NEAR(final_hidden.at(2, 3), row[3] / rms, 1e-5);
}

TEST(ReferenceForward, IsCausal) {
  const auto model = small_model(2);
  const auto a = run_forward(model, batch_of(2, 5, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  const auto b = run_forward(model, batch_of(2, 5, {1, 2, 3, 4, 0, 6, 7, 8, 9, 3}));
  for (std::size_t row : {0, 1, 2, 3, 5, 6, 7, 8})
    for (std::size_t c = 0; c < 16; ++c) EXPECT_EQ(a.at(row, c), b.at(row, c)) << "row " << row;
  double difference = 0;
  for (std::size_t row : {4, 9})
    for (std::size_t c = 0; c < 16; ++c) difference += std::abs(a.at(row, c) - b.at(row, c));
  EXPECT_GT(difference, 1e-3);  // the changed positions do change
}

TEST(ReferenceForward, GroupedKvEqualsRepeatedKv) {
  const auto grouped = small_model(2);
  auto repeated = grouped;
  repeated.config.num_key_value_heads = 4;
  for (auto& layer : repeated.layers) {
    for (Matrix* m : {&layer.k, &layer.v}) {
      Matrix wide(16, 16);
      for (std::size_t head = 0; head < 4; ++head)  // query head h reads grouped KV head h / 2
        for (std::size_t r = 0; r < 4; ++r)
          for (std::size_t c = 0; c < 16; ++c) wide.at(head * 4 + r, c) = m->at((head / 2) * 4 + r, c);
      *m = wide;
    }
  }
  const auto tokens = batch_of(1, 7, {3, 1, 4, 1, 5, 9, 2});
  const auto a = run_forward(grouped, tokens);
  const auto b = run_forward(repeated, tokens);
  for (std::size_t i = 0; i < a.data.size(); ++i) EXPECT_NEAR(a.data[i], b.data[i], 1e-5f);
}

TEST(ReferenceForward, RopeMatchesAHandComputedRotation) {
  twell::ModelConfig config = small_model(2).config;
  config.num_attention_heads = 1;
  config.num_key_value_heads = 1;
  config.head_dim = 4;
  config.hidden_size = 4;
  const auto geometry = twell::reference::attention_geometry(config, 1, 2);
  ASSERT_EQ(geometry.inverse_frequencies.size(), 2u);
  EXPECT_DOUBLE_EQ(geometry.inverse_frequencies[1], 0.01);  // 10000^(-2/4)
  Matrix x(2, 4);
  x.data = {1, 2, 3, 4, 1, 2, 3, 4};
  twell::reference::apply_rope(x, 1, geometry);
  // Position 0 is not rotated.
  EXPECT_FLOAT_EQ(x.at(0, 0), 1);
  EXPECT_FLOAT_EQ(x.at(0, 3), 4);
  // Position 1: pairs (0, 2) at angle 1 and (1, 3) at angle 0.01 (rotate_half convention).
  EXPECT_NEAR(x.at(1, 0), 1 * std::cos(1.0) - 3 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(x.at(1, 2), 3 * std::cos(1.0) + 1 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(x.at(1, 1), 2 * std::cos(0.01) - 4 * std::sin(0.01), 1e-6);
  EXPECT_NEAR(x.at(1, 3), 4 * std::cos(0.01) + 2 * std::sin(0.01), 1e-6);
}

TEST(ReferenceForward, RopeScalingLinearAndUnsupportedTypes) {
  twell::ModelConfig config = small_model(2).config;
  const auto plain = twell::reference::attention_geometry(config, 1, 1);
  config.rope_scaling = R"({"rope_type": "linear", "factor": 4.0})";
  const auto scaled = twell::reference::attention_geometry(config, 1, 1);
  EXPECT_DOUBLE_EQ(scaled.inverse_frequencies[1], plain.inverse_frequencies[1] / 4);
  config.rope_scaling = R"({"rope_type": "yarn", "factor": 4.0})";
  try {
    twell::reference::attention_geometry(config, 1, 1);
    ADD_FAILURE() << "yarn accepted";
  } catch (const twell::Error& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("yarn"), std::string::npos);
  }
}

TEST(ReferenceForward, RmsNormMatchesAHandComputedRow) {
  Matrix x(1, 2);
  x.data = {3, 4};
  Matrix out;
  const std::vector<float> weight = {1, 2};
  twell::reference::rms_norm(x, weight, 0.0, out);
  const double rms = std::sqrt(12.5);
  EXPECT_NEAR(out.at(0, 0), 3 / rms, 1e-6);
  EXPECT_NEAR(out.at(0, 1), 8 / rms, 1e-6);
}

TEST(ReferenceForward, AttentionOfTheFirstPositionIsItsValue) {
  std::mt19937 rng(9);
  auto config = small_model(2).config;
  const auto geometry = twell::reference::attention_geometry(config, 2, 3);
  const Matrix q = random_matrix(6, 16, rng), k = random_matrix(6, 8, rng), v = random_matrix(6, 8, rng);
  const Matrix out = twell::reference::causal_attention(q, k, v, geometry);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t head = 0; head < 4; ++head)
      for (std::size_t i = 0; i < 4; ++i)
        EXPECT_FLOAT_EQ(out.at(b * 3, head * 4 + i), v.at(b * 3, (head / 2) * 4 + i));
}

TEST(ReferenceForward, RejectsTokensOutsideTheVocabulary) {
  const auto model = small_model(2);
  EXPECT_THROW(run_forward(model, batch_of(1, 2, {3, 11})), twell::Error);
  EXPECT_THROW(run_forward(model, batch_of(1, 2, {-1, 1})), twell::Error);
  EXPECT_THROW(run_forward(model, batch_of(1, 3, {1, 1})), twell::Error);  // ids do not fill the batch
}

TEST(ReferenceForward, ResultDoesNotDependOnTheThreadCount) {
  const auto model = small_model(2);
  std::vector<std::int32_t> ids(80);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7) % 11);
  const auto tokens = batch_of(2, 40, ids);
  auto ffn = [&](std::size_t layer, const Matrix& x) {
    const auto& w = model.layers[layer];
    const twell::reference::FfnWeights weights{&w.gate, &w.up, &w.down, &w.down_t};
    return twell::reference::dense_ffn(x, weights, model.activation, twell::reference::Precision::Fp32);
  };
  const auto one = twell::reference::forward_backbone(model, tokens, ffn, {}, nullptr, {}, 1);
  const auto two = twell::reference::forward_backbone(model, tokens, ffn, {}, nullptr, {}, 2);
  EXPECT_EQ(one.data, two.data);
}

}  // namespace
