// SPDX-License-Identifier: GPL-3.0-or-later
// Portable TwELL gate GEMM (sm_80+): a 128 x 256 CTA tile computed with mma.sync m16n8k16 on bf16,
// fed by a cp.async multi-stage pipeline through XOR-swizzled shared memory and ldmatrix. The
// epilogue applies the ReLU on the fp32 accumulators and packs the tile into TwELL in shared memory
// (one atomic counter per row), then writes the packed words: the 256-column CTA tile is exactly
// one TwELL tile, so no dense gate tensor is ever written. The CTAs are persistent, and where shared
// memory allows, the next tile's loads start before this tile is packed.
#include <cuda_bf16.h>

#include <string>

#include "mma_sync.cuh"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_gate_pack.hpp"

namespace twell::cuda {
namespace {

constexpr int kTileM = 128;
constexpr int kTileN = 256;    // == the TwELL tile width: packing stays tile-local
constexpr int kThreads = 256;  // 8 warps: 2 along M x 4 along N, each owning a 64 x 64 sub-tile

// The pipeline's shape: K per stage and ring depth. 64 x 4 (192 KiB) where the opt-in shared
// memory allows it (sm_90), 64 x 3 on sm_80 (144 KiB), 32 x 4 (96 KiB) on the 99-KiB parts.
template <int kTileK_, int kStages_>
struct Pipeline {
  static constexpr int kTileK = kTileK_;
  static constexpr int kStages = kStages_;
  static constexpr int kChunksPerRow = kTileK / 8;  // 16-byte chunks per tile row
  static constexpr int kRowBytes = kTileK * 2;
  static constexpr int kStageABytes = kTileM * kRowBytes;
  static constexpr int kStageBBytes = kTileN * kRowBytes;
  static constexpr int kStageBytes = kStageABytes + kStageBBytes;
  static constexpr int kSharedBytes = kStages * kStageBytes;
  static_assert(kTileM * (kTileN / 2 + 1) * 4 <= kSharedBytes, "the C=2 packing tile must fit the ring");

  // The 16-byte chunk c of tile row r is stored at chunk c ^ f(r), so the eight rows one ldmatrix
  // phase reads land in eight distinct 16-byte bank groups.
  __device__ static __forceinline__ std::uint32_t swizzled_offset(int row, int chunk) {
    const int flip = kChunksPerRow == 8 ? (row & 7) : ((row >> 1) & 3);
    return static_cast<std::uint32_t>(row * kRowBytes + ((chunk ^ flip) << 4));
  }
};

using mma::cp_async_16;
using mma::cp_async_commit;
using mma::cp_async_wait;
using mma::ldmatrix_x4;

struct GatePackParams {
  const __nv_bfloat16* x;
  const __nv_bfloat16* weight;
  std::uint32_t* packed;
  TwellOverflowState overflow;
  int rows, hidden, neurons;
  int slots_per_tile;  // T_c = 256 / C
  int words_per_row;   // padded_neurons / C
  int slot_shift;      // log2(slots_per_tile)
  int n_tiles, m_tiles;
};

// Issues the cp.async copies of k-tile `k_tile` into the ring slot at `slot_base`.
template <typename P>
__device__ __forceinline__ void load_stage(const GatePackParams& p, std::uint32_t slot_base, int m0, int n0,
                                           int k_tile) {
  const int k0 = k_tile * P::kTileK;
  constexpr int kChunks = P::kChunksPerRow;
  const int t = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kTileM * kChunks / kThreads; ++i) {
    const int index = t + i * kThreads;
    const int row = index / kChunks, chunk = index % kChunks;
    const int global_row = m0 + row;
    const bool valid = global_row < p.rows;
    const __nv_bfloat16* src =
        p.x + static_cast<std::size_t>(valid ? global_row : 0) * p.hidden + k0 + chunk * 8;
    cp_async_16(slot_base + P::swizzled_offset(row, chunk), src, valid);
  }
#pragma unroll
  for (int i = 0; i < kTileN * kChunks / kThreads; ++i) {
    const int index = t + i * kThreads;
    const int row = index / kChunks, chunk = index % kChunks;
    const int neuron = n0 + row;
    const bool valid = neuron < p.neurons;
    const __nv_bfloat16* src =
        p.weight + static_cast<std::size_t>(valid ? neuron : 0) * p.hidden + k0 + chunk * 8;
    cp_async_16(slot_base + P::kStageABytes + P::swizzled_offset(row, chunk), src, valid);
  }
}

// Persistent: each CTA walks tiles blockIdx.x, blockIdx.x + gridDim.x, ... with N tiles varying
// fastest, so the CTAs running together share their x rows and the whole weight matrix stays hot in
// L2. With kSeparateStage the packing tile has shared memory of its own after the ring, so the next
// tile's first K stages are already loading while this tile is packed and written; without it (C = 2,
// or parts with less shared memory) the ring doubles as the packing tile and nothing overlaps.
template <typename P, bool kSeparateStage>
__global__ void __launch_bounds__(kThreads, 1) twell_gate_pack_kernel(const GatePackParams p) {
  constexpr int kTileK = P::kTileK, kStages = P::kStages, kStageBytes = P::kStageBytes;
  extern __shared__ __align__(128) unsigned char shared[];
  const std::uint32_t shared_base = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int warp_m = warp >> 2, warp_n = warp & 3;
  const int k_tiles = p.hidden / kTileK;
  const int tile_count = p.n_tiles * p.m_tiles;

  // Packing tile: [128 rows][T_c + 1 words]; word 0 of a row is its counter. The odd pitch spreads
  // the rows of one quad-group over distinct banks.
  std::uint32_t* stage = reinterpret_cast<std::uint32_t*>(shared + (kSeparateStage ? P::kSharedBytes : 0));
  const int slots = p.slots_per_tile;
  const int pitch = slots + 1;
  const std::uint32_t capacity = static_cast<std::uint32_t>(slots - 1);

  const auto issue_prologue = [&](int tile) {
    const int m0 = (tile / p.n_tiles) * kTileM, n0 = (tile % p.n_tiles) * kTileN;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < k_tiles) load_stage<P>(p, shared_base + s * kStageBytes, m0, n0, s);
      cp_async_commit();
    }
  };

  // Per-lane ldmatrix row coordinates (constant over the main loop).
  const int a_row_base = warp_m * 64 + (lane & 15);
  const int a_chunk_half = lane >> 4;
  const int b_row_base = warp_n * 64 + ((lane >> 4) << 3) + (lane & 7);
  const int b_chunk_half = (lane >> 3) & 1;

  if (kSeparateStage && static_cast<int>(blockIdx.x) < tile_count) issue_prologue(blockIdx.x);
  for (int tile = blockIdx.x; tile < tile_count; tile += gridDim.x) {
    const int tile_n = tile % p.n_tiles;
    const int m0 = (tile / p.n_tiles) * kTileM;
    const int n0 = tile_n * kTileN;
    if (!kSeparateStage) issue_prologue(tile);

    float acc[4][8][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;

    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
      cp_async_wait<kStages - 2>();
      __syncthreads();  // slot k_tile is filled, and every warp is done with the slot reloaded below
      const int next = k_tile + kStages - 1;
      if (next < k_tiles) load_stage<P>(p, shared_base + (next % kStages) * kStageBytes, m0, n0, next);
      cp_async_commit();

      const std::uint32_t a_base = shared_base + (k_tile % kStages) * kStageBytes;
      const std::uint32_t b_base = a_base + P::kStageABytes;
#pragma unroll
      for (int k_step = 0; k_step < kTileK / 16; ++k_step) {
        std::uint32_t a_frag[4][4];
        std::uint32_t b_frag[4][4];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
          const int row = a_row_base + mi * 16;
          ldmatrix_x4(a_frag[mi], a_base + P::swizzled_offset(row, k_step * 2 + a_chunk_half));
        }
#pragma unroll
        for (int nj = 0; nj < 4; ++nj) {
          const int row = b_row_base + nj * 16;
          ldmatrix_x4(b_frag[nj], b_base + P::swizzled_offset(row, k_step * 2 + b_chunk_half));
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
          for (int ni = 0; ni < 8; ++ni)
            mma::mma_bf16_16816(acc[mi][ni], a_frag[mi], b_frag[ni >> 1][(ni & 1) * 2],
                                b_frag[ni >> 1][(ni & 1) * 2 + 1]);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the ring (and, without a stage of its own, it is free)
    if (kSeparateStage && tile + static_cast<int>(gridDim.x) < tile_count) issue_prologue(tile + gridDim.x);

    for (int r = threadIdx.x; r < kTileM; r += kThreads) stage[r * pitch] = 0u;
    __syncthreads();

#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_m * 64 + mi * 16 + (lane >> 2) + half * 8;
        std::uint32_t* row_words = stage + row * pitch;
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const float value = acc[mi][ni][half * 2 + j];
            if (value > 0.0f) {  // the ReLU is the packing predicate, tested before rounding
              const std::uint32_t column =
                  static_cast<std::uint32_t>(n0 + warp_n * 64 + ni * 8 + (lane & 3) * 2 + j);
              const std::uint32_t slot = atomicAdd(row_words, 1u);
              if (slot < capacity) {
                const std::uint32_t bits = __bfloat16_as_ushort(__float2bfloat16_rn(value));
                row_words[1 + slot] = column | (bits << 16);
              }
            }
          }
      }
    __syncthreads();

    // Write the tile: count clamped to capacity, the entries, zeros past the count (deterministic).
    const int tile_words = kTileM * slots;
    for (int index = threadIdx.x; index < tile_words; index += kThreads) {
      const int row = index >> p.slot_shift, word = index & (slots - 1);
      const int global_row = m0 + row;
      if (global_row >= p.rows) continue;
      const std::uint32_t raw_count = stage[row * pitch];
      const std::uint32_t count = raw_count < capacity ? raw_count : capacity;
      std::uint32_t value;
      if (word == 0) {
        value = count;
        if (raw_count > capacity) {
          atomicAdd(&p.overflow.counters[1], 1u);
          if (atomicExch(&p.overflow.row_flags[global_row], 1u) == 0u) {
            const std::uint32_t position = atomicAdd(&p.overflow.counters[0], 1u);
            p.overflow.row_list[position] = static_cast<std::uint32_t>(global_row);
          }
        }
      } else {
        value = static_cast<std::uint32_t>(word) <= count ? stage[row * pitch + word] : 0u;
      }
      p.packed[static_cast<std::size_t>(global_row) * p.words_per_row + tile_n * slots + word] = value;
    }
    __syncthreads();  // the packing tile (and the ring, when shared) is rewritten by the next tile
  }
}

template <typename P, bool kSeparateStage>
void launch_pipeline(const GatePackParams& params, int stage_bytes, int multiprocessors,
                     cudaStream_t stream) {
  const int shared_bytes = P::kSharedBytes + (kSeparateStage ? stage_bytes : 0);
  TWELL_CUDA_CHECK(cudaFuncSetAttribute(twell_gate_pack_kernel<P, kSeparateStage>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes));
  const int tiles = params.n_tiles * params.m_tiles;
  const dim3 grid(static_cast<unsigned>(tiles < multiprocessors ? tiles : multiprocessors));
  twell_gate_pack_kernel<P, kSeparateStage><<<grid, kThreads, shared_bytes, stream>>>(params);
}

// The deepest ring that fits, with a packing tile of its own where that fits too.
template <typename P>
bool try_launch(const GatePackParams& params, int shared_optin, int multiprocessors, cudaStream_t stream) {
  const int stage_bytes = kTileM * (params.slots_per_tile + 1) * 4;
  if (shared_optin >= P::kSharedBytes + stage_bytes) {
    launch_pipeline<P, true>(params, stage_bytes, multiprocessors, stream);
    return true;
  }
  if (shared_optin >= P::kSharedBytes) {
    launch_pipeline<P, false>(params, stage_bytes, multiprocessors, stream);
    return true;
  }
  return false;
}

}  // namespace

void launch_twell_gate_pack(const GatePackArgs& args, cudaStream_t stream) {
  const auto fail = [](const std::string& what) {
    throw Error(Error::Kind::Unsupported, "TwELL gate-pack kernel: " + what);
  };
  if (args.rows <= 0) fail("rows must be positive (got " + std::to_string(args.rows) + ")");
  if (args.hidden <= 0 || args.hidden % 64 != 0)  // whole K tiles for every pipeline shape
    fail("hidden size " + std::to_string(args.hidden) + " is not a positive multiple of 64");
  if (args.neurons <= 0 || args.neurons > 65536)
    fail("intermediate size " + std::to_string(args.neurons) + " is outside 1..65536");
  if (args.compression != 8 && args.compression != 4 && args.compression != 2)
    fail("compression factor " + std::to_string(args.compression) + " is not 8, 4 or 2");
  if (!args.x || !args.weight || !args.packed || !args.overflow.counters || !args.overflow.row_flags ||
      !args.overflow.row_list)
    throw Error(Error::Kind::InvalidInput, "TwELL gate-pack kernel: a device pointer is null");
  const int m_tiles = (args.rows + kTileM - 1) / kTileM;
  if (static_cast<std::int64_t>(m_tiles) * (twell_padded_neurons(args.neurons) / kTileN) > 0x7fffffff)
    fail("too many tiles for one launch (" + std::to_string(args.rows) + " rows)");

  GatePackParams params{};
  params.x = args.x;
  params.weight = args.weight;
  params.packed = args.packed;
  params.overflow = args.overflow;
  params.rows = args.rows;
  params.hidden = args.hidden;
  params.neurons = args.neurons;
  params.slots_per_tile = 256 / static_cast<int>(args.compression);
  params.words_per_row = twell_padded_neurons(args.neurons) / static_cast<int>(args.compression);

  params.slot_shift = __builtin_ctz(static_cast<unsigned>(params.slots_per_tile));
  params.n_tiles = twell_padded_neurons(args.neurons) / kTileN;
  params.m_tiles = m_tiles;

  int device = 0, shared_optin = 0, multiprocessors = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  if (!try_launch<Pipeline<64, 4>>(params, shared_optin, multiprocessors, stream) &&
      !try_launch<Pipeline<64, 3>>(params, shared_optin, multiprocessors, stream))
    launch_pipeline<Pipeline<32, 4>, false>(params, 0, multiprocessors, stream);
  TWELL_CUDA_CHECK_LAUNCH("twell_gate_pack_kernel");
}

}  // namespace twell::cuda
