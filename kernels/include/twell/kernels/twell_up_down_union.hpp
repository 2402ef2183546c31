// SPDX-License-Identifier: GPL-3.0-or-later
// TwELL's union consumer (sm_90a): per block of 128 tokens, the union of the block's live neurons
// (core's twell_block_unions), then the up projection on the tensor cores over the union's up rows with
// h = bf16(g * bf16(u)) written per non-zero, then the down projection over the union's Wd^T rows with
// h scattered into each k-block's A tile. Each union row is read once per block instead of once per
// non-zero; the products of a token with neurons it does not fire are computed and multiplied by zero.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "twell/kernels/twell_up_down.hpp"

namespace twell::cuda {

/// The union pass's output for `blocks` blocks, carved from one buffer of union_workspace_words words.
struct UnionWorkspaceView {
  std::uint32_t* union_sizes = nullptr;   ///< [blocks]: live neurons in each block's union
  std::uint32_t* neurons = nullptr;       ///< [blocks, padded_neurons]: ascending, the first union_size
  std::uint32_t* column_start = nullptr;  ///< [blocks, padded_neurons + 1]: entries of each position
  std::uint32_t* entries = nullptr;       ///< [blocks, entries_per_block]: twell_union_entry words
  /// The up GEMM's work: one item per block and 256 union positions of it, block << 8 | tile, in the
  /// order the pass claimed them (a block's tiles together); their count first, cleared by the launch.
  std::uint32_t* up_item_count = nullptr;
  std::uint32_t* up_items = nullptr;  ///< [blocks * padded_neurons / 256]
  int blocks = 0;
  int padded_neurons = 0;
  std::size_t entries_per_block = 0;
};

/// Words of the union consumer's workspace for `rows` tokens of `words_per_row` packed words each.
std::size_t union_workspace_words(int rows, int padded_neurons, int words_per_row);
UnionWorkspaceView union_workspace_view(std::uint32_t* workspace, int rows, int padded_neurons,
                                        int words_per_row);

/// Whether the union consumer runs here: an sm_90a build on a compute capability 9.0 device.
bool up_down_union_available(int device);
/// Why `args` cannot take the union consumer (empty when it can): highest precision, hidden not a
/// multiple of 256, more than 16384 padded neurons, the workspace missing or too small.
const char* up_down_union_refusal(const UpDownArgs& args);

/// The union pass alone (for tests): fills the workspace view from args.packed and args.row_flags.
void launch_twell_union_pass(const UpDownArgs& args, const UnionWorkspaceView& view, cudaStream_t stream);
/// The whole union consumer (the pass, the up GEMM where gated, the down GEMM); validated by
/// launch_twell_up_down.
void launch_twell_up_down_union(const UpDownArgs& args, cudaStream_t stream);

}  // namespace twell::cuda
