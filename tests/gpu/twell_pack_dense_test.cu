// SPDX-License-Identifier: GPL-3.0-or-later
// The pack pass of GateKernel::CublasPack against core's twell_pack on the same bf16 values: every
// word exact (ascending columns, count clamped, zeros past it in the bounded layouts; the unbounded
// layout's counts and entries exact, what lies past them unchecked), overflowing rows listed and tiles
// counted, for every compression and the unbounded layout (with or without counting the rows over a
// factor's capacity), ragged N, a row pitch wider than N, unaligned rows, and rows picked through a list.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "twell/error.hpp"
#include "twell/kernels/twell_pack_dense.hpp"
#include "twell/numeric.hpp"
#include "twell/twell_format.hpp"

namespace twell::test {
namespace {

struct PackDenseCase {
  int rows, neurons, pitch;
  std::uint32_t compression;
  double positive_fraction;
  double heavy_row_fraction;      // rows where half the values are positive: they overflow every tile
  int offset_elements;            // where the matrix starts in its buffer: 1 breaks the 16-byte alignment
  bool through_row_list = false;  // pack every other row, last first, through source_rows
  std::uint32_t counted_compression = 0;  // unbounded layout: count overflow against this C's capacity
};

std::string describe(const PackDenseCase& c) {
  return "rows " + std::to_string(c.rows) + ", N " + std::to_string(c.neurons) + ", pitch " +
         std::to_string(c.pitch) + ", C " + std::to_string(c.compression) + ", offset " +
         std::to_string(c.offset_elements) + (c.through_row_list ? ", through a row list" : "") +
         (c.counted_compression ? ", counted at C " + std::to_string(c.counted_compression) : "");
}

// Zeroes each tile's words past its count (word 0), as the reference packs them.
void zero_words_past_counts(std::vector<std::uint32_t>& words, std::uint32_t slots) {
  for (std::size_t tile = 0; tile < words.size(); tile += slots) {
    const std::uint32_t count = std::min(words[tile], slots - 1);
    std::fill(words.begin() + static_cast<std::ptrdiff_t>(tile + 1 + count),
              words.begin() + static_cast<std::ptrdiff_t>(tile + slots), 0u);
  }
}

class TwellPackDense : public ::testing::TestWithParam<PackDenseCase> {};

TEST_P(TwellPackDense, MatchesTheReferencePackingWordForWord) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const PackDenseCase c = GetParam();
  SCOPED_TRACE(describe(c));
  std::mt19937 random(static_cast<unsigned>(c.rows * 131 + c.neurons));
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> magnitude(0.0f, 2.0f);

  // Values as bf16 bits in the padded layout, and the same values as floats for the reference.
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(c.offset_elements) + c.rows * c.pitch, 0);
  std::vector<float> dense(static_cast<std::size_t>(c.rows) * c.neurons);
  for (int r = 0; r < c.rows; ++r) {
    const double fraction = uniform(random) < c.heavy_row_fraction ? 0.5 : c.positive_fraction;
    for (int j = 0; j < c.pitch; ++j) {
      float value = std::abs(magnitude(random)) + 1e-3f;
      if (uniform(random) >= fraction) value = uniform(random) < 0.5f ? -value : 0.0f;
      // Past N the row holds garbage the pass must ignore.
      if (j >= c.neurons) value = 1.0f;
      const std::uint16_t b = float_to_bf16_bits(value);
      bits[c.offset_elements + static_cast<std::size_t>(r) * c.pitch + j] = b;
      if (j < c.neurons) dense[static_cast<std::size_t>(r) * c.neurons + j] = bf16_bits_to_float(b);
    }
  }
  std::vector<std::uint32_t> source_rows;
  if (c.through_row_list)
    for (int r = c.rows - 1; r >= 0; r -= 2) source_rows.push_back(static_cast<std::uint32_t>(r));
  const int packed_rows = c.through_row_list ? static_cast<int>(source_rows.size()) : c.rows;
  std::vector<float> selected;
  for (std::uint32_t r : source_rows)
    selected.insert(selected.end(), dense.begin() + static_cast<std::ptrdiff_t>(r) * c.neurons,
                    dense.begin() + static_cast<std::ptrdiff_t>(r + 1) * c.neurons);
  const float* packed_values = c.through_row_list ? selected.data() : dense.data();
  const TwellPacked reference = twell_pack(packed_values, static_cast<std::uint32_t>(packed_rows),
                                           static_cast<std::uint32_t>(c.neurons), c.compression);
  // The words come from the layout packed; the counts, in the unbounded layout with a counted factor,
  // from that factor's packing of the same values.
  const TwellPacked counted = c.counted_compression == 0
                                  ? reference
                                  : twell_pack(packed_values, static_cast<std::uint32_t>(packed_rows),
                                               static_cast<std::uint32_t>(c.neurons), c.counted_compression);

  cuda::DeviceBuffer<__nv_bfloat16> matrix(bits.size());
  TWELL_CUDA_CHECK(cudaMemcpy(matrix.data(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  cuda::DeviceBuffer<std::uint32_t> packed(reference.words.size()), state(2 + packed_rows), list(packed_rows);
  cuda::DeviceBuffer<std::uint32_t> row_list(std::max<std::size_t>(source_rows.size(), 1));
  if (!source_rows.empty())
    TWELL_CUDA_CHECK(
        cudaMemcpy(row_list.data(), source_rows.data(), source_rows.size() * 4, cudaMemcpyHostToDevice));
  TWELL_CUDA_CHECK(cudaMemset(packed.data(), 0xab, packed.bytes()));  // poison: every word must be written
  TWELL_CUDA_CHECK(cudaMemset(state.data(), 0, state.bytes()));
  cuda::PackDenseArgs args;
  args.preactivations = matrix.data() + c.offset_elements;
  args.source_rows = c.through_row_list ? row_list.data() : nullptr;
  args.rows = packed_rows;
  args.neurons = c.neurons;
  args.pitch = c.pitch;
  args.compression = c.compression;
  args.counted_compression = c.counted_compression;
  args.packed = packed.data();
  args.overflow = {state.data(), state.data() + 2, list.data()};
  cuda::launch_twell_pack_dense(args, nullptr);
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<std::uint32_t> words(reference.words.size());
  TWELL_CUDA_CHECK(cudaMemcpy(words.data(), packed.data(), packed.bytes(), cudaMemcpyDeviceToHost));
  // The unbounded layout leaves the words past each tile's count as they were (poisoned here).
  if (c.compression == kTwellUnbounded) zero_words_past_counts(words, reference.slots_per_tile());
  EXPECT_EQ(words, reference.words);
  std::vector<std::uint32_t> counters(2 + packed_rows);
  TWELL_CUDA_CHECK(cudaMemcpy(counters.data(), state.data(), state.bytes(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(counters[1], counted.overflow_tiles);
  ASSERT_EQ(counters[0], counted.overflow_rows.size());
  std::vector<std::uint32_t> rows(counters[0]);
  if (!rows.empty())
    TWELL_CUDA_CHECK(cudaMemcpy(rows.data(), list.data(), rows.size() * 4, cudaMemcpyDeviceToHost));
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(rows, counted.overflow_rows);
  for (int r = 0; r < packed_rows; ++r)
    EXPECT_EQ(counters[2 + r] != 0,
              std::binary_search(counted.overflow_rows.begin(), counted.overflow_rows.end(),
                                 static_cast<std::uint32_t>(r)))
        << "row flag " << r;
  if (c.heavy_row_fraction > 0 && (c.compression != kTwellUnbounded || c.counted_compression != 0))
    EXPECT_FALSE(counted.overflow_rows.empty());
  if (c.compression == kTwellUnbounded) EXPECT_TRUE(reference.overflow_rows.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TwellPackDense,
    ::testing::Values(
        PackDenseCase{1, 256, 256, 8, 0.05, 0, 0}, PackDenseCase{64, 5632, 5632, 8, 0.02, 0.05, 0},
        PackDenseCase{77, 5632, 5632, 4, 0.05, 0.05, 0}, PackDenseCase{33, 5632, 5632, 2, 0.3, 0.1, 0},
        PackDenseCase{100, 172, 172, 8, 0.1, 0.05, 0}, PackDenseCase{100, 1000, 1008, 8, 0.05, 0.05, 0},
        PackDenseCase{50, 768, 768, 4, 0.05, 0.1, 1}, PackDenseCase{9, 65536, 65536, 8, 0.01, 0.2, 0},
        PackDenseCase{300, 2816, 2824, 2, 0.2, 0, 0}, PackDenseCase{77, 5632, 5632, 8, 0.02, 0.1, 0, true},
        PackDenseCase{40, 5632, 5632, kTwellUnbounded, 0.05, 0.3, 0},
        PackDenseCase{31, 1000, 1008, kTwellUnbounded, 1.0, 0, 0, true},
        PackDenseCase{20, 768, 768, kTwellUnbounded, 0.5, 0, 1, true},
        PackDenseCase{40, 5632, 5632, kTwellUnbounded, 0.05, 0.3, 0, false, 8},
        PackDenseCase{61, 1000, 1008, kTwellUnbounded, 0.05, 0.2, 1, true, 4},
        PackDenseCase{33, 5632, 5632, kTwellUnbounded, 0.3, 0.1, 0, false, 2}));

TEST(TwellPackDenseArguments, AreValidatedBeforeAnythingRuns) {
  TWELL_REQUIRE_CUDA_DEVICE();
  cuda::DeviceBuffer<__nv_bfloat16> matrix(512);
  cuda::DeviceBuffer<std::uint32_t> packed(64), state(4), list(2);
  cuda::PackDenseArgs args;
  args.preactivations = matrix.data();
  args.rows = 2;
  args.neurons = 256;
  args.pitch = 256;
  args.packed = packed.data();
  args.overflow = {state.data(), state.data() + 2, list.data()};
  cuda::PackDenseArgs bad = args;
  bad.pitch = 255;
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
  bad = args;
  bad.compression = 16;
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
  bad = args;
  bad.neurons = 65537;
  bad.pitch = 65537;
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
  bad = args;
  bad.rows = 0;
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
  bad = args;
  bad.packed = nullptr;
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
  cuda::launch_twell_pack_dense(args, nullptr);
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());
  // The unbounded layout counts nothing (no tile can overflow): its overflow state may be absent.
  cuda::DeviceBuffer<std::uint32_t> unbounded_packed(2 * 512);
  cuda::PackDenseArgs unbounded = args;
  unbounded.compression = kTwellUnbounded;
  unbounded.packed = unbounded_packed.data();
  unbounded.overflow = {};
  cuda::launch_twell_pack_dense(unbounded, nullptr);
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());
  bad = unbounded;
  bad.compression = 1;
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
  // Counting against a factor needs the overflow state, and a factor with a capacity.
  bad = unbounded;
  bad.counted_compression = 8;
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
  bad.overflow = args.overflow;
  bad.counted_compression = 3;
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
  bad.counted_compression = 8;
  cuda::launch_twell_pack_dense(bad, nullptr);
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());
  bad = args;
  bad.overflow = {};
  EXPECT_THROW(cuda::launch_twell_pack_dense(bad, nullptr), Error);
}

}  // namespace
}  // namespace twell::test
