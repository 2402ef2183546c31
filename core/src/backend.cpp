// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/backend.hpp"

namespace twell {

const char* to_string(FfnPath path) noexcept {
  return path == FfnPath::Dense ? "dense" : "twell";
}

std::optional<FfnBreakEven> Backend::ffn_break_even(std::size_t /*tokens*/,
                                                    const FfnOptions& /*options*/) const {
  return std::nullopt;
}

}  // namespace twell
