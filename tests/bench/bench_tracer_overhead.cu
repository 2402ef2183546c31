// SPDX-License-Identifier: GPL-3.0-or-later
// What tracing costs: one FFN-shaped workload (three bf16 cuBLAS GEMMs and a custom elementwise
// kernel, D 2048 / N 5632 / M 16384 by default) timed with CUDA events with CUPTI tracing off,
// on (tags, NVTX ranges and CUPTI activity records, as a profiling run has them), and off again,
// in one process. Prints a summary on stderr and one JSON object on stdout.
//
//   bench_tracer_overhead [--tokens M] [--hidden D] [--intermediate N] [--warmup W] [--reps R]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "twell/cupti/tracers.hpp"
#include "twell/error.hpp"
#include "twell/timing_aggregate.hpp"

namespace {

void check(cudaError_t result, const char* call) {
  if (result != cudaSuccess) {
    throw twell::Error(twell::Error::Kind::Device,
                       std::string(call) + " failed: " + cudaGetErrorString(result));
  }
}

void check(cublasStatus_t result, const char* call) {
  if (result != CUBLAS_STATUS_SUCCESS) {
    throw twell::Error(twell::Error::Kind::Device, std::string(call) + " failed: cuBLAS status " +
                                                       std::to_string(static_cast<int>(result)));
  }
}

#define BENCH_CHECK(call) check((call), #call)

struct Options {
  int tokens = 16384, hidden = 2048, intermediate = 5632;
  int warmup = 5, repetitions = 30;
};

void add_options(CLI::App& app, Options& options) {
  app.add_option("--tokens", options.tokens)->check(CLI::PositiveNumber);
  app.add_option("--hidden", options.hidden)->check(CLI::PositiveNumber);
  app.add_option("--intermediate", options.intermediate)->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup)->check(CLI::PositiveNumber);
  app.add_option("--reps", options.repetitions, "timed repetitions")->check(CLI::PositiveNumber);
}

/// Deterministic values in [-scale, scale]: timing only, but zeros would flatter the tensor cores.
__global__ void fill_kernel(__nv_bfloat16* data, std::size_t count, unsigned seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    data[i] = __float2bfloat16(scale * (static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f));
  }
}

/// h = relu(gate) * up, the gated FFN's elementwise step.
__global__ void relu_gate_kernel(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* h,
                                 std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float g = __bfloat162float(gate[i]);
    h[i] = __float2bfloat16(g > 0.0f ? g * __bfloat162float(up[i]) : 0.0f);
  }
}

class FfnWorkload {
 public:
  FfnWorkload(const Options& o, int multiprocessors)
      : m(o.tokens), d(o.hidden), n(o.intermediate), elementwise_blocks(8 * multiprocessors) {
    BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BENCH_CHECK(cublasCreate(&cublas));
    BENCH_CHECK(cublasSetStream(cublas, stream));
    x = allocate(std::size_t(m) * d, 1, 1.0f);
    w_gate = allocate(std::size_t(n) * d, 2, 0.02f);
    w_up = allocate(std::size_t(n) * d, 3, 0.02f);
    w_down = allocate(std::size_t(d) * n, 4, 0.02f);
    gate = allocate(std::size_t(n) * m, 0, 0.0f);
    up = allocate(std::size_t(n) * m, 0, 0.0f);
    h = allocate(std::size_t(n) * m, 0, 0.0f);
    out = allocate(std::size_t(d) * m, 0, 0.0f);
    BENCH_CHECK(cudaStreamSynchronize(stream));
  }
  ~FfnWorkload() {
    for (void* buffer : buffers) cudaFree(buffer);
    cublasDestroy(cublas);
    cudaStreamDestroy(stream);
  }

  /// One FFN: gate and up projections, the gated ReLU, the down projection; each op under a tag
  /// when a tracer is given, as a profiling session tags them.
  void run(twell::Tracer* tracer, int repetition, bool warmup) {
    auto tag = [&](const char* op) {
      return twell::TraceTag{"layer_ffn", 0, "dense", op, repetition, warmup};
    };
    {
      twell::ScopedTrace scope(tracer, tag("gate"));
      gemm(n, m, d, w_gate, x, gate);
    }
    {
      twell::ScopedTrace scope(tracer, tag("up"));
      gemm(n, m, d, w_up, x, up);
    }
    {
      twell::ScopedTrace scope(tracer, tag("relu_gate"));
      const std::size_t count = std::size_t(n) * m;
      relu_gate_kernel<<<elementwise_blocks, 256, 0, stream>>>(gate, up, h, count);
      BENCH_CHECK(cudaGetLastError());
    }
    {
      twell::ScopedTrace scope(tracer, tag("down"));
      gemm(d, m, n, w_down, h, out);
    }
  }

  double flops() const { return 2.0 * m * d * n * 3.0; }

  cudaStream_t stream = nullptr;

 private:
  __nv_bfloat16* allocate(std::size_t count, unsigned seed, float scale) {
    void* buffer = nullptr;
    BENCH_CHECK(cudaMalloc(&buffer, count * sizeof(__nv_bfloat16)));
    buffers.push_back(buffer);
    auto* typed = static_cast<__nv_bfloat16*>(buffer);
    if (scale == 0.0f) {
      BENCH_CHECK(cudaMemsetAsync(buffer, 0, count * sizeof(__nv_bfloat16), stream));
    } else {
      fill_kernel<<<1024, 256, 0, stream>>>(typed, count, seed, scale);
      BENCH_CHECK(cudaGetLastError());
    }
    return typed;
  }

  /// Column-major C[rows x cols] = A[rows x inner] * B[inner x cols], fp32 accumulation.
  void gemm(int rows, int cols, int inner, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c) {
    const float one = 1.0f, zero = 0.0f;
    BENCH_CHECK(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, inner, &one, a, CUDA_R_16BF, rows,
                             b, CUDA_R_16BF, inner, &zero, c, CUDA_R_16BF, rows, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
  }

  int m, d, n;
  int elementwise_blocks;
  cublasHandle_t cublas = nullptr;
  std::vector<void*> buffers;
  __nv_bfloat16 *x = nullptr, *w_gate = nullptr, *w_up = nullptr, *w_down = nullptr;
  __nv_bfloat16 *gate = nullptr, *up = nullptr, *h = nullptr, *out = nullptr;
};

/// Median FFN time (µs) by CUDA events over `repetitions`, after `warmup` untimed runs.
twell::TimingStat time_ffn(FfnWorkload& ffn, twell::Tracer* tracer, const Options& options) {
  cudaEvent_t start = nullptr, end = nullptr;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&end));
  for (int i = 0; i < options.warmup; ++i) ffn.run(tracer, i, true);
  std::vector<double> samples;
  for (int i = 0; i < options.repetitions; ++i) {
    BENCH_CHECK(cudaEventRecord(start, ffn.stream));
    ffn.run(tracer, i, false);
    BENCH_CHECK(cudaEventRecord(end, ffn.stream));
    BENCH_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, end));
    samples.push_back(ms * 1000.0);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return twell::timing::summarize(samples);
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_stat(const twell::TimingStat& stat) {
  char text[160];
  std::snprintf(text, sizeof text, "{\"median_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"count\": %u}",
                stat.median_us, stat.min_us, stat.max_us, stat.count);
  return text;
}

int run(const Options& options) {
  cudaDeviceProp properties{};
  BENCH_CHECK(cudaGetDeviceProperties(&properties, 0));
  FfnWorkload ffn(options, properties.multiProcessorCount);

  const twell::TimingStat off_before = time_ffn(ffn, nullptr, options);
  twell::TimingStat on;
  twell::TimingStat cupti_busy;
  std::size_t records = 0;
  {
    auto tracer = twell::gpu_trace::make_cupti_tracer();
    on = time_ffn(ffn, tracer.get(), options);
    const auto traced = tracer->collect();
    records = traced.size();
    cupti_busy = twell::timing::busy_stat(traced, {.phase = "layer_ffn"});
  }
  const twell::TimingStat off_after = time_ffn(ffn, nullptr, options);

  const double off = (off_before.median_us + off_after.median_us) / 2.0;
  const double overhead_percent = (on.median_us / off - 1.0) * 100.0;
  const double tflops = ffn.flops() / (off * 1e-6) / 1e12;

  std::fprintf(stderr, "device: %s\n", properties.name);
  std::fprintf(stderr, "FFN M %d D %d N %d, %d warm-up + %d timed repetitions, %.0f TFLOP/s untraced\n",
               options.tokens, options.hidden, options.intermediate, options.warmup, options.repetitions,
               tflops);
  std::fprintf(stderr, "tracing off (before): median %.1f us\n", off_before.median_us);
  std::fprintf(stderr, "tracing on (CUPTI):   median %.1f us  (CUPTI kernel sum %.1f us, %zu records)\n",
               on.median_us, cupti_busy.median_us, records);
  std::fprintf(stderr, "tracing off (after):  median %.1f us\n", off_after.median_us);
  std::fprintf(stderr, "overhead: %+.2f %%\n", overhead_percent);

  std::printf(
      "{\"benchmark\": \"tracer_overhead\", \"device\": %s, \"tokens\": %d, \"hidden\": %d, "
      "\"intermediate\": %d, "
      "\"warmup\": %d, \"repetitions\": %d, \"off_before\": %s, \"on\": %s, \"off_after\": %s, "
      "\"cupti_kernel_sum\": %s, \"records\": %zu, \"untraced_tflops\": %.1f, \"overhead_percent\": %.3f}\n",
      json_string(properties.name).c_str(), options.tokens, options.hidden, options.intermediate,
      options.warmup, options.repetitions, json_stat(off_before).c_str(), json_stat(on).c_str(),
      json_stat(off_after).c_str(), json_stat(cupti_busy).c_str(), records, tflops, overhead_percent);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"What CUPTI tracing adds to the time of one FFN"};
  add_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const twell::Error& error) {
    std::fprintf(stderr, "bench_tracer_overhead: %s\n", error.what());
    return twell::exit_code_for(error.kind());
  }
}
