// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace twell {

enum class Activation { Relu, Silu };
const char* to_string(Activation activation) noexcept;
std::optional<Activation> activation_from_string(const std::string& name);

/// The FFN activation twellscope will run, and why: shown to users, kept in reports.
struct ActivationChoice {
  Activation activation = Activation::Relu;
  std::string reason;  ///< e.g. "model_type llama_sparse_relu uses ReLU (config says hidden_act silu)"
  bool operator==(const ActivationChoice&) const = default;
};

/// The fields of a Hugging Face config.json that a Llama-style forward needs.
struct ModelConfig {
  std::string model_type;          ///< "llama", "llama_sparse_relu", "mistral", "qwen2"...
  std::int64_t hidden_size = 0;    ///< D
  std::int64_t intermediate_size = 0;  ///< N
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t head_dim = 0;       ///< hidden_size / num_attention_heads unless given
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<std::string> rope_scaling;  ///< the rope_scaling object as JSON text, if present
  std::int64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  std::string hidden_act = "silu";
  std::string dtype = "bfloat16";  ///< dtype or torch_dtype; empty when config.json states neither
  std::vector<std::string> architectures;  ///< e.g. {"SparseLlamaForCausalLM"}; may be empty
  bool has_sparsity_fields = false;        ///< any sparsity_* key (SakanaAI SparseLM training config)
  bool gated_mlp = true;                   ///< false when sparsity_gated_mlp is false (up/down only)

  /// Parses config.json text; `source` names the file in errors. Throws twell::Error.
  static ModelConfig parse(const std::string& json_text, const std::string& source);
  static ModelConfig load(const std::filesystem::path& config_json);
  nlohmann::json to_json() const;
  bool operator==(const ModelConfig&) const = default;
};

/// The one place that decides the FFN activation. `override_activation` (the user's
/// --activation) wins; model_type llama_sparse_relu means ReLU whatever hidden_act says.
ActivationChoice resolve_activation(const ModelConfig& config, std::optional<Activation> override_activation);

/// Architectures the forward supports, for error messages.
const char* supported_architectures() noexcept;

/// Throws twell::Error(Unsupported), naming `source` and listing the supported model types, unless
/// config.model_type is one of them.
void require_supported_architecture(const ModelConfig& config, const std::string& source);

}  // namespace twell
