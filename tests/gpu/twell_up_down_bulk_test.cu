// SPDX-License-Identifier: GPL-3.0-or-later
// The persistent bulk consumer against the per-token CTA consumer on the same packed rows: bit for bit
// where the CTA kernel stages a token's entries in one pass (its arithmetic and its order are the
// same), within the output's rounding elsewhere; flagged rows left alone, tokens without non-zeros
// written as zeros, token counts below and above one CTA per SM, every compression, gated and not,
// both precisions. Where the device or build cannot run it, it is refused, never run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "controlled_density.hpp"
#include "gpu_test_support.hpp"
#include "twell/error.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/metrics.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/twell_format.hpp"

namespace twell::test {
namespace {

struct BulkCase {
  int rows, hidden, neurons;
  bool gated;
};

std::string describe(const BulkCase& c) {
  return "M " + std::to_string(c.rows) + ", D " + std::to_string(c.hidden) + ", N " +
         std::to_string(c.neurons) + (c.gated ? ", gated" : ", non-gated");
}

int device_ordinal() {
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

class TwellUpDownBulk : public ::testing::TestWithParam<BulkCase> {};

TEST_P(TwellUpDownBulk, MatchesThePerTokenCtaConsumer) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const BulkCase c = GetParam();
  SCOPED_TRACE(describe(c));
  if (!cuda::up_down_persistent_bulk_supported(c.hidden, device_ordinal()))
    GTEST_SKIP() << "no sm_90a code for this device in this build";
  ControlledFfnOptions options;
  options.tokens = static_cast<std::size_t>(c.rows);
  options.hidden = static_cast<std::size_t>(c.hidden);
  options.intermediate = static_cast<std::size_t>(c.neurons);
  options.density = 0.02;
  options.gated = c.gated;
  options.heavy_row_fraction = 0.05;
  options.heavy_row_density = 0.3;  // overflows C = 8 and 4: those rows are flagged and skipped
  options.seed = 31 + c.rows;
  const ControlledFfn problem = make_controlled_ffn(options);
  const DeviceFfn device_ffn(problem);
  const auto x = upload_bf16(problem.x);
  reference::FfnWeights weights;
  weights.gate = c.gated ? &problem.gate : nullptr;
  weights.up = &problem.up;
  weights.down = &problem.down;
  weights.down_t = &problem.down_t;
  Matrix preactivation;
  (void)reference::twell_ffn(problem.x, weights, 8, reference::Precision::Fp32, 0, &preactivation);

  for (const std::uint32_t compression : {8u, 4u, 2u, kTwellUnbounded}) {
    TwellPacked packed = twell_pack(preactivation.data.data(), static_cast<std::uint32_t>(c.rows),
                                    static_cast<std::uint32_t>(c.neurons), compression);
    // Every seventh token without non-zeros: its output must be written as zeros.
    for (int r = 3; r < c.rows; r += 7)
      for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile)
        packed.words[static_cast<std::size_t>(r) * packed.words_per_row() + tile * packed.slots_per_tile()] =
            0;
    std::vector<std::uint32_t> flags(c.rows, 0);
    for (std::uint32_t r : packed.overflow_rows) flags[r] = 1;
    cuda::DeviceBuffer<std::uint32_t> device_packed(packed.words.size()), device_flags(flags.size());
    TWELL_CUDA_CHECK(
        cudaMemcpy(device_packed.data(), packed.words.data(), device_packed.bytes(), cudaMemcpyHostToDevice));
    TWELL_CUDA_CHECK(
        cudaMemcpy(device_flags.data(), flags.data(), device_flags.bytes(), cudaMemcpyHostToDevice));
    // The CTA kernel stages kChunkWords = 1024 packed words a pass: one pass holds every tile here.
    const bool one_pass = packed.tiles() * packed.slots_per_tile() <= 1024;

    for (const bool highest : {false, true}) {
      SCOPED_TRACE("C " + std::to_string(compression) +
                   (highest ? ", highest precision" : ", default precision"));
      const auto run = [&](cuda::UpDownKernel kernel) {
        auto out = poisoned_bf16(static_cast<std::size_t>(c.rows) * c.hidden);
        cuda::UpDownArgs args;
        args.x = x.data();
        args.packed = device_packed.data();
        args.up = c.gated ? device_ffn.up.data() : nullptr;
        args.down_t = device_ffn.down_t.data();
        args.row_flags = device_flags.data();
        args.out = out.data();
        args.rows = c.rows;
        args.hidden = c.hidden;
        args.padded_neurons = static_cast<int>(packed.padded_neurons);
        args.compression = compression;
        args.highest_precision = highest;
        args.kernel = kernel;
        cuda::launch_twell_up_down(args, nullptr);
        TWELL_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<std::uint16_t> bits(out.size());
        TWELL_CUDA_CHECK(cudaMemcpy(bits.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost));
        return bits;
      };
      const std::vector<std::uint16_t> cta = run(cuda::UpDownKernel::PerTokenCta);
      const std::vector<std::uint16_t> bulk = run(cuda::UpDownKernel::PersistentBulk);
      EXPECT_EQ(run(cuda::UpDownKernel::PersistentBulk), bulk) << "two runs differ";
      constexpr std::uint16_t kPoison = 0xffffu;
      Matrix a(1, c.hidden), b(1, c.hidden);
      for (int r = 0; r < c.rows; ++r) {
        const std::size_t begin = static_cast<std::size_t>(r) * c.hidden;
        if (flags[r] != 0) {
          for (int d = 0; d < c.hidden; ++d) ASSERT_EQ(bulk[begin + d], kPoison) << "flagged row " << r;
          continue;
        }
        if (r >= 3 && (r - 3) % 7 == 0) {
          for (int d = 0; d < c.hidden; ++d) ASSERT_EQ(bulk[begin + d], 0u) << "empty row " << r;
          continue;
        }
        if (one_pass) {
          for (int d = 0; d < c.hidden; ++d)
            ASSERT_EQ(bulk[begin + d], cta[begin + d]) << "row " << r << " element " << d;
          continue;
        }
        for (int d = 0; d < c.hidden; ++d) {
          a.at(0, d) = bf16_bits_to_float(cta[begin + d]);
          b.at(0, d) = bf16_bits_to_float(bulk[begin + d]);
        }
        // The tensor-core sums group the entries in fours from another start: within the rounding.
        EXPECT_LE(compare_outputs(a, b).rel_frobenius, 4e-3) << "row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TwellUpDownBulk,
                         ::testing::Values(BulkCase{1, 2048, 5632, true}, BulkCase{300, 2048, 5632, true},
                                           BulkCase{300, 2048, 5632, false}, BulkCase{700, 256, 1000, true},
                                           BulkCase{129, 1024, 11008, true}, BulkCase{77, 512, 2816, false}));

TEST(TwellUpDownBulkArguments, UnsupportedShapesAreRefusedBeforeAnythingRuns) {
  TWELL_REQUIRE_CUDA_DEVICE();
  const int device = device_ordinal();
  EXPECT_FALSE(cuda::up_down_persistent_bulk_supported(64, device));
  EXPECT_FALSE(cuda::up_down_persistent_bulk_supported(2304, device));
  EXPECT_FALSE(cuda::up_down_persistent_bulk_supported(4096, device));
  const auto dummy = poisoned_bf16(4096);
  auto out = poisoned_bf16(4096);
  cuda::DeviceBuffer<std::uint32_t> packed(4096);
  cuda::UpDownArgs args;
  args.x = dummy.data();
  args.packed = packed.data();
  args.up = dummy.data();
  args.down_t = dummy.data();
  args.out = out.data();
  args.rows = 1;
  args.hidden = 4096;
  args.padded_neurons = 256;
  args.kernel = cuda::UpDownKernel::PersistentBulk;
  EXPECT_THROW(cuda::launch_twell_up_down(args, nullptr), Error);
}

}  // namespace
}  // namespace twell::test
