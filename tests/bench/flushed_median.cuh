// SPDX-License-Identifier: GPL-3.0-or-later
// The median time of a launch with L2 flushed before every repetition (CUDA events around the launch
// alone), for the benchmarks that time single kernels or library calls.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/l2_flush.hpp"
#include "twell/kernels/stream.hpp"

namespace twell::test {

template <typename Launch>
double flushed_median_ms(twell::cuda::L2Flusher& flusher, cudaStream_t stream, int warmup, int repetitions,
                         Launch launch) {
  twell::cuda::Event start, end;
  std::vector<double> samples;
  for (int i = 0; i < warmup + repetitions; ++i) {
    flusher.flush(stream);
    start.record(stream);
    launch();
    TWELL_CUDA_CHECK_LAUNCH("timed launch");
    end.record(stream);
    end.synchronize();
    if (i >= warmup) samples.push_back(end.elapsed_ms_since(start));
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

/// How flushed_median_ms timed, for the benchmark's JSON record.
inline nlohmann::json flushed_median_timing(int warmup, int repetitions,
                                            const twell::cuda::L2Flusher& flusher) {
  return {{"warmup", warmup},
          {"repetitions", repetitions},
          {"statistic", "median"},
          {"clock", "cuda events"},
          {"l2_flush_bytes", flusher.bytes()}};
}

}  // namespace twell::test
