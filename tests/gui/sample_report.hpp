// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include "twell/report.hpp"

namespace twellscope::test {

/// Shape of the synthetic report every GUI test opens.
inline constexpr int kSampleLayers = 4;
inline constexpr std::uint32_t kSampleTokens = 64;
inline constexpr std::uint32_t kSampleNeurons = 1024;
/// Per-layer densities the firing pattern is drawn at; layer 3 is past break-even.
inline constexpr double kSampleDensities[kSampleLayers] = {0.02, 0.05, 0.10, 0.30};
/// Every neuron index divisible by this never fires (dead).
inline constexpr std::uint32_t kSampleDeadStride = 17;

/// A complete report built in memory: statistics from core's own summarize/compute functions over a
/// seeded firing pattern, timings where TwELL time = dense time * (0.6 + 2 * density), a timeline
/// of one repetition with two kernels per path and layer, and end-to-end throughput.
twell::Report makeSampleReport();

/// Dense time of a sample layer (µs): 100 + 10 * layer.
double sampleDenseUs(int layer);
double sampleTwellUs(int layer);

}  // namespace twellscope::test
