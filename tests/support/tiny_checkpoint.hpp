// SPDX-License-Identifier: GPL-3.0-or-later
// Writes small Llama-style checkpoints (config.json + safetensors) for tests, with deterministic
// weights, optional alternative tensor spellings, shards and deliberate defects.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "twell/safetensors.hpp"

namespace twell::test {

enum class FfnSpelling {
  HfProj,          ///< mlp.{gate,up,down}_proj.weight in nn.Linear layout
  SakanaWeights,   ///< mlp.gate_weight [D, N], mlp.up_weight [N, D], mlp.down_weight [N, D]
  TwellCaps,       ///< mlp.GATE [N, D], mlp.UP [N, D], mlp.DOWN [N, D]
  DownTransposed,  ///< mlp.down_proj.weight stored [N, D] (hybrid-kernel training runs)
};

struct TinyCheckpointOptions {
  std::int64_t hidden_size = 64;
  std::int64_t intermediate_size = 256;
  std::int64_t layers = 2;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 2;
  std::int64_t vocab = 96;
  std::string model_type = "llama";
  std::string hidden_act = "silu";
  std::string dtype = "BF16";  ///< safetensors dtype of every weight: BF16, F16 or F32
  bool tie_word_embeddings = false;
  bool store_lm_head = true;
  std::size_t shards = 1;  ///< more than one writes model-0000k-of-0000n.safetensors + index
  FfnSpelling ffn_spelling = FfnSpelling::HfProj;
  std::vector<std::string> omit;                               ///< tensor names to leave out
  std::vector<SafetensorsTensorSpec> extra;                    ///< extra tensors, zero-filled
  nlohmann::json config_overrides = nlohmann::json::object();  ///< merged into config.json; null deletes
};

/// Writes config.json and the weights into `directory` (created if needed). Returns every tensor
/// name written.
std::vector<std::string> write_tiny_llama_checkpoint(const std::filesystem::path& directory,
                                                     const TinyCheckpointOptions& options = {});

/// The value stored at flat (row-major, as stored) index `index` of tensor `name`: k / 128 with
/// |k| <= 127, exact in BF16, F16 and F32.
float tiny_checkpoint_value(const std::string& name, std::size_t index);

/// Bytes of `count` values of tensor `name` in a safetensors dtype.
std::vector<std::byte> tiny_checkpoint_bytes(const std::string& name, std::size_t count,
                                             const std::string& dtype);

}  // namespace twell::test
