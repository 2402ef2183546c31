// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/kernels/kernel_registry.hpp"

namespace twell::cuda {

std::vector<KernelVariant> kernel_variants() {
  constexpr bool kLibrary = true, kOurs = false;
  return {
      {"cuBLASLt bf16 GEMM", kLibrary, "dense", "gate_up", "any",
       "x Wg^T and x Wu^T with fp32 accumulation (non-gated: x Wu^T with a ReLU epilogue)"},
      {"act_mul_kernel", kOurs, "dense", "act_mul", "any",
       "act(gate) * up elementwise in fp32, rounded to bf16, 16-byte vectors"},
      {"relu_kernel", kOurs, "dense", "act_mul", "any",
       "non-gated FFN whose pre-activations are kept for statistics: ReLU elementwise, 16-byte vectors"},
      {"cuBLASLt bf16 GEMM", kLibrary, "dense", "down", "any", "h Wd^T with fp32 accumulation"},
      {"twell_gate_pack_kernel", kOurs, "twell", "gate_pack", "sm_80+",
       "mma.sync bf16 gate GEMM, 128x256 tiles, cp.async ring of K 64 x 4 (sm_90), 64 x 3 (sm_80) or 32 x 4 "
       "stages; ReLU + TwELL pack in the epilogue (shared-memory row counters, count clamped to capacity, "
       "overflowing rows flagged and listed)"},
      {"twell_gate_pack_sm90_kernel", kOurs, "twell", "gate_pack", "sm_90a (compute capability 9.0)",
       "Hopper gate GEMM: TMA + mbarrier ring, warp-specialised persistent CTAs, wgmma m64n256k16; ReLU + "
       "TwELL pack epilogue (each quad lane's entries in consecutive slots: a fixed order, not column "
       "order), counts clamped, overflowing rows flagged (default where available; the weight tile "
       "multicast to clusters of 2 CTAs for the GPU models and token counts where that measured faster)"},
      {"cuBLASLt bf16 GEMM", kLibrary, "twell", "gate_pack", "any",
       "the gate GEMM x Wg^T into a dense [M, N] workspace (GateKernel::CublasPack: what Auto runs at the "
       "decode-sized token counts where it measured faster than the fused gate)"},
      {"twell_pack_dense_kernel", kOurs, "twell", "gate_pack", "any",
       "after cuBLASLt's gate GEMM: ReLU + TwELL pack, one warp per row and 256-column tile, slots from a "
       "warp scan (ascending columns), counts clamped, overflowing rows flagged and listed; under the "
       "unbounded overflow route every row in the unbounded layout (512 slots a tile, the slots past a "
       "tile's count left unwritten), the rows over C's capacity still counted"},
      {"compact_flagged_rows_kernel", kOurs, "twell", "gate_pack", "any",
       "after the sm_90a gate: the flagged overflowing rows compacted into the count and row list the "
       "dense recomputation consumes"},
      {"twell_up_down_kernel", kOurs, "twell", "up_down", "sm_80+",
       "fused gated consumer, one CTA per token or per planned piece of one: x and outputs in registers, "
       "bf16 products with fp32 sums on the tensor cores (or all-fp32 highest precision); a split token's "
       "last piece to finish sums the pieces' fp32 partials in piece order; non-gated T2D variant; any "
       "hidden size (the default consumer). Split form, where the dispatch table measured it faster: one "
       "launch writes every non-zero's bf16 h as one list per token or planned piece, a second (the "
       "non-gated variant) accumulates the down rows from it, bit for bit the fused output with each "
       "launch gathering rows of one weight matrix. Each pass stages only the counted entries of as many "
       "tiles as fit, so under the unbounded overflow route it reads every row in the unbounded layout "
       "without its empty slots"},
      {"count_row_entries_kernel", kOurs, "twell", "up_down", "sm_80+",
       "before the balanced consumer (token counts where few tokens share each resident CTA slot): every "
       "token's non-zeros, one warp each, and their total"},
      {"plan_pieces_kernel", kOurs, "twell", "up_down", "any",
       "every token cut into pieces of about equal non-zeros, cut inside tiles (as core's "
       "twell_plan_balanced_pieces), one thread a token, space for the extra pieces claimed once a warp"},
      {"twell_up_down_warp_kernel", kOurs, "twell", "up_down", "sm_80+",
       "fused consumer, persistent warps, one token each with the next token's x and packed row prefetched "
       "(cp.async); ballot-compacted entry list, 2 non-zeros in flight, shuffle reductions; hidden <= 2048"},
      {"twell_union_pass_kernel", kOurs, "twell", "up_down", "any",
       "the union consumer's first pass (on request: union_sm90): per block of 128 tokens the union of live "
       "neurons, each non-zero grouped by its union position, and the up GEMM's work items"},
      {"twell_union_up_kernel", kOurs, "twell", "up_down", "sm_90a (compute capability 9.0)",
       "union consumer: persistent wgmma m64n256k16 GEMM of each block's x against its union's up rows "
       "(gathered by cp.async into a 128-byte-swizzled mbarrier ring), h = bf16(g bf16(u)) per non-zero"},
      {"twell_union_down_kernel", kOurs, "twell", "up_down", "sm_90a (compute capability 9.0)",
       "union consumer: persistent wgmma GEMM of each block's h (scattered into zeroed A tiles) against "
       "its union's Wd^T rows (N-major, gathered by cp.async), 256 output columns per item"},
      {"move_rows_kernel", kOurs, "twell", "overflow_dense", "any",
       "rows with an overflowing tile gathered into a dense batch, and their outputs scattered back"},
      {"cuBLASLt bf16 GEMM", kLibrary, "twell", "overflow_dense", "any",
       "the dense FFN's GEMMs on the gathered overflowing rows (with act_mul_kernel between them)"},
      {"move_rows_kernel", kOurs, "twell", "overflow_sparse", "any",
       "rows with an overflowing tile gathered into a batch, and their outputs scattered back"},
      {"cuBLASLt bf16 GEMM", kLibrary, "twell", "overflow_sparse", "any",
       "after a fused gate: the gate GEMM over just the gathered overflowing rows (the cuBLAS gate's "
       "workspace already holds them)"},
      {"twell_pack_dense_kernel", kOurs, "twell", "overflow_sparse", "any",
       "the overflowing rows' gate pre-activations packed in the unbounded layout (512 slots a tile: no "
       "tile overflows)"},
      {"count_row_entries_kernel", kOurs, "twell", "overflow_sparse", "sm_80+",
       "the overflowing rows' non-zeros, for the balanced consumer's plan"},
      {"plan_pieces_kernel", kOurs, "twell", "overflow_sparse", "any",
       "the overflowing rows cut into pieces of about equal non-zeros"},
      {"twell_up_down_kernel", kOurs, "twell", "overflow_sparse", "sm_80+",
       "the balanced consumer over the overflowing rows in the unbounded layout: up and down rows read "
       "only where a row is live"},
  };
}

}  // namespace twell::cuda
