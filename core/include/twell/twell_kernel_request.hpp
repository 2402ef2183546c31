// SPDX-License-Identifier: GPL-3.0-or-later
// Which TwELL kernels a run asks the backend for, by name, so kernel engineers can profile one
// variant end to end and compare it with another. "auto" leaves the choice to the backend (the
// fastest measured on this GPU and shape).
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace twell {

struct TwellKernelRequest {
  std::string gate = "auto";      ///< one of twell_gate_kernel_names()
  std::string up_down = "auto";   ///< one of twell_up_down_kernel_names()
  std::string overflow = "auto";  ///< one of twell_overflow_route_names()
  bool is_auto() const { return gate == "auto" && up_down == "auto" && overflow == "auto"; }
  bool operator==(const TwellKernelRequest&) const = default;
};

/// The names each part accepts, "auto" first (the CUDA backend's GateKernel, UpDownKernel and
/// OverflowRoute, as their to_string writes them).
std::span<const std::string_view> twell_gate_kernel_names();
std::span<const std::string_view> twell_up_down_kernel_names();
std::span<const std::string_view> twell_overflow_route_names();

/// Parses "GATE[/UP_DOWN[/OVERFLOW]]", e.g. "sm90/balanced_cta/sparse" or "auto"; parts left out
/// are auto. Throws twell::Error (InvalidInput) naming the part that is not a known name and the
/// names it could be.
TwellKernelRequest parse_twell_kernel_request(std::string_view text);

/// "auto" when every part is auto, else "gate/up_down/overflow": what parse_twell_kernel_request
/// reads back as the same request.
std::string to_string(const TwellKernelRequest& request);

}  // namespace twell
