// SPDX-License-Identifier: GPL-3.0-or-later
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "runtime.hpp"

namespace twell::cli {
namespace {

void print_variants(const char* heading, const std::vector<KernelVariant>& variants) {
  std::printf("\n%s\n", heading);
  for (const KernelVariant& v : variants)
    std::printf("  %s  [%s %s; %s]\n      %s\n", v.name.c_str(), v.path.c_str(), v.op.c_str(),
                v.architectures.c_str(), v.description.c_str());
}

}  // namespace

void add_devices_command(CLI::App& app) {
  auto* command = app.add_subcommand("devices", "List CUDA devices and the kernel family each one gets");
  auto list_kernels = std::make_shared<bool>(false);
  command->add_flag("--kernels", *list_kernels,
                    "Also list the FFN kernels of each backend in this build, with what each one does");
  command->callback([list_kernels] {
    const auto devices = runtime::cuda_devices();
    if (devices.empty())
      std::printf("No CUDA device: %s. twellscope will run the CPU backend.\n",
                  runtime::no_cuda_reason().c_str());
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const auto& d = devices[i];
      std::printf(
          "[%zu] %s\n    compute capability %s, %d SMs, %.1f GiB\n    driver %s, runtime %s\n"
          "    kernel family: %s\n",
          i, d.name.c_str(), d.compute_capability.c_str(), d.multiprocessor_count,
          static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0), d.driver_version.c_str(),
          d.runtime_version.c_str(), d.kernel_family.c_str());
    }
    if (!*list_kernels) return;
    if (const auto cuda = runtime::cuda_kernel_variants(); !cuda.empty())
      print_variants("FFN kernels of the CUDA backend (library kernels are told apart by their op):", cuda);
    print_variants("FFN stages of the CPU backend:", make_cpu_backend(1)->kernel_variants());
  });
}

}  // namespace twell::cli
