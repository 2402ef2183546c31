// SPDX-License-Identifier: GPL-3.0-or-later
// The plan that balances the CTA-per-token consumer by non-zeros: the kernels that count every
// token's non-zeros and cut it into pieces (layout and rationale in twell_up_down_balance.cuh).
#include <algorithm>
#include <string>
#include <vector>

#include "dependent_launch.cuh"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell_up_down_balance.cuh"

namespace twell::cuda {
namespace up_down {
namespace {

// At M 64 and 0.5 % (28 non-zeros a token) the minimum piece gives 7 pieces a token, close to the
// uniform 8-way split that measured best there on H100 (h100-small-m-2026-12-05.json, run 5).
constexpr std::uint32_t kMinPieceEntries = kTwellMinPieceEntries;

__device__ std::uint32_t pieces_of(std::uint32_t entries, std::uint32_t budget) {
  return max(1u, min(entries / budget, kTwellMaxPieces));
}

// One warp per token: its non-zeros (0 for rows flagged for the dense recomputation), and each
// CTA's total. Launched as a dependent of the gate, it touches nothing before the gate has finished.
__global__ void __launch_bounds__(kPlanThreads) count_row_entries_kernel(const BalanceParams p) {
  wait_for_prior_grid();
  allow_dependent_launch();  // the plan kernel waits for this one before it reads the counts
  __shared__ std::uint32_t warp_entries[kRowsPerCountCta];
  const BalancePlanView plan = balance_plan_view(p.plan, p.rows);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // The 64-bit counter the plan kernel claims extra pieces and slots from.
  if (blockIdx.x == 0 && threadIdx.x < 2) plan.header[2 + threadIdx.x] = 0u;
  const int row = blockIdx.x * kRowsPerCountCta + warp;
  std::uint32_t entries = 0;
  if (row < p.rows && (p.row_flags == nullptr || p.row_flags[row] == 0u)) {
    const std::uint32_t* words = p.packed + static_cast<std::size_t>(row) * p.words_per_row;
    for (int tile = lane; tile < p.tiles; tile += 32)
      entries += min(words[static_cast<std::size_t>(tile) * p.slots], p.capacity);
  }
  entries = __reduce_add_sync(0xffffffffu, entries);
  if (lane == 0) {
    if (row < p.rows) plan.row_entries[row] = entries;
    warp_entries[warp] = entries;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint32_t total = 0;
#pragma unroll
    for (int w = 0; w < kRowsPerCountCta; ++w) total += warp_entries[w];
    plan.count_totals[blockIdx.x] = total;
  }
}

// One thread per token: its pieces, as core's twell_plan_balanced_pieces. Split tokens take their
// extra items and partial slots from one 64-bit counter (extra pieces high, split tokens low), so a
// token's slots, (pieces - 1) + 1, never overlap another's. Where the items land depends on
// scheduling; what each piece computes and the order its partials are summed in do not.
__global__ void __launch_bounds__(kPlanThreads) plan_pieces_kernel(const BalanceParams p) {
  wait_for_prior_grid();
  allow_dependent_launch();  // the consumer waits for the plan before it reads it
  const BalancePlanView plan = balance_plan_view(p.plan, p.rows);
  // Every CTA sums the counting CTAs' totals (at most a few hundred words, read from L2).
  __shared__ std::uint32_t all_entries;
  if (threadIdx.x == 0) all_entries = 0;
  __syncthreads();
  std::uint32_t some_entries = 0;
  for (int cta = threadIdx.x; cta < balance_count_ctas(p.rows); cta += kPlanThreads)
    some_entries += plan.count_totals[cta];
  some_entries = __reduce_add_sync(0xffffffffu, some_entries);
  if ((threadIdx.x & 31) == 0 && some_entries != 0) atomicAdd(&all_entries, some_entries);
  __syncthreads();
  const std::uint32_t total = all_entries;
  // With budget >= total / extra, the pieces after each token's first number at most `extra`
  // (pieces - 1 <= entries / budget, summed over tokens).
  const std::uint32_t budget = max(kMinPieceEntries, (total + static_cast<std::uint32_t>(p.extra) - 1) /
                                                         static_cast<std::uint32_t>(p.extra));
  const int row = blockIdx.x * kPlanThreads + threadIdx.x;
  if (row == 0) plan.header[0] = budget, plan.header[1] = total;
  const std::uint32_t pieces = row < p.rows ? pieces_of(plan.row_entries[row], budget) : 1u;
  if (row < p.rows) plan.row_pieces[row] = pieces, plan.row_done[row] = 0u;
  const bool split = pieces > 1;
  const unsigned splitting = __ballot_sync(0xffffffffu, split);
  if (splitting == 0) return;
  // One atomic per warp: an inclusive scan of the lanes' claims, the last lane's total claimed.
  const int lane = threadIdx.x & 31;
  const unsigned long long claim = split ? (static_cast<unsigned long long>(pieces - 1) << 32) | 1ull : 0ull;
  unsigned long long inclusive = claim;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const unsigned long long other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  unsigned long long base = 0;
  if (lane == 31) base = atomicAdd(reinterpret_cast<unsigned long long*>(plan.header + 2), inclusive);
  base = __shfl_sync(0xffffffffu, base, 31);
  if (!split) return;
  const unsigned long long before = base + inclusive - claim;
  std::uint32_t extra_at = static_cast<std::uint32_t>(before >> 32);
  const std::uint32_t split_at = static_cast<std::uint32_t>(before);
  plan.row_slot[row] = extra_at + split_at;
  for (std::uint32_t piece = 1; piece < pieces; ++piece)
    plan.extra_items[extra_at++] = (static_cast<std::uint32_t>(row) << kPieceBits) | piece;
}

}  // namespace

void launch_plan_balanced_pieces(const BalanceParams& params, cudaStream_t stream, bool overlap) {
  const unsigned plan_ctas = static_cast<unsigned>((params.rows + kPlanThreads - 1) / kPlanThreads);
  launch_dependent(count_row_entries_kernel, dim3(static_cast<unsigned>(balance_count_ctas(params.rows))),
                   dim3(kPlanThreads), stream, overlap, "count_row_entries_kernel", params);
  launch_dependent(plan_pieces_kernel, dim3(plan_ctas), dim3(kPlanThreads), stream, overlap,
                   "plan_pieces_kernel", params);
}

}  // namespace up_down

TwellBalancedPieces download_up_down_balance_plan(const std::uint32_t* plan, int rows, int extra_pieces,
                                                  cudaStream_t stream) {
  std::vector<std::uint32_t> words(up_down::balance_plan_words(rows, extra_pieces));
  TWELL_CUDA_CHECK(cudaMemcpyAsync(words.data(), plan, words.size() * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, stream));
  TWELL_CUDA_CHECK(cudaStreamSynchronize(stream));
  const up_down::BalancePlanView view = up_down::balance_plan_view(words.data(), rows);
  const std::uint32_t split_count = view.header[2], extra_count = view.header[3];
  if (extra_count > static_cast<std::uint32_t>(extra_pieces) || split_count > extra_count)
    throw Error(Error::Kind::Internal, "download_up_down_balance_plan: the plan's header is corrupt (" +
                                           std::to_string(extra_count) + " extra pieces, " +
                                           std::to_string(split_count) + " split tokens)");
  TwellBalancedPieces result;
  result.budget = view.header[0];
  result.row_entries.assign(view.row_entries, view.row_entries + rows);
  result.row_pieces.assign(view.row_pieces, view.row_pieces + rows);
  result.row_slot.assign(view.row_slot, view.row_slot + rows);
  result.extra_items.assign(view.extra_items, view.extra_items + extra_count);
  std::sort(result.extra_items.begin(), result.extra_items.end());
  for (int row = 0; row < rows; ++row)
    if (result.row_pieces[row] > 1) result.split_rows.push_back(static_cast<std::uint32_t>(row));
  if (result.split_rows.size() != split_count)
    throw Error(Error::Kind::Internal, "download_up_down_balance_plan: " + std::to_string(split_count) +
                                           " split tokens counted, " +
                                           std::to_string(result.split_rows.size()) + " planned");
  return result;
}

// Balanced up to 8 tokens a resident CTA slot. On H100 with 2 % of the tokens at 6 % density
// (bench_ffn --heavy-row-fraction 0.02, h100-balanced-consumer-2026-12-05.json) balancing took up/down
// at 0.5 % from 152 to 41 us at M 64, 155 to 81 at M 1024, 271 to 254 at M 4096 (7.8 tokens a slot),
// and cost 10 % at M 8192 (15.5), where the tokens already average out; M 131072 runs as before.
UpDownBalanceSizes up_down_balance_sizes(int rows, int hidden, int device) {
  constexpr int kMaxTokensPerCtaSlot = 8;
  if (rows <= 0 || hidden <= 0) return {};
  int multiprocessors = 0;
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  const int wave = multiprocessors * up_down::kResidentConsumerCtasPerSm;
  if (rows > kMaxTokensPerCtaSlot * wave) return {};
  UpDownBalanceSizes sizes;
  sizes.extra_pieces = wave;
  sizes.plan_words = up_down::balance_plan_words(rows, wave);
  sizes.partial_elements = up_down::balance_partial_slots(wave) * static_cast<std::size_t>(hidden);
  return sizes;
}

}  // namespace twell::cuda
