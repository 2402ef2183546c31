// SPDX-License-Identifier: GPL-3.0-or-later
// CudaBackend::forward: the backbone (no LM head) with one layer's activations on the device at a
// time, and the memory plan that refuses, up front and by name, a batch that cannot fit.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "cuda_backend_impl.hpp"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/transformer_ops.hpp"
#include "twell/reference_forward.hpp"

namespace twell::cuda {

namespace {

constexpr std::uint64_t kHeadroomBytes = 256ull << 20;  // cuBLASLt, the statistics, the driver's own

FfnWorkspaceRequest ffn_workspace_request(const ModelConfig& config, std::uint64_t tokens,
                                          const ForwardOptions& options, bool with_hook) {
  FfnWorkspaceRequest request;
  request.tokens = static_cast<int>(std::min<std::uint64_t>(tokens, INT_MAX));
  request.hidden = static_cast<int>(config.hidden_size);
  request.intermediate = static_cast<int>(config.intermediate_size);
  request.compression = options.ffn.compression;
  request.twell = options.runs_any_layer_on(FfnPath::Twell) || with_hook;
  request.kernels = twell_kernels_from_request(options.ffn.twell_kernels);
  return request;
}

// One layer's activations, the hook's outputs and the statistics' pre-activations: everything but
// the FFN runner's workspaces.
std::uint64_t activation_bytes(const ModelConfig& config, std::uint64_t tokens, const ForwardOptions& options,
                               bool with_hook) {
  const std::uint64_t d = static_cast<std::uint64_t>(config.hidden_size);
  const std::uint64_t n = static_cast<std::uint64_t>(config.intermediate_size);
  const std::uint64_t head_dim = static_cast<std::uint64_t>(config.head_dim);
  const std::uint64_t qkv =
      static_cast<std::uint64_t>(config.num_attention_heads + 2 * config.num_key_value_heads) * head_dim;
  const std::uint64_t attention = static_cast<std::uint64_t>(config.num_attention_heads) * head_dim;
  std::uint64_t per_token = sizeof(std::int32_t) + 2 * (3 * d + qkv + attention);
  if (with_hook) per_token += 2 * 2 * d;  // run_layer_ffn's dense and TwELL outputs
  if (options.capture_statistics && options.runs_any_layer_on(FfnPath::Twell)) per_token += 2 * n;
  return tokens * per_token;
}

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

std::uint64_t planned_forward_bytes(const ModelConfig& config, std::uint64_t tokens,
                                    const ForwardOptions& options, bool with_hook, int device) {
  return activation_bytes(config, tokens, options, with_hook) +
         ffn_workspace_bytes(ffn_workspace_request(config, tokens, options, with_hook), device).total();
}

void CudaBackend::prepare_activations(std::int64_t tokens, std::uint32_t batch, std::uint32_t sequence,
                                      const ForwardOptions& options, bool with_hook) {
  const std::uint64_t count = static_cast<std::uint64_t>(tokens);
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  TWELL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // The activations held now are released or reused. The runner's workspaces only grow: what they
  // hold stays, and only their growth to this forward's plan is allocated.
  const std::uint64_t held = m_activations.bytes() + m_statistics_preactivation.bytes() +
                             m_hook_outputs[0].bytes() + m_hook_outputs[1].bytes();
  const std::uint64_t needed =
      activation_bytes(m_config, count, options, with_hook) +
      ffn_workspace_growth(
          m_ffn->workspace_bytes(),
          ffn_workspace_bytes(ffn_workspace_request(m_config, count, options, with_hook), m_device));
  const std::uint64_t available = free_bytes + held > kHeadroomBytes ? free_bytes + held - kHeadroomBytes : 0;
  const std::string request = "a forward of batch " + std::to_string(batch) + " x sequence " +
                              std::to_string(sequence) + " = " + std::to_string(tokens) + " tokens";
  if (needed > available)
    throw Error(Error::Kind::OutOfMemory,
                request + " needs " + std::to_string(needed) + " bytes (" + gib(needed) +
                    ") more device memory for one layer's activations and the FFN workspaces, but only " +
                    gib(available) + " is available on " + m_info.name + " (" + gib(m_weight_bytes) +
                    " taken by the weights); use a smaller batch or shorter sequences");

  if (m_activations.capacity_tokens < tokens) {
    m_activations = {};
    const std::size_t m = static_cast<std::size_t>(tokens);
    const std::size_t d = static_cast<std::size_t>(m_config.hidden_size);
    const std::size_t head_dim = static_cast<std::size_t>(m_config.head_dim);
    try {
      m_activations.token_ids.ensure(m);
      m_activations.residual.ensure(m * d);
      m_activations.normed.ensure(m * d);
      m_activations.qkv.ensure(
          m * static_cast<std::size_t>(m_config.num_attention_heads + 2 * m_config.num_key_value_heads) *
          head_dim);
      m_activations.attention.ensure(m * static_cast<std::size_t>(m_config.num_attention_heads) * head_dim);
      m_activations.ffn_out.ensure(m * d);
    } catch (const Error& error) {
      m_activations = {};
      throw Error(error.kind(), request + ": allocating its activations failed: " + error.what());
    }
    m_activations.capacity_tokens = tokens;
  }
}

void CudaBackend::prepare_rope(std::uint32_t batch, std::uint32_t sequence) {
  if (m_rope_sequence == sequence) return;
  const reference::AttentionGeometry geometry = reference::attention_geometry(m_config, batch, sequence);
  std::vector<float2> table(static_cast<std::size_t>(sequence) * geometry.inverse_frequencies.size());
  rope_table(static_cast<int>(sequence), geometry.inverse_frequencies, table.data());
  m_rope_sequence = 0;
  m_rope.ensure(table.size());
  TWELL_CUDA_CHECK(
      cudaMemcpy(m_rope.data(), table.data(), table.size() * sizeof(float2), cudaMemcpyHostToDevice));
  m_rope_sequence = sequence;
}

ActivationSummary CudaBackend::summarize_layer(std::size_t layer, const bf16* gate_preactivation,
                                               std::int64_t tokens, const ForwardOptions& options,
                                               Tracer* tracer, const TraceTag& tag) {
  const ScopedTrace scope(tracer, tag);
  const int neurons = static_cast<int>(m_config.intermediate_size);
  if (gate_preactivation == nullptr) {
    // TwELL's packed form clamps overflowing tiles, so the statistics read the gate product itself.
    m_statistics_preactivation.ensure(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(neurons));
    m_gemm.run(m_activations.normed.data(), m_layers[layer].gate.data(), m_statistics_preactivation.data(),
               tokens, neurons, static_cast<int>(m_config.hidden_size), false, m_stream.get());
    gate_preactivation = m_statistics_preactivation.data();
  }
  return m_statistics.summarize(gate_preactivation, tokens, neurons, neurons, options.map_shape,
                                m_stream.get());
}

ForwardResult CudaBackend::forward(const TokenBatch& tokens, const ForwardOptions& options, Tracer* tracer,
                                   const TraceTag& base_tag, const LayerHook& hook) {
  require_loaded("forward");
  select_device();
  const std::int64_t m = static_cast<std::int64_t>(tokens.batch) * tokens.sequence;
  if (m == 0 || tokens.ids.size() != static_cast<std::size_t>(m))
    throw Error(Error::Kind::InvalidInput, "forward: the token batch is " + std::to_string(tokens.batch) +
                                               " x " + std::to_string(tokens.sequence) + " but holds " +
                                               std::to_string(tokens.ids.size()) + " ids");
  if (m > INT_MAX)
    throw Error(Error::Kind::Unsupported, "forward: " + std::to_string(m) +
                                              " tokens in one forward exceed the " + std::to_string(INT_MAX) +
                                              " the FFN kernels index");
  options.check_layer_paths(m_layers.size());
  const int d = static_cast<int>(m_config.hidden_size);
  const int q_heads = static_cast<int>(m_config.num_attention_heads);
  const int kv_heads = static_cast<int>(m_config.num_key_value_heads);
  const int head_dim = static_cast<int>(m_config.head_dim);
  const int qkv_columns = (q_heads + 2 * kv_heads) * head_dim;
  const AttentionShape shape{static_cast<int>(tokens.batch), static_cast<int>(tokens.sequence), q_heads,
                             kv_heads, head_dim};
  const char* why = nullptr;
  if (!attention_supported(shape, &why))
    throw Error(Error::Kind::Unsupported, std::string("forward: attention over this batch: ") + why);

  prepare_activations(m, tokens.batch, tokens.sequence, options, static_cast<bool>(hook));
  for (std::size_t i = 0; i < tokens.ids.size(); ++i) {
    if (tokens.ids[i] < 0 || tokens.ids[i] >= m_config.vocab_size)
      throw Error(Error::Kind::InvalidInput, "forward: token id " + std::to_string(tokens.ids[i]) +
                                                 " at position " + std::to_string(i) + " of " +
                                                 tokens.source + " is outside the vocabulary [0, " +
                                                 std::to_string(m_config.vocab_size) + ")");
  }
  prepare_rope(tokens.batch, tokens.sequence);
  m_forward_tokens = m;
  const cudaStream_t stream = m_stream.get();
  TWELL_CUDA_CHECK(cudaMemcpyAsync(m_activations.token_ids.data(), tokens.ids.data(),
                                   tokens.ids.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream));

  struct HookReset {
    HookState& state;
    ~HookReset() { state = {}; }
  } hook_reset{m_hook};
  auto tagged = [&base_tag](int layer, const char* op) {
    TraceTag tag = base_tag;
    tag.layer = layer;
    tag.op = op;
    return tag;
  };
  const float eps = static_cast<float>(m_config.rms_norm_eps);
  ActivationBuffers& a = m_activations;
  ForwardResult result;
  result.layers.resize(m_layers.size());
  // Each TwELL layer's gate counters (overflowing rows, then tiles), read after the forward.
  if (!m_forward_overflow || m_forward_overflow->size() < 2 * m_layers.size())
    m_forward_overflow =
        std::make_unique<PinnedBuffer<std::uint32_t>>(std::max<std::size_t>(2 * m_layers.size(), 2));
  std::uint32_t* layer_counters = m_forward_overflow->data();

  {
    const ScopedTrace scope(tracer, tagged(-1, "embedding"));
    embedding_lookup(a.token_ids.data(), m_embedding.data(), m, d, a.residual.data(), stream);
  }
  for (std::size_t l = 0; l < m_layers.size(); ++l) {
    const DeviceLayer& w = m_layers[l];
    const int layer = static_cast<int>(l);
    {
      // The previous layer's FFN output joins the residual stream inside this norm.
      const ScopedTrace scope(tracer, tagged(layer, "attn_norm"));
      if (l == 0)
        rms_norm(a.residual.data(), w.input_norm.data(), m, d, eps, a.normed.data(), stream);
      else
        add_rms_norm(a.residual.data(), a.ffn_out.data(), w.input_norm.data(), m, d, eps, a.normed.data(),
                     stream);
    }
    if (l > 0 && options.keep_layer_hidden)
      result.layers[l - 1].hidden_out = copy_to_host(a.residual.data(), m, d);
    {
      const ScopedTrace scope(tracer, tagged(layer, "qkv"));
      m_gemm.run(a.normed.data(), w.qkv.data(), a.qkv.data(), m, qkv_columns, d, false, stream);
    }
    {
      const ScopedTrace scope(tracer, tagged(layer, "rope"));
      apply_rope(a.qkv.data(), m, static_cast<int>(tokens.sequence), q_heads, kv_heads, head_dim,
                 m_rope.data(), stream);
    }
    {
      const ScopedTrace scope(tracer, tagged(layer, "attention"));
      flash_attention(a.qkv.data(), shape, a.attention.data(), stream);
    }
    {
      // The residual add is the GEMM's epilogue (beta = 1 into the residual stream).
      const ScopedTrace scope(tracer, tagged(layer, "o_proj"));
      m_gemm.run(a.attention.data(), w.o.data(), a.residual.data(), m, d, q_heads * head_dim, true, stream);
    }
    {
      const ScopedTrace scope(tracer, tagged(layer, "ffn_norm"));
      rms_norm(a.residual.data(), w.post_attention_norm.data(), m, d, eps, a.normed.data(), stream);
    }
    if (hook) {
      m_hook = {};
      m_hook.layer = l;
      hook(l);
      m_hook = {};
    }
    const FfnPath path = options.path_of(l);
    const bool keep_gate = options.capture_statistics && path == FfnPath::Dense;
    const bf16* gate_preactivation = nullptr;
    // The counters land from the runner's side stream and are read after the forward: asking now
    // would hold the host until this layer's gate is done.
    std::uint32_t* counters = layer_counters + 2 * l;
    counters[0] = 0;
    launch_ffn(l, path, options.ffn, a.normed.data(), m, a.ffn_out.data(), tracer, base_tag,
               keep_gate ? &gate_preactivation : nullptr, path == FfnPath::Twell ? counters : nullptr);
    if (options.capture_statistics)
      result.layers[l].summary =
          summarize_layer(l, gate_preactivation, m, options, tracer, tagged(layer, "statistics"));
    if (options.on_layer_done) options.on_layer_done(l, result.layers[l]);
  }
  {
    const ScopedTrace scope(tracer, tagged(-1, "final_norm"));
    if (m_layers.empty())
      rms_norm(a.residual.data(), m_final_norm.data(), m, d, eps, a.normed.data(), stream);
    else
      add_rms_norm(a.residual.data(), a.ffn_out.data(), m_final_norm.data(), m, d, eps, a.normed.data(),
                   stream);
  }
  if (options.keep_layer_hidden && !m_layers.empty())
    result.layers.back().hidden_out = copy_to_host(a.residual.data(), m, d);
  if (options.keep_final_hidden) result.final_hidden = copy_to_host(a.normed.data(), m, d);
  TWELL_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (std::size_t l = 0; l < m_layers.size(); ++l) result.layers[l].overflow_rows = layer_counters[2 * l];
  return result;
}

}  // namespace twell::cuda
