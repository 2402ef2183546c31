// SPDX-License-Identifier: GPL-3.0-or-later
// Causal self-attention in the flash-attention style (tiled, online softmax, nothing of size
// sequence^2 ever stored), on tensor cores through mma.sync m16n8k16 bf16 with fp32 accumulation.
//
// One block of 8 warps owns 128 query rows of one (sequence, head); each warp owns 16 of them and
// keeps its Q fragments, its output accumulator and its running max / sum in registers. K and V
// tiles of 64 rows stream through a two-stage cp.async ring in shared memory (the Q tile borrows
// the second stage before the loop); the scores of a tile stay in registers, where the
// accumulator layout of S already is the A-operand layout P needs for P·V. Grouped KV heads: query head h
// reads KV head h / (q_heads / kv_heads). Blocks are issued longest-first (the last query block has the most
// KV tiles) so the causal tail balances.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "mma_sync.cuh"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/transformer_ops.hpp"

namespace twell::cuda {

namespace {

constexpr int kBlockQ = 128;
constexpr int kBlockKv = 64;
constexpr int kWarps = kBlockQ / 16;
constexpr int kThreads = kWarps * 32;
constexpr float kNegativeInfinity = -INFINITY;

__device__ __forceinline__ void copy_16_async(void* shared_destination, const void* global_source,
                                              bool valid) {
  mma::cp_async_16(mma::shared_address(shared_destination), global_source, valid);
}
__device__ __forceinline__ void load_matrix_x4(std::uint32_t (&r)[4], const void* shared_source) {
  mma::ldmatrix_x4(r, mma::shared_address(shared_source));
}
__device__ __forceinline__ void load_matrix_x4_transposed(std::uint32_t (&r)[4], const void* shared_source) {
  mma::ldmatrix_x4_transposed(r, mma::shared_address(shared_source));
}
using mma::cp_async_commit;
using mma::cp_async_wait;

__device__ inline float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ inline std::uint32_t pack_bf16(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}

template <int kHeadDim>
struct AttentionTiles {
  static constexpr int kStride = kHeadDim + 8;  // +16 bytes per row: ldmatrix rows hit distinct banks
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte vectors per row
  static constexpr int kStageElements = 2 * kBlockKv * kStride;  // K rows then V rows
  // Two K/V stages; the Q tile (128 rows) borrows stage 1 until its fragments are in registers.
  static constexpr int kSharedBytes = 2 * kStageElements * 2;
  static_assert(kBlockQ <= 2 * kBlockKv, "the Q tile must fit in one K/V stage");
};

struct AttentionArgs {
  const __nv_bfloat16* qkv;
  __nv_bfloat16* out;
  int sequence;
  int q_heads;
  int kv_heads;
  int group;         // query heads per KV head
  float scale_log2;  // log2(e) / sqrt(head_dim): softmax in base 2
};

// Two blocks per SM fit the register file for head_dim <= 64 (at most 128 registers per thread);
// wider heads keep their larger accumulators in registers at one block per SM.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, kHeadDim <= 64 ? 2 : 1)
    flash_attention_kernel(const AttentionArgs args) {
  using Tiles = AttentionTiles<kHeadDim>;
  constexpr int kStride = Tiles::kStride;
  constexpr int kChunks = Tiles::kChunks;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  constexpr int kStageElements = Tiles::kStageElements;
  __nv_bfloat16* stages = reinterpret_cast<__nv_bfloat16*>(shared_raw);
  __nv_bfloat16* q_tile = stages + kStageElements;

  const int q_block = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int head = static_cast<int>(blockIdx.x % args.q_heads);
  const std::int64_t sequence_index = blockIdx.x / args.q_heads;
  const int kv_head = head / args.group;
  const std::int64_t row_stride = static_cast<std::int64_t>(args.q_heads + 2 * args.kv_heads) * kHeadDim;
  const std::int64_t first_row = sequence_index * args.sequence;
  const __nv_bfloat16* q_source =
      args.qkv + first_row * row_stride + static_cast<std::int64_t>(head) * kHeadDim;
  const __nv_bfloat16* k_source =
      args.qkv + first_row * row_stride + static_cast<std::int64_t>(args.q_heads + kv_head) * kHeadDim;
  const __nv_bfloat16* v_source =
      args.qkv + first_row * row_stride +
      static_cast<std::int64_t>(args.q_heads + args.kv_heads + kv_head) * kHeadDim;
  const int q_start = q_block * kBlockQ;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  for (int i = tid; i < kBlockQ * kChunks; i += kThreads) {
    const int row = i / kChunks;
    const int chunk = i % kChunks;
    const int position = q_start + row;
    const bool valid = position < args.sequence;
    copy_16_async(q_tile + row * kStride + chunk * 8,
                  valid ? q_source + position * row_stride + chunk * 8 : q_source, valid);
  }
  cp_async_commit();

  auto load_kv_tile = [&](int tile, int stage) {
    const int kv_start = tile * kBlockKv;
    __nv_bfloat16* k_stage = stages + stage * kStageElements;
    __nv_bfloat16* v_stage = k_stage + kBlockKv * kStride;
    for (int i = tid; i < kBlockKv * kChunks; i += kThreads) {
      const int row = i / kChunks;
      const int chunk = i % kChunks;
      const int position = kv_start + row;
      const bool valid = position < args.sequence;  // zero-filled past the end: never NaN in P·V
      const std::int64_t offset = valid ? position * row_stride + chunk * 8 : 0;
      copy_16_async(k_stage + row * kStride + chunk * 8, k_source + offset, valid);
      copy_16_async(v_stage + row * kStride + chunk * 8, v_source + offset, valid);
    }
    cp_async_commit();
  };

  const int kv_end = min(args.sequence, q_start + kBlockQ);
  const int kv_tiles = (kv_end + kBlockKv - 1) / kBlockKv;
  load_kv_tile(0, 0);
  cp_async_wait<1>();  // the Q group has landed (groups complete in order)
  __syncthreads();

  const int warp_row0 = warp * 16;
  std::uint32_t q_fragments[kHeadDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
    load_matrix_x4(q_fragments[kk], q_tile + (warp_row0 + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8);
  __syncthreads();  // stage 1 is free for K/V from here on

  float o_accumulator[kHeadDim / 8][4];
#pragma unroll
  for (int dt = 0; dt < kHeadDim / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_accumulator[dt][e] = 0.0f;
  float running_max[2] = {kNegativeInfinity, kNegativeInfinity};
  float running_sum[2] = {0.0f, 0.0f};  // this thread's partial sums; the quad is reduced at the end
  const int group_row = lane >> 2;
  const int thread_in_group = lane & 3;
  const int my_row = q_start + warp_row0 + group_row;  // and my_row + 8
  const int warp_last_row = q_start + warp_row0 + 15;

  for (int tile = 0; tile < kv_tiles; ++tile) {
    const int stage = tile & 1;
    if (tile + 1 < kv_tiles) {
      load_kv_tile(tile + 1, stage ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int kv_start = tile * kBlockKv;
    const __nv_bfloat16* k_stage = stages + stage * kStageElements;
    const __nv_bfloat16* v_stage = k_stage + kBlockKv * kStride;

    if (kv_start <= warp_last_row) {  // otherwise every key of the tile is in this warp's future
      float scores[kBlockKv / 8][4];
#pragma unroll
      for (int nt = 0; nt < kBlockKv / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) scores[nt][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kBlockKv / 16; ++np) {
          std::uint32_t b[4];
          load_matrix_x4(b, k_stage + (np * 16 + (lane & 7) + (lane >> 4) * 8) * kStride + kk * 16 +
                                ((lane >> 3) & 1) * 8);
          mma::mma_bf16_16816(scores[2 * np], q_fragments[kk], b[0], b[1]);
          mma::mma_bf16_16816(scores[2 * np + 1], q_fragments[kk], b[2], b[3]);
        }
      }

      const bool crosses_diagonal = kv_start + kBlockKv - 1 > q_start + warp_row0;
      float tile_max[2] = {kNegativeInfinity, kNegativeInfinity};
#pragma unroll
      for (int nt = 0; nt < kBlockKv / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float value = scores[nt][e] * args.scale_log2;
          if (crosses_diagonal) {
            const int key = kv_start + nt * 8 + 2 * thread_in_group + (e & 1);
            const int query = my_row + (e >> 1) * 8;
            if (key > query) value = kNegativeInfinity;
          }
          scores[nt][e] = value;
          tile_max[e >> 1] = fmaxf(tile_max[e >> 1], value);
        }
      }
      float base[2];
      float correction[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        const float new_max = fmaxf(running_max[r], tile_max[r]);
        base[r] = new_max == kNegativeInfinity ? 0.0f : new_max;  // a row with nothing visible yet
        correction[r] = fast_exp2(running_max[r] - base[r]);
        running_max[r] = new_max;
      }
      float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int nt = 0; nt < kBlockKv / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = fast_exp2(scores[nt][e] - base[e >> 1]);
          scores[nt][e] = p;
          tile_sum[e >> 1] += p;
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) running_sum[r] = running_sum[r] * correction[r] + tile_sum[r];
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
        o_accumulator[dt][0] *= correction[0];
        o_accumulator[dt][1] *= correction[0];
        o_accumulator[dt][2] *= correction[1];
        o_accumulator[dt][3] *= correction[1];
      }

#pragma unroll
      for (int kc = 0; kc < kBlockKv / 16; ++kc) {
        const std::uint32_t p_fragment[4] = {pack_bf16(scores[2 * kc][0], scores[2 * kc][1]),
                                             pack_bf16(scores[2 * kc][2], scores[2 * kc][3]),
                                             pack_bf16(scores[2 * kc + 1][0], scores[2 * kc + 1][1]),
                                             pack_bf16(scores[2 * kc + 1][2], scores[2 * kc + 1][3])};
#pragma unroll
        for (int dp = 0; dp < kHeadDim / 16; ++dp) {
          std::uint32_t b[4];
          load_matrix_x4_transposed(b, v_stage + (kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride +
                                           dp * 16 + (lane >> 4) * 8);
          mma::mma_bf16_16816(o_accumulator[2 * dp], p_fragment, b[0], b[1]);
          mma::mma_bf16_16816(o_accumulator[2 * dp + 1], p_fragment, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the stage just read is the next prefetch's destination
  }

  const std::int64_t out_stride = static_cast<std::int64_t>(args.q_heads) * kHeadDim;
  __nv_bfloat16* out_base = args.out + first_row * out_stride + static_cast<std::int64_t>(head) * kHeadDim;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float total = running_sum[r];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    const int position = my_row + r * 8;
    if (position >= args.sequence) continue;
    __nv_bfloat16* destination = out_base + position * out_stride + 2 * thread_in_group;
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      *reinterpret_cast<__nv_bfloat162*>(destination + dt * 8) =
          __floats2bfloat162_rn(o_accumulator[dt][2 * r] * inverse, o_accumulator[dt][2 * r + 1] * inverse);
    }
  }
}

template <int kHeadDim>
void launch_attention(const AttentionArgs& args, int batch, cudaStream_t stream) {
  constexpr int kShared = AttentionTiles<kHeadDim>::kSharedBytes;
  // The opt-in above 48 KiB is per function and per device; setting it every call is cheap.
  TWELL_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<kHeadDim>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  const dim3 grid(static_cast<unsigned>(batch) * static_cast<unsigned>(args.q_heads),
                  static_cast<unsigned>((args.sequence + kBlockQ - 1) / kBlockQ));
  flash_attention_kernel<kHeadDim><<<grid, kThreads, kShared, stream>>>(args);
  TWELL_CUDA_CHECK_LAUNCH("flash_attention_kernel");
}

}  // namespace

bool attention_supported(const AttentionShape& shape, const char** why) {
  const char* reason = nullptr;
  if (shape.head_dim != 32 && shape.head_dim != 64 && shape.head_dim != 96 && shape.head_dim != 128)
    reason = "head_dim must be 32, 64, 96 or 128";
  else if (shape.q_heads <= 0 || shape.kv_heads <= 0 || shape.q_heads % shape.kv_heads != 0)
    reason = "the number of KV heads must divide the number of query heads";
  else if (shape.sequence <= 0 || shape.batch <= 0)
    reason = "batch and sequence must be positive";
  else if (static_cast<std::int64_t>(shape.sequence + kBlockQ - 1) / kBlockQ > 65535)
    reason = "sequence longer than 65535 * 128 tokens";
  else if (static_cast<std::int64_t>(shape.batch) * shape.q_heads > 0x7fffffff)
    reason = "batch * heads exceeds the grid limit";
  if (why) *why = reason;
  return reason == nullptr;
}

void flash_attention(const __nv_bfloat16* qkv, const AttentionShape& shape, __nv_bfloat16* out,
                     cudaStream_t stream) {
  const char* why = nullptr;
  if (!attention_supported(shape, &why))
    throw Error(Error::Kind::Unsupported,
                std::string("flash_attention: ") + why + " (head_dim " + std::to_string(shape.head_dim) +
                    ", heads " + std::to_string(shape.q_heads) + "/" + std::to_string(shape.kv_heads) + ")");
  const AttentionArgs args{
      qkv,
      out,
      shape.sequence,
      shape.q_heads,
      shape.kv_heads,
      shape.q_heads / shape.kv_heads,
      static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(shape.head_dim)))};
  switch (shape.head_dim) {
    case 32:
      launch_attention<32>(args, shape.batch, stream);
      break;
    case 64:
      launch_attention<64>(args, shape.batch, stream);
      break;
    case 96:
      launch_attention<96>(args, shape.batch, stream);
      break;
    default:
      launch_attention<128>(args, shape.batch, stream);
      break;
  }
}

}  // namespace twell::cuda
