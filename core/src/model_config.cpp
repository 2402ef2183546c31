// SPDX-License-Identifier: GPL-3.0-or-later
// config.json -> ModelConfig, with every field type-checked so that a bad config fails with the
// field's name instead of an exception from deep inside the JSON library.
#include "twell/model_config.hpp"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "twell/error.hpp"

namespace twell {
namespace {

using nlohmann::json;

constexpr int kMaxConfigDepth = 64;  // configs are shallow; this only stops stack-exhausting input
constexpr std::array<std::string_view, 4> kSupportedModelTypes{"llama", "llama_sparse_relu", "mistral",
                                                               "qwen2"};

class ConfigReader {
 public:
  ConfigReader(const json& root, const std::string& source) : m_root(root), m_source(source) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(Error::Kind::InvalidInput, m_source + ": field '" + field + "' " + what);
  }

  // Absent and JSON null both mean "not given", as in transformers.
  const json* find(const std::string& field) const {
    const auto it = m_root.find(field);
    return it == m_root.end() || it->is_null() ? nullptr : &*it;
  }

  const json& require(const std::string& field) const {
    const json* value = find(field);
    if (value == nullptr) fail(field, "is missing");
    return *value;
  }

  std::int64_t positive_integer(const std::string& field, const json& value) const {
    if (!value.is_number_integer() || value.get<std::int64_t>() <= 0) {
      fail(field, "must be a positive integer, got " + value.dump());
    }
    return value.get<std::int64_t>();
  }
  std::int64_t required_positive_integer(const std::string& field) const {
    return positive_integer(field, require(field));
  }
  std::optional<std::int64_t> optional_positive_integer(const std::string& field) const {
    const json* value = find(field);
    return value == nullptr ? std::nullopt : std::optional(positive_integer(field, *value));
  }

  double optional_positive_number(const std::string& field, double fallback) const {
    const json* value = find(field);
    if (value == nullptr) return fallback;
    if (!value->is_number() || value->get<double>() <= 0.0)
      fail(field, "must be a positive number, got " + value->dump());
    return value->get<double>();
  }

  std::optional<std::string> optional_string(const std::string& field) const {
    const json* value = find(field);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string()) fail(field, "must be a string, got " + value->dump());
    return value->get<std::string>();
  }

  std::optional<bool> optional_bool(const std::string& field) const {
    const json* value = find(field);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) fail(field, "must be true or false, got " + value->dump());
    return value->get<bool>();
  }

 private:
  const json& m_root;
  const std::string& m_source;
};

json parse_json(const std::string& text, const std::string& source) {
  auto limit_depth = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxConfigDepth) {
      throw Error(Error::Kind::InvalidInput,
                  source + ": JSON is nested more than " + std::to_string(kMaxConfigDepth) + " levels deep");
    }
    return true;
  };
  try {
    return json::parse(text, limit_depth);
  } catch (const json::exception& e) {
    throw Error(Error::Kind::InvalidInput, source + ": not valid JSON: " + e.what());
  }
}

}  // namespace

const char* to_string(Activation activation) noexcept {
  switch (activation) {
    case Activation::Relu:
      return "relu";
    case Activation::Silu:
      return "silu";
  }
  return "?";
}

std::optional<Activation> activation_from_string(const std::string& name) {
  if (name == "relu") return Activation::Relu;
  if (name == "silu") return Activation::Silu;
  return std::nullopt;
}

ModelConfig ModelConfig::parse(const std::string& json_text, const std::string& source) {
  const json root = parse_json(json_text, source);
  if (!root.is_object()) throw Error(Error::Kind::InvalidInput, source + ": config must be a JSON object");
  const ConfigReader reader(root, source);

  ModelConfig config;
  config.model_type = reader.optional_string("model_type").value_or("");
  if (config.model_type.empty()) reader.fail("model_type", "is missing");
  config.hidden_size = reader.required_positive_integer("hidden_size");
  config.intermediate_size = reader.required_positive_integer("intermediate_size");
  config.num_hidden_layers = reader.required_positive_integer("num_hidden_layers");
  config.num_attention_heads = reader.required_positive_integer("num_attention_heads");
  config.vocab_size = reader.required_positive_integer("vocab_size");
  config.num_key_value_heads =
      reader.optional_positive_integer("num_key_value_heads").value_or(config.num_attention_heads);
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    reader.fail("num_key_value_heads", "(" + std::to_string(config.num_key_value_heads) +
                                           ") must divide num_attention_heads (" +
                                           std::to_string(config.num_attention_heads) + ")");
  }
  if (const auto head_dim = reader.optional_positive_integer("head_dim")) {
    config.head_dim = *head_dim;
  } else {
    if (config.hidden_size % config.num_attention_heads != 0) {
      reader.fail("head_dim", "is missing and hidden_size (" + std::to_string(config.hidden_size) +
                                  ") is not a multiple of num_attention_heads (" +
                                  std::to_string(config.num_attention_heads) + ")");
    }
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }
  // SparseLM's MLP is built with the "new" width when set (MODELS.md §1.2).
  if (const auto width = reader.optional_positive_integer("sparsity_new_intermediate_size")) {
    config.intermediate_size = *width;
  }
  config.rms_norm_eps = reader.optional_positive_number("rms_norm_eps", 1e-6);
  config.rope_theta = reader.optional_positive_number("rope_theta", 10000.0);
  if (const json* scaling = reader.find("rope_scaling")) {
    if (!scaling->is_object())
      reader.fail("rope_scaling", "must be an object or null, got " + scaling->dump());
    config.rope_scaling = scaling->dump();
  }
  config.tie_word_embeddings = reader.optional_bool("tie_word_embeddings").value_or(false);
  config.hidden_act = reader.optional_string("hidden_act").value_or("silu");
  // transformers >= 4.56 writes "dtype"; older versions wrote "torch_dtype".
  config.dtype = reader.optional_string("dtype").value_or(reader.optional_string("torch_dtype").value_or(""));
  if (const json* architectures = reader.find("architectures")) {
    if (!architectures->is_array()) reader.fail("architectures", "must be an array of strings");
    for (const auto& name : *architectures) {
      if (!name.is_string())
        reader.fail("architectures", "must be an array of strings, got " + architectures->dump());
      config.architectures.push_back(name.get<std::string>());
    }
  }
  config.gated_mlp = reader.optional_bool("sparsity_gated_mlp").value_or(true);
  config.has_sparsity_fields = std::any_of(root.items().begin(), root.items().end(), [](const auto& item) {
    return item.key().starts_with("sparsity_");
  });
  return config;
}

ModelConfig ModelConfig::load(const std::filesystem::path& config_json) {
  std::ifstream in(config_json, std::ios::binary);
  if (!in) throw Error(Error::Kind::Io, config_json.string() + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(Error::Kind::Io, config_json.string() + ": read failed");
  return parse(text.str(), config_json.string());
}

nlohmann::json ModelConfig::to_json() const {
  json out = {{"model_type", model_type},
              {"hidden_size", hidden_size},
              {"intermediate_size", intermediate_size},
              {"num_hidden_layers", num_hidden_layers},
              {"num_attention_heads", num_attention_heads},
              {"num_key_value_heads", num_key_value_heads},
              {"head_dim", head_dim},
              {"rms_norm_eps", rms_norm_eps},
              {"rope_theta", rope_theta},
              {"rope_scaling", rope_scaling ? json::parse(*rope_scaling) : json(nullptr)},
              {"vocab_size", vocab_size},
              {"tie_word_embeddings", tie_word_embeddings},
              {"hidden_act", hidden_act}};
  if (!dtype.empty()) out["dtype"] = dtype;
  if (!architectures.empty()) out["architectures"] = architectures;
  if (has_sparsity_fields || !gated_mlp) out["sparsity_gated_mlp"] = gated_mlp;
  return out;
}

ActivationChoice resolve_activation(const ModelConfig& config,
                                    std::optional<Activation> override_activation) {
  const std::string config_says = "config says hidden_act " + config.hidden_act;
  if (override_activation) {
    return {*override_activation, std::string("--activation ") + to_string(*override_activation) +
                                      " given by the user (" + config_says + ")"};
  }
  if (config.model_type == "llama_sparse_relu") {
    return {Activation::Relu, "model_type llama_sparse_relu uses ReLU (" + config_says + ")"};
  }
  if (!config.architectures.empty() && config.architectures.front() == "SparseLlamaForCausalLM" &&
      config.has_sparsity_fields) {
    return {Activation::Relu,
            "architecture SparseLlamaForCausalLM with sparsity_* fields uses ReLU (" + config_says + ")"};
  }
  if (const auto activation = activation_from_string(config.hidden_act)) {
    return {*activation, "config.json hidden_act " + config.hidden_act};
  }
  throw Error(Error::Kind::Unsupported, "hidden_act '" + config.hidden_act +
                                            "' is not supported: twellscope runs relu or silu FFNs "
                                            "(pass --activation relu|silu to override)");
}

const char* supported_architectures() noexcept {
  return "llama, llama_sparse_relu, mistral, qwen2";
}

void require_supported_architecture(const ModelConfig& config, const std::string& source) {
  const bool supported = std::find(kSupportedModelTypes.begin(), kSupportedModelTypes.end(),
                                   config.model_type) != kSupportedModelTypes.end();
  if (!supported) {
    throw Error(Error::Kind::Unsupported, source + ": model_type '" + config.model_type +
                                              "' is not supported (supported: " + supported_architectures() +
                                              ")");
  }
}

}  // namespace twell
