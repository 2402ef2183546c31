// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/reference_forward.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include <nlohmann/json.hpp>

#include "cpu_vector.hpp"
#include "reference_parallel.hpp"
#include "twell/error.hpp"
#include "twell/reference_ffn.hpp"

// The attention's dot products and row updates are compiled for AVX-512 and AVX2 as well as the
// baseline (TWELL_CPU_CLONES), as the reference GEMM is.

namespace twell::reference {
namespace {

// Element-wise ops on fewer values than this run on the calling thread: starting threads would
// cost more than the work.
constexpr std::size_t kParallelElements = std::size_t{1} << 18;

unsigned threads_for(std::size_t elements, unsigned threads) {
  return elements < kParallelElements ? 1u : threads;
}

/// Scores of one query against keys 0..count-1 (row stride `stride`), then the softmax-weighted
/// sum of the values into `result`. Eight partial sums let the dot products vectorise without
/// reassociation flags.
TWELL_CPU_CLONES void attend_one_query(const float* query, const float* keys, const float* values,
                                       std::size_t stride, std::size_t count, std::size_t head_dim,
                                       float scale, float* weights, float* accumulator, float* result) {
  float max_score = -INFINITY;
  for (std::size_t t = 0; t < count; ++t) {
    const float* key = keys + t * stride;
    float partial[8] = {};
    std::size_t i = 0;
    for (; i + 8 <= head_dim; i += 8)
      for (std::size_t lane = 0; lane < 8; ++lane) partial[lane] += query[i + lane] * key[i + lane];
    float dot = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                ((partial[4] + partial[5]) + (partial[6] + partial[7]));
    for (; i < head_dim; ++i) dot += query[i] * key[i];
    weights[t] = dot * scale;
    max_score = std::max(max_score, weights[t]);
  }
  float total = 0;
  for (std::size_t t = 0; t < count; ++t) {
    weights[t] = std::exp(weights[t] - max_score);
    total += weights[t];
  }
  std::fill(accumulator, accumulator + head_dim, 0.0f);
  for (std::size_t t = 0; t < count; ++t) {
    const float* value = values + t * stride;
    const float p = weights[t];
    for (std::size_t i = 0; i < head_dim; ++i) accumulator[i] += p * value[i];
  }
  const float inverse_total = 1.0f / total;
  for (std::size_t i = 0; i < head_dim; ++i) result[i] = accumulator[i] * inverse_total;
}

std::string shape_text(std::size_t rows, std::size_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

void expect_shape(const Matrix& m, std::size_t rows, std::size_t cols, const std::string& what) {
  if (m.rows != rows || m.cols != cols) {
    throw Error(Error::Kind::InvalidInput,
                what + " is " + shape_text(m.rows, m.cols) + ", expected " + shape_text(rows, cols));
  }
}

std::vector<float> norm_vector(const RoleTensor& tensor, std::size_t size, const std::string& what) {
  const Matrix m = tensor.to_linear_matrix();
  if (m.data.size() != size) {
    throw Error(Error::Kind::InvalidInput, what + " has " + std::to_string(m.data.size()) +
                                               " elements, expected " + std::to_string(size));
  }
  return m.data;
}

Matrix transpose(const Matrix& m) {
  Matrix t(m.cols, m.rows);
  constexpr std::size_t kBlock = 64;
  for (std::size_t r0 = 0; r0 < m.rows; r0 += kBlock)
    for (std::size_t c0 = 0; c0 < m.cols; c0 += kBlock)
      for (std::size_t r = r0; r < std::min(r0 + kBlock, m.rows); ++r)
        for (std::size_t c = c0; c < std::min(c0 + kBlock, m.cols); ++c)
          t.data[c * m.rows + r] = m.data[r * m.cols + c];
  return t;
}

/// Applies a rope_scaling object to the inverse frequencies (Hugging Face's rope_type semantics).
void apply_rope_scaling(const std::string& scaling_json, std::int64_t max_positions_hint,
                        std::vector<double>& inverse_frequencies) {
  nlohmann::json scaling;
  try {
    scaling = nlohmann::json::parse(scaling_json);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Error::Kind::InvalidInput,
                std::string("config.json rope_scaling is not valid JSON: ") + e.what());
  }
  if (scaling.is_null()) return;
  if (!scaling.is_object())
    throw Error(Error::Kind::InvalidInput, "config.json rope_scaling must be an object");
  std::string type = scaling.value("rope_type", scaling.value("type", std::string("default")));
  if (type == "default") return;
  auto number = [&](const char* key) -> double {
    const auto it = scaling.find(key);
    if (it == scaling.end() || !it->is_number()) {
      throw Error(Error::Kind::InvalidInput,
                  "config.json rope_scaling (" + type + ") needs a numeric \"" + std::string(key) + "\"");
    }
    return it->get<double>();
  };
  if (type == "linear") {
    const double factor = number("factor");
    if (!(factor > 0))
      throw Error(Error::Kind::InvalidInput, "config.json rope_scaling factor must be positive");
    for (double& f : inverse_frequencies) f /= factor;
    return;
  }
  if (type == "llama3") {
    const double factor = number("factor");
    const double low = number("low_freq_factor");
    const double high = number("high_freq_factor");
    const double original = scaling.contains("original_max_position_embeddings")
                                ? number("original_max_position_embeddings")
                                : static_cast<double>(max_positions_hint);
    if (!(factor > 0) || !(high > low) || !(original > 0)) {
      throw Error(Error::Kind::InvalidInput, "config.json rope_scaling (llama3) has inconsistent factors");
    }
    const double low_wavelength = original / low;
    const double high_wavelength = original / high;
    for (double& f : inverse_frequencies) {
      const double wavelength = 2.0 * std::numbers::pi / f;
      if (wavelength > low_wavelength) {
        f /= factor;
      } else if (wavelength >= high_wavelength) {
        const double smooth = (original / wavelength - low) / (high - low);
        f = (1.0 - smooth) * f / factor + smooth * f;
      }
    }
    return;
  }
  throw Error(Error::Kind::Unsupported, "config.json rope_scaling type \"" + type +
                                            "\" is not supported (supported: default, linear, llama3)");
}

TraceTag op_tag(const TraceTag& base, int layer, const char* op) {
  TraceTag tag = base;
  tag.layer = layer;
  tag.op = op;
  return tag;
}

}  // namespace

ModelWeights load_model_weights(const Checkpoint& checkpoint, unsigned threads) {
  ModelWeights weights;
  weights.config = checkpoint.config();
  weights.activation = checkpoint.activation().activation;
  const auto& config = weights.config;
  const auto geometry = attention_geometry(config, 1, 1);
  const std::size_t d = static_cast<std::size_t>(config.hidden_size);
  const std::size_t q_out = static_cast<std::size_t>(geometry.heads) * geometry.head_dim;
  const std::size_t kv_out = static_cast<std::size_t>(geometry.kv_heads) * geometry.head_dim;

  weights.embedding = checkpoint.embedding().to_linear_matrix();
  if (weights.embedding.cols != d) {
    throw Error(Error::Kind::InvalidInput, "embedding is " +
                                               shape_text(weights.embedding.rows, weights.embedding.cols) +
                                               " but hidden_size is " + std::to_string(d));
  }
  weights.final_norm = norm_vector(checkpoint.final_norm(), d, "final norm");

  weights.layers.resize(checkpoint.layer_count());
  detail::parallel_for(weights.layers.size(), threads, [&](std::size_t index, unsigned) {
    const LayerTensors& tensors = checkpoint.layer(index);
    LayerWeights& layer = weights.layers[index];
    const std::string where = "layer " + std::to_string(index) + " ";
    layer.q = tensors.q.to_linear_matrix();
    layer.k = tensors.k.to_linear_matrix();
    layer.v = tensors.v.to_linear_matrix();
    layer.o = tensors.o.to_linear_matrix();
    expect_shape(layer.q, q_out, d, where + "q_proj");
    expect_shape(layer.k, kv_out, d, where + "k_proj");
    expect_shape(layer.v, kv_out, d, where + "v_proj");
    expect_shape(layer.o, d, q_out, where + "o_proj");
    layer.input_norm = norm_vector(tensors.input_norm, d, where + "input_layernorm");
    layer.post_attention_norm =
        norm_vector(tensors.post_attention_norm, d, where + "post_attention_layernorm");
    layer.up = tensors.up.to_linear_matrix();
    const std::size_t n = layer.up.rows;
    expect_shape(layer.up, n, d, where + "up_proj");
    if (tensors.gate.view != nullptr) {
      layer.gate = tensors.gate.to_linear_matrix();
      expect_shape(layer.gate, n, d, where + "gate_proj");
    }
    layer.down = tensors.down.to_linear_matrix();
    expect_shape(layer.down, d, n, where + "down_proj");
    layer.down_t = transpose(layer.down);
  });
  return weights;
}

AttentionGeometry attention_geometry(const ModelConfig& config, std::uint32_t batch, std::uint32_t sequence) {
  AttentionGeometry geometry;
  geometry.batch = batch;
  geometry.sequence = sequence;
  const std::int64_t heads = config.num_attention_heads;
  const std::int64_t kv_heads = config.num_key_value_heads > 0 ? config.num_key_value_heads : heads;
  if (heads <= 0 || config.hidden_size <= 0) {
    throw Error(Error::Kind::InvalidInput, "config: num_attention_heads and hidden_size must be positive");
  }
  const std::int64_t head_dim = config.head_dim > 0 ? config.head_dim : config.hidden_size / heads;
  if (heads % kv_heads != 0) {
    throw Error(Error::Kind::InvalidInput, "config: num_attention_heads (" + std::to_string(heads) +
                                               ") is not a multiple of num_key_value_heads (" +
                                               std::to_string(kv_heads) + ")");
  }
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw Error(Error::Kind::InvalidInput,
                "config: head_dim " + std::to_string(head_dim) + " must be positive and even for RoPE");
  }
  geometry.heads = static_cast<std::uint32_t>(heads);
  geometry.kv_heads = static_cast<std::uint32_t>(kv_heads);
  geometry.head_dim = static_cast<std::uint32_t>(head_dim);
  if (!(config.rope_theta > 0)) throw Error(Error::Kind::InvalidInput, "config: rope_theta must be positive");
  geometry.inverse_frequencies.resize(geometry.head_dim / 2);
  for (std::uint32_t i = 0; i < geometry.head_dim / 2; ++i) {
    geometry.inverse_frequencies[i] =
        1.0 /
        std::pow(config.rope_theta, static_cast<double>(2 * i) / static_cast<double>(geometry.head_dim));
  }
  if (config.rope_scaling) apply_rope_scaling(*config.rope_scaling, 8192, geometry.inverse_frequencies);
  return geometry;
}

void rms_norm(const Matrix& x, std::span<const float> weight, double eps, Matrix& out, unsigned threads) {
  if (weight.size() != x.cols) {
    throw Error(Error::Kind::InvalidInput, "rms_norm: weight has " + std::to_string(weight.size()) +
                                               " elements for rows of " + std::to_string(x.cols));
  }
  if (&out != &x) {
    out.rows = x.rows;
    out.cols = x.cols;
    out.data.resize(x.data.size());
  }
  detail::parallel_for(x.rows, threads_for(x.data.size(), threads), [&](std::size_t r, unsigned) {
    const auto in = x.row(r);
    double sum = 0;
    for (const float value : in) sum += static_cast<double>(value) * value;
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(x.cols) + eps));
    auto result = out.row(r);
    for (std::size_t c = 0; c < x.cols; ++c) result[c] = (in[c] * scale) * weight[c];
  });
}

void apply_rope(Matrix& x, std::uint32_t heads, const AttentionGeometry& geometry, unsigned threads) {
  const std::size_t head_dim = geometry.head_dim;
  const std::size_t half = head_dim / 2;
  const std::size_t rows = static_cast<std::size_t>(geometry.batch) * geometry.sequence;
  if (x.rows != rows || x.cols != heads * head_dim || geometry.inverse_frequencies.size() != half) {
    throw Error(Error::Kind::Internal, "apply_rope: matrix " + shape_text(x.rows, x.cols) +
                                           " does not match " + std::to_string(rows) + " tokens x " +
                                           std::to_string(heads) + " heads of " + std::to_string(head_dim));
  }
  detail::parallel_for(
      geometry.sequence, threads_for(x.data.size(), threads), [&](std::size_t position, unsigned) {
        std::vector<float> cosines(half), sines(half);
        for (std::size_t i = 0; i < half; ++i) {
          const double angle = static_cast<double>(position) * geometry.inverse_frequencies[i];
          cosines[i] = static_cast<float>(std::cos(angle));
          sines[i] = static_cast<float>(std::sin(angle));
        }
        for (std::size_t b = 0; b < geometry.batch; ++b) {
          auto row = x.row(b * geometry.sequence + position);
          for (std::size_t h = 0; h < heads; ++h) {
            float* head = row.data() + h * head_dim;
            for (std::size_t i = 0; i < half; ++i) {
              const float first = head[i];
              const float second = head[i + half];
              head[i] = first * cosines[i] - second * sines[i];
              head[i + half] = second * cosines[i] + first * sines[i];
            }
          }
        }
      });
}

Matrix causal_attention(const Matrix& q, const Matrix& k, const Matrix& v, const AttentionGeometry& geometry,
                        unsigned threads) {
  const std::size_t head_dim = geometry.head_dim;
  const std::size_t sequence = geometry.sequence;
  const std::size_t rows = static_cast<std::size_t>(geometry.batch) * sequence;
  const std::size_t group = geometry.heads / geometry.kv_heads;
  if (q.rows != rows || q.cols != geometry.heads * head_dim || k.rows != rows || v.rows != rows ||
      k.cols != geometry.kv_heads * head_dim || v.cols != k.cols) {
    throw Error(Error::Kind::Internal, "causal_attention: q " + shape_text(q.rows, q.cols) + ", k " +
                                           shape_text(k.rows, k.cols) + ", v " + shape_text(v.rows, v.cols) +
                                           " do not match the attention geometry");
  }
  Matrix out(rows, q.cols);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  // Work items are (sequence, head, block of queries); later blocks cost more, so dynamic dealing
  // keeps the threads even.
  constexpr std::size_t kQueryBlock = 32;
  const std::size_t blocks = (sequence + kQueryBlock - 1) / kQueryBlock;
  const std::size_t items = static_cast<std::size_t>(geometry.batch) * geometry.heads * blocks;
  detail::parallel_for(items, threads, [&](std::size_t item, unsigned) {
    const std::size_t block = item % blocks;
    const std::size_t head = (item / blocks) % geometry.heads;
    const std::size_t b = item / (blocks * geometry.heads);
    const std::size_t kv_head = head / group;
    const std::size_t base = b * sequence;
    std::vector<float> weights(sequence);
    std::vector<float> accumulator(head_dim);
    const float* keys = k.row(base).data() + kv_head * head_dim;
    const float* values = v.row(base).data() + kv_head * head_dim;
    for (std::size_t s = block * kQueryBlock; s < std::min(sequence, (block + 1) * kQueryBlock); ++s) {
      attend_one_query(q.row(base + s).data() + head * head_dim, keys, values, k.cols, s + 1, head_dim, scale,
                       weights.data(), accumulator.data(), out.row(base + s).data() + head * head_dim);
    }
  });
  return out;
}

Matrix embed_tokens(const Matrix& embedding, std::span<const std::int32_t> ids) {
  Matrix hidden(ids.size(), embedding.cols);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const std::int32_t id = ids[t];
    if (id < 0 || static_cast<std::size_t>(id) >= embedding.rows) {
      throw Error(Error::Kind::InvalidInput, "token " + std::to_string(id) + " at position " +
                                                 std::to_string(t) + " is outside the vocabulary [0, " +
                                                 std::to_string(embedding.rows) + ")");
    }
    const auto source = embedding.row(static_cast<std::size_t>(id));
    std::copy(source.begin(), source.end(), hidden.row(t).begin());
  }
  return hidden;
}

void attention_block(Matrix& hidden, const LayerWeights& layer, const AttentionGeometry& geometry, double eps,
                     Tracer* tracer, const TraceTag& tag, unsigned threads) {
  Matrix normed;
  {
    const ScopedTrace scope(tracer, op_tag(tag, tag.layer, "attn_norm"));
    rms_norm(hidden, layer.input_norm, eps, normed, threads);
  }
  Matrix q, k, v;
  {
    const ScopedTrace scope(tracer, op_tag(tag, tag.layer, "qkv"));
    matmul_nt(normed, layer.q, q, threads);
    matmul_nt(normed, layer.k, k, threads);
    matmul_nt(normed, layer.v, v, threads);
  }
  {
    const ScopedTrace scope(tracer, op_tag(tag, tag.layer, "rope"));
    apply_rope(q, geometry.heads, geometry, threads);
    apply_rope(k, geometry.kv_heads, geometry, threads);
  }
  Matrix attended;
  {
    const ScopedTrace scope(tracer, op_tag(tag, tag.layer, "attention"));
    attended = causal_attention(q, k, v, geometry, threads);
  }
  {
    const ScopedTrace scope(tracer, op_tag(tag, tag.layer, "o_proj"));
    Matrix projected;
    matmul_nt(attended, layer.o, projected, threads);
    for (std::size_t i = 0; i < hidden.data.size(); ++i) hidden.data[i] += projected.data[i];
  }
}

Matrix forward_backbone(const ModelWeights& weights, const TokenBatch& tokens, const FfnStep& ffn,
                        const LayerObserver& observer, Tracer* tracer, const TraceTag& base_tag,
                        unsigned threads) {
  if (tokens.ids.size() != static_cast<std::size_t>(tokens.batch) * tokens.sequence || tokens.ids.empty()) {
    throw Error(Error::Kind::InvalidInput, "token batch " + std::to_string(tokens.batch) + " x " +
                                               std::to_string(tokens.sequence) + " holds " +
                                               std::to_string(tokens.ids.size()) + " ids");
  }
  if (!ffn) throw Error(Error::Kind::Internal, "forward_backbone: no FFN step given");
  const auto& config = weights.config;
  const auto geometry = attention_geometry(config, tokens.batch, tokens.sequence);
  Matrix hidden;
  {
    const ScopedTrace scope(tracer, op_tag(base_tag, -1, "embedding"));
    hidden = embed_tokens(weights.embedding, tokens.ids);
  }
  Matrix ffn_input;
  for (std::size_t l = 0; l < weights.layers.size(); ++l) {
    const int layer_index = static_cast<int>(l);
    const LayerWeights& layer = weights.layers[l];
    attention_block(hidden, layer, geometry, config.rms_norm_eps, tracer, op_tag(base_tag, layer_index, ""),
                    threads);
    {
      const ScopedTrace scope(tracer, op_tag(base_tag, layer_index, "ffn_norm"));
      rms_norm(hidden, layer.post_attention_norm, config.rms_norm_eps, ffn_input, threads);
    }
    const Matrix ffn_output = ffn(l, ffn_input);
    if (ffn_output.rows != hidden.rows || ffn_output.cols != hidden.cols) {
      throw Error(Error::Kind::Internal, "layer " + std::to_string(l) + " FFN returned " +
                                             shape_text(ffn_output.rows, ffn_output.cols) + " for input " +
                                             shape_text(hidden.rows, hidden.cols));
    }
    for (std::size_t i = 0; i < hidden.data.size(); ++i) hidden.data[i] += ffn_output.data[i];
    if (observer) observer(l, hidden);
  }
  const ScopedTrace scope(tracer, op_tag(base_tag, -1, "final_norm"));
  Matrix normed;
  rms_norm(hidden, weights.final_norm, config.rms_norm_eps, normed, threads);
  return normed;
}

}  // namespace twell::reference
