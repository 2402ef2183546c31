// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/backend.hpp"

namespace twell {

const char* to_string(FfnPath path) noexcept { return path == FfnPath::Dense ? "dense" : "twell"; }

}  // namespace twell
