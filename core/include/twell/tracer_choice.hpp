// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <optional>
#include <string>

namespace twell {

/// Why the CUPTI tracer could not be created, in terms a user can act on.
struct CuptiUnavailable {
  enum class Cause {
    AnotherSubscriber,       ///< Nsight Systems/Compute, compute-sanitizer, cuda-gdb or another CUPTI client
    InsufficientPrivileges,  ///< the driver restricts profiling to administrators
    NoDriver,                ///< no NVIDIA driver or no CUDA device
    AlreadyInUse,            ///< this process already has a live CUPTI tracer
    Other,                   ///< any other CUPTI failure; `detail` has CUPTI's own words
  };
  Cause cause = Cause::Other;
  std::string detail;  ///< the failing call and CUPTI's message, or the other tool's name
};

/// A short phrase for a cause: "CUPTI is owned by another tool", ...
const char* to_string(CuptiUnavailable::Cause cause) noexcept;

/// The user-facing reason, e.g. "CUPTI is owned by another tool (Nsight Systems): ...".
std::string describe(const CuptiUnavailable& failure);

enum class GpuTracerKind { Cupti, CudaEvents };

struct GpuTracerChoice {
  GpuTracerKind kind = GpuTracerKind::Cupti;
  std::string fallback_reason;  ///< empty when CUPTI was chosen
  bool operator==(const GpuTracerChoice&) const = default;
};

/// The GPU tracer to use given how the CUPTI attempt went: CUPTI when it subscribed, else CUDA
/// events per tagged region, whatever the cause, with the reason recorded (reports show it).
GpuTracerChoice choose_gpu_tracer(const std::optional<CuptiUnavailable>& cupti_failure);

}  // namespace twell
