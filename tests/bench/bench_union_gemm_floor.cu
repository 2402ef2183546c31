// SPDX-License-Identifier: GPL-3.0-or-later
// bench_union_gemm_floor: what the up/down stage would cost if a block of T tokens ran its up and down
// projections on the tensor cores over the union of the block's live neurons, wasting the products of
// neurons live in the block but not in a given token. With every neuron live at rate d per token, a
// block's union holds N (1 - (1 - d)^T) neurons; the block then needs one up and one down row per
// union neuron, instead of one per non-zero. The floor of such a design is measured here with cuBLAS
// batched GEMMs of exactly those shapes (one batch entry per block, each over its own window of
// weight rows, so that the blocks together read every row as the real unions would), against the
// dense GEMM of the same projection. No gating and no gather: an optimistic floor for a kernel that
// would gather the union's rows itself. L2 flushed before every repetition, CUDA events, medians.
// JSON to --output or stdout.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "benchmark_output.hpp"
#include "device_fill.cuh"
#include "flushed_median.cuh"
#include "test_support.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/l2_flush.hpp"
#include "twell/kernels/stream.hpp"
#include "twell/version.hpp"

namespace {

using Bf16 = __nv_bfloat16;
using twell::cuda::DeviceBuffer;

// A batched GEMM's array of per-block matrix pointers, on the device.
DeviceBuffer<void*> device_pointers(const std::vector<void*>& host) {
  DeviceBuffer<void*> buffer(host.size());
  TWELL_CUDA_CHECK(
      cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice));
  return buffer;
}

}  // namespace

int main(int argc, char** argv) try {
  int tokens = 131072, hidden = 2048, intermediate = 5632, warmup = 3, repetitions = 10;
  std::vector<double> densities_percent = {0.5, 1.0, 2.0};
  std::vector<int> block_tokens = {32, 64, 128};
  std::string output;
  CLI::App app{
      "The floor of an up/down stage on the tensor cores over each token block's union of live neurons"};
  app.add_option("--tokens", tokens, "tokens (M)")->check(CLI::Range(128, 1 << 20));
  app.add_option("--densities", densities_percent, "live fraction of neurons per token, percent")
      ->delimiter(',')
      ->check(CLI::Range(0.01, 50.0));
  app.add_option("--block-tokens", block_tokens, "tokens per block (T)")
      ->delimiter(',')
      ->check(CLI::Range(8, 1024));
  app.add_option("--hidden", hidden, "D")->check(CLI::Range(256, 8192));
  app.add_option("--intermediate", intermediate, "N")->check(CLI::Range(256, 32768));
  app.add_option("--warmup", warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--repetitions", repetitions)->check(CLI::PositiveNumber);
  app.add_option("--output", output, "JSON file (written atomically); stdout when absent");
  CLI11_PARSE(app, argc, argv);
  const std::string command = twell::test::command_line(argc, argv);

  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  const std::string driver_version = twell::test::nvidia_driver_version();

  DeviceBuffer<Bf16> x(static_cast<std::size_t>(tokens) * hidden),
      y(static_cast<std::size_t>(tokens) * hidden);
  DeviceBuffer<Bf16> up(static_cast<std::size_t>(intermediate) * hidden);
  DeviceBuffer<Bf16> down_t(static_cast<std::size_t>(intermediate) * hidden);
  DeviceBuffer<Bf16> activations(static_cast<std::size_t>(tokens) * intermediate);
  // Values only matter for the power they draw: Gaussian, as the FFN benchmarks' inputs.
  twell::test::fill_gaussian_bf16(x.data(), x.size(), 1, 1.0f, hidden, 1.0f);
  twell::test::fill_gaussian_bf16(up.data(), up.size(), 2, 0.02f, hidden, 0.02f);
  twell::test::fill_gaussian_bf16(down_t.data(), down_t.size(), 3, 0.02f, hidden, 0.02f);
  twell::test::fill_gaussian_bf16(activations.data(), activations.size(), 4, 0.5f, intermediate, 0.5f);
  TWELL_CUDA_CHECK_LAUNCH("fill_gaussian_bf16");
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());

  twell::cuda::Stream stream;
  twell::cuda::L2Flusher flusher;
  cublasHandle_t cublas = nullptr;
  TWELL_CUBLAS_CHECK(cublasCreate(&cublas));
  TWELL_CUBLAS_CHECK(cublasSetStream(cublas, stream.get()));
  const float one = 1.0f, zero = 0.0f;

  // up: U_b^T (n x T) = W_b (n x D) . X_b^T; down: Y_b^T (D x T) = Wd_b^T (D x n) . H_b^T (n x T),
  // column-major, as the gate's GEMM is called.
  const double dense_ms = twell::test::flushed_median_ms(flusher, stream.get(), warmup, repetitions, [&] {
    TWELL_CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, intermediate, tokens, hidden, &one,
                                    up.data(), CUDA_R_16BF, hidden, x.data(), CUDA_R_16BF, hidden, &zero,
                                    activations.data(), CUDA_R_16BF, intermediate, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
  });

  nlohmann::json results = nlohmann::json::array();
  std::cerr << "bench_union_gemm_floor on " << properties.name << ", M " << tokens << ", D " << hidden
            << ", N " << intermediate << "; dense GEMM of one projection " << dense_ms
            << " ms\n   dens%     T  union  nz/union   up ms  down ms  up+down ms  (up+down)/dense GEMM\n";
  for (const double percent : densities_percent) {
    for (const int block : block_tokens) {
      if (tokens % block != 0)
        throw std::runtime_error("--tokens must be a multiple of every --block-tokens");
      const double d = percent / 100.0;
      const double union_expected = intermediate * (1.0 - std::pow(1.0 - d, block));
      const int union_neurons =
          std::min(intermediate, static_cast<int>(std::ceil(union_expected / 64.0)) * 64);
      const int blocks = tokens / block;
      // The up GEMM's outputs are the down GEMM's inputs (one activation block per token block).
      std::vector<void*> x_blocks, up_windows, down_windows, activation_blocks, y_blocks;
      const int windows = intermediate - union_neurons + 1;
      for (int b = 0; b < blocks; ++b) {
        const std::size_t first_row = static_cast<std::size_t>((static_cast<long long>(b) * 2749) % windows);
        x_blocks.push_back(x.data() + static_cast<std::size_t>(b) * block * hidden);
        up_windows.push_back(up.data() + first_row * hidden);
        down_windows.push_back(down_t.data() + first_row * hidden);
        activation_blocks.push_back(activations.data() + static_cast<std::size_t>(b) * block * union_neurons);
        y_blocks.push_back(y.data() + static_cast<std::size_t>(b) * block * hidden);
      }
      auto x_ptrs = device_pointers(x_blocks), up_ptrs = device_pointers(up_windows),
           down_ptrs = device_pointers(down_windows), activation_ptrs = device_pointers(activation_blocks),
           y_ptrs = device_pointers(y_blocks);
      const double up_ms = twell::test::flushed_median_ms(flusher, stream.get(), warmup, repetitions, [&] {
        TWELL_CUBLAS_CHECK(cublasGemmBatchedEx(
            cublas, CUBLAS_OP_T, CUBLAS_OP_N, union_neurons, block, hidden, &one, up_ptrs.data(), CUDA_R_16BF,
            hidden, x_ptrs.data(), CUDA_R_16BF, hidden, &zero, activation_ptrs.data(), CUDA_R_16BF,
            union_neurons, blocks, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      });
      const double down_ms = twell::test::flushed_median_ms(flusher, stream.get(), warmup, repetitions, [&] {
        TWELL_CUBLAS_CHECK(cublasGemmBatchedEx(
            cublas, CUBLAS_OP_N, CUBLAS_OP_N, hidden, block, union_neurons, &one, down_ptrs.data(),
            CUDA_R_16BF, hidden, activation_ptrs.data(), CUDA_R_16BF, union_neurons, &zero, y_ptrs.data(),
            CUDA_R_16BF, hidden, blocks, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      });
      const double live_per_block = d * intermediate * block;
      results.push_back({{"density_percent", percent},
                         {"block_tokens", block},
                         {"union_neurons", union_neurons},
                         {"non_zeros_per_union_row", live_per_block / union_neurons},
                         {"up_ms", up_ms},
                         {"down_ms", down_ms},
                         {"up_plus_down_ms", up_ms + down_ms},
                         {"up_plus_down_over_dense_gemm", (up_ms + down_ms) / dense_ms}});
      char line[200];
      std::snprintf(line, sizeof line, "  %6.2f %5d %6d %9.2f %7.3f %8.3f %11.3f %21.3f\n", percent, block,
                    union_neurons, live_per_block / union_neurons, up_ms, down_ms, up_ms + down_ms,
                    (up_ms + down_ms) / dense_ms);
      std::cerr << line;
    }
  }
  TWELL_CUBLAS_CHECK(cublasDestroy(cublas));

  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const nlohmann::json document = {
      {"benchmark", "bench_union_gemm_floor"},
      {"date", date},
      {"gpu", properties.name},
      {"compute_capability", std::to_string(properties.major) + "." + std::to_string(properties.minor)},
      {"driver", driver_version},
      {"commit", twell::git_commit()},
      {"command", command},
      {"shape", {{"tokens", tokens}, {"hidden", hidden}, {"intermediate", intermediate}}},
      {"dense_gemm_ms", dense_ms},
      {"model",
       "union = N (1 - (1 - d)^T) rounded up to 64; one cuBLAS batched GEMM per projection, one batch entry "
       "per "
       "block of T tokens, each over its own window of union rows"},
      {"timing", twell::test::flushed_median_timing(warmup, repetitions, flusher)},
      {"results", results}};
  twell::test::write_benchmark_json(document, output);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "bench_union_gemm_floor: " << error.what() << "\n";
  return 1;
}
