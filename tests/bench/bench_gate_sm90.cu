// SPDX-License-Identifier: GPL-3.0-or-later
// Benchmark: the Hopper TwELL gate GEMM + pack against the cuBLAS bf16 GEMM of the same shape
// (x [M, K] times Wg^T, Wg [N, K]), ratios measured in one run: contenders interleaved within each
// repetition, the L2 flushed before every run, medians and medians of per-repetition ratios.
// Writes JSON (stdout, or --output FILE); progress to stderr.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "benchmark_output.hpp"
#include "controlled_density.hpp"
#include "device_fill.cuh"
#include "test_support.hpp"
#include "timing_order.hpp"
#include "twell/kernels/twell_gate_pack_sm90.hpp"
#include "twell/timing_aggregate.hpp"
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

// One thing timed and its per-repetition samples (ms).
struct Contender {
  std::string name;
  std::function<void()> run;
  int cluster_size = 0;  ///< the TwELL gate's; 0 for cuBLAS
  std::vector<double> samples_ms;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> token_counts = {16384, 131072};
  std::vector<double> densities_percent = {0.5, 2, 5};
  int repetitions = 30, warmup = 5;
  std::string output, order = "interleaved";
  CLI::App app{"The sm_90a TwELL gate GEMM + pack against cuBLAS's GEMM of the same shape"};
  app.add_option("--tokens", token_counts, "token counts (M)")->delimiter(',')->check(CLI::Range(1, 1 << 22));
  app.add_option("--densities", densities_percent, "gate densities, percent")
      ->delimiter(',')
      ->check(CLI::Range(0.01, 49.0));
  app.add_option("--repetitions", repetitions)->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--output", output, "JSON file (written atomically); stdout when absent");
  twell::test::add_timing_order_option(app, order);
  CLI11_PARSE(app, argc, argv);
  const std::string command = twell::test::command_line(argc, argv);
  const int hidden = 2048, neurons = 5632;

  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  cublasHandle_t handle;
  check(cublasCreate(&handle), "cublasCreate");
  const std::size_t flush_bytes = 2 * static_cast<std::size_t>(properties.l2CacheSize);
  void* flush = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "cudaMalloc(flush)");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));

  nlohmann::json results = nlohmann::json::array();
  for (const int tokens : token_counts) {
    __nv_bfloat16 *x, *w, *gate;
    std::uint32_t *packed, *overflow;
    check(cudaMalloc(&x, static_cast<std::size_t>(tokens) * hidden * 2), "cudaMalloc(x)");
    check(cudaMalloc(&w, static_cast<std::size_t>(neurons) * hidden * 2), "cudaMalloc(w)");
    check(cudaMalloc(&gate, static_cast<std::size_t>(tokens) * neurons * 2), "cudaMalloc(gate)");
    check(cudaMalloc(&packed, static_cast<std::size_t>(tokens) * neurons / 8 * 4 * 4), "cudaMalloc(packed)");
    check(cudaMalloc(&overflow, static_cast<std::size_t>(tokens) * 4), "cudaMalloc(overflow)");
    twell::test::fill_gaussian_bf16(x, static_cast<std::size_t>(tokens) * hidden, 1, 1.0f, hidden, 1.0f);
    for (const double percent : densities_percent) {
      // x[:, 0] = 1 and the other products sum to about N(0, 1), so a bias of Phi^-1(p) in the
      // weight's column 0 makes every neuron fire with probability p.
      const float bias = static_cast<float>(twell::test::normal_quantile(percent / 100.0));
      twell::test::fill_gaussian_bf16(w, static_cast<std::size_t>(neurons) * hidden, 2,
                                      1.0f / std::sqrt(2047.0f), hidden, bias);
      check(cudaDeviceSynchronize(), "fill");
      const float alpha = 1.0f, beta = 0.0f;
      twell::cuda::GatePackSm90Params params;
      params.x = x;
      params.weight = w;
      params.packed = packed;
      params.row_overflow = overflow;
      params.tokens = tokens;
      params.hidden = hidden;
      params.neurons = neurons;
      params.compression = 8;
      std::vector<Contender> contenders;
      contenders.push_back({"cublas_gemm", [&] {
                              // Column-major view: gate^T [N, M] = Wg [N, K] (K x N col-major, transposed) *
                              // x^T.
                              check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, neurons, tokens, hidden,
                                                 &alpha, w, CUDA_R_16BF, hidden, x, CUDA_R_16BF, hidden,
                                                 &beta, gate, CUDA_R_16BF, neurons, CUBLAS_COMPUTE_32F,
                                                 CUBLAS_GEMM_DEFAULT),
                                    "cublasGemmEx");
                            }});
      for (const int cluster_size : {1, 2})
        contenders.push_back({"twell_gate_pack_cluster" + std::to_string(cluster_size),
                              [&, cluster_size] {
                                check(cudaMemsetAsync(overflow, 0, static_cast<std::size_t>(tokens) * 4),
                                      "memset");
                                params.cluster_size = cluster_size;
                                twell::cuda::gate_pack_sm90(params, nullptr);
                              },
                              cluster_size});
      // Each run after an L2 flush, in the order --order names (timing_order.hpp).
      twell::test::run_in_order(order, warmup, repetitions, contenders.size(), [&](std::size_t c, bool keep) {
        check(cudaMemsetAsync(flush, 0, flush_bytes), "flush L2");
        check(cudaEventRecord(start), "record");
        contenders[c].run();
        check(cudaEventRecord(stop), "record");
        check(cudaEventSynchronize(stop), "sync");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
        if (keep) contenders[c].samples_ms.push_back(ms);
      });
      // Achieved density, from the packed counts (the last contender ran last).
      std::vector<std::uint32_t> host(static_cast<std::size_t>(tokens) * neurons / 8);
      check(cudaMemcpy(host.data(), packed, host.size() * 4, cudaMemcpyDeviceToHost), "copy packed");
      double nnz = 0;
      for (std::size_t i = 0; i < host.size(); i += 32) nnz += host[i];
      const double flops = 2.0 * tokens * static_cast<double>(neurons) * hidden;
      const Contender& cublas = contenders.front();
      nlohmann::json row = {{"M", tokens},
                            {"target_density_percent", percent},
                            {"density", nnz / (static_cast<double>(tokens) * neurons)}};
      const double cublas_ms = twell::timing::summarize(cublas.samples_ms).median_us;
      row["cublas_gemm_ms"] = cublas_ms;
      row["cublas_tflops"] = flops / cublas_ms / 1e9;
      for (std::size_t i = 1; i < contenders.size(); ++i) {
        const double ms = twell::timing::summarize(contenders[i].samples_ms).median_us;
        params.cluster_size = contenders[i].cluster_size;
        row[contenders[i].name] = {
            {"ms", ms},
            {"tflops", flops / ms / 1e9},
            {"ratio_of_medians", ms / cublas_ms},
            {"ratio_paired", twell::timing::median_of_ratios(contenders[i].samples_ms, cublas.samples_ms)},
            {"ctas", twell::cuda::gate_pack_sm90_plan(params).ctas}};
      }
      std::fprintf(stderr,
                   "%s, M %d, %.2f %% (measured %.3f %%): cuBLAS %.3f ms, gate+pack %.3f ms (x%.4f paired), "
                   "cluster 2 %.3f ms (x%.4f)\n",
                   order.c_str(), tokens, percent, 100 * row["density"].get<double>(), cublas_ms,
                   row["twell_gate_pack_cluster1"]["ms"].get<double>(),
                   row["twell_gate_pack_cluster1"]["ratio_paired"].get<double>(),
                   row["twell_gate_pack_cluster2"]["ms"].get<double>(),
                   row["twell_gate_pack_cluster2"]["ratio_paired"].get<double>());
      results.push_back(row);
    }
    cudaFree(x);
    cudaFree(w);
    cudaFree(gate);
    cudaFree(packed);
    cudaFree(overflow);
  }
  const std::string order_description =
      order == "interleaved"
          ? "interleaved: cuBLAS, gate+pack cluster 1, gate+pack cluster 2 in every repetition"
          : "blocked: every repetition of cuBLAS, then of cluster 1, then of cluster 2";
  const nlohmann::json document = {
      {"benchmark", "bench_gate_sm90"},
      {"date", date},
      {"gpu", properties.name},
      {"driver", twell::test::nvidia_driver_version()},
      {"commit", twell::git_commit()},
      {"command", command},
      {"shape", {{"hidden", hidden}, {"intermediate", neurons}, {"compression", 8}}},
      {"timing",
       {{"warmup", warmup},
        {"repetitions", repetitions},
        {"statistic", "median"},
        {"order", order_description},
        {"ratio_paired", "median over repetitions of gate+pack / cuBLAS, repetition i with repetition i"},
        {"l2_flush_bytes", flush_bytes}}},
      {"results", results}};
  twell::test::write_benchmark_json(document, output);
  return 0;
}
