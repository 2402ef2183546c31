// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "twell/matrix.hpp"
#include "twell/model_config.hpp"

namespace twell {

enum class DType { BF16, F16, F32 };
const char* to_string(DType dtype) noexcept;
std::size_t item_size(DType dtype) noexcept;

/// One tensor of a memory-mapped safetensors file. The bytes stay in the mapping; nothing is
/// copied until a conversion is asked for.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;  ///< may be unaligned for its dtype
  std::string file;                  ///< the shard it lives in

  std::int64_t element_count() const;
  /// Exact conversion of every element to fp32.
  std::vector<float> to_float() const;
  /// The elements as bf16 bits (F32 and F16 are rounded to nearest even).
  std::vector<std::uint16_t> to_bf16_bits() const;
};

/// Where a weight sits in a Llama-style decoder.
enum class TensorRole {
  Embedding, AttnQ, AttnK, AttnV, AttnO, InputNorm, PostAttentionNorm, FfnGate, FfnUp, FfnDown, FinalNorm, LmHead
};
const char* to_string(TensorRole role) noexcept;

/// A weight resolved for its role, with its orientation decided from shapes (not names):
/// `transposed` means the stored matrix is the transpose of the nn.Linear [out, in] layout.
struct RoleTensor {
  const TensorView* view = nullptr;
  bool transposed = false;
  /// The weight in nn.Linear layout [out, in] (or a vector for norms), as fp32.
  Matrix to_linear_matrix() const;
};

struct LayerTensors {
  RoleTensor q, k, v, o, input_norm, post_attention_norm, gate, up, down;
};

/// An opened Hugging Face checkpoint directory: config.json plus model.safetensors or a sharded
/// index. Every file is memory-mapped and every tensor validated on open; the data is not read.
class Checkpoint {
 public:
  struct Options {
    std::optional<Activation> activation_override;
  };
  static Checkpoint open(const std::filesystem::path& directory, const Options& options);
  static Checkpoint open(const std::filesystem::path& directory) { return open(directory, Options{}); }

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::filesystem::path& directory() const;
  const ModelConfig& config() const;
  const ActivationChoice& activation() const;
  const std::vector<TensorView>& tensors() const;
  const TensorView* find(const std::string& name) const;

  const RoleTensor& embedding() const;
  const RoleTensor& final_norm() const;
  /// The output head; `view` points at the embedding when tie_word_embeddings (or lm_head absent).
  const RoleTensor& lm_head() const;
  bool lm_head_tied() const;
  const LayerTensors& layer(std::size_t index) const;
  std::size_t layer_count() const;
  /// Names present in the files but not used by the model (listed by `inspect`, otherwise ignored).
  const std::vector<std::string>& unused_tensors() const;
  std::uint64_t parameter_count() const;
  /// The safetensors files the tensors come from (one, or every shard).
  std::vector<std::filesystem::path> weight_files() const;
  /// Non-fatal findings (unknown header fields, index total_size mismatch, extra layers...).
  const std::vector<std::string>& warnings() const;

 private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace twell
