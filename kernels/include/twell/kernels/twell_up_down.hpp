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

namespace twell::cuda {

/// Which consumer kernel runs. Both compute the same function with the same rounding points.
enum class UpDownKernel {
  Auto,         ///< PerTokenCta (the faster or equal of the two on H200, see resolve_up_down_kernel)
  PerTokenCta,  ///< one CTA per token, D spread over the CTA's threads (any hidden size)
  PerTokenWarp  ///< persistent warps, one token at a time with the next prefetched (hidden <= 2048)
};

const char* to_string(UpDownKernel kernel) noexcept;  ///< "auto", "per_token_cta", "per_token_warp"

struct UpDownArgs {
  const __nv_bfloat16* x = nullptr;          ///< [rows, hidden]; gated only
  const std::uint32_t* packed = nullptr;     ///< [rows, padded_neurons / C]
  const __nv_bfloat16* up = nullptr;         ///< [N, hidden]; null selects the non-gated consumer
  const __nv_bfloat16* down_t = nullptr;     ///< [N, hidden] = down^T
  const std::uint32_t* row_flags = nullptr;  ///< rows flagged here are skipped (recomputed densely)
  __nv_bfloat16* out = nullptr;              ///< [rows, hidden]
  int rows = 0;
  int hidden = 0;          ///< a multiple of 64, at most 8192
  int padded_neurons = 0;  ///< a multiple of 256
  std::uint32_t compression = 8;
  bool highest_precision = false;  ///< fp32 products and h instead of bf16 (TWELL_SPEC §2.5)
  UpDownKernel kernel = UpDownKernel::Auto;
  /// PerTokenCta at token counts too small to fill the GPU: each token's tiles are spread over
  /// up_down_cta_splits CTAs whose fp32 partial outputs land here, [splits, rows, hidden], and are
  /// summed by a second pass. Null (or too small): one CTA per token.
  float* split_partials = nullptr;
  std::size_t split_partials_capacity = 0;  ///< fp32 elements
};

/// How many CTAs the CTA-per-token consumer gives each token for `rows` tokens on `device`: as many
/// as keep one wave of resident CTAs (4 per SM) busy, at most one per 256-neuron tile and 8; 1 where
/// that would be fewer than 4 (the tokens alone fill a quarter of the wave).
int up_down_cta_splits(int rows, int padded_neurons, int device);

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
