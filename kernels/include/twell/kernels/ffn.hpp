// SPDX-License-Identifier: GPL-3.0-or-later
// The FFN operations on the GPU: the dense cuBLASLt path and the TwELL path, behind one runner
// that owns the workspaces and the cuBLASLt handle. Consumed by CudaBackend and the benchmark.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "twell/backend.hpp"
#include "twell/tracer.hpp"

namespace twell::cuda {

/// One layer's FFN weights on the device, bf16. Gated: y = (act(x Wg^T) * (x Wu^T)) Wd^T.
/// Non-gated: y = ReLU(x Wu^T) Wd^T (gate is null).
struct FfnDeviceWeights {
  const __nv_bfloat16* gate = nullptr;    ///< [N, D] nn.Linear layout; null for non-gated
  const __nv_bfloat16* up = nullptr;      ///< [N, D]
  const __nv_bfloat16* down = nullptr;    ///< [D, N] nn.Linear layout (dense path)
  const __nv_bfloat16* down_t = nullptr;  ///< [N, D] = down^T contiguous (TwELL's consumer)
  int hidden = 0;                         ///< D, a multiple of 64, at most 8192
  int intermediate = 0;                   ///< N, at most 65536 (padded to 256 inside)
};

/// Runs FFNs on one stream. Not thread-safe; one per backend. Workspaces grow to the largest M seen.
class FfnRunner {
 public:
  explicit FfnRunner(cudaStream_t stream);
  ~FfnRunner();
  FfnRunner(const FfnRunner&) = delete;
  FfnRunner& operator=(const FfnRunner&) = delete;

  /// Dense: gate and up GEMMs (cuBLASLt), act(gate) * up fused, down GEMM. x and out are [M, D]
  /// bf16 row-major; out may not alias x. Launch groups are tagged gate_up / act_mul / down.
  /// If `gate_preactivation` is non-null it receives the gate GEMM output [M, N] bf16 (for statistics).
  void dense(const FfnDeviceWeights& weights, Activation activation, const __nv_bfloat16* x, int tokens,
             __nv_bfloat16* out, Tracer* tracer, const TraceTag& tag,
             const __nv_bfloat16** gate_preactivation = nullptr);

  /// TwELL: gate GEMM with the ReLU + pack epilogue, then the fused up/down consumer; rows whose
  /// tiles overflowed capacity are recomputed densely. Tagged gate_pack / up_down / overflow_dense.
  /// The overflow row count is left on the device; read it with last_overflow_rows().
  void twell(const FfnDeviceWeights& weights, const FfnOptions& options, const __nv_bfloat16* x, int tokens,
             __nv_bfloat16* out, Tracer* tracer, const TraceTag& tag);

  /// Rows recomputed densely by the last twell() call (synchronises the stream).
  std::uint64_t last_overflow_rows();

  /// The packed TwELL buffer of the last twell() call: [M, N_padded / C] uint32 (tests).
  const std::uint32_t* last_packed() const;

  cudaStream_t stream() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace twell::cuda
