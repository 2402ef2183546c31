// SPDX-License-Identifier: GPL-3.0-or-later
// The union consumer's first pass: one CTA per block of 128 tokens counts how many of the block's tokens
// fire each neuron (shared-memory atomics over the packed entries, flagged rows skipped), scans the counts
// into union positions and entry offsets, lists the union, then places every entry, tagged with its
// position's low bits, in its position's group. It also claims the up GEMM's work items (the block's union
// in tiles of 256 positions). Entries within a position, and items, land in atomic order; the GEMMs
// scatter entries into tiles and each item writes only its own, so the output does not depend on it.
// Checked against core's twell_block_unions.
#include <cub/block/block_scan.cuh>

#include <string>

#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_up_down_union.hpp"
#include "twell/twell_block_union.hpp"
#include "twell/twell_format.hpp"

namespace twell::cuda {
namespace {

constexpr int kPassThreads = 512;
constexpr int kPassBatch = 8;
constexpr int kBlockTokens = static_cast<int>(kTwellUnionBlockTokens);

struct UnionPassParams {
  const std::uint32_t* packed;
  const std::uint32_t* row_flags;
  UnionWorkspaceView view;
  int rows, tiles, slots, capacity, words_per_row;
};

// Calls visit(token within the block, entry word) for every counted entry of the block's unflagged rows,
// one warp per token and one lane per tile, so that a token's tiles are read in parallel (a warp walking
// the tiles in turn waits on one dependent load per tile). On an H100 at M 131072, 2 %, the pass took 1.04
// ms with one load per visited entry (ncu: 92 % of cycles with no warp eligible).
template <typename Visit>
__device__ __forceinline__ void for_each_entry(const UnionPassParams& p, int first, int tokens, Visit visit) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int t = warp; t < tokens; t += kPassThreads / 32) {
    const int row = first + t;
    if (p.row_flags != nullptr && p.row_flags[row] != 0) continue;
    const std::uint32_t* words = p.packed + static_cast<std::size_t>(row) * p.words_per_row;
    for (int tile = lane; tile < p.tiles; tile += 32) {
      const std::uint32_t* tile_words = words + tile * p.slots;
      const int count = min(static_cast<int>(tile_words[0]), p.capacity);
      // kPassBatch entries loaded before any is visited: one load latency per batch, not per entry
      // (the visits' shared-memory atomics would otherwise keep the next load from being issued).
      for (int slot = 1; slot <= count; slot += kPassBatch) {
        std::uint32_t batch[kPassBatch];
#pragma unroll
        for (int j = 0; j < kPassBatch; ++j) batch[j] = slot + j <= count ? __ldg(tile_words + slot + j) : 0u;
#pragma unroll
        for (int j = 0; j < kPassBatch; ++j)
          if (slot + j <= count) visit(t, batch[j]);
      }
    }
  }
}

__global__ void __launch_bounds__(kPassThreads) twell_union_pass_kernel(UnionPassParams p) {
  using Scan = cub::BlockScan<std::uint32_t, kPassThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ std::uint32_t union_size;
  extern __shared__ std::uint32_t counts[];  // per neuron; then each neuron's next entry slot
  std::uint16_t* position_of = reinterpret_cast<std::uint16_t*>(counts + p.view.padded_neurons);
  const int block = blockIdx.x;
  const int first = block * kBlockTokens;
  const int tokens = min(kBlockTokens, p.rows - first);
  const int neurons = p.view.padded_neurons;
  for (int n = threadIdx.x; n < neurons; n += kPassThreads) counts[n] = 0;
  __syncthreads();
  for_each_entry(p, first, tokens, [&](int, std::uint32_t word) { atomicAdd(&counts[word & 0xffffu], 1u); });
  __syncthreads();

  // Each thread scans a run of consecutive neurons: union positions and entry offsets in neuron order.
  const int per_thread = (neurons + kPassThreads - 1) / kPassThreads;
  const int begin = min(neurons, static_cast<int>(threadIdx.x) * per_thread);
  const int end = min(neurons, begin + per_thread);
  std::uint32_t live = 0, total = 0;
  for (int n = begin; n < end; ++n) {
    live += counts[n] != 0 ? 1u : 0u;
    total += counts[n];
  }
  std::uint32_t position = 0, offset = 0, live_sum = 0, total_sum = 0;
  Scan(scan_storage).ExclusiveSum(live, position, live_sum);
  __syncthreads();  // the temporary storage is reused
  Scan(scan_storage).ExclusiveSum(total, offset, total_sum);
  std::uint32_t* neuron_list = p.view.neurons + static_cast<std::size_t>(block) * neurons;
  std::uint32_t* column_start = p.view.column_start + static_cast<std::size_t>(block) * (neurons + 1);
  for (int n = begin; n < end; ++n) {
    const std::uint32_t count = counts[n];
    if (count == 0) continue;
    neuron_list[position] = static_cast<std::uint32_t>(n);
    column_start[position] = offset;
    position_of[n] = static_cast<std::uint16_t>(position);
    ++position;
    counts[n] = offset;
    offset += count;
  }
  if (threadIdx.x == 0) {
    union_size = live_sum;
    p.view.union_sizes[block] = live_sum;
    const std::uint32_t tiles = (live_sum + kTwellTileWidth - 1) / kTwellTileWidth;
    const std::uint32_t first_item = atomicAdd(p.view.up_item_count, tiles);
    for (std::uint32_t tile = 0; tile < tiles; ++tile)
      p.view.up_items[first_item + tile] = static_cast<std::uint32_t>(block) << 8 | tile;
  }
  __syncthreads();
  if (threadIdx.x == 0) column_start[union_size] = total_sum;
  std::uint32_t* entries = p.view.entries + static_cast<std::size_t>(block) * p.view.entries_per_block;
  for_each_entry(p, first, tokens, [&](int t, std::uint32_t word) {
    const std::uint32_t neuron = word & 0xffffu;
    const std::uint32_t slot = atomicAdd(&counts[neuron], 1u);
    entries[slot] = twell_union_entry(static_cast<std::uint32_t>(t), position_of[neuron], word >> 16);
  });
}

}  // namespace

std::size_t union_workspace_words(int rows, int padded_neurons, int words_per_row) {
  const std::size_t blocks = (static_cast<std::size_t>(rows) + kBlockTokens - 1) / kBlockTokens;
  const std::size_t neurons = static_cast<std::size_t>(padded_neurons);
  return 1 + blocks * (1 + neurons + (neurons + 1) + neurons / kTwellTileWidth +
                       static_cast<std::size_t>(kBlockTokens) * words_per_row);
}

UnionWorkspaceView union_workspace_view(std::uint32_t* workspace, int rows, int padded_neurons,
                                        int words_per_row) {
  UnionWorkspaceView view;
  view.blocks = (rows + kBlockTokens - 1) / kBlockTokens;
  view.padded_neurons = padded_neurons;
  // A block's entries are at most its tokens' packed words (each tile's slots past its count word).
  view.entries_per_block = static_cast<std::size_t>(kBlockTokens) * words_per_row;
  const std::size_t blocks = static_cast<std::size_t>(view.blocks);
  view.union_sizes = workspace;
  view.neurons = view.union_sizes + blocks;
  view.column_start = view.neurons + blocks * padded_neurons;
  view.entries = view.column_start + blocks * (padded_neurons + 1);
  view.up_items = view.entries + blocks * view.entries_per_block;
  view.up_item_count = view.up_items + blocks * (padded_neurons / kTwellTileWidth);
  return view;
}

void launch_twell_union_pass(const UpDownArgs& args, const UnionWorkspaceView& view, cudaStream_t stream) {
  UnionPassParams params{};
  params.packed = args.packed;
  params.row_flags = args.row_flags;
  params.view = view;
  params.rows = args.rows;
  params.tiles = args.padded_neurons / static_cast<int>(kTwellTileWidth);
  params.slots = static_cast<int>(twell_slots_per_tile(args.compression));
  params.capacity = params.slots - 1;
  params.words_per_row = params.tiles * params.slots;
  // Per neuron its count (then its next entry slot) and its union position.
  const std::size_t shared =
      static_cast<std::size_t>(args.padded_neurons) * (sizeof(std::uint32_t) + sizeof(std::uint16_t));
  TWELL_CUDA_CHECK(cudaFuncSetAttribute(twell_union_pass_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared)));
  TWELL_CUDA_CHECK(cudaMemsetAsync(view.up_item_count, 0, sizeof(std::uint32_t), stream));
  twell_union_pass_kernel<<<view.blocks, kPassThreads, shared, stream>>>(params);
  TWELL_CUDA_CHECK_LAUNCH("twell_union_pass_kernel (one CTA per block of 128 tokens)");
}

}  // namespace twell::cuda
