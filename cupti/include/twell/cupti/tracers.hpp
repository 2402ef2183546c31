// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <memory>
#include <string>

#include "twell/tracer.hpp"

namespace twell::gpu_trace {

/// The CUPTI Activity API tracer. Throws twell::Error (Kind::Device) naming why CUPTI cannot be
/// used (another subscriber such as Nsight or compute-sanitizer, insufficient privileges, no driver).
std::unique_ptr<Tracer> make_cupti_tracer();
/// One CUDA-event pair per tagged region on `stream` (a cudaStream_t); `fallback_reason` says why.
std::unique_ptr<Tracer> make_cuda_event_tracer(void* stream, std::string fallback_reason);
/// CUPTI when it can subscribe, else the CUDA-event fallback with the reason recorded.
std::unique_ptr<Tracer> make_best_gpu_tracer(void* stream);

}  // namespace twell::gpu_trace
