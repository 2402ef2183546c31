// SPDX-License-Identifier: GPL-3.0-or-later
#include "tiny_checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>

#include "twell/numeric.hpp"

namespace twell::test {
namespace {

struct Planned {
  SafetensorsTensorSpec spec;
  std::size_t shard = 0;
};

void add(std::vector<Planned>& plan, const TinyCheckpointOptions& options, std::string name,
         std::vector<std::int64_t> shape, std::size_t shard) {
  plan.push_back({{std::move(name), options.dtype, std::move(shape)}, shard});
}

std::vector<Planned> plan_tensors(const TinyCheckpointOptions& o) {
  const std::int64_t d = o.hidden_size, n = o.intermediate_size, head_dim = o.hidden_size / o.heads;
  const std::int64_t q_rows = o.heads * head_dim, kv_rows = o.kv_heads * head_dim;
  const std::size_t shards = std::max<std::size_t>(1, o.shards);
  std::vector<Planned> plan;
  add(plan, o, "model.embed_tokens.weight", {o.vocab, d}, 0);
  for (std::int64_t layer = 0; layer < o.layers; ++layer) {
    const std::size_t shard = static_cast<std::size_t>(layer) % shards;
    const std::string base = "model.layers." + std::to_string(layer) + ".";
    add(plan, o, base + "input_layernorm.weight", {d}, shard);
    add(plan, o, base + "post_attention_layernorm.weight", {d}, shard);
    add(plan, o, base + "self_attn.q_proj.weight", {q_rows, d}, shard);
    add(plan, o, base + "self_attn.k_proj.weight", {kv_rows, d}, shard);
    add(plan, o, base + "self_attn.v_proj.weight", {kv_rows, d}, shard);
    add(plan, o, base + "self_attn.o_proj.weight", {d, q_rows}, shard);
    const std::string mlp = base + "mlp.";
    switch (o.ffn_spelling) {
      case FfnSpelling::HfProj:
        add(plan, o, mlp + "gate_proj.weight", {n, d}, shard);
        add(plan, o, mlp + "up_proj.weight", {n, d}, shard);
        add(plan, o, mlp + "down_proj.weight", {d, n}, shard);
        break;
      case FfnSpelling::SakanaWeights:
        add(plan, o, mlp + "gate_weight", {d, n}, shard);
        add(plan, o, mlp + "up_weight", {n, d}, shard);
        add(plan, o, mlp + "down_weight", {n, d}, shard);
        break;
      case FfnSpelling::TwellCaps:
        add(plan, o, mlp + "GATE", {n, d}, shard);
        add(plan, o, mlp + "UP", {n, d}, shard);
        add(plan, o, mlp + "DOWN", {n, d}, shard);
        break;
      case FfnSpelling::DownTransposed:
        add(plan, o, mlp + "gate_proj.weight", {n, d}, shard);
        add(plan, o, mlp + "up_proj.weight", {n, d}, shard);
        add(plan, o, mlp + "down_proj.weight", {n, d}, shard);
        break;
    }
  }
  add(plan, o, "model.norm.weight", {d}, shards - 1);
  if (o.store_lm_head) add(plan, o, "lm_head.weight", {o.vocab, d}, shards - 1);
  for (const auto& extra : o.extra) plan.push_back({extra, shards - 1});
  std::erase_if(plan, [&](const Planned& p) {
    return std::find(o.omit.begin(), o.omit.end(), p.spec.name) != o.omit.end();
  });
  return plan;
}

nlohmann::json make_config(const TinyCheckpointOptions& o) {
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                           {"model_type", o.model_type},
                           {"hidden_size", o.hidden_size},
                           {"intermediate_size", o.intermediate_size},
                           {"num_hidden_layers", o.layers},
                           {"num_attention_heads", o.heads},
                           {"num_key_value_heads", o.kv_heads},
                           {"hidden_act", o.hidden_act},
                           {"rms_norm_eps", 1e-5},
                           {"rope_theta", 10000.0},
                           {"rope_scaling", nullptr},
                           {"vocab_size", o.vocab},
                           {"tie_word_embeddings", o.tie_word_embeddings},
                           {"torch_dtype", "bfloat16"}};
  for (const auto& [key, value] : o.config_overrides.items()) {
    if (value.is_null()) {
      config.erase(key);
    } else {
      config[key] = value;
    }
  }
  return config;
}

std::string shard_name(std::size_t shard, std::size_t shards) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", shard + 1, shards);
  return name;
}

}  // namespace

float tiny_checkpoint_value(const std::string& name, std::size_t index) {
  std::uint64_t h = std::hash<std::string>{}(name) ^ (0x9e3779b97f4a7c15ull * (index + 1));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return static_cast<float>(static_cast<int>(h % 255) - 127) / 128.0f;
}

std::vector<std::byte> tiny_checkpoint_bytes(const std::string& name, std::size_t count,
                                             const std::string& dtype) {
  const std::size_t item = dtype == "F32" ? 4 : (dtype == "BF16" || dtype == "F16") ? 2 : 0;
  if (item == 0) return std::vector<std::byte>(count * 8);  // other dtypes: zeros, up to 8 bytes/item
  std::vector<std::byte> bytes(count * item);
  for (std::size_t i = 0; i < count; ++i) {
    const float value = tiny_checkpoint_value(name, i);
    if (item == 4) {
      std::memcpy(bytes.data() + 4 * i, &value, 4);
    } else {
      const std::uint16_t bits = dtype == "BF16" ? float_to_bf16_bits(value) : float_to_f16_bits(value);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    }
  }
  return bytes;
}

std::vector<std::string> write_tiny_llama_checkpoint(const std::filesystem::path& directory,
                                                     const TinyCheckpointOptions& options) {
  std::filesystem::create_directories(directory);
  {
    std::ofstream config(directory / "config.json");
    config << make_config(options).dump(2);
    if (!config) throw std::runtime_error("cannot write config.json in " + directory.string());
  }
  const auto plan = plan_tensors(options);
  const std::size_t shards = std::max<std::size_t>(1, options.shards);
  std::vector<std::string> names;
  nlohmann::json weight_map = nlohmann::json::object();
  std::uint64_t total_size = 0;
  for (std::size_t shard = 0; shard < shards; ++shard) {
    std::vector<std::vector<std::byte>> storage;
    std::vector<SafetensorsTensor> tensors;
    for (const auto& planned : plan) {
      if (planned.shard != shard) continue;
      const auto size = safetensors_byte_size(planned.spec.dtype, planned.spec.shape, planned.spec.name);
      std::size_t count = 1;
      for (const auto extent : planned.spec.shape) count *= static_cast<std::size_t>(extent);
      auto bytes = tiny_checkpoint_bytes(planned.spec.name, count, planned.spec.dtype);
      bytes.resize(size);
      storage.push_back(std::move(bytes));
      total_size += size;
    }
    std::size_t next = 0;
    const std::string file = shards == 1 ? "model.safetensors" : shard_name(shard, shards);
    for (const auto& planned : plan) {
      if (planned.shard != shard) continue;
      tensors.push_back({planned.spec, storage[next++]});
      names.push_back(planned.spec.name);
      weight_map[planned.spec.name] = file;
    }
    write_safetensors(directory / file, tensors, {{"format", "pt"}});
  }
  if (shards > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
    std::ofstream out(directory / "model.safetensors.index.json");
    out << index.dump(2);
  }
  return names;
}

}  // namespace twell::test
