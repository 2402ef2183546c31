// SPDX-License-Identifier: GPL-3.0-or-later
// The fp32 Llama-style decoder forward of the CPU reference: embedding, RMSNorm, RoPE (Hugging Face
// convention), causal attention with grouped KV heads, residuals and the final norm. The FFN is a
// callback, so the CPU backend and the synthetic-model generator run the same code around their FFNs.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "twell/checkpoint.hpp"
#include "twell/matrix.hpp"
#include "twell/model_config.hpp"
#include "twell/tokens.hpp"
#include "twell/tracer.hpp"

namespace twell::reference {

/// One decoder layer's weights in fp32, nn.Linear layout [out, in].
struct LayerWeights {
  Matrix q, k, v;  ///< [heads * head_dim, D], [kv_heads * head_dim, D] twice
  Matrix o;        ///< [D, heads * head_dim]
  std::vector<float> input_norm, post_attention_norm;  ///< [D]
  Matrix gate;                                         ///< [N, D]; empty for a non-gated FFN
  Matrix up;                                           ///< [N, D]
  Matrix down;                                         ///< [D, N]
  Matrix down_t;  ///< [N, D]: down transposed, the TwELL consumer's layout
};

struct ModelWeights {
  ModelConfig config;
  Activation activation = Activation::Relu;
  Matrix embedding;  ///< [vocab, D]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  ///< [D]
};

/// Converts every weight of a checkpoint to fp32 once (and transposes down for TwELL).
ModelWeights load_model_weights(const Checkpoint& checkpoint, unsigned threads = 0);

/// Shape of the attention of a batch of sequences, and the rotary frequencies.
struct AttentionGeometry {
  std::uint32_t batch = 0, sequence = 0;
  std::uint32_t heads = 0, kv_heads = 0, head_dim = 0;
  std::vector<double> inverse_frequencies;  ///< [head_dim / 2]
};
/// Validates the config's attention shape and computes RoPE's inverse frequencies from rope_theta
/// (and rope_scaling "linear" or "llama3" when present; other scalings are unsupported).
AttentionGeometry attention_geometry(const ModelConfig& config, std::uint32_t batch, std::uint32_t sequence);

/// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight (Hugging Face LlamaRMSNorm, in fp32).
void rms_norm(const Matrix& x, std::span<const float> weight, double eps, Matrix& out, unsigned threads = 0);

/// Rotates each head of `x` [batch * sequence, heads * head_dim] in place by its position in its
/// sequence: the rotate_half convention (pairs i and i + head_dim / 2).
void apply_rope(Matrix& x, std::uint32_t heads, const AttentionGeometry& geometry, unsigned threads = 0);

/// softmax(q k^T / sqrt(head_dim)) v per sequence and head, causally masked; query head h reads KV
/// head h / (heads / kv_heads). q [M, heads * head_dim], k and v [M, kv_heads * head_dim].
Matrix causal_attention(const Matrix& q, const Matrix& k, const Matrix& v, const AttentionGeometry& geometry,
                        unsigned threads = 0);

/// Rows of `embedding` for each token id (validated against the vocabulary).
Matrix embed_tokens(const Matrix& embedding, std::span<const std::int32_t> ids);

/// hidden += o_proj(attention(rope(q, k), v)) of input_norm(hidden): one layer's attention block.
/// Ops are tagged under `tag` ("input_norm", "qkv_proj", "rope", "attention", "o_proj").
void attention_block(Matrix& hidden, const LayerWeights& layer, const AttentionGeometry& geometry, double eps,
                     Tracer* tracer, const TraceTag& tag, unsigned threads = 0);

/// Runs a layer's FFN on its input [M, D] (post-attention-normed) and returns its output [M, D].
using FfnStep = std::function<Matrix(std::size_t layer, const Matrix& ffn_input)>;
/// Sees the residual stream after a layer (before the final norm).
using LayerObserver = std::function<void(std::size_t layer, const Matrix& hidden)>;

/// The backbone without the LM head: returns the final-normed hidden states [M, D]. Every op is
/// tagged with `base_tag` plus its layer and op name ("embedding", the attention block's ops,
/// "post_attention_norm", "final_norm"); `ffn` tags its own work (so that whatever it runs before
/// the layer's FFN, such as a profiling hook, stays outside the forward's regions).
Matrix forward_backbone(const ModelWeights& weights, const TokenBatch& tokens, const FfnStep& ffn,
                        const LayerObserver& observer, Tracer* tracer, const TraceTag& base_tag,
                        unsigned threads = 0);

}  // namespace twell::reference
