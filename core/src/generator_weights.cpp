// SPDX-License-Identifier: GPL-3.0-or-later
#include "generator_weights.hpp"

#include <cmath>

#include "counter_rng.hpp"
#include "reference_parallel.hpp"
#include "twell/numeric.hpp"

namespace twell::generator {
namespace {

/// Fills out[0, count) with N(0, 1) numbers first_index, first_index + 1, ... of `rng`, a pair at a
/// time where the pair is aligned (the same values whatever the split).
void fill_normal(const detail::CounterRng& rng, std::uint64_t first_index, std::size_t count, double* out) {
  std::size_t i = 0;
  while (i < count) {
    const std::uint64_t index = first_index + i;
    if (index % 2 == 0 && i + 1 < count) {
      rng.normal_pair(index / 2, out[i], out[i + 1]);
      i += 2;
    } else {
      out[i] = rng.normal(index);
      i += 1;
    }
  }
}

}  // namespace

Matrix random_matrix(std::uint64_t seed, const std::string& name, std::size_t rows, std::size_t cols,
                     double sigma, unsigned threads) {
  Matrix m(rows, cols);
  const detail::CounterRng rng(seed, name);
  reference::detail::parallel_for(rows, threads, [&](std::size_t r, unsigned) {
    std::vector<double> values(cols);
    fill_normal(rng, static_cast<std::uint64_t>(r) * cols, cols, values.data());
    auto out = m.row(r);
    for (std::size_t c = 0; c < cols; ++c) out[c] = round_to_bf16(static_cast<float>(sigma * values[c]));
  });
  return m;
}

EmbeddingRecipe::EmbeddingRecipe(std::uint64_t seed, std::size_t hidden, std::size_t bias_channel,
                                 float bias_value, double sigma, std::size_t topics, double topic_weight,
                                 double scale_sigma)
    : m_seed(seed),
      m_hidden(hidden),
      m_bias_channel(bias_channel),
      m_topics(topics),
      m_bias_value(round_to_bf16(bias_value)),
      m_sigma(sigma),
      m_topic_weight(topic_weight),
      m_scale_sigma(scale_sigma),
      m_topic_directions(topics * hidden) {
  const detail::CounterRng rng(seed, "model.embed_tokens.topics");
  std::vector<double> values(hidden);
  for (std::size_t k = 0; k < topics; ++k) {
    fill_normal(rng, static_cast<std::uint64_t>(k) * hidden, hidden, values.data());
    for (std::size_t i = 0; i < hidden; ++i)
      m_topic_directions[k * hidden + i] = static_cast<float>(sigma * values[i]);
  }
}

void EmbeddingRecipe::row(std::int64_t token, float* out) const {
  const detail::CounterRng noise(m_seed, "model.embed_tokens.weight");
  const detail::CounterRng token_scale(m_seed, "model.embed_tokens.scale");
  const detail::CounterRng token_topic(m_seed, "model.embed_tokens.topic");
  const auto t = static_cast<std::uint64_t>(token);
  const double scale = std::exp(m_scale_sigma * token_scale.normal(t));
  const std::size_t topic = static_cast<std::size_t>(token_topic.below(t, m_topics));
  const float* direction = m_topic_directions.data() + topic * m_hidden;
  std::vector<double> values(m_hidden);
  fill_normal(noise, t * m_hidden, m_hidden, values.data());
  for (std::size_t i = 0; i < m_hidden; ++i) {
    const double value = scale * (m_sigma * values[i] + m_topic_weight * direction[i]);
    out[i] = round_to_bf16(static_cast<float>(value));
  }
  out[m_bias_channel] = m_bias_value;
}

}  // namespace twell::generator
