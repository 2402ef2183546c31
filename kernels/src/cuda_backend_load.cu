// SPDX-License-Identifier: GPL-3.0-or-later
// CudaBackend::load: every weight converted to bf16 once and uploaded in the layout its kernel reads
// (q, k, v stacked into one projection; the down projection also transposed for TwELL).
#include <string>
#include <vector>

#include "cuda_backend_impl.hpp"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/transformer_ops.hpp"

namespace twell::cuda {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Uploads weights through one reusable staging buffer, transposing on the device where needed.
class WeightUploader {
 public:
  explicit WeightUploader(cudaStream_t stream) : m_stream(stream) {}

  /// `role` as nn.Linear [out, in] into `destination` (which holds at least out * in values).
  void linear(const RoleTensor& role, std::int64_t out, std::int64_t in, bf16* destination,
              const std::string& what) {
    const TensorView* view = require(role, what);
    const std::vector<std::int64_t> expected =
        role.transposed ? std::vector<std::int64_t>{in, out} : std::vector<std::int64_t>{out, in};
    if (view->shape != expected)
      throw Error(Error::Kind::InvalidInput, what + " (" + view->name + ") has shape " +
                                                 shape_text(view->shape) + ", expected " +
                                                 shape_text(expected));
    const std::vector<std::uint16_t> bits = view->to_bf16_bits();
    if (!role.transposed) {
      copy(bits, destination);
      return;
    }
    m_staging.ensure(bits.size());
    copy(bits, m_staging.data());
    transpose_bf16(m_staging.data(), in, out, destination, m_stream);
    TWELL_CUDA_CHECK(cudaStreamSynchronize(m_stream));  // the staging buffer is reused next
  }

  void vector(const RoleTensor& role, std::int64_t length, bf16* destination, const std::string& what) {
    const TensorView* view = require(role, what);
    if (view->element_count() != length)
      throw Error(Error::Kind::InvalidInput, what + " (" + view->name + ") has shape " +
                                                 shape_text(view->shape) + ", expected [" +
                                                 std::to_string(length) + "]");
    copy(view->to_bf16_bits(), destination);
  }

 private:
  static const TensorView* require(const RoleTensor& role, const std::string& what) {
    if (role.view == nullptr) throw Error(Error::Kind::InvalidInput, "the checkpoint has no " + what);
    return role.view;
  }
  void copy(const std::vector<std::uint16_t>& bits, bf16* destination) {
    TWELL_CUDA_CHECK(
        cudaMemcpy(destination, bits.data(), bits.size() * sizeof(std::uint16_t), cudaMemcpyHostToDevice));
  }

  cudaStream_t m_stream;
  DeviceBuffer<bf16> m_staging;
};

void check_supported(const ModelConfig& config, const Checkpoint& checkpoint) {
  const std::string source = (checkpoint.directory() / "config.json").string();
  auto unsupported = [&](const std::string& why) {
    throw Error(Error::Kind::Unsupported, source + ": the CUDA backend does not support " + why);
  };
  const AttentionShape shape{1, 1, static_cast<int>(config.num_attention_heads),
                             static_cast<int>(config.num_key_value_heads), static_cast<int>(config.head_dim)};
  const char* why = nullptr;
  if (!attention_supported(shape, &why)) unsupported(std::string("this attention shape: ") + why);
  if (config.hidden_size % 64 != 0 || config.hidden_size > kMaxNormHidden)
    unsupported("hidden_size " + std::to_string(config.hidden_size) + " (a multiple of 64 up to " +
                std::to_string(kMaxNormHidden) + " is required)");
  if (config.intermediate_size <= 0 || config.intermediate_size > 65536)
    unsupported("intermediate_size " + std::to_string(config.intermediate_size) + " (at most 65536)");
  if (!config.gated_mlp) unsupported("non-gated FFNs");
  // Llama has no projection biases; a checkpoint that carries them (Qwen2's q/k/v) would be run
  // without them and give wrong numbers, so it is refused.
  for (const std::string& name : checkpoint.unused_tensors()) {
    if (name.find("layers.") != std::string::npos && name.size() > 5 && name.ends_with(".bias"))
      unsupported("projection biases (found " + name + ")");
  }
}

}  // namespace

void CudaBackend::load(const Checkpoint& checkpoint) {
  select_device();
  ModelConfig config = checkpoint.config();
  if (config.num_key_value_heads <= 0) config.num_key_value_heads = config.num_attention_heads;
  if (config.head_dim <= 0 && config.num_attention_heads > 0)
    config.head_dim = config.hidden_size / config.num_attention_heads;
  check_supported(config, checkpoint);
  TWELL_CUDA_CHECK(cudaStreamSynchronize(m_stream.get()));
  m_loaded = false;
  m_layers.clear();
  m_embedding = {};
  m_final_norm = {};
  m_activations = {};
  m_statistics_preactivation = {};
  m_hook_outputs = {};
  m_rope = {};
  m_rope_sequence = 0;

  const std::int64_t d = config.hidden_size;
  const std::int64_t n = config.intermediate_size;
  const std::int64_t head_dim = config.head_dim;
  const std::int64_t q_rows = config.num_attention_heads * head_dim;
  const std::int64_t kv_rows = config.num_key_value_heads * head_dim;
  const std::int64_t layers = static_cast<std::int64_t>(checkpoint.layer_count());
  const std::uint64_t per_layer =
      static_cast<std::uint64_t>((q_rows + 2 * kv_rows) * d + d * q_rows + 2 * d + 4 * n * d);
  const std::uint64_t total_bytes = 2 * (per_layer * static_cast<std::uint64_t>(layers) +
                                         static_cast<std::uint64_t>(config.vocab_size * d + d));
  std::size_t free_bytes = 0;
  std::size_t device_bytes = 0;
  TWELL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &device_bytes));
  if (total_bytes > free_bytes)
    throw Error(Error::Kind::OutOfMemory, "the model's weights need " + std::to_string(total_bytes) +
                                              " bytes of device memory in bf16 (" +
                                              std::to_string(total_bytes >> 20) +
                                              " MiB, the down projection held twice), but " + m_info.name +
                                              " has " + std::to_string(free_bytes >> 20) + " MiB free");

  try {
    WeightUploader upload(m_stream.get());
    m_embedding.ensure(static_cast<std::size_t>(config.vocab_size * d));
    upload.linear(checkpoint.embedding(), config.vocab_size, d, m_embedding.data(), "token embedding");
    m_final_norm.ensure(static_cast<std::size_t>(d));
    upload.vector(checkpoint.final_norm(), d, m_final_norm.data(), "final norm");
    m_layers.resize(static_cast<std::size_t>(layers));
    for (std::int64_t l = 0; l < layers; ++l) {
      const LayerTensors& tensors = checkpoint.layer(static_cast<std::size_t>(l));
      DeviceLayer& layer = m_layers[static_cast<std::size_t>(l)];
      const std::string where = " of layer " + std::to_string(l);
      layer.qkv.ensure(static_cast<std::size_t>((q_rows + 2 * kv_rows) * d));
      upload.linear(tensors.q, q_rows, d, layer.qkv.data(), "query projection" + where);
      upload.linear(tensors.k, kv_rows, d, layer.qkv.data() + q_rows * d, "key projection" + where);
      upload.linear(tensors.v, kv_rows, d, layer.qkv.data() + (q_rows + kv_rows) * d,
                    "value projection" + where);
      layer.o.ensure(static_cast<std::size_t>(d * q_rows));
      upload.linear(tensors.o, d, q_rows, layer.o.data(), "output projection" + where);
      layer.input_norm.ensure(static_cast<std::size_t>(d));
      upload.vector(tensors.input_norm, d, layer.input_norm.data(), "input norm" + where);
      layer.post_attention_norm.ensure(static_cast<std::size_t>(d));
      upload.vector(tensors.post_attention_norm, d, layer.post_attention_norm.data(),
                    "post-attention norm" + where);
      layer.gate.ensure(static_cast<std::size_t>(n * d));
      upload.linear(tensors.gate, n, d, layer.gate.data(), "FFN gate projection" + where);
      layer.up.ensure(static_cast<std::size_t>(n * d));
      upload.linear(tensors.up, n, d, layer.up.data(), "FFN up projection" + where);
      layer.down.ensure(static_cast<std::size_t>(d * n));
      upload.linear(tensors.down, d, n, layer.down.data(), "FFN down projection" + where);
      layer.down_t.ensure(static_cast<std::size_t>(n * d));
      transpose_bf16(layer.down.data(), d, n, layer.down_t.data(), m_stream.get());
    }
    TWELL_CUDA_CHECK(cudaStreamSynchronize(m_stream.get()));
  } catch (...) {
    m_layers.clear();
    m_embedding = {};
    m_final_norm = {};
    throw;
  }
  m_config = config;
  m_activation = checkpoint.activation().activation;
  m_weight_bytes = total_bytes;
  m_loaded = true;
}

}  // namespace twell::cuda
