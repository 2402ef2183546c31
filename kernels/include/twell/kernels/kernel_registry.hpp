// SPDX-License-Identifier: GPL-3.0-or-later
// The FFN kernels this build contains, each described in a line: the CUDA backend's
// Backend::kernel_variants, which reports carry and `devices` lists, so a user can see which code
// produced a timing.
#pragma once
#include <vector>

#include "twell/kernel_variant.hpp"

namespace twell::cuda {

std::vector<KernelVariant> kernel_variants();

}  // namespace twell::cuda
