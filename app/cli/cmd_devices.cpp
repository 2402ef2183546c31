// SPDX-License-Identifier: GPL-3.0-or-later
#include <cstdio>

#include "commands.hpp"
#include "runtime.hpp"

namespace twell::cli {

void add_devices_command(CLI::App& app) {
  auto* command = app.add_subcommand("devices", "List CUDA devices and the kernel family each one gets");
  command->callback([] {
    const auto devices = runtime::cuda_devices();
    if (devices.empty()) {
      std::printf("No CUDA device: %s. twellscope will run the CPU backend.\n", runtime::no_cuda_reason().c_str());
      return;
    }
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const auto& d = devices[i];
      std::printf("[%zu] %s\n    compute capability %s, %d SMs, %.1f GiB\n    driver %s, runtime %s\n"
                  "    kernel family: %s\n",
                  i, d.name.c_str(), d.compute_capability.c_str(), d.multiprocessor_count,
                  static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0), d.driver_version.c_str(),
                  d.runtime_version.c_str(), d.kernel_family.c_str());
    }
  });
}

}  // namespace twell::cli
