// SPDX-License-Identifier: GPL-3.0-or-later
// What the measurements of resources/benchmarks/ decide per GPU model: the per-layer choice between
// the dense and the TwELL FFN from the break-even densities bench_ffn measured (a conservative
// default where nothing was measured), and the cluster size of the sm_90a gate kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/ffn.hpp"

namespace twell::cuda {
namespace {

// One measured point: the density at which TwELL (Auto kernels) and dense took the same time,
// interpolated linearly between the two bench_ffn densities around the crossing.
struct BreakEvenPoint {
  const char* gpu_name;  // cudaDeviceProp::name, exactly
  int major, minor;
  int hidden, intermediate;
  std::uint32_t compression;
  bool gated;
  int tokens;
  double density;
  const char* source;  // the benchmark record it comes from
};

// From the H200 runs of bench_ffn with the current default kernels (sm90/per_token_cta, what Auto
// runs): the lowest crossing measured, rounded down to 0.01 %, so the dispatch never picks TwELL
// where a run found it slower. M 131072: 1.062 and 1.055 % (h200-gate-deferred-packing-2026-12-04.json,
// runs 1 and 2) and 1.058 % (h200-ffn-2026-12-04.json); M 16384: 1.090 % (one run,
// h200-ffn-2026-12-03-interleaved.json, with the gate before its two later speed-ups, which can only
// have moved the crossing up). The 2026-12-02 figures (0.72 / 0.81 %) predate the deferred packing.
// H100 80GB HBM3: M 131072: 1.069 and 1.118 % (h100-ffn-token-block-2026-12-05.json, the Auto
// kernels of its first run, and h100-record-2026-12-05.json); M 16384: 1.050 % (h100-record-2026-12-05.json).
// Those ran the gate at cluster size 1. With the pairs the runner now uses there, one run crossed at
// 1.146 and 1.136 % (h100-gate-cluster-pairs-2026-12-05.json); the table keeps the lower figures
// until a second run agrees.
constexpr BreakEvenPoint kMeasured[] = {
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 16384, 0.0108, "bench_ffn, H200, 2026-12-03"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 131072, 0.0105, "bench_ffn, H200, 2026-12-04"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 16384, 0.0105, "bench_ffn, H100, 2026-12-05"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 131072, 0.0106, "bench_ffn, H100, 2026-12-05"},
};

// GPU models on which the gate kernel runs faster with the weight tile multicast to CTA pairs
// (bench_gate_sm90, gate / cuBLAS at D 2048, N 5632, interleaved). H100 80GB HBM3, 2026-12-05
// (h100-record-2026-12-05.json): cluster 2 against 1 at 0.5 / 2 / 5 %: 0.971 / 1.022 / 1.073 against
// 1.090 / 1.108 / 1.104 at M 131072, and 0.980 / 1.017 / 1.078 against 1.058 / 1.080 / 1.126 at
// M 16384. Not the H200: there the two were level at M 131072 (cluster 2 0.3-1 % behind) and
// cluster 2 1-3 % ahead at M 16384 (h200-gate-lane-placing-consumer-2026-12-05.json).
constexpr const char* kGateClusterPairGpus[] = {"NVIDIA H100 80GB HBM3"};

}  // namespace

FfnBreakEven twell_break_even(const FfnShape& shape, int device) {
  cudaDeviceProp properties{};
  TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  const BreakEvenPoint* nearest = nullptr;
  double nearest_distance = 0;
  for (const BreakEvenPoint& point : kMeasured) {
    if (std::string(properties.name) != point.gpu_name || properties.major != point.major ||
        properties.minor != point.minor || shape.hidden != point.hidden ||
        shape.intermediate != point.intermediate || shape.compression != point.compression ||
        shape.gated != point.gated)
      continue;
    // Token counts compare on a log scale: 4096 is as far from 16384 as 16384 from 65536.
    const double distance = std::fabs(std::log2(std::max(shape.tokens, 1)) - std::log2(point.tokens));
    if (nearest == nullptr || distance < nearest_distance) {
      nearest = &point;
      nearest_distance = distance;
    }
  }
  if (nearest == nullptr) return conservative_break_even("no measurement for this GPU and shape");
  return {nearest->density, true,
          std::string(nearest->gpu_name) + ", D " + std::to_string(nearest->hidden) + ", N " +
              std::to_string(nearest->intermediate) + ", C " + std::to_string(nearest->compression) + ", M " +
              std::to_string(nearest->tokens) + " (" + nearest->source + ")"};
}

FfnPath choose_ffn_path(double measured_density, const FfnShape& shape, int device) {
  return twell::choose_ffn_path(measured_density, twell_break_even(shape, device));
}

int sm90_gate_cluster_size_for(const std::string& gpu_name) {
  for (const char* name : kGateClusterPairGpus)
    if (gpu_name == name) return 2;
  return 1;
}

int sm90_gate_cluster_size(int device) {
  static std::mutex mutex;
  static std::vector<int> sizes;  // per device; 0 not yet read
  const std::lock_guard<std::mutex> lock(mutex);
  if (device < 0)
    throw Error(Error::Kind::InvalidInput, "sm90_gate_cluster_size: no device " + std::to_string(device));
  if (static_cast<int>(sizes.size()) <= device) sizes.resize(device + 1, 0);
  if (sizes[device] == 0) {
    cudaDeviceProp properties{};
    TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    sizes[device] = sm90_gate_cluster_size_for(properties.name);
  }
  return sizes[device];
}

}  // namespace twell::cuda
