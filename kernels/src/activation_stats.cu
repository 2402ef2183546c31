// SPDX-License-Identifier: GPL-3.0-or-later
// GPU statistics of an FFN gate's ReLU mask (value > 0), matching core's summarize_preactivations.
//
// Two passes over the [M, N] pre-activations:
//  - by rows: one warp per row, one 256-wide TwELL tile per warp step (8 values per lane), giving the
//    non-zeros per token and the tile-count / fullest-tile histograms (block-local in shared memory);
//  - by columns: one block per map row of tokens, two neurons per thread, giving per-neuron firing
//    counts and the token x neuron map's fired counts (encoded into cells on the host).
#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

#include "twell/error.hpp"
#include "twell/kernels/activation_stats.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/device_buffer.hpp"

namespace twell::cuda {

namespace {

constexpr int kHistogramBins = 257;  // counts 0..256 per 256-wide tile

__device__ inline int fired(float value) {
  return value > 0.0f ? 1 : 0;
}

__global__ void row_statistics_kernel(const __nv_bfloat16* __restrict__ x, std::int64_t rows, int columns,
                                      std::int64_t row_stride, bool vector_ok,
                                      std::uint32_t* __restrict__ nnz,
                                      unsigned long long* __restrict__ tile_histogram,
                                      unsigned long long* __restrict__ row_max_histogram) {
  __shared__ unsigned int local_tiles[kHistogramBins];
  __shared__ unsigned int local_row_max[kHistogramBins];
  for (int i = threadIdx.x; i < kHistogramBins; i += blockDim.x) {
    local_tiles[i] = 0;
    local_row_max[i] = 0;
  }
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int warps_per_block = blockDim.x / 32;
  const int tiles = (columns + 255) / 256;
  for (std::int64_t row = blockIdx.x * static_cast<std::int64_t>(warps_per_block) + threadIdx.x / 32;
       row < rows; row += static_cast<std::int64_t>(gridDim.x) * warps_per_block) {
    const __nv_bfloat16* row_data = x + row * row_stride;
    unsigned int row_total = 0;
    unsigned int row_max = 0;
    for (int tile = 0; tile < tiles; ++tile) {
      const int column = tile * 256 + lane * 8;
      int count = 0;
      if (vector_ok && column + 8 <= columns) {
        const uint4 bits = *reinterpret_cast<const uint4*>(row_data + column);
        const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&bits);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __bfloat1622float2(pairs[i]);
          count += fired(f.x) + fired(f.y);
        }
      } else {
        for (int i = 0; i < 8 && column + i < columns; ++i)
          count += fired(__bfloat162float(row_data[column + i]));
      }
      const unsigned int tile_count = __reduce_add_sync(0xffffffffu, static_cast<unsigned int>(count));
      row_total += tile_count;
      row_max = max(row_max, tile_count);
      if (lane == 0) atomicAdd(&local_tiles[tile_count], 1u);
    }
    if (lane == 0) {
      nnz[row] = row_total;
      atomicAdd(&local_row_max[row_max], 1u);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kHistogramBins; i += blockDim.x) {
    if (local_tiles[i]) atomicAdd(&tile_histogram[i], static_cast<unsigned long long>(local_tiles[i]));
    if (local_row_max[i]) atomicAdd(&row_max_histogram[i], static_cast<unsigned long long>(local_row_max[i]));
  }
}

__global__ void column_statistics_kernel(const __nv_bfloat16* __restrict__ x, std::int64_t rows, int columns,
                                         std::int64_t row_stride, bool pair_ok, std::int64_t tokens_per_cell,
                                         int map_rows, int neurons_per_cell, int map_columns,
                                         std::uint32_t* __restrict__ fire_counts,
                                         std::uint32_t* __restrict__ cell_counts) {
  const int column = (blockIdx.x * blockDim.x + threadIdx.x) * 2;
  if (column >= columns) return;
  const bool has_second = column + 1 < columns;
  for (int map_row = blockIdx.y; map_row < map_rows; map_row += gridDim.y) {
    const std::int64_t first = map_row * tokens_per_cell;
    const std::int64_t last = min(rows, first + tokens_per_cell);
    unsigned int count0 = 0;
    unsigned int count1 = 0;
    for (std::int64_t row = first; row < last; ++row) {
      const __nv_bfloat16* at = x + row * row_stride + column;
      if (pair_ok && has_second) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(at));
        count0 += fired(f.x);
        count1 += fired(f.y);
      } else {
        count0 += fired(__bfloat162float(at[0]));
        if (has_second) count1 += fired(__bfloat162float(at[1]));
      }
    }
    std::uint32_t* cells = cell_counts + static_cast<std::int64_t>(map_row) * map_columns;
    if (count0) {
      atomicAdd(&fire_counts[column], count0);
      atomicAdd(&cells[column / neurons_per_cell], count0);
    }
    if (count1) {
      atomicAdd(&fire_counts[column + 1], count1);
      atomicAdd(&cells[(column + 1) / neurons_per_cell], count1);
    }
  }
}

}  // namespace

struct ActivationStatsCollector::Impl {
  DeviceBuffer<unsigned char> workspace;
};

ActivationStatsCollector::ActivationStatsCollector() : m_impl(std::make_unique<Impl>()) {}
ActivationStatsCollector::~ActivationStatsCollector() = default;

ActivationSummary ActivationStatsCollector::summarize(const __nv_bfloat16* preactivations,
                                                      std::int64_t tokens, int neurons,
                                                      std::int64_t row_stride, const MapShape& map_shape,
                                                      cudaStream_t stream) {
  if (tokens < 0 || neurons < 0 || tokens > 0xffffffffLL || row_stride < neurons)
    throw Error(Error::Kind::Internal, "activation statistics: invalid shape " + std::to_string(tokens) +
                                           " x " + std::to_string(neurons) + " (row stride " +
                                           std::to_string(row_stride) + ")");
  ActivationSummary summary;
  summary.tokens = static_cast<std::uint32_t>(tokens);
  summary.neurons = static_cast<std::uint32_t>(neurons);
  summary.nnz_per_token.assign(static_cast<std::size_t>(tokens), 0);
  summary.neuron_fire_counts.assign(static_cast<std::size_t>(neurons), 0);
  summary.tile_count_histogram.assign(kHistogramBins, 0);
  summary.row_max_tile_histogram.assign(kHistogramBins, 0);
  const MapGeometry geometry = map_geometry(summary.tokens, summary.neurons, map_shape);
  summary.map.rows = geometry.rows;
  summary.map.cols = geometry.cols;
  summary.map.tokens = summary.tokens;
  summary.map.neurons = summary.neurons;
  summary.map.cells.assign(static_cast<std::size_t>(geometry.rows) * geometry.cols, 0);
  if (tokens == 0 || neurons == 0) return summary;

  // Workspace: both histograms (u64), then nnz [M], fire counts [N], map cells (u32).
  const std::size_t histogram_bytes = 2 * kHistogramBins * sizeof(unsigned long long);
  const std::size_t cell_count = summary.map.cells.size();
  const std::size_t u32_count =
      static_cast<std::size_t>(tokens) + static_cast<std::size_t>(neurons) + cell_count;
  const std::size_t bytes = histogram_bytes + u32_count * sizeof(std::uint32_t);
  m_impl->workspace.ensure(bytes);
  auto* histograms = reinterpret_cast<unsigned long long*>(m_impl->workspace.data());
  auto* nnz = reinterpret_cast<std::uint32_t*>(histograms + 2 * kHistogramBins);
  std::uint32_t* fire_counts = nnz + tokens;
  std::uint32_t* cells = fire_counts + neurons;
  TWELL_CUDA_CHECK(cudaMemsetAsync(histograms, 0, bytes, stream));

  const bool aligned16 = reinterpret_cast<std::uintptr_t>(preactivations) % 16 == 0 && row_stride % 8 == 0;
  const bool aligned4 = reinterpret_cast<std::uintptr_t>(preactivations) % 4 == 0 && row_stride % 2 == 0;
  constexpr int kThreads = 256;
  const auto row_blocks = static_cast<unsigned>(std::min<std::int64_t>((tokens + 7) / 8, 4096));
  row_statistics_kernel<<<row_blocks, kThreads, 0, stream>>>(
      preactivations, tokens, neurons, row_stride, aligned16, nnz, histograms, histograms + kHistogramBins);
  TWELL_CUDA_CHECK_LAUNCH("row_statistics_kernel");
  const dim3 column_grid(static_cast<unsigned>((neurons + 2 * kThreads - 1) / (2 * kThreads)),
                         std::min<unsigned>(geometry.rows, 65535));
  column_statistics_kernel<<<column_grid, kThreads, 0, stream>>>(
      preactivations, tokens, neurons, row_stride, aligned4, geometry.tokens_per_cell,
      static_cast<int>(geometry.rows), static_cast<int>(geometry.neurons_per_cell),
      static_cast<int>(geometry.cols), fire_counts, cells);
  TWELL_CUDA_CHECK_LAUNCH("column_statistics_kernel");

  std::vector<unsigned long long> host_histograms(2 * kHistogramBins);
  std::vector<std::uint32_t> host_cells(cell_count);
  TWELL_CUDA_CHECK(
      cudaMemcpyAsync(host_histograms.data(), histograms, histogram_bytes, cudaMemcpyDeviceToHost, stream));
  TWELL_CUDA_CHECK(cudaMemcpyAsync(summary.nnz_per_token.data(), nnz, tokens * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, stream));
  TWELL_CUDA_CHECK(cudaMemcpyAsync(summary.neuron_fire_counts.data(), fire_counts,
                                   static_cast<std::size_t>(neurons) * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, stream));
  TWELL_CUDA_CHECK(cudaMemcpyAsync(host_cells.data(), cells, cell_count * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, stream));
  TWELL_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::copy(host_histograms.begin(), host_histograms.begin() + kHistogramBins,
            summary.tile_count_histogram.begin());
  std::copy(host_histograms.begin() + kHistogramBins, host_histograms.end(),
            summary.row_max_tile_histogram.begin());
  for (std::uint32_t r = 0; r < geometry.rows; ++r) {
    const std::uint64_t row_begin = static_cast<std::uint64_t>(r) * geometry.tokens_per_cell;
    const std::uint64_t cell_tokens =
        std::min<std::uint64_t>(summary.tokens, row_begin + geometry.tokens_per_cell) - row_begin;
    for (std::uint32_t c = 0; c < geometry.cols; ++c) {
      const std::uint64_t col_begin = static_cast<std::uint64_t>(c) * geometry.neurons_per_cell;
      const std::uint64_t cell_neurons =
          std::min<std::uint64_t>(summary.neurons, col_begin + geometry.neurons_per_cell) - col_begin;
      const std::size_t index = static_cast<std::size_t>(r) * geometry.cols + c;
      summary.map.cells[index] = encode_map_cell(host_cells[index], cell_tokens * cell_neurons);
    }
  }
  return summary;
}

}  // namespace twell::cuda
