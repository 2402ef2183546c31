// SPDX-License-Identifier: GPL-3.0-or-later
// Private to the synthetic-model generator: seeded weights, each element a pure function of
// (seed, tensor name, index), rounded to bf16 so the generator computes with exactly the values it
// stores.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "twell/matrix.hpp"

namespace twell::generator {

/// [rows, cols] of sigma * N(0, 1), bf16-rounded, keyed by `name`.
Matrix random_matrix(std::uint64_t seed, const std::string& name, std::size_t rows, std::size_t cols,
                     double sigma, unsigned threads);

/// The token embedding: the bias channel is a constant; the other channels are a per-token scale
/// (lognormal) times (Gaussian noise + a topic direction shared by the tokens of one topic), so
/// tokens differ in norm (per-token density varies) and tokens of a topic co-fire neurons.
class EmbeddingRecipe {
 public:
  EmbeddingRecipe(std::uint64_t seed, std::size_t hidden, std::size_t bias_channel, float bias_value,
                  double sigma, std::size_t topics, double topic_weight, double scale_sigma);
  /// Row `token` (bf16-rounded) into out[0, hidden).
  void row(std::int64_t token, float* out) const;

 private:
  std::uint64_t m_seed;
  std::size_t m_hidden, m_bias_channel, m_topics;
  float m_bias_value;
  double m_sigma, m_topic_weight, m_scale_sigma;
  std::vector<float> m_topic_directions;  // [topics, hidden], unrounded
};

}  // namespace twell::generator
