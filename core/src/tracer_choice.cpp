// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/tracer_choice.hpp"

namespace twell {

const char* to_string(CuptiUnavailable::Cause cause) noexcept {
  switch (cause) {
    case CuptiUnavailable::Cause::AnotherSubscriber:
      return "CUPTI is owned by another tool (Nsight Systems/Compute, compute-sanitizer, cuda-gdb or "
             "another CUPTI client)";
    case CuptiUnavailable::Cause::InsufficientPrivileges:
      return "the driver does not let this user trace the GPU";
    case CuptiUnavailable::Cause::NoDriver:
      return "no NVIDIA driver or no CUDA device";
    case CuptiUnavailable::Cause::AlreadyInUse:
      return "this process already has a live CUPTI tracer (CUPTI allows one subscriber)";
    case CuptiUnavailable::Cause::Other:
      return "CUPTI failed";
  }
  return "CUPTI failed";
}

std::string describe(const CuptiUnavailable& failure) {
  std::string text = to_string(failure.cause);
  if (!failure.detail.empty()) text += ": " + failure.detail;
  return text;
}

GpuTracerChoice choose_gpu_tracer(const std::optional<CuptiUnavailable>& cupti_failure) {
  if (!cupti_failure) return {GpuTracerKind::Cupti, {}};
  return {GpuTracerKind::CudaEvents, describe(*cupti_failure)};
}

}  // namespace twell
