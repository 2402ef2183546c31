// SPDX-License-Identifier: GPL-3.0-or-later
// The CUPTI tracer and its CUDA-event fallback on a known sequence: a cuBLAS GEMM and a custom
// kernel under two tags, repeated, plus copies and a memset. Checks that every kernel is
// captured and attributed, timestamps are ordered, durations agree with CUDA events within
// 10 %, and that a second CUPTI tracer is refused cleanly.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "twell/cupti/tracers.hpp"
#include "twell/timing_aggregate.hpp"

namespace {

using twell::KernelRecord;
using twell::Tracer;
using twell::TraceTag;

#define CHECK_CUDA(call) \
  ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())
#define CHECK_CUBLAS(call) ASSERT_EQ((call), CUBLAS_STATUS_SUCCESS) << #call

std::string no_device_reason() {
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorString(result);
  }
  return count == 0 ? "no CUDA device" : "";
}

/// Compute-bound work whose time scales with `iterations`; the store keeps it from being elided.
__global__ void spin_kernel(float* out, int n, int iterations) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float value = out[i];
  for (int k = 0; k < iterations; ++k) value = fmaf(value, 0.999f, 0.001f);
  out[i] = value;
}

constexpr int kGemmSize = 4096;  // 137 GFLOP of SGEMM: milliseconds, so launch gaps stay far below 10 %
constexpr int kSpinElements = 1 << 20;
constexpr int kSpinIterations = 16384;  // about 0.5 ms per launch on an H200
constexpr int kSpinLaunchesPerRegion = 2;
constexpr int kWarmups = 1;
constexpr int kRepetitions = 5;

TraceTag tag_for(const std::string& op, int repetition, bool warmup) {
  return TraceTag{"layer_ffn", 0, "dense", op, repetition, warmup};
}

/// Device buffers, a stream and a cuBLAS handle, all warmed up before any tracer exists so that
/// lazy loading happens outside the measurement.
class TracedWorkload : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = no_device_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    const std::size_t matrix = std::size_t{kGemmSize} * kGemmSize;
    CHECK_CUDA(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&m_a, matrix * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&m_b, matrix * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&m_c, matrix * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&m_spin, kSpinElements * sizeof(float)));
    CHECK_CUDA(cudaMallocHost(&m_host, kCopyBytes));
    CHECK_CUDA(cudaMemset(m_a, 0, matrix * sizeof(float)));
    CHECK_CUDA(cudaMemset(m_b, 0, matrix * sizeof(float)));
    CHECK_CUDA(cudaMemset(m_spin, 0, kSpinElements * sizeof(float)));
    CHECK_CUBLAS(cublasCreate(&m_cublas));
    CHECK_CUBLAS(cublasSetStream(m_cublas, m_stream));
    CHECK_CUDA(cudaEventCreate(&m_event_start));
    CHECK_CUDA(cudaEventCreate(&m_event_end));
    run_gemm();
    run_spin();
    CHECK_CUDA(cudaStreamSynchronize(m_stream));
  }

  void TearDown() override {
    if (m_cublas) cublasDestroy(m_cublas);
    if (m_event_start) cudaEventDestroy(m_event_start);
    if (m_event_end) cudaEventDestroy(m_event_end);
    cudaFree(m_a);
    cudaFree(m_b);
    cudaFree(m_c);
    cudaFree(m_spin);
    cudaFreeHost(m_host);
    if (m_stream) cudaStreamDestroy(m_stream);
  }

  /// The CUPTI tracer, or a skip when another tool owns CUPTI (the test is then run under
  /// Nsight or compute-sanitizer, where only the fallback can work).
  std::unique_ptr<Tracer> cupti_or_skip(std::string* skip_reason) {
    try {
      return twell::gpu_trace::make_cupti_tracer();
    } catch (const twell::gpu_trace::CuptiUnavailableError& error) {
      if (error.failure().cause == twell::CuptiUnavailable::Cause::AnotherSubscriber) {
        *skip_reason = error.what();
        return nullptr;
      }
      ADD_FAILURE() << error.what();
      return nullptr;
    }
  }

  void run_gemm() {
    const float one = 1.0f, zero = 0.0f;
    CHECK_CUBLAS(cublasSgemm(m_cublas, CUBLAS_OP_N, CUBLAS_OP_N, kGemmSize, kGemmSize, kGemmSize, &one, m_a,
                             kGemmSize, m_b, kGemmSize, &zero, m_c, kGemmSize));
  }

  void run_spin() {
    spin_kernel<<<kSpinElements / 256, 256, 0, m_stream>>>(m_spin, kSpinElements, kSpinIterations);
    CHECK_CUDA(cudaGetLastError());
  }

  /// Runs one tagged region on every tracer given (outermost first) and returns its CUDA-event
  /// time in microseconds, measured inside the innermost tag.
  double run_region(const std::vector<Tracer*>& tracers, const TraceTag& tag) {
    for (Tracer* tracer : tracers) tracer->push(tag);
    EXPECT_EQ(cudaEventRecord(m_event_start, m_stream), cudaSuccess);
    if (tag.op == "gemm") {
      run_gemm();
    } else {
      for (int i = 0; i < kSpinLaunchesPerRegion; ++i) run_spin();
    }
    EXPECT_EQ(cudaEventRecord(m_event_end, m_stream), cudaSuccess);
    for (auto tracer = tracers.rbegin(); tracer != tracers.rend(); ++tracer) (*tracer)->pop();
    EXPECT_EQ(cudaEventSynchronize(m_event_end), cudaSuccess);
    float ms = 0;
    EXPECT_EQ(cudaEventElapsedTime(&ms, m_event_start, m_event_end), cudaSuccess);
    return ms * 1000.0;
  }

  /// The known sequence: warm-ups then repetitions of (gemm, spin). Returns the median CUDA-event
  /// time per op over the timed repetitions.
  std::map<std::string, double> run_sequence(const std::vector<Tracer*>& tracers) {
    std::map<std::string, std::vector<double>> event_us;
    for (int i = 0; i < kWarmups + kRepetitions; ++i) {
      const bool warmup = i < kWarmups;
      const int repetition = warmup ? i : i - kWarmups;
      for (const char* op : {"gemm", "spin"}) {
        const double us = run_region(tracers, tag_for(op, repetition, warmup));
        if (!warmup) event_us[op].push_back(us);
      }
    }
    std::map<std::string, double> medians;
    for (auto& [op, samples] : event_us) medians[op] = twell::timing::summarize(samples).median_us;
    return medians;
  }

  static constexpr std::size_t kCopyBytes = std::size_t{8} << 20;
  cudaStream_t m_stream = nullptr;
  cublasHandle_t m_cublas = nullptr;
  cudaEvent_t m_event_start = nullptr, m_event_end = nullptr;
  float *m_a = nullptr, *m_b = nullptr, *m_c = nullptr, *m_spin = nullptr;
  void* m_host = nullptr;
};

bool same_region(const KernelRecord& record, const TraceTag& tag) {
  return record.attributed && record.tag == tag;
}

TEST_F(TracedWorkload, CuptiCapturesAndAttributesEveryKernel) {
  std::string skip;
  auto tracer = cupti_or_skip(&skip);
  if (!tracer) {
    if (!skip.empty()) GTEST_SKIP() << skip;
    return;
  }
  EXPECT_EQ(tracer->info().name, "cupti");
  EXPECT_TRUE(tracer->info().per_kernel);
  const auto event_medians = run_sequence({tracer.get()});
  const std::vector<KernelRecord> records = tracer->collect();

  std::vector<const KernelRecord*> kernels;
  for (const KernelRecord& record : records) {
    if (record.kind == "kernel") kernels.push_back(&record);
  }
  // Nothing ran outside a tag while the tracer lived, so every kernel must be attributed.
  for (const KernelRecord* kernel : kernels) EXPECT_TRUE(kernel->attributed) << kernel->name;

  for (int i = 0; i < kWarmups + kRepetitions; ++i) {
    const bool warmup = i < kWarmups;
    const int repetition = warmup ? i : i - kWarmups;
    const TraceTag gemm = tag_for("gemm", repetition, warmup);
    const TraceTag spin = tag_for("spin", repetition, warmup);
    const auto gemm_kernels = std::count_if(kernels.begin(), kernels.end(),
                                            [&](const KernelRecord* k) { return same_region(*k, gemm); });
    EXPECT_GE(gemm_kernels, 1) << "repetition " << repetition << (warmup ? " (warm-up)" : "");
    int spins = 0;
    for (const KernelRecord* kernel : kernels) {
      if (!same_region(*kernel, spin)) continue;
      ++spins;
      EXPECT_NE(kernel->name.find("spin_kernel"), std::string::npos) << kernel->name;  // demangled
      EXPECT_EQ(kernel->grid[0], kSpinElements / 256);
      EXPECT_EQ(kernel->block[0], 256);
      EXPECT_GT(kernel->registers_per_thread, 0);
      EXPECT_GT(kernel->correlation_id, 0u);
    }
    EXPECT_EQ(spins, kSpinLaunchesPerRegion) << "repetition " << repetition;
  }
  // The custom kernel must never be attributed to the GEMM's tag, nor cuBLAS's to the custom one.
  for (const KernelRecord* kernel : kernels) {
    if (kernel->tag.op == "gemm") EXPECT_EQ(kernel->name.find("spin_kernel"), std::string::npos);
  }

  // Ordered by start. Each region was waited for before the next began, so kernels of
  // consecutive regions cannot overlap (within a cuBLAS call they may, with programmatic
  // dependent launch).
  ASSERT_FALSE(records.empty());
  for (std::size_t i = 0; i < records.size(); ++i) {
    EXPECT_GE(records[i].end_ns, records[i].start_ns);
    if (i > 0) EXPECT_LE(records[i - 1].start_ns, records[i].start_ns);
  }
  for (std::size_t i = 1; i < kernels.size(); ++i) {
    if (!(kernels[i]->tag == kernels[i - 1]->tag)) EXPECT_LE(kernels[i - 1]->end_ns, kernels[i]->start_ns);
  }

  // CUPTI's per-kernel sums agree with CUDA events around the same regions.
  for (const char* op : {"gemm", "spin"}) {
    const auto cupti = twell::timing::busy_stat(records, {.op = op});
    EXPECT_EQ(cupti.count, static_cast<std::uint32_t>(kRepetitions)) << op;
    const double events = event_medians.at(op);
    EXPECT_GT(cupti.median_us, 50.0) << op << ": the workload is too small to compare";
    EXPECT_NEAR(cupti.median_us, events, 0.10 * events)
        << op << ": CUPTI " << cupti.median_us << " us, events " << events << " us";
  }
}

TEST_F(TracedWorkload, CuptiRecordsCopiesAndMemsets) {
  std::string skip;
  auto tracer = cupti_or_skip(&skip);
  if (!tracer) {
    if (!skip.empty()) GTEST_SKIP() << skip;
    return;
  }
  const TraceTag copies{"capture", 0, "", "copies", 0, false};
  tracer->push(copies);
  CHECK_CUDA(cudaMemsetAsync(m_c, 0, kCopyBytes, m_stream));
  CHECK_CUDA(cudaMemcpyAsync(m_host, m_c, kCopyBytes, cudaMemcpyDeviceToHost, m_stream));
  CHECK_CUDA(cudaMemcpyAsync(m_c, m_host, kCopyBytes, cudaMemcpyHostToDevice, m_stream));
  tracer->pop();
  const auto records = tracer->collect();
  std::map<std::string, int> seen;
  for (const KernelRecord& record : records) {
    if (!same_region(record, copies)) continue;
    ++seen[record.name];
    EXPECT_EQ(record.bytes, kCopyBytes) << record.name;
    EXPECT_GT(record.end_ns, record.start_ns) << record.name;
  }
  EXPECT_EQ(seen["memset"], 1);
  EXPECT_EQ(seen["memcpy DtoH"], 1);
  EXPECT_EQ(seen["memcpy HtoD"], 1);
}

TEST_F(TracedWorkload, CudaEventFallbackTimesEachRegionLikeCupti) {
  auto events = twell::gpu_trace::make_cuda_event_tracer(m_stream, "forced by the test");
  EXPECT_EQ(events->info().name, "cuda-events");
  EXPECT_FALSE(events->info().per_kernel);
  EXPECT_EQ(events->info().fallback_reason, "forced by the test");

  std::string skip;
  auto cupti = cupti_or_skip(&skip);  // optional: the cross-check needs it, the fallback does not
  std::vector<Tracer*> tracers;
  if (cupti) tracers.push_back(cupti.get());
  tracers.push_back(events.get());
  const auto event_medians = run_sequence(tracers);

  const auto regions = events->collect();
  ASSERT_EQ(regions.size(), static_cast<std::size_t>(2 * (kWarmups + kRepetitions)));
  for (std::size_t i = 0; i < regions.size(); ++i) {
    EXPECT_EQ(regions[i].kind, "region");
    EXPECT_EQ(regions[i].name, regions[i].tag.op);
    EXPECT_TRUE(regions[i].attributed);
    if (i > 0) EXPECT_LE(regions[i - 1].end_ns, regions[i].start_ns);
  }
  const auto cupti_records = cupti ? cupti->collect() : std::vector<KernelRecord>{};
  for (const char* op : {"gemm", "spin"}) {
    const auto region = twell::timing::busy_stat(regions, {.op = op});
    EXPECT_EQ(region.count, static_cast<std::uint32_t>(kRepetitions));
    EXPECT_NEAR(region.median_us, event_medians.at(op), 0.10 * event_medians.at(op)) << op;
    if (cupti) {
      const auto kernels = twell::timing::busy_stat(cupti_records, {.op = op});
      EXPECT_NEAR(kernels.median_us, region.median_us, 0.10 * region.median_us) << op;
    }
  }
}

TEST_F(TracedWorkload, SecondCuptiTracerIsRefusedAndBestFallsBack) {
  std::string skip;
  auto first = cupti_or_skip(&skip);
  if (!first) {
    if (!skip.empty()) GTEST_SKIP() << skip;
    return;
  }
  try {
    auto second = twell::gpu_trace::make_cupti_tracer();
    ADD_FAILURE() << "a second CUPTI tracer was created while one is alive";
  } catch (const twell::gpu_trace::CuptiUnavailableError& error) {
    EXPECT_EQ(error.failure().cause, twell::CuptiUnavailable::Cause::AlreadyInUse);
    EXPECT_EQ(error.kind(), twell::Error::Kind::Device);
  }
  auto best = twell::gpu_trace::make_best_gpu_tracer(m_stream);
  EXPECT_EQ(best->info().name, "cuda-events");
  EXPECT_NE(best->info().fallback_reason.find("already has a live CUPTI tracer"), std::string::npos)
      << best->info().fallback_reason;

  // Once the first is gone, CUPTI can be claimed again and still sees kernels.
  first.reset();
  auto again = twell::gpu_trace::make_best_gpu_tracer(m_stream);
  ASSERT_EQ(again->info().name, "cupti") << again->info().fallback_reason;
  const TraceTag spin = tag_for("spin", 0, false);
  again->push(spin);
  run_spin();
  again->pop();
  const auto records = again->collect();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(same_region(records[0], spin));
}

}  // namespace
