// SPDX-License-Identifier: GPL-3.0-or-later
// The union consumer (sm_90a): its union pass must write core's twell_block_unions (the entries of a
// position in any order), and its output must be the TwELL up/down of the packed rows it reads, against a
// CPU computation over the same packed values in double: every compression and the unbounded layout,
// gated and non-gated, blocks cut short by M, flagged rows left unwritten. FfnRunner runs it on request,
// in default precision only.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "controlled_density.hpp"
#include "gpu_test_support.hpp"
#include "twell/error.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/stream.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/kernels/twell_up_down_union.hpp"
#include "twell/metrics.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/twell_block_union.hpp"
#include "twell/twell_format.hpp"

namespace twell::test {
namespace {

struct UnionShape {
  std::uint32_t compression;  // kTwellUnbounded: packed on the CPU, no row flagged
  int rows, hidden, neurons;
  double density;
};

std::string shape_name(const ::testing::TestParamInfo<UnionShape>& info) {
  const UnionShape& s = info.param;
  return (s.compression == kTwellUnbounded ? std::string("Unbounded") : "C" + std::to_string(s.compression)) +
         "_M" + std::to_string(s.rows) + "_D" + std::to_string(s.hidden) + "_N" + std::to_string(s.neurons);
}

bool union_consumer_runs_here() {
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  return cuda::up_down_union_available(device);
}

template <typename T>
std::vector<T> download(const T* device, std::size_t count) {
  std::vector<T> host(count);
  TWELL_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// out[r] = sum over r's counted entries (n, g) of h * Wd^T[n], h = g <x_r, Wu[n]> (gated) or g, in double
// over the bf16 values the GPU reads; flagged rows stay zero.
Matrix reference_up_down(const ControlledFfn& problem, const TwellPacked& packed,
                         const std::vector<std::uint32_t>& flags, bool gated) {
  const std::size_t d = problem.x.cols;
  Matrix out(packed.rows, d);
  const auto bf16 = [](float v) { return static_cast<double>(round_to_bf16(v)); };
  for (std::uint32_t r = 0; r < packed.rows; ++r) {
    if (!flags.empty() && flags[r] != 0) continue;
    std::vector<double> sums(d, 0.0);
    for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile) {
      const std::uint32_t* words = packed.words.data() +
                                   static_cast<std::size_t>(r) * packed.words_per_row() +
                                   tile * packed.slots_per_tile();
      for (std::uint32_t slot = 1; slot <= std::min(words[0], packed.capacity()); ++slot) {
        const std::size_t n = words[slot] & 0xffffu;
        double h = bf16_bits_to_float(static_cast<std::uint16_t>(words[slot] >> 16));
        if (gated) {
          double u = 0;
          for (std::size_t k = 0; k < d; ++k) u += bf16(problem.x.at(r, k)) * bf16(problem.up.at(n, k));
          h *= u;
        }
        for (std::size_t k = 0; k < d; ++k) sums[k] += h * bf16(problem.down_t.at(n, k));
      }
    }
    for (std::size_t k = 0; k < d; ++k) out.at(r, k) = static_cast<float>(sums[k]);
  }
  return out;
}

class TwellUpDownUnion : public ::testing::TestWithParam<UnionShape> {};

TEST_P(TwellUpDownUnion, ListsTheBlockUnionsAndComputesTheirUpDown) {
  TWELL_REQUIRE_CUDA_DEVICE();
  if (!union_consumer_runs_here()) GTEST_SKIP() << "the union consumer needs sm_90a code on a 9.0 device";
  const UnionShape shape = GetParam();
  const bool unbounded = shape.compression == kTwellUnbounded;
  ControlledFfnOptions options;
  options.tokens = static_cast<std::size_t>(shape.rows);
  options.hidden = static_cast<std::size_t>(shape.hidden);
  options.intermediate = static_cast<std::size_t>(shape.neurons);
  options.density = shape.density;
  options.heavy_row_fraction = 0.05;  // these overflow C = 8 and C = 4: flagged and skipped
  options.heavy_row_density = 0.4;
  options.seed = 41 + static_cast<std::uint64_t>(shape.rows);
  const ControlledFfn problem = make_controlled_ffn(options);
  const DeviceFfn device_ffn(problem);
  const auto x = upload_bf16(problem.x);
  const int padded = cuda::twell_padded_neurons(shape.neurons);

  // The packed rows: the portable gate's (flags and all), or the unbounded layout packed on the CPU.
  TwellPacked host_packed;
  std::vector<std::uint32_t> flags;
  cuda::DeviceBuffer<std::uint32_t> packed_words, flag_words;
  if (unbounded) {
    reference::FfnWeights weights;
    weights.gate = &problem.gate;
    weights.up = &problem.up;
    weights.down = &problem.down;
    weights.down_t = &problem.down_t;
    Matrix preactivation;
    reference::dense_ffn(problem.x, weights, Activation::Relu, reference::Precision::Fp32, &preactivation);
    host_packed = twell_pack(preactivation.data.data(), static_cast<std::uint32_t>(shape.rows),
                             static_cast<std::uint32_t>(shape.neurons), kTwellUnbounded);
    packed_words = cuda::DeviceBuffer<std::uint32_t>(host_packed.words.size());
    TWELL_CUDA_CHECK(cudaMemcpy(packed_words.data(), host_packed.words.data(), packed_words.bytes(),
                                cudaMemcpyHostToDevice));
  } else {
    PortablePacked packed = pack_with_portable_gate(x.data(), device_ffn, shape.rows, shape.compression);
    host_packed = download_twell_packed(packed, shape.rows, shape.neurons, shape.compression);
    flags = download_row_flags(packed, shape.rows);
    packed_words = std::move(packed.packed);
    flag_words = std::move(packed.state);  // [0..1] counters, then the flags
  }
  const int words_per_row = static_cast<int>(host_packed.words_per_row());
  cuda::DeviceBuffer<std::uint32_t> workspace(cuda::union_workspace_words(shape.rows, padded, words_per_row));
  const auto args_into = [&](__nv_bfloat16* out, bool gated) {
    cuda::UpDownArgs args;
    args.x = x.data();
    args.packed = packed_words.data();
    args.up = gated ? device_ffn.up.data() : nullptr;
    args.down_t = device_ffn.down_t.data();
    args.row_flags = unbounded ? nullptr : flag_words.data() + 2;
    args.out = out;
    args.rows = shape.rows;
    args.hidden = shape.hidden;
    args.padded_neurons = padded;
    args.compression = shape.compression;
    args.kernel = cuda::UpDownKernel::UnionSm90;
    args.union_workspace = workspace.data();
    args.union_workspace_words = workspace.size();
    return args;
  };

  // The union pass against core's reference.
  TWELL_CUDA_CHECK(cudaMemset(workspace.data(), 0xa5, workspace.bytes()));
  const cuda::UnionWorkspaceView view =
      cuda::union_workspace_view(workspace.data(), shape.rows, padded, words_per_row);
  cuda::launch_twell_union_pass(args_into(nullptr, true), view, nullptr);
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<TwellBlockUnion> expected = twell_block_unions(host_packed, flags);
  ASSERT_EQ(static_cast<int>(expected.size()), view.blocks);
  const auto sizes = download(view.union_sizes, expected.size());
  for (std::size_t block = 0; block < expected.size(); ++block) {
    SCOPED_TRACE("block " + std::to_string(block));
    const TwellBlockUnion& want = expected[block];
    ASSERT_EQ(sizes[block], want.neurons.size());
    const auto neurons = download(view.neurons + block * padded, want.neurons.size());
    EXPECT_EQ(neurons, want.neurons);
    const auto starts = download(view.column_start + block * (padded + 1), want.column_start.size());
    ASSERT_EQ(starts, want.column_start);
    auto entries = download(view.entries + block * view.entries_per_block, want.entries.size());
    for (std::size_t position = 0; position < want.neurons.size(); ++position)
      std::sort(entries.begin() + starts[position], entries.begin() + starts[position + 1],
                [](std::uint32_t a, std::uint32_t b) { return (a & 0xffffu) < (b & 0xffffu); });
    EXPECT_EQ(entries, want.entries);
  }

  for (bool gated : {true, false}) {
    SCOPED_TRACE(gated ? "gated" : "non-gated");
    auto out = poisoned_bf16(static_cast<std::size_t>(shape.rows) * shape.hidden);
    cuda::launch_twell_up_down(args_into(out.data(), gated), nullptr);
    TWELL_CUDA_CHECK(cudaDeviceSynchronize());
    const Matrix gpu = download_bf16(out.data(), shape.rows, shape.hidden);
    const Matrix want = reference_up_down(problem, host_packed, flags, gated);
    Matrix gpu_kept = gpu, want_kept = want;
    for (int r = 0; r < shape.rows; ++r) {
      if (flags.empty() || flags[r] == 0) continue;
      // A flagged row is left for the dense recomputation: not one element written.
      const auto bits = download(out.data() + static_cast<std::size_t>(r) * shape.hidden, shape.hidden);
      for (const __nv_bfloat16 value : bits)
        ASSERT_EQ(__bfloat16_as_ushort(value), 0xffffu) << "flagged row " << r << " was written";
      std::fill_n(gpu_kept.data.begin() + static_cast<std::size_t>(r) * shape.hidden, shape.hidden, 0.0f);
    }
    const ErrorMetrics error = compare_outputs(want_kept, gpu_kept);
    // h and u are rounded to bf16 once each, the output once: about 3 x 2^-9 relative at worst.
    EXPECT_LE(error.rel_frobenius, 6e-3);
    EXPECT_GE(error.cosine, 0.9999);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TwellUpDownUnion,
                         ::testing::Values(UnionShape{8, 300, 256, 2560, 0.04},
                                           UnionShape{4, 77, 512, 1000, 0.05},
                                           UnionShape{2, 129, 256, 768, 0.05},
                                           UnionShape{8, 1, 256, 768, 0.05},
                                           UnionShape{8, 260, 2048, 5632, 0.01},
                                           UnionShape{kTwellUnbounded, 300, 2048, 5632, 0.02}),
                         shape_name);

// FfnRunner takes the union consumer on request: the FFN within TWELL_SPEC §6's tolerances of the fp32
// FFN behind every gate this device runs; highest precision is refused, not silently downgraded.
TEST(TwellUpDownUnion, RunsInTheFfnOnRequestInDefaultPrecisionOnly) {
  TWELL_REQUIRE_CUDA_DEVICE();
  if (!union_consumer_runs_here()) GTEST_SKIP() << "the union consumer needs sm_90a code on a 9.0 device";
  ControlledFfnOptions options;
  options.tokens = 333;
  options.hidden = 512;
  options.intermediate = 1500;
  options.density = 0.03;
  options.heavy_row_fraction = 0.03;
  options.heavy_row_density = 0.35;
  options.seed = 43;
  const ControlledFfn problem = make_controlled_ffn(options);
  reference::FfnWeights weights;
  weights.gate = &problem.gate;
  weights.up = &problem.up;
  weights.down = &problem.down;
  weights.down_t = &problem.down_t;
  const Matrix fp32 = reference::dense_ffn(problem.x, weights, Activation::Relu, reference::Precision::Fp32);
  const DeviceFfn device_ffn(problem);
  const auto x = upload_bf16(problem.x);
  cuda::Stream stream;
  cuda::FfnRunner runner(stream.get());
  for (const cuda::GateKernel gate :
       {cuda::GateKernel::Portable, cuda::GateKernel::Sm90, cuda::GateKernel::CublasPack}) {
    for (const cuda::OverflowRoute route : {cuda::OverflowRoute::Dense, cuda::OverflowRoute::Unbounded}) {
      if (route == cuda::OverflowRoute::Unbounded && gate != cuda::GateKernel::CublasPack) continue;
      SCOPED_TRACE(std::string("gate ") + cuda::to_string(gate) + ", overflow " + cuda::to_string(route));
      runner.set_twell_kernels({gate, cuda::UpDownKernel::UnionSm90, route});
      for (const std::uint32_t compression : {8u, 2u}) {
        auto out = poisoned_bf16(options.tokens * options.hidden);
        FfnOptions ffn;
        ffn.compression = compression;
        runner.twell(device_ffn.weights(), ffn, x.data(), static_cast<int>(options.tokens), out.data(),
                     nullptr, TraceTag{});
        EXPECT_EQ(runner.last_twell_kernels().up_down, cuda::UpDownKernel::UnionSm90);
        const Matrix gpu = download_bf16(out.data(), options.tokens, options.hidden);
        const ErrorMetrics error = compare_outputs(fp32, gpu);
        EXPECT_LE(error.rel_frobenius, 2e-2) << "C=" << compression;
        EXPECT_GE(error.cosine, 0.999) << "C=" << compression;
      }
      auto out = poisoned_bf16(options.tokens * options.hidden);
      FfnOptions highest;
      highest.highest_precision = true;
      EXPECT_THROW(runner.twell(device_ffn.weights(), highest, x.data(), static_cast<int>(options.tokens),
                                out.data(), nullptr, TraceTag{}),
                   Error);
    }
  }
}

}  // namespace
}  // namespace twell::test
