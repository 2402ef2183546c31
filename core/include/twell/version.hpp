// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

namespace twell {
const char* version() noexcept;     ///< "0.1.0"
const char* git_commit() noexcept;  ///< short hash, "-dirty" when built from a modified tree
}  // namespace twell
