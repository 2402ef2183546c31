// SPDX-License-Identifier: GPL-3.0-or-later
// The FFN kernel variants this build contains, with a one-line description each: what the GUI and
// `devices` list so a user can see which code produced a timing.
#pragma once
#include <string>
#include <vector>

namespace twell::cuda {

struct KernelVariant {
  std::string name;           ///< as it appears in traces (the kernel's function name)
  std::string path;           ///< "dense" or "twell"
  std::string op;             ///< the trace op its launches are tagged with
  std::string architectures;  ///< where it runs, e.g. "sm_80+"
  std::string description;    ///< one line
};

std::vector<KernelVariant> kernel_variants();

}  // namespace twell::cuda
