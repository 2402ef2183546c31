// SPDX-License-Identifier: GPL-3.0-or-later
// The portable gate GEMM + ReLU + TwELL pack kernel against core's CPU reference (TWELL_SPEC §6.1):
// positions exact except at the near-zero boundary, values within 1 bf16 ulp, the layout's
// invariants, and overflow detected on the device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "controlled_density.hpp"
#include "gpu_test_support.hpp"
#include "twell/kernels/twell_gate_pack.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/twell_format.hpp"

namespace twell::test {
namespace {

struct PackRun {
  std::vector<std::uint32_t> words;
  std::vector<std::uint32_t> overflow_rows;  // ascending
  std::uint32_t overflow_tiles = 0;
};

PackRun run_gate_pack(const Matrix& x, const Matrix& weight, std::uint32_t compression) {
  const int rows = static_cast<int>(x.rows), hidden = static_cast<int>(x.cols),
            neurons = static_cast<int>(weight.rows);
  const auto x_device = upload_bf16(x);
  const auto w_device = upload_bf16(weight);
  const std::size_t words_per_row = cuda::twell_padded_neurons(neurons) / compression;
  cuda::DeviceBuffer<std::uint32_t> packed(rows * words_per_row), state(2 + rows), list(rows);
  TWELL_CUDA_CHECK(cudaMemset(packed.data(), 0xab, packed.bytes()));  // poison: every word must be written
  TWELL_CUDA_CHECK(cudaMemset(state.data(), 0, state.bytes()));
  cuda::GatePackArgs args;
  args.x = x_device.data();
  args.weight = w_device.data();
  args.rows = rows;
  args.hidden = hidden;
  args.neurons = neurons;
  args.compression = compression;
  args.packed = packed.data();
  args.overflow = {state.data(), state.data() + 2, list.data()};
  cuda::launch_twell_gate_pack(args, nullptr);
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());

  PackRun run;
  run.words.resize(packed.size());
  TWELL_CUDA_CHECK(cudaMemcpy(run.words.data(), packed.data(), packed.bytes(), cudaMemcpyDeviceToHost));
  std::uint32_t counters[2];
  TWELL_CUDA_CHECK(cudaMemcpy(counters, state.data(), sizeof(counters), cudaMemcpyDeviceToHost));
  run.overflow_rows.resize(counters[0]);
  if (counters[0] > 0)
    TWELL_CUDA_CHECK(
        cudaMemcpy(run.overflow_rows.data(), list.data(), counters[0] * 4, cudaMemcpyDeviceToHost));
  std::sort(run.overflow_rows.begin(), run.overflow_rows.end());
  run.overflow_tiles = counters[1];
  return run;
}

// Checks the GPU's packed words against the fp32 pre-activations (TWELL_SPEC §6.1).
void expect_packed_matches(const PackRun& gpu, const Matrix& preactivation, std::uint32_t compression) {
  const std::uint32_t rows = static_cast<std::uint32_t>(preactivation.rows);
  const std::uint32_t neurons = static_cast<std::uint32_t>(preactivation.cols);
  const TwellPacked reference = twell_pack(preactivation.data.data(), rows, neurons, compression);
  const std::uint32_t slots = reference.slots_per_tile(), capacity = reference.capacity();
  ASSERT_EQ(gpu.words.size(), reference.words.size());
  EXPECT_EQ(gpu.overflow_rows, reference.overflow_rows);
  EXPECT_EQ(gpu.overflow_tiles, reference.overflow_tiles);

  std::size_t boundary_flips = 0, failures = 0;
  for (std::uint32_t m = 0; m < rows && failures < 20; ++m) {
    const float* pre = preactivation.data.data() + static_cast<std::size_t>(m) * neurons;
    float row_max = 0;
    for (std::uint32_t j = 0; j < neurons; ++j) row_max = std::max(row_max, std::fabs(pre[j]));
    const float boundary = 1e-3f * row_max;
    for (std::uint32_t tile = 0; tile < reference.tiles(); ++tile) {
      const std::uint32_t* words =
          gpu.words.data() + static_cast<std::size_t>(m) * reference.words_per_row() + tile * slots;
      const std::uint32_t count = words[0];
      ASSERT_LE(count, capacity) << "row " << m << " tile " << tile;
      std::set<std::uint32_t> columns;
      for (std::uint32_t s = 1; s <= count; ++s) {
        const std::uint32_t column = words[s] & 0xffffu;
        ASSERT_GE(column, tile * 256) << "row " << m << " tile " << tile;
        ASSERT_LT(column, std::min(tile * 256 + 256, neurons)) << "row " << m << " tile " << tile;
        ASSERT_TRUE(columns.insert(column).second) << "duplicate column " << column << " in row " << m;
        const float value = bf16_bits_to_float(static_cast<std::uint16_t>(words[s] >> 16));
        const float expected = round_to_bf16(pre[column]);
        if (pre[column] <= 0.0f) {
          if (std::fabs(pre[column]) >= boundary)
            ++failures, ADD_FAILURE()
                            << "row " << m << " col " << column << " stored but reference " << pre[column];
          else
            ++boundary_flips;
          continue;
        }
        // Within the near-zero band the fp32 sum order alone moves a value by more than an ulp.
        const float ulp = std::ldexp(1.0f, std::ilogb(expected) - 7);
        const float tolerance = pre[column] < boundary ? boundary : ulp;
        if (std::fabs(value - expected) > tolerance) {
          ++failures;
          ADD_FAILURE() << "row " << m << " col " << column << ": " << value << " vs " << expected;
        }
      }
      for (std::uint32_t s = count + 1; s < slots; ++s)
        ASSERT_EQ(words[s], 0u) << "row " << m << " tile " << tile;
      const std::uint32_t first = tile * 256, last = std::min(first + 256, neurons);
      std::uint32_t positives = 0;
      for (std::uint32_t j = first; j < last; ++j) positives += pre[j] > 0.0f ? 1 : 0;
      if (positives > capacity) continue;  // overflowed: which entries were kept is atomic order
      for (std::uint32_t j = first; j < last; ++j) {
        if (pre[j] > 0.0f && !columns.count(j)) {
          if (pre[j] >= boundary)
            ++failures, ADD_FAILURE() << "row " << m << " col " << j << " missing (" << pre[j] << ")";
          else
            ++boundary_flips;
        }
      }
    }
  }
  EXPECT_LE(boundary_flips, rows * neurons / 10000 + 2) << "too many near-zero sign flips";
}

struct PackCase {
  std::size_t tokens, hidden, intermediate;
  std::uint32_t compression;
  double density;
  double heavy_fraction;
};

class TwellGatePack : public ::testing::TestWithParam<PackCase> {};

TEST_P(TwellGatePack, MatchesReferencePacking) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const PackCase c = GetParam();
  ControlledFfnOptions options;
  options.tokens = c.tokens;
  options.hidden = c.hidden;
  options.intermediate = c.intermediate;
  options.density = c.density;
  options.heavy_row_fraction = c.heavy_fraction;
  options.heavy_row_density = 0.35;
  options.seed = c.tokens * 31 + c.intermediate;
  const ControlledFfn problem = make_controlled_ffn(options);
  Matrix preactivation;
  reference::matmul_nt(problem.x, problem.gate, preactivation);
  const PackRun gpu = run_gate_pack(problem.x, problem.gate, c.compression);
  expect_packed_matches(gpu, preactivation, c.compression);
  if (c.heavy_fraction > 0 && c.compression == 8) EXPECT_FALSE(gpu.overflow_rows.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TwellGatePack,
    ::testing::Values(PackCase{1, 64, 172, 8, 0.05, 0}, PackCase{77, 64, 172, 4, 0.1, 0},
                      PackCase{1000, 256, 768, 8, 0.03, 0.02}, PackCase{1000, 256, 768, 4, 0.03, 0.02},
                      PackCase{130, 256, 768, 2, 0.3, 0}, PackCase{77, 2048, 5632, 8, 0.02, 0.05},
                      PackCase{200, 2048, 5632, 2, 0.05, 0.05}, PackCase{77, 4096, 11008, 8, 0.01, 0.05},
                      PackCase{129, 1024, 2816, 4, 0.02, 0.03}, PackCase{300, 512, 1000, 8, 0.04, 0.05}));

// Hand-built rows with exactly 0, 1, 31, 32, 40 and 256 positives in tile 0 (TWELL_SPEC §6.6):
// C = 8 holds 31, so the last three rows overflow and must be flagged, listed and clamped.
TEST(TwellGatePackOverflow, FlagsRowsPastCapacity) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const std::vector<std::uint32_t> positives = {0, 1, 31, 32, 40, 256};
  const std::size_t hidden = 64, neurons = 512, rows = positives.size();
  Matrix x(rows, hidden), weight(neurons, hidden);
  for (std::size_t r = 0; r < rows; ++r) x.at(r, r) = 1.0f;  // pre-activation[r, j] = weight[j, r]
  for (std::size_t j = 0; j < neurons; ++j)
    for (std::size_t r = 0; r < rows; ++r)
      weight.at(j, r) = (j < 256 && j < positives[r]) ? 0.5f + 0.00390625f * static_cast<float>(j % 64)
                                                      : (j == 300 ? 1.0f : -1.0f);
  Matrix preactivation;
  reference::matmul_nt(x, weight, preactivation);
  const PackRun gpu = run_gate_pack(x, weight, 8);
  EXPECT_EQ(gpu.overflow_rows, (std::vector<std::uint32_t>{3, 4, 5}));
  EXPECT_EQ(gpu.overflow_tiles, 3u);
  for (std::size_t r = 0; r < rows; ++r) {
    EXPECT_EQ(gpu.words[r * 64], std::min<std::uint32_t>(positives[r], 31)) << "row " << r;
    EXPECT_EQ(gpu.words[r * 64 + 32], 1u) << "row " << r << ": column 300 fires in tile 1";
    EXPECT_EQ(gpu.words[r * 64 + 33], 300u | (static_cast<std::uint32_t>(float_to_bf16_bits(1.0f)) << 16));
  }
  expect_packed_matches(gpu, preactivation, 8);
}

TEST(TwellGatePackOverflow, RejectsUnsupportedShapes) {
  TWELL_REQUIRE_CUDA_DEVICE();
  cuda::GatePackArgs args;
  args.rows = 4;
  args.hidden = 96;  // not a multiple of 64
  args.neurons = 256;
  EXPECT_THROW(cuda::launch_twell_gate_pack(args, nullptr), Error);
  args.hidden = 64;
  args.compression = 16;
  EXPECT_THROW(cuda::launch_twell_gate_pack(args, nullptr), Error);
}

}  // namespace
}  // namespace twell::test
