// SPDX-License-Identifier: GPL-3.0-or-later
// One warp per (row, 256-column tile): each lane reads 8 consecutive pre-activations, a warp scan of
// the per-lane positive counts gives every entry its slot, so the entries land in ascending column
// order without atomics. In the bounded layouts the words past the count are zeroed so the output is
// deterministic; in the unbounded one they are left as they were: zeroing 511 words a tile would write
// 16 times what the bounded layouts hold, and every consumer reads only the counted entries.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <string>

#include "twell/activation_summary.hpp"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_pack_dense.hpp"
#include "twell/twell_format.hpp"

namespace twell::cuda {
namespace {

constexpr int kTileWidth = static_cast<int>(kTwellTileWidth);
constexpr int kValuesPerLane = kTileWidth / 32;
constexpr int kWarpsPerBlock = 8;

struct PackDenseParams {
  const __nv_bfloat16* preactivations;
  const std::uint32_t* source_rows;  // may be null
  std::uint32_t* packed;
  TwellOverflowState overflow;
  long long pitch;
  int rows, neurons, tiles, slots, words_per_row;
  int counted_capacity;  // a tile with more entries is counted in `overflow`; INT_MAX: none is
  int zeroed_slots;      // slots zeroed past the count: all of them, or none in the unbounded layout
};

// kVectorised: every row starts 16-byte aligned and the tile's 8 values of a lane are one 16-byte load.
template <bool kVectorised>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) twell_pack_dense_kernel(const PackDenseParams p) {
  const int lane = threadIdx.x & 31;
  const long long item = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (item >= static_cast<long long>(p.rows) * p.tiles) return;
  const int row = static_cast<int>(item / p.tiles), tile = static_cast<int>(item % p.tiles);
  const int first_column = tile * kTileWidth + lane * kValuesPerLane;
  const long long source_row = p.source_rows != nullptr ? p.source_rows[row] : row;
  const __nv_bfloat16* source = p.preactivations + source_row * p.pitch + first_column;

  __nv_bfloat16 values[kValuesPerLane];
  if (kVectorised && first_column + kValuesPerLane <= p.neurons) {
    const uint4 vector = *reinterpret_cast<const uint4*>(source);
    const __nv_bfloat16* unpacked = reinterpret_cast<const __nv_bfloat16*>(&vector);
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) values[i] = unpacked[i];
  } else {
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i)
      values[i] = first_column + i < p.neurons ? source[i] : __float2bfloat16_rn(0.0f);
  }
  unsigned positives = 0;
#pragma unroll
  for (int i = 0; i < kValuesPerLane; ++i)
    if (__bfloat162float(values[i]) > 0.0f) positives |= 1u << i;

  const int count = __popc(positives);
  int inclusive = count;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int below = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += below;
  }
  const int total = __shfl_sync(0xffffffffu, inclusive, 31);
  const int capacity = p.slots - 1;
  const int stored = total < capacity ? total : capacity;

  std::uint32_t* words = p.packed + static_cast<long long>(row) * p.words_per_row + tile * p.slots;
  int slot = inclusive - count;
#pragma unroll
  for (int i = 0; i < kValuesPerLane; ++i) {
    if ((positives >> i & 1u) == 0u) continue;
    if (slot < capacity)
      words[1 + slot] = static_cast<std::uint32_t>(first_column + i) |
                        (static_cast<std::uint32_t>(__bfloat16_as_ushort(values[i])) << 16);
    ++slot;
  }
  if (lane == 0) words[0] = static_cast<std::uint32_t>(stored);
  for (int word = stored + 1 + lane; word < p.zeroed_slots; word += 32) words[word] = 0u;
  if (lane == 0 && total > p.counted_capacity) {
    atomicAdd(&p.overflow.counters[1], 1u);
    if (atomicExch(&p.overflow.row_flags[row], 1u) == 0u)
      p.overflow.row_list[atomicAdd(&p.overflow.counters[0], 1u)] = static_cast<std::uint32_t>(row);
  }
}

}  // namespace

void launch_twell_pack_dense(const PackDenseArgs& args, cudaStream_t stream) {
  const auto invalid = [](const std::string& what) {
    throw Error(Error::Kind::InvalidInput, "TwELL pack of dense pre-activations: " + what);
  };
  if (args.rows <= 0) invalid("row count must be positive (got " + std::to_string(args.rows) + ")");
  if (args.neurons <= 0 || args.neurons > 65536)
    invalid("neuron count must be in 1..65536 (got " + std::to_string(args.neurons) + ")");
  if (args.pitch < args.neurons)
    invalid("row pitch " + std::to_string(args.pitch) + " is below the neuron count " +
            std::to_string(args.neurons));
  const bool unbounded = args.compression == kTwellUnbounded;
  if (!twell_layout_supported(args.compression))
    throw Error(Error::Kind::Unsupported, "TwELL pack of dense pre-activations: compression factor " +
                                              std::to_string(args.compression) +
                                              " is not 8, 4, 2 or unbounded");
  // The factor whose capacity overflow is counted against: the layout's own, or in the unbounded
  // layout (whose 511 exceeds any tile's 256 columns) the one asked for; 0 counts nothing.
  const std::uint32_t counted_at = unbounded ? args.counted_compression : args.compression;
  const bool counted = counted_at != 0;
  if (counted && !twell_layout_supported(counted_at))
    throw Error(Error::Kind::Unsupported, "TwELL pack of dense pre-activations: overflow counted at factor " +
                                              std::to_string(counted_at) + ", not 8, 4 or 2");
  if (!args.preactivations || !args.packed ||
      (counted && (!args.overflow.counters || !args.overflow.row_flags || !args.overflow.row_list)))
    invalid("a device pointer is null");

  PackDenseParams params;
  params.preactivations = args.preactivations;
  params.source_rows = args.source_rows;
  params.packed = args.packed;
  params.overflow = args.overflow;
  params.pitch = args.pitch;
  params.rows = args.rows;
  params.neurons = args.neurons;
  params.tiles = twell_padded_neurons(args.neurons) / kTileWidth;
  params.slots = static_cast<int>(twell_slots_per_tile(args.compression));
  params.words_per_row = params.tiles * params.slots;
  // One word of a tile holds its count: capacity = slots - 1.
  params.counted_capacity = counted ? static_cast<int>(twell_slots_per_tile(counted_at)) - 1 : INT_MAX;
  params.zeroed_slots = unbounded ? 0 : params.slots;
  const long long items = static_cast<long long>(args.rows) * params.tiles;
  const unsigned blocks = static_cast<unsigned>((items + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const bool vectorised =
      reinterpret_cast<std::uintptr_t>(args.preactivations) % 16 == 0 && args.pitch % kValuesPerLane == 0;
  if (vectorised)
    twell_pack_dense_kernel<true><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(params);
  else
    twell_pack_dense_kernel<false><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(params);
  TWELL_CUDA_CHECK_LAUNCH("twell_pack_dense_kernel");
}

}  // namespace twell::cuda
