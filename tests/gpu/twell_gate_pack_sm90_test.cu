// SPDX-License-Identifier: GPL-3.0-or-later
// The Hopper gate GEMM + pack kernel against core's CPU reference (TWELL_SPEC §6 check 1).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "twell/error.hpp"
#include "twell/kernels/twell_gate_pack_sm90.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/twell_format.hpp"

namespace {

bool skip_unless_hopper(std::string& reason) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    reason = "no CUDA device";
    return true;
  }
  if (!twell::cuda::gate_pack_sm90_supported(0)) {
    reason = "the sm_90a gate kernel needs a compute capability 9.0 device";
    return true;
  }
  return false;
}

struct Problem {
  int tokens, hidden, neurons, compression;
  float bias;  // shifts the constant input channel's weight to set the density
};

// Random bf16 x with channel 0 held at 1 and a per-neuron bias in the weight's column 0, so the gate
// fires at a controlled rate; values are bf16-exact so CPU and GPU see the same inputs.
void make_inputs(const Problem& p, std::vector<std::uint16_t>& x_bits, std::vector<std::uint16_t>& w_bits,
                 twell::Matrix& x, twell::Matrix& w, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  x = twell::Matrix(p.tokens, p.hidden);
  w = twell::Matrix(p.neurons, p.hidden);
  for (int t = 0; t < p.tokens; ++t)
    for (int k = 0; k < p.hidden; ++k) x.at(t, k) = twell::round_to_bf16(k == 0 ? 1.0f : normal(rng));
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.hidden));
  for (int n = 0; n < p.neurons; ++n)
    for (int k = 0; k < p.hidden; ++k)
      w.at(n, k) = twell::round_to_bf16(k == 0 ? p.bias + 0.5f * normal(rng) : scale * normal(rng));
  x_bits.resize(x.data.size());
  w_bits.resize(w.data.size());
  for (std::size_t i = 0; i < x.data.size(); ++i) x_bits[i] = twell::float_to_bf16_bits(x.data[i]);
  for (std::size_t i = 0; i < w.data.size(); ++i) w_bits[i] = twell::float_to_bf16_bits(w.data[i]);
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// max_ctas 0: one CTA per SM; a small cap makes each CTA carry many tiles (the deferred packing
// of one tile behind the next runs through a long chain).
void run_and_compare(const Problem& p, int cluster_size, int max_ctas = 0) {
  SCOPED_TRACE("cluster size " + std::to_string(cluster_size) + ", max_ctas " + std::to_string(max_ctas));
  std::vector<std::uint16_t> x_bits, w_bits;
  twell::Matrix x, w;
  make_inputs(p, x_bits, w_bits, x, w, 1234u + p.tokens + p.neurons);
  twell::Matrix preact;
  twell::reference::matmul_nt(x, w, preact);
  const twell::TwellPacked expected =
      twell::twell_pack(preact.data.data(), p.tokens, p.neurons, p.compression);

  const std::size_t words = static_cast<std::size_t>(p.tokens) * expected.words_per_row();
  void *d_x = nullptr, *d_w = nullptr, *d_packed = nullptr, *d_overflow = nullptr;
  CUDA_OK(cudaMalloc(&d_x, x_bits.size() * 2));
  CUDA_OK(cudaMalloc(&d_w, w_bits.size() * 2));
  CUDA_OK(cudaMalloc(&d_packed, words * 4));
  CUDA_OK(cudaMalloc(&d_overflow, p.tokens * 4));
  CUDA_OK(cudaMemcpy(d_x, x_bits.data(), x_bits.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_w, w_bits.data(), w_bits.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_packed, 0xAB, words * 4));  // poison: every count word must be written
  CUDA_OK(cudaMemset(d_overflow, 0, p.tokens * 4));
  twell::cuda::GatePackSm90Params params;
  params.x = static_cast<const __nv_bfloat16*>(d_x);
  params.weight = static_cast<const __nv_bfloat16*>(d_w);
  params.packed = static_cast<std::uint32_t*>(d_packed);
  params.row_overflow = static_cast<std::uint32_t*>(d_overflow);
  params.tokens = p.tokens;
  params.hidden = p.hidden;
  params.neurons = p.neurons;
  params.compression = p.compression;
  params.cluster_size = cluster_size;
  params.max_ctas = max_ctas;
  if (max_ctas > 0) {
    const twell::cuda::GatePackSm90Plan plan = twell::cuda::gate_pack_sm90_plan(params);
    EXPECT_GE(plan.ctas, cluster_size);
    EXPECT_LE(plan.ctas, std::max(max_ctas, cluster_size));
    EXPECT_EQ(plan.ctas % cluster_size, 0);
  }
  twell::cuda::gate_pack_sm90(params, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> packed(words), overflow(p.tokens);
  CUDA_OK(cudaMemcpy(packed.data(), d_packed, words * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(overflow.data(), d_overflow, p.tokens * 4, cudaMemcpyDeviceToHost));
  // The order within a tile is not column order but it is fixed (no atomics): a second run writes
  // the same counts and the same entries in the same slots.
  CUDA_OK(cudaMemset(d_packed, 0xAB, words * 4));
  twell::cuda::gate_pack_sm90(params, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> packed_again(words);
  CUDA_OK(cudaMemcpy(packed_again.data(), d_packed, words * 4, cudaMemcpyDeviceToHost));
  cudaFree(d_x);
  cudaFree(d_w);
  cudaFree(d_packed);
  cudaFree(d_overflow);

  const std::uint32_t slots = expected.slots_per_tile();
  const std::uint32_t capacity = expected.capacity();
  std::uint64_t boundary_differences = 0, total_entries = 0;
  for (int t = 0; t < p.tokens; ++t) {
    float row_max = 0;
    for (int n = 0; n < p.neurons; ++n) row_max = std::max(row_max, std::fabs(preact.at(t, n)));
    const bool expect_overflow = std::binary_search(
        expected.overflow_rows.begin(), expected.overflow_rows.end(), static_cast<std::uint32_t>(t));
    for (std::uint32_t tile = 0; tile < expected.tiles(); ++tile) {
      const std::uint32_t* got =
          packed.data() + static_cast<std::size_t>(t) * expected.words_per_row() + tile * slots;
      ASSERT_LE(got[0], capacity) << "row " << t << " tile " << tile;
      const std::uint32_t* again =
          packed_again.data() + static_cast<std::size_t>(t) * expected.words_per_row() + tile * slots;
      ASSERT_TRUE(std::equal(got, got + 1 + got[0], again))
          << "row " << t << " tile " << tile << " differs between runs";
      std::map<std::uint32_t, std::uint16_t> entries;
      for (std::uint32_t s = 1; s <= got[0]; ++s) {
        const std::uint32_t column = got[s] & 0xFFFFu;
        ASSERT_GE(column, tile * 256) << "row " << t;
        ASSERT_LT(column, std::min<std::uint32_t>((tile + 1) * 256, p.neurons)) << "row " << t;
        ASSERT_TRUE(entries.emplace(column, static_cast<std::uint16_t>(got[s] >> 16)).second)
            << "duplicate column";
      }
      if (expect_overflow) continue;  // the order of claims decides which entries stayed
      for (std::uint32_t column = tile * 256; column < std::min<std::uint32_t>((tile + 1) * 256, p.neurons);
           ++column) {
        const float reference = preact.at(t, column);
        const auto found = entries.find(column);
        const bool near_boundary = std::fabs(reference) < 1e-3f * row_max;
        if ((reference > 0) != (found != entries.end())) {
          ASSERT_TRUE(near_boundary) << "row " << t << " column " << column << " reference " << reference;
          ++boundary_differences;
          continue;
        }
        if (found == entries.end()) continue;
        ++total_entries;
        const float got_value = twell::bf16_bits_to_float(found->second);
        const float expected_value = twell::round_to_bf16(reference);
        // One bf16 ulp, plus what summing the same products in another order may move an fp32 dot
        // product (K * 2^-24 * sum |x_k w_k|): that term only matters for values near cancellation.
        double magnitude = 0;
        for (int k = 0; k < p.hidden; ++k) magnitude += std::fabs(x.at(t, k) * w.at(column, k));
        const double tolerance =
            std::ldexp(1.0, std::ilogb(expected_value) - 7) + p.hidden * std::ldexp(magnitude, -24);
        ASSERT_LE(std::fabs(got_value - expected_value), tolerance)
            << "row " << t << " column " << column << " expected " << expected_value << " got " << got_value;
      }
    }
    EXPECT_EQ(overflow[t] != 0, expect_overflow) << "row " << t;
  }
  // Unless every row overflowed (then which entries stayed depends on claim order), values were checked.
  if (expected.overflow_rows.size() < static_cast<std::size_t>(p.tokens)) EXPECT_GT(total_entries, 0u);
  EXPECT_LE(boundary_differences, total_entries / 1000 + 2);
}

}  // namespace

class GatePackSm90 : public ::testing::TestWithParam<Problem> {};

TEST_P(GatePackSm90, MatchesCpuReference) {
  std::string reason;
  if (skip_unless_hopper(reason)) GTEST_SKIP() << reason;
  run_and_compare(GetParam(), 1);
  run_and_compare(GetParam(), 2);
}

TEST_P(GatePackSm90, MatchesCpuReferenceOnFewCtas) {
  std::string reason;
  if (skip_unless_hopper(reason)) GTEST_SKIP() << reason;
  run_and_compare(GetParam(), 1, 3);
  run_and_compare(GetParam(), 2, 1);  // rounded up to one whole cluster
}

TEST(GatePackSm90Plan, RefusesANegativeCtaCap) {
  std::string reason;
  if (skip_unless_hopper(reason)) GTEST_SKIP() << reason;
  twell::cuda::GatePackSm90Params params;
  params.tokens = 256;
  params.hidden = 128;
  params.neurons = 512;
  params.max_ctas = -1;
  EXPECT_THROW(twell::cuda::gate_pack_sm90_plan(params), twell::Error);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatePackSm90,
                         ::testing::Values(Problem{256, 128, 512, 8, -2.0f}, Problem{77, 64, 172, 8, -1.5f},
                                           Problem{1000, 512, 1280, 4, -1.0f},
                                           Problem{300, 256, 768, 2, -0.8f},
                                           Problem{513, 2048, 5632, 8, -2.5f},
                                           Problem{129, 1024, 2816, 8, 1.0f},
                                           Problem{4099, 2048, 5632, 8, -1.7f}));
