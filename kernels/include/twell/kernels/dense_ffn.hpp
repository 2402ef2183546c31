// SPDX-License-Identifier: GPL-3.0-or-later
// The dense FFN on cuBLASLt: bf16 operands, fp32 accumulation, bf16 outputs. The baseline every
// TwELL speedup is measured against, and the fallback for TwELL rows that overflow a tile.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/model_config.hpp"
#include "twell/tracer.hpp"

namespace twell::cuda {

enum class GemmEpilogue { None, Relu };

/// out[m, n] = epilogue(sum_k a[m, k] * b[n, k]) for row-major a [M, K], b [N, K] and out [M, N]
/// with row pitch `out_pitch`: the nn.Linear product x W^T. One cuBLASLt handle, a workspace and
/// a per-shape cache of the heuristic's algorithm.
class LtMatmul {
 public:
  explicit LtMatmul(std::size_t workspace_bytes = std::size_t{32} << 20);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void gemm_nt(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int m, int n, int k,
               int out_pitch, GemmEpilogue epilogue, cudaStream_t stream);
  /// The same with b row-major [K, N]: out = a b (the down projection through down_t).
  void gemm_nn(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int m, int n, int k,
               int out_pitch, GemmEpilogue epilogue, cudaStream_t stream);

 private:
  void run(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int m, int n, int k,
           int out_pitch, GemmEpilogue epilogue, bool b_is_k_by_n, cudaStream_t stream);
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// up[i] = bf16(act(gate[i]) * up[i]) over `count` elements (the gated FFN's hidden activation,
/// written over the up projection so the gate pre-activation survives for statistics).
void launch_act_mul(Activation activation, const __nv_bfloat16* gate, __nv_bfloat16* up, std::size_t count,
                    cudaStream_t stream);
/// out[i] = max(in[i], 0) over `count` elements.
void launch_relu(const __nv_bfloat16* in, __nv_bfloat16* out, std::size_t count, cudaStream_t stream);

/// The dense FFN with its workspaces (grown to the largest M seen). The down projection uses
/// weights.down, or weights.down_t when only TwELL's layout is there.
class DenseFfn {
 public:
  DenseFfn() = default;
  /// See FfnRunner::dense. `tracer` may be null (no tags pushed).
  void run(const FfnDeviceWeights& weights, Activation activation, const __nv_bfloat16* x, int tokens,
           __nv_bfloat16* out, cudaStream_t stream, Tracer* tracer, const TraceTag& tag,
           const __nv_bfloat16** gate_preactivation = nullptr);
  LtMatmul& matmul() { return m_matmul; }
  /// Bytes of the [M, N] workspaces held now (the cuBLASLt workspace is fixed at construction).
  std::uint64_t workspace_bytes() const noexcept { return m_gate.bytes() + m_hidden.bytes(); }

 private:
  LtMatmul m_matmul;
  DeviceBuffer<__nv_bfloat16> m_gate;    ///< [M, N]: gate (or non-gated up) pre-activation
  DeviceBuffer<__nv_bfloat16> m_hidden;  ///< [M, N]: up projection, then the hidden activation
};

/// Throws twell::Error (Kind::InvalidInput / Unsupported) when `weights` cannot run `path`.
void validate_ffn_weights(const FfnDeviceWeights& weights, bool for_twell);

}  // namespace twell::cuda
