// SPDX-License-Identifier: GPL-3.0-or-later
// Conversion of CUPTI activity records into core's KernelRecord: the boundary past which no
// CUPTI type travels.
#pragma once
#include <cupti.h>

#include <cstdint>
#include <string>
#include <vector>

#include "twell/trace_attribution.hpp"
#include "twell/tracer.hpp"

namespace twell::gpu_trace::detail {

static_assert(CUPTI_API_VERSION >= 130000, "twellscope's CUPTI tracer reads CUDA 13 activity records");
/// The one place the kernel record version is pinned. Later CUPTI versions only append fields,
/// so a newer record (Kernel11 in CUDA 13.1) still starts with these.
using KernelActivity = CUpti_ActivityKernel10;
using MemcpyActivity = CUpti_ActivityMemcpy6;
using MemsetActivity = CUpti_ActivityMemset4;

/// Our external-correlation kind; other tools in the process may use the others.
constexpr CUpti_ExternalCorrelationKind kTagCorrelationKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

/// The demangled form of a C++ symbol, or the name unchanged (cuBLAS's nvjet kernels are not
/// mangled); "<unnamed>" for null.
std::string demangle(const char* name);

KernelRecord to_record(const KernelActivity& kernel);
KernelRecord to_record(const MemcpyActivity& memcpy);
KernelRecord to_record(const MemsetActivity& memset);

/// CUPTI leaves start and end at 0 when it could not time an activity.
bool has_times(const KernelRecord& record);
/// Removes the records without valid times; returns how many of them were attributed.
std::size_t drop_untimed(std::vector<KernelRecord>& records);

/// What the buffers held, beyond the records fed to the correlator.
struct BufferTally {
  std::uint64_t incomplete = 0;  ///< kernel, memcpy and memset records without valid timestamps
};

/// Feeds every kernel, memcpy and memset record of a completed buffer (incomplete ones too, so
/// the caller can tell whose they were), and every external correlation of our kind, into
/// `correlator`; reads past the other kinds (API records are enabled only because CUPTI emits
/// external correlations for them). Throws twell::Error naming cuptiActivityGetNextRecord if
/// the buffer cannot be read.
void feed_buffer(std::uint8_t* buffer, std::size_t valid_bytes, TagCorrelator& correlator,
                 BufferTally& tally);

}  // namespace twell::gpu_trace::detail
