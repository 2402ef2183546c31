// SPDX-License-Identifier: GPL-3.0-or-later
// Per-layer choice between the dense and the TwELL FFN from break-even densities that bench_ffn
// measured (resources/benchmarks/), with a conservative default where nothing was measured.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

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
constexpr BreakEvenPoint kMeasured[] = {
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 16384, 0.0108, "bench_ffn, H200, 2026-12-03"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 131072, 0.0105, "bench_ffn, H200, 2026-12-04"},
};

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

}  // namespace twell::cuda
