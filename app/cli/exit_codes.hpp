// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

namespace twell::cli {

/// The exit codes main() returns (error.cpp maps error kinds to them), shown in --help footers.
inline constexpr const char* kExitCodesHelp =
    "Exit codes: 0 success, 2 usage error, 3 invalid input (model, report, token file or option), "
    "4 unsupported, 5 I/O error, 6 device error, 7 out of memory, 130 cancelled, 70 internal error.";

}  // namespace twell::cli
