// SPDX-License-Identifier: GPL-3.0-or-later
// Private to core: the CPU backend's FFNs split into the stages it times separately, so a CPU
// profile shows the same breakdown as the GPU kernels. Dense: "gate_up" (both projections and the
// activation product) then "down". TwELL: "gate_pack" (gate GEMM, ReLU, packing), "up_down" (per
// stored non-zero, the up dot product and the down accumulation), "overflow_dense" (rows whose
// tiles overflowed, recomputed densely). All fp32; the synthetic-model generator runs them too.
#pragma once
#include <cstdint>
#include <vector>

#include "twell/kernel_variant.hpp"
#include "twell/matrix.hpp"
#include "twell/model_config.hpp"
#include "twell/twell_format.hpp"

namespace twell::cpu {

struct FfnLayerView {
  const Matrix* gate = nullptr;    ///< [N, D]; null for a non-gated ReLU FFN
  const Matrix* up = nullptr;      ///< [N, D]
  const Matrix* down = nullptr;    ///< [D, N]
  const Matrix* down_t = nullptr;  ///< [N, D]
  Activation activation = Activation::Relu;
};

/// gate_pre = x Wg^T (x Wu^T when non-gated); hidden = act(gate_pre) * x Wu^T (ReLU(gate_pre) when
/// non-gated). Both [M, N].
void dense_gate_up(const Matrix& x, const FfnLayerView& layer, Matrix& gate_pre, Matrix& hidden,
                   unsigned threads);
/// out = hidden Wd^T, [M, D].
void dense_down(const Matrix& hidden, const FfnLayerView& layer, Matrix& out, unsigned threads);

/// gate_pre = x Wg^T (x Wu^T when non-gated), packed as TwELL at `compression`.
TwellPacked twell_gate_pack(const Matrix& x, const FfnLayerView& layer, std::uint32_t compression,
                            Matrix& gate_pre, unsigned threads);
/// out[m] = sum over the stored non-zeros j of row m: g * (x[m] . Wu[j]) * Wd^T[j] (g alone when
/// non-gated), rows in packed.overflow_rows left zero; `out` is sized [M, D]. The packed columns
/// say which neurons to visit; g is taken in fp32 from `gate_pre` (the reference's Fp32 precision),
/// not as the bf16 value the format stores.
void twell_up_down(const Matrix& x, const TwellPacked& packed, const Matrix& gate_pre,
                   const FfnLayerView& layer, Matrix& out, unsigned threads);
/// Recomputes packed.overflow_rows with the dense FFN into `out`, reusing their gate
/// pre-activations from `gate_pre` (computed for every row by twell_gate_pack).
void twell_overflow_dense(const Matrix& x, const TwellPacked& packed, const Matrix& gate_pre,
                          const FfnLayerView& layer, Matrix& out, unsigned threads);

/// The stages above as the CPU clock tracer names them ("cpu:" + op), each described.
std::vector<KernelVariant> stage_variants();

}  // namespace twell::cpu
