// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <CLI/CLI.hpp>

namespace twell::cli {

// One file per subcommand; each adds itself to the app and runs through its callback. A callback
// reports failure by throwing twell::Error; main maps it to the documented exit code.
void add_devices_command(CLI::App& app);
void add_gen_model_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_compare_command(CLI::App& app);

}  // namespace twell::cli
