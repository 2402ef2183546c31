// SPDX-License-Identifier: GPL-3.0-or-later
#include <optional>

#include "twell/cupti/tracers.hpp"
#include "twell/tracer_choice.hpp"

namespace twell::gpu_trace {

std::unique_ptr<Tracer> make_best_gpu_tracer(void* stream) {
  std::optional<CuptiUnavailable> failure;
  try {
    return make_cupti_tracer();
  } catch (const CuptiUnavailableError& error) {
    failure = error.failure();
  }
  const GpuTracerChoice choice = choose_gpu_tracer(failure);
  return make_cuda_event_tracer(stream, choice.fallback_reason);
}

}  // namespace twell::gpu_trace
