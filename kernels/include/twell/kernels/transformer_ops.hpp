// SPDX-License-Identifier: GPL-3.0-or-later
// The non-FFN pieces of a Llama-style decoder on the GPU: embedding, RMSNorm (fused with the
// residual add), RoPE and causal attention. bf16 activations, fp32 arithmetic inside. Every launcher
// enqueues on `stream` and throws twell::Error naming the kernel when the launch fails.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

namespace twell::cuda {

/// out[t, :] = table[ids[t], :] for `tokens` rows of `hidden` values. ids must lie in [0, vocab):
/// the caller checks them on the host. hidden % 8 == 0.
void embedding_lookup(const std::int32_t* ids, const __nv_bfloat16* table, std::int64_t tokens, int hidden,
                      __nv_bfloat16* out, cudaStream_t stream);

/// The largest hidden size the norm kernels take (one 16-byte vector per thread, 1024 threads).
inline constexpr int kMaxNormHidden = 8192;

/// out = x / sqrt(mean(x^2) + eps) * weight, per row of `hidden` values (hidden % 8 == 0, at most
/// kMaxNormHidden). out may not alias x.
void rms_norm(const __nv_bfloat16* x, const __nv_bfloat16* weight, std::int64_t rows, int hidden, float eps,
              __nv_bfloat16* out, cudaStream_t stream);

/// residual += delta (rounded to bf16, as the residual stream is stored), then out = RMSNorm(residual).
void add_rms_norm(__nv_bfloat16* residual, const __nv_bfloat16* delta, const __nv_bfloat16* weight,
                  std::int64_t rows, int hidden, float eps, __nv_bfloat16* out, cudaStream_t stream);

/// Rotary position embedding, Hugging Face convention (rotate_half: dimension i pairs with
/// i + head_dim / 2), applied in place to the query and key heads of a fused QKV buffer whose rows
/// are [q heads | k heads | v heads]. Token t sits at position t % sequence. `cos_sin` holds
/// [sequence, head_dim / 2] pairs (cos, sin) of position * theta^(-2i / head_dim).
void apply_rope(__nv_bfloat16* qkv, std::int64_t tokens, int sequence, int q_heads, int kv_heads,
                int head_dim, const float2* cos_sin, cudaStream_t stream);

/// Host-side table for apply_rope: [sequence, head_dim / 2] (cos, sin) of position * inverse
/// frequency, computed in double (the frequencies come from core's attention_geometry, which
/// applies rope_theta and any supported rope_scaling).
void rope_table(int sequence, std::span<const double> inverse_frequencies, float2* host_out);

/// Shapes of one causal self-attention call over a fused QKV buffer.
struct AttentionShape {
  int batch = 0;
  int sequence = 0;
  int q_heads = 0;
  int kv_heads = 0;  ///< divides q_heads (grouped-query attention when smaller)
  int head_dim = 0;  ///< 64 or 128
};

/// Whether flash_attention supports this shape; if not, `why` says what is wrong.
bool attention_supported(const AttentionShape& shape, const char** why);

/// Causal softmax(Q K^T / sqrt(head_dim)) V per sequence and head, tiled on tensor cores with an
/// online softmax; the score matrix is never stored. qkv: [batch * sequence, (q_heads + 2 kv_heads) *
/// head_dim] (RoPE already applied); out: [batch * sequence, q_heads * head_dim].
void flash_attention(const __nv_bfloat16* qkv, const AttentionShape& shape, __nv_bfloat16* out,
                     cudaStream_t stream);

/// dst [cols, rows] = src [rows, cols]^T (bf16, row-major both): weight layout conversions at load.
void transpose_bf16(const __nv_bfloat16* src, std::int64_t rows, std::int64_t cols, __nv_bfloat16* dst,
                    cudaStream_t stream);

}  // namespace twell::cuda
