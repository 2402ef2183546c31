// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/twell_kernel_request.hpp"

#include <algorithm>
#include <array>

#include "twell/error.hpp"

namespace twell {
namespace {

constexpr std::array<std::string_view, 4> kGateNames = {"auto", "portable", "sm90", "cublas_pack"};
constexpr std::array<std::string_view, 5> kUpDownNames = {"auto", "per_token_cta", "balanced_cta",
                                                          "per_token_warp", "union_sm90"};
constexpr std::array<std::string_view, 4> kOverflowNames = {"auto", "dense", "sparse", "unbounded"};

std::string known(std::span<const std::string_view> names, std::string_view part, std::string_view what) {
  if (std::find(names.begin(), names.end(), part) != names.end()) return std::string(part);
  std::string choices;
  for (std::string_view name : names) choices += (choices.empty() ? "" : ", ") + std::string(name);
  throw Error(Error::Kind::InvalidInput, "TwELL kernels: \"" + std::string(part) + "\" is not " +
                                             std::string(what) + " (one of " + choices + ")");
}

}  // namespace

std::span<const std::string_view> twell_gate_kernel_names() {
  return kGateNames;
}
std::span<const std::string_view> twell_up_down_kernel_names() {
  return kUpDownNames;
}
std::span<const std::string_view> twell_overflow_route_names() {
  return kOverflowNames;
}

TwellKernelRequest parse_twell_kernel_request(std::string_view text) {
  std::array<std::string_view, 3> parts = {"auto", "auto", "auto"};
  std::size_t count = 0;
  while (true) {
    const std::size_t slash = text.find('/');
    if (count == parts.size())
      throw Error(Error::Kind::InvalidInput, "TwELL kernels: \"" + std::string(text) +
                                                 "\" has more than three parts (gate/up_down/overflow)");
    parts[count++] = text.substr(0, slash);
    if (slash == std::string_view::npos) break;
    text.remove_prefix(slash + 1);
  }
  TwellKernelRequest request;
  request.gate = known(kGateNames, parts[0], "a gate kernel");
  request.up_down = known(kUpDownNames, parts[1], "an up/down kernel");
  request.overflow = known(kOverflowNames, parts[2], "a route for overflowing rows");
  return request;
}

std::string to_string(const TwellKernelRequest& request) {
  if (request.is_auto()) return "auto";
  return request.gate + "/" + request.up_down + "/" + request.overflow;
}

}  // namespace twell
