// SPDX-License-Identifier: GPL-3.0-or-later
// CudaBackend: core's Backend on one CUDA device. Split over cuda_backend.cu (device, hooks,
// comparisons, ad hoc FFNs), cuda_backend_load.cu (weights) and cuda_backend_forward.cu (the
// forward and its memory plan).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "projection_gemm.hpp"
#include "twell/backend.hpp"
#include "twell/kernels/activation_stats.hpp"
#include "twell/kernels/cuda_backend.hpp"
#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/kernel_registry.hpp"
#include "twell/kernels/l2_flush.hpp"
#include "twell/kernels/stream.hpp"

namespace twell::cuda {

using bf16 = __nv_bfloat16;

/// One decoder layer's weights on the device, each in the layout its kernel reads.
struct DeviceLayer {
  DeviceBuffer<bf16> qkv;  ///< [(q_heads + 2 kv_heads) * head_dim, D]: q, k, v rows stacked
  DeviceBuffer<bf16> o;    ///< [D, q_heads * head_dim]
  DeviceBuffer<bf16> input_norm, post_attention_norm;  ///< [D]
  DeviceBuffer<bf16> gate, up;                         ///< [N, D]
  DeviceBuffer<bf16> down;                             ///< [D, N] (dense path)
  DeviceBuffer<bf16> down_t;                           ///< [N, D] (TwELL's consumer)
};

/// The activations of one layer at a time, sized for up to `capacity_tokens`.
struct ActivationBuffers {
  std::int64_t capacity_tokens = 0;
  DeviceBuffer<std::int32_t> token_ids;
  DeviceBuffer<bf16> residual;   ///< [M, D] the residual stream
  DeviceBuffer<bf16> normed;     ///< [M, D] input of the attention block, then of the FFN
  DeviceBuffer<bf16> qkv;        ///< [M, (q_heads + 2 kv_heads) * head_dim]
  DeviceBuffer<bf16> attention;  ///< [M, q_heads * head_dim]
  DeviceBuffer<bf16> ffn_out;    ///< [M, D]
  std::uint64_t bytes() const {
    return token_ids.bytes() + residual.bytes() + normed.bytes() + qkv.bytes() + attention.bytes() +
           ffn_out.bytes();
  }
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;

  DeviceInfo device() const override { return m_info; }
  std::vector<KernelVariant> kernel_variants() const override { return cuda::kernel_variants(); }
  void load(const Checkpoint& checkpoint) override;
  const ModelConfig& config() const override;
  Activation activation() const override;
  ForwardResult forward(const TokenBatch& tokens, const ForwardOptions& options, Tracer* tracer,
                        const TraceTag& base_tag, const LayerHook& hook) override;
  std::uint64_t run_layer_ffn(std::size_t layer, FfnPath path, const FfnOptions& options, Tracer* tracer,
                              const TraceTag& tag) override;
  ErrorMetrics compare_layer_ffn_outputs(FfnPath reference, FfnPath candidate) override;
  Matrix ffn(std::size_t layer, const Matrix& input, FfnPath path, const FfnOptions& options) override;
  std::optional<FfnBreakEven> ffn_break_even(std::size_t tokens, const FfnOptions& options) const override;
  void check_ffn_options(const FfnOptions& options) const override;
  void* native_stream() const override { return m_stream.get(); }
  void flush_cache() override;

 private:
  struct HookState {
    std::optional<std::size_t> layer;  ///< set while the forward is inside that layer's hook
    std::array<bool, 2> has_output{false, false};
  };

  void require_loaded(const char* what) const;
  void select_device() const;
  FfnDeviceWeights ffn_weights(std::size_t layer) const;
  /// Runs `layer`'s FFN through `path` on x -> out; returns the overflow rows (TwELL).
  std::uint64_t run_ffn(std::size_t layer, FfnPath path, const FfnOptions& options, const bf16* x,
                        std::int64_t tokens, bf16* out, Tracer* tracer, const TraceTag& tag,
                        const bf16** gate_preactivation);
  /// run_ffn without reading the overflow count: TwELL's counters go to `counters_host` where given
  /// (FfnRunner::twell).
  void launch_ffn(std::size_t layer, FfnPath path, const FfnOptions& options, const bf16* x,
                  std::int64_t tokens, bf16* out, Tracer* tracer, const TraceTag& tag,
                  const bf16** gate_preactivation, std::uint32_t* counters_host = nullptr);
  void prepare_activations(std::int64_t tokens, std::uint32_t batch, std::uint32_t sequence,
                           const ForwardOptions& options, bool with_hook);
  void prepare_rope(std::uint32_t batch, std::uint32_t sequence);
  ActivationSummary summarize_layer(std::size_t layer, const bf16* gate_preactivation, std::int64_t tokens,
                                    const ForwardOptions& options, Tracer* tracer, const TraceTag& tag);
  Matrix copy_to_host(const bf16* device, std::int64_t rows, std::int64_t cols);

  int m_device;
  DeviceInfo m_info;
  Stream m_stream;
  std::unique_ptr<FfnRunner> m_ffn;
  /// Each TwELL layer's overflow row count in a forward, read once the forward's stream is done.
  std::unique_ptr<PinnedBuffer<std::uint32_t>> m_forward_overflow;
  ProjectionGemm m_gemm;
  ActivationStatsCollector m_statistics;

  bool m_loaded = false;
  ModelConfig m_config;
  Activation m_activation = Activation::Relu;
  DeviceBuffer<bf16> m_embedding;   ///< [vocab, D]
  DeviceBuffer<bf16> m_final_norm;  ///< [D]
  std::vector<DeviceLayer> m_layers;
  std::uint64_t m_weight_bytes = 0;

  ActivationBuffers m_activations;
  std::int64_t m_forward_tokens = 0;  ///< M of the forward in progress (or the last one)
  DeviceBuffer<float2> m_rope;        ///< [sequence, head_dim / 2]
  std::uint32_t m_rope_sequence = 0;
  DeviceBuffer<bf16> m_statistics_preactivation;     ///< [M, N], TwELL path with statistics
  std::array<DeviceBuffer<bf16>, 2> m_hook_outputs;  ///< [M, D] per FfnPath, run_layer_ffn's outputs
  HookState m_hook;
  DeviceBuffer<unsigned char> m_compare_scratch;
  std::unique_ptr<L2Flusher> m_l2_flusher;
};

}  // namespace twell::cuda
