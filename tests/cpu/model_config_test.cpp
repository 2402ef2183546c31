// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "twell/error.hpp"
#include "twell/model_config.hpp"

namespace twell {
namespace {

using nlohmann::json;

// SakanaAI/SparseLM2B's config.json, as published (MODELS.md §1.2), trimmed of fields we ignore.
json sparselm_2b_config() {
  return json::parse(R"({
    "architectures": ["SparseLlamaForCausalLM"], "model_type": "llama_sparse_relu", "dtype": "bfloat16",
    "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 38, "num_attention_heads": 32,
    "num_key_value_heads": 32, "head_dim": 64, "hidden_act": "silu", "rms_norm_eps": 1e-05,
    "rope_theta": 100000, "rope_scaling": null, "max_position_embeddings": 2048, "vocab_size": 49152,
    "tie_word_embeddings": true, "sparsity_gated_mlp": true, "sparsity_l1_coeff": 2e-05,
    "sparsity_new_intermediate_size": 5632, "transformers_version": "4.56.2"})");
}

void expect_config_error(const json& config, Error::Kind kind, const std::string& fragment) {
  try {
    ModelConfig::parse(config.dump(), "/models/x/config.json");
    FAIL() << "expected an error containing \"" << fragment << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/models/x/config.json"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ParsesSparseLm2b) {
  const auto config = ModelConfig::parse(sparselm_2b_config().dump(), "config.json");
  EXPECT_EQ(config.model_type, "llama_sparse_relu");
  EXPECT_EQ(config.hidden_size, 2048);
  EXPECT_EQ(config.intermediate_size, 5632);
  EXPECT_EQ(config.num_hidden_layers, 38);
  EXPECT_EQ(config.num_attention_heads, 32);
  EXPECT_EQ(config.num_key_value_heads, 32);
  EXPECT_EQ(config.head_dim, 64);
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(config.rope_theta, 100000.0);
  EXPECT_FALSE(config.rope_scaling.has_value());
  EXPECT_EQ(config.vocab_size, 49152);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.hidden_act, "silu");
  EXPECT_EQ(config.dtype, "bfloat16");
  EXPECT_TRUE(config.has_sparsity_fields);
  EXPECT_TRUE(config.gated_mlp);
  EXPECT_EQ(config.architectures, std::vector<std::string>{"SparseLlamaForCausalLM"});
}

TEST(ModelConfig, DefaultsAndAlternativeKeys) {
  auto config_json = sparselm_2b_config();
  for (const char* key : {"head_dim", "num_key_value_heads", "dtype", "rms_norm_eps", "rope_theta",
                          "tie_word_embeddings", "hidden_act", "sparsity_new_intermediate_size"}) {
    config_json.erase(key);
  }
  config_json["torch_dtype"] = "float32";
  config_json["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const auto config = ModelConfig::parse(config_json.dump(), "config.json");
  EXPECT_EQ(config.head_dim, 64) << "hidden_size / num_attention_heads";
  EXPECT_EQ(config.num_key_value_heads, 32);
  EXPECT_EQ(config.dtype, "float32");
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(config.rope_theta, 10000.0);
  EXPECT_FALSE(config.tie_word_embeddings);
  EXPECT_EQ(config.hidden_act, "silu");
  ASSERT_TRUE(config.rope_scaling.has_value());
  EXPECT_EQ(json::parse(*config.rope_scaling)["type"], "linear");
}

TEST(ModelConfig, SparsityNewIntermediateSizeWins) {
  auto config_json = sparselm_2b_config();
  config_json["sparsity_new_intermediate_size"] = 4096;
  EXPECT_EQ(ModelConfig::parse(config_json.dump(), "c").intermediate_size, 4096);
}

TEST(ModelConfig, ToJsonRoundTrips) {
  auto config_json = sparselm_2b_config();
  config_json["rope_scaling"] = {{"factor", 4.0}, {"type", "dynamic"}};
  const auto config = ModelConfig::parse(config_json.dump(), "c");
  EXPECT_EQ(ModelConfig::parse(config.to_json().dump(), "c"), config);
}

TEST(ModelConfig, MissingFieldIsNamed) {
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                            "vocab_size", "model_type"}) {
    auto config = sparselm_2b_config();
    config.erase(field);
    expect_config_error(config, Error::Kind::InvalidInput, std::string("field '") + field + "' is missing");
  }
}

TEST(ModelConfig, WrongTypesAreNamed) {
  const std::vector<std::pair<std::string, json>> cases{{"hidden_size", "2048"},
                                                        {"hidden_size", 2048.5},
                                                        {"num_hidden_layers", -3},
                                                        {"vocab_size", 0},
                                                        {"rms_norm_eps", "small"},
                                                        {"rope_theta", -1.0},
                                                        {"tie_word_embeddings", 1},
                                                        {"hidden_act", 7},
                                                        {"rope_scaling", "linear"},
                                                        {"model_type", true},
                                                        {"architectures", "Llama"},
                                                        {"head_dim", json::array()},
                                                        {"dtype", 16},
                                                        {"sparsity_gated_mlp", "yes"}};
  for (const auto& [field, value] : cases) {
    auto config = sparselm_2b_config();
    config[field] = value;
    expect_config_error(config, Error::Kind::InvalidInput, "field '" + field + "'");
  }
}

TEST(ModelConfig, InconsistentHeadsAreRejected) {
  auto config = sparselm_2b_config();
  config["num_key_value_heads"] = 5;
  expect_config_error(config, Error::Kind::InvalidInput, "must divide num_attention_heads");
  config = sparselm_2b_config();
  config.erase("head_dim");
  config.erase("num_key_value_heads");
  config["num_attention_heads"] = 30;
  expect_config_error(config, Error::Kind::InvalidInput, "not a multiple of num_attention_heads");
}

TEST(ModelConfig, NotJsonOrNotAnObject) {
  EXPECT_THROW(ModelConfig::parse("{\"hidden_size\": ", "c"), Error);
  EXPECT_THROW(ModelConfig::parse("[1, 2]", "c"), Error);
  EXPECT_THROW(ModelConfig::parse(std::string(100000, '[') + std::string(100000, ']'), "c"), Error);
}

TEST(ModelConfig, LoadReportsMissingFile) {
  test::TempDir dir;
  try {
    ModelConfig::load(dir.path() / "config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::Io);
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos);
  }
}

TEST(ResolveActivation, SparseReluModelTypeIsReluDespiteSilu) {
  const auto config = ModelConfig::parse(sparselm_2b_config().dump(), "c");
  const auto choice = resolve_activation(config, std::nullopt);
  EXPECT_EQ(choice.activation, Activation::Relu);
  EXPECT_NE(choice.reason.find("llama_sparse_relu"), std::string::npos) << choice.reason;
  EXPECT_NE(choice.reason.find("hidden_act silu"), std::string::npos) << choice.reason;
}

TEST(ResolveActivation, SparseLlamaArchitectureWithSparsityFields) {
  auto config_json = sparselm_2b_config();
  config_json["model_type"] = "llama";
  const auto choice = resolve_activation(ModelConfig::parse(config_json.dump(), "c"), std::nullopt);
  EXPECT_EQ(choice.activation, Activation::Relu);
  EXPECT_NE(choice.reason.find("SparseLlamaForCausalLM"), std::string::npos) << choice.reason;
}

TEST(ResolveActivation, OverrideWins) {
  const auto config = ModelConfig::parse(sparselm_2b_config().dump(), "c");
  const auto choice = resolve_activation(config, Activation::Silu);
  EXPECT_EQ(choice.activation, Activation::Silu);
  EXPECT_NE(choice.reason.find("--activation silu"), std::string::npos) << choice.reason;
}

TEST(ResolveActivation, HiddenActDecidesForPlainLlama) {
  ModelConfig config;
  config.model_type = "llama";
  config.hidden_act = "relu";
  EXPECT_EQ(resolve_activation(config, std::nullopt).activation, Activation::Relu);
  config.hidden_act = "silu";
  EXPECT_EQ(resolve_activation(config, std::nullopt).activation, Activation::Silu);
  config.hidden_act = "gelu";
  try {
    resolve_activation(config, std::nullopt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("hidden_act 'gelu'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(resolve_activation(config, Activation::Relu).activation, Activation::Relu);
}

TEST(ResolveActivation, ActivationNames) {
  EXPECT_EQ(activation_from_string("relu"), Activation::Relu);
  EXPECT_EQ(activation_from_string("silu"), Activation::Silu);
  EXPECT_FALSE(activation_from_string("gelu").has_value());
  EXPECT_STREQ(to_string(Activation::Relu), "relu");
}

TEST(SupportedArchitectures, UnsupportedModelTypeListsSupportedOnes) {
  ModelConfig config;
  config.model_type = "gpt2";
  try {
    require_supported_architecture(config, "dir/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::Unsupported);
    const std::string message = e.what();
    EXPECT_NE(message.find("model_type 'gpt2'"), std::string::npos) << message;
    EXPECT_NE(message.find("llama, llama_sparse_relu, mistral, qwen2"), std::string::npos) << message;
  }
  for (const char* type : {"llama", "llama_sparse_relu", "mistral", "qwen2"}) {
    config.model_type = type;
    EXPECT_NO_THROW(require_supported_architecture(config, "c"));
  }
}

}  // namespace
}  // namespace twell
