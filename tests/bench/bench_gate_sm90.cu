// SPDX-License-Identifier: GPL-3.0-or-later
// Benchmark: the Hopper TwELL gate GEMM + pack against the cuBLAS bf16 GEMM of the same shape
// (x [M, K] times Wg^T, Wg [N, K]), ratios measured in one run. Medians of CUDA-event timings,
// L2 flushed before every repetition. Usage: bench_gate_sm90 [M ...] (default 16384 131072).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "twell/kernels/twell_gate_pack_sm90.hpp"
#include "twell/numeric.hpp"
#include "twell/version.hpp"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "bench_gate_sm90: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(6);
  }
}
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench_gate_sm90: %s: cuBLAS status %d\n", what, static_cast<int>(status));
    std::exit(6);
  }
}

__global__ void fill_bf16(__nv_bfloat16* out, std::size_t count, std::uint64_t seed, float scale, int hidden,
                          float channel0) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u1 = ((z >> 40) + 1) * (1.0f / 16777217.0f);
    const float u2 = ((z >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
    float value = scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (i % hidden == 0) value = channel0;
    out[i] = __float2bfloat16_rn(value);
  }
}

float median(std::vector<float> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> token_counts = {16384, 131072};
  CLI::App app{"The sm_90a TwELL gate GEMM + pack against cuBLAS's GEMM of the same shape"};
  app.add_option("token_counts", token_counts, "token counts (M)")->check(CLI::Range(1, 1 << 22));
  CLI11_PARSE(app, argc, argv);
  const int hidden = 2048, neurons = 5632, reps = 20, warmup = 5;
  // Gate column-0 weights (bias) chosen for ~0.5 % and ~5 % density with x[:,0] = 1 (normal(0,1) gate).
  const std::vector<std::pair<const char*, float>> densities = {{"0.5%", -2.58f}, {"5%", -1.64f}};

  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  int driver = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  cublasHandle_t handle;
  check(cublasCreate(&handle), "cublasCreate");
  const std::size_t flush_bytes = 2 * static_cast<std::size_t>(properties.l2CacheSize);
  void* flush = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "cudaMalloc(flush)");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");

  std::printf("{\"benchmark\":\"gate_sm90\",\"gpu\":\"%s\",\"driver\":%d,\"commit\":\"%s\",\"results\":[\n",
              properties.name, driver, twell::git_commit());
  bool first = true;
  for (const int tokens : token_counts) {
    __nv_bfloat16 *x, *w, *gate;
    std::uint32_t *packed, *overflow;
    check(cudaMalloc(&x, static_cast<std::size_t>(tokens) * hidden * 2), "cudaMalloc(x)");
    check(cudaMalloc(&w, static_cast<std::size_t>(neurons) * hidden * 2), "cudaMalloc(w)");
    check(cudaMalloc(&gate, static_cast<std::size_t>(tokens) * neurons * 2), "cudaMalloc(gate)");
    check(cudaMalloc(&packed, static_cast<std::size_t>(tokens) * neurons / 8 * 4 * 4), "cudaMalloc(packed)");
    check(cudaMalloc(&overflow, static_cast<std::size_t>(tokens) * 4), "cudaMalloc(overflow)");
    fill_bf16<<<1024, 256>>>(x, static_cast<std::size_t>(tokens) * hidden, 1, 1.0f, hidden, 1.0f);
    for (const auto& [label, bias] : densities) {
      fill_bf16<<<1024, 256>>>(w, static_cast<std::size_t>(neurons) * hidden, 2, 1.0f / std::sqrt(2047.0f),
                               hidden, bias);
      check(cudaDeviceSynchronize(), "fill");
      const float alpha = 1.0f, beta = 0.0f;
      auto cublas_gemm = [&] {
        // Column-major view: gate^T [N, M] = Wg [N, K] (as K x N col-major, transposed) * x^T.
        check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, neurons, tokens, hidden, &alpha, w, CUDA_R_16BF,
                           hidden, x, CUDA_R_16BF, hidden, &beta, gate, CUDA_R_16BF, neurons,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
      };
      twell::cuda::GatePackSm90Params params;
      params.x = x;
      params.weight = w;
      params.packed = packed;
      params.row_overflow = overflow;
      params.tokens = tokens;
      params.hidden = hidden;
      params.neurons = neurons;
      params.compression = 8;
      auto twell_gate = [&] {
        check(cudaMemsetAsync(overflow, 0, static_cast<std::size_t>(tokens) * 4), "memset");
        twell::cuda::gate_pack_sm90(params, nullptr);
      };
      auto time = [&](auto&& work) {
        std::vector<float> samples;
        for (int r = 0; r < warmup + reps; ++r) {
          check(cudaMemsetAsync(flush, r & 0xFF, flush_bytes), "flush L2");
          check(cudaEventRecord(start), "record");
          work();
          check(cudaEventRecord(stop), "record");
          check(cudaEventSynchronize(stop), "sync");
          float ms = 0;
          check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
          if (r >= warmup) samples.push_back(ms);
        }
        return median(samples);
      };
      const float cublas_ms = time(cublas_gemm);
      params.cluster_size = 1;
      const auto plan1 = twell::cuda::gate_pack_sm90_plan(params);
      const float twell1_ms = time(twell_gate);
      params.cluster_size = 2;
      const auto plan2 = twell::cuda::gate_pack_sm90_plan(params);
      const float twell2_ms = time(twell_gate);
      // Achieved density, from the packed counts.
      std::vector<std::uint32_t> host(static_cast<std::size_t>(tokens) * neurons / 8);
      check(cudaMemcpy(host.data(), packed, host.size() * 4, cudaMemcpyDeviceToHost), "copy packed");
      double nnz = 0;
      for (std::size_t i = 0; i < host.size(); i += 32) nnz += host[i];
      const double flops = 2.0 * tokens * static_cast<double>(neurons) * hidden;
      std::printf(
          "%s{\"M\":%d,\"target_density\":\"%s\",\"density\":%.5f,\"cublas_gemm_ms\":%.4f,"
          "\"cublas_tflops\":%.1f,\"twell_gate_pack_ms\":%.4f,\"twell_tflops\":%.1f,\"ratio\":%.4f,"
          "\"ctas\":%d,\"twell_gate_pack_cluster2_ms\":%.4f,\"cluster2_ratio\":%.4f,\"cluster2_ctas\":%d}",
          first ? "" : ",\n", tokens, label, nnz / (static_cast<double>(tokens) * neurons), cublas_ms,
          flops / cublas_ms / 1e9, twell1_ms, flops / twell1_ms / 1e9, twell1_ms / cublas_ms, plan1.ctas,
          twell2_ms, twell2_ms / cublas_ms, plan2.ctas);
      first = false;
    }
    cudaFree(x);
    cudaFree(w);
    cudaFree(gate);
    cudaFree(packed);
    cudaFree(overflow);
  }
  std::printf("\n]}\n");
  return 0;
}
