// SPDX-License-Identifier: GPL-3.0-or-later
// Firing statistics of an FFN gate computed where the activations live: only the small arrays of an
// ActivationSummary cross to the host, never the [M, N] pre-activation matrix.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "twell/activation_summary.hpp"

namespace twell::cuda {

/// Summarises a gate pre-activation matrix on the GPU exactly as core's summarize_preactivations
/// defines it (ReLU mask: value > 0). Owns a device workspace grown to the largest input seen.
class ActivationStatsCollector {
 public:
  ActivationStatsCollector();
  ~ActivationStatsCollector();
  ActivationStatsCollector(const ActivationStatsCollector&) = delete;
  ActivationStatsCollector& operator=(const ActivationStatsCollector&) = delete;

  /// `preactivations`: [tokens, neurons] bf16 with `row_stride` elements between rows. Enqueues on
  /// `stream`, then waits for it to copy the summary back.
  ActivationSummary summarize(const __nv_bfloat16* preactivations, std::int64_t tokens, int neurons,
                              std::int64_t row_stride, const MapShape& map_shape, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace twell::cuda
