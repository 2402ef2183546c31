// SPDX-License-Identifier: GPL-3.0-or-later
// TwELL's consumer: per token, for every packed non-zero j, the up dot product <x, Wu[j]>, the gate
// multiply and the down accumulation through Wd^T[j] (TWELL_SPEC.md §2.2), with the x row and the
// output accumulators in registers and the hidden activation never written. The non-gated variant
// (§2.3) accumulates the packed values straight through Wd^T.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "twell/twell_balance.hpp"

namespace twell::cuda {

/// Which consumer kernel runs. Both compute the same function with the same rounding points.
enum class UpDownKernel {
  Auto,          ///< BalancedCta (see resolve_up_down_kernel)
  PerTokenCta,   ///< one CTA per token, D spread over the CTA's threads (any hidden size)
  BalancedCta,   ///< PerTokenCta's kernel over pieces of tokens balanced by non-zeros where few tokens
                 ///< share each resident CTA slot (up_down_balance_sizes), one CTA per token elsewhere
  PerTokenWarp,  ///< persistent warps, one token at a time with the next prefetched (hidden <= 2048)
  UnionSm90      ///< sm_90a: wgmma GEMMs over each 128-token block's union of live neurons
                 ///< (twell_up_down_union.hpp); default precision, hidden a multiple of 256
};

/// "auto", "per_token_cta", "balanced_cta", "per_token_warp", "union_sm90"
const char* to_string(UpDownKernel kernel) noexcept;

struct UpDownArgs {
  const __nv_bfloat16* x = nullptr;          ///< [rows, hidden]; gated only
  const std::uint32_t* packed = nullptr;     ///< [rows, tiles * twell_slots_per_tile(C)]
  const __nv_bfloat16* up = nullptr;         ///< [N, hidden]; null selects the non-gated consumer
  const __nv_bfloat16* down_t = nullptr;     ///< [N, hidden] = down^T
  const std::uint32_t* row_flags = nullptr;  ///< rows flagged here are skipped (recomputed densely)
  __nv_bfloat16* out = nullptr;              ///< [rows, hidden]
  /// The split form of the CTA consumers (PerTokenCta, BalancedCta), gated, default precision; ignored
  /// elsewhere. A first kernel writes every non-zero's h (bf16, as the fused kernel rounds it) into this
  /// buffer, and a second accumulates the down rows from it: the same output bit for bit, each kernel
  /// gathering rows of one weight matrix only. One list per CTA (its length, then its entries) in the
  /// token's row, from the word of its first tile: a whole token's at word 0, a piece's (the balanced
  /// launch) at its piece. Packed's size.
  std::uint32_t* h_packed = nullptr;
  int rows = 0;
  int hidden = 0;                  ///< a multiple of 64, at most 8192
  int padded_neurons = 0;          ///< a multiple of 256
  std::uint32_t compression = 8;   ///< C in {8, 4, 2}, or kTwellUnbounded (the CTA kernels only)
  bool highest_precision = false;  ///< fp32 products and h instead of bf16 (TWELL_SPEC §2.5)
  UpDownKernel kernel = UpDownKernel::Auto;
  /// BalancedCta: the workspace of the plan that cuts tokens into pieces of about equal non-zeros, one
  /// CTA each (sized by up_down_balance_sizes; too small or null: one CTA per token).
  std::uint32_t* balance_plan = nullptr;
  std::size_t balance_plan_words = 0;
  float* balance_partials = nullptr;  ///< split tokens' fp32 partial outputs, summed by a second pass
  std::size_t balance_partial_elements = 0;
  /// UnionSm90: the unions and the non-zeros grouped by union position (union_workspace_words).
  std::uint32_t* union_workspace = nullptr;
  std::size_t union_workspace_words = 0;
};

/// The workspace of the balanced CTA-per-token consumer; all zero where `rows` tokens already give
/// every resident CTA slot enough of them that no single token is the critical path.
struct UpDownBalanceSizes {
  int extra_pieces = 0;  ///< CTAs for the pieces after each token's first (0: not balanced)
  std::size_t plan_words = 0;
  std::size_t partial_elements = 0;  ///< fp32
};
UpDownBalanceSizes up_down_balance_sizes(int rows, int hidden, int device);
/// The plan a balanced launch built in `plan` for `rows` tokens and `extra_pieces` (its sizes), in
/// core's form, to check against twell_plan_balanced_pieces: extra items and split rows sorted (the
/// device writes them in the order its warps claimed space); row_slot as the device assigned it,
/// meaningful for split rows only. Synchronises `stream`.
TwellBalancedPieces download_up_down_balance_plan(const std::uint32_t* plan, int rows, int extra_pieces,
                                                  cudaStream_t stream);

/// True when the one-warp-per-token consumer handles this hidden size (its registers hold D / 32
/// elements of x and D / 32 accumulators per lane).
bool up_down_per_token_warp_supported(int hidden);
/// The kernel launch_twell_up_down runs for `requested` at this hidden size (Auto resolved).
UpDownKernel resolve_up_down_kernel(UpDownKernel requested, int hidden);

/// Validates and launches the kernel args.kernel selects. Throws twell::Error for unsupported shapes
/// (including PerTokenWarp requested for hidden > 2048).
void launch_twell_up_down(const UpDownArgs& args, cudaStream_t stream);

/// The one-warp-per-token consumer (arguments already validated by launch_twell_up_down).
void launch_twell_up_down_per_token_warp(const UpDownArgs& args, cudaStream_t stream);

}  // namespace twell::cuda
