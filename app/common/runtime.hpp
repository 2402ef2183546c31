// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "twell/backend.hpp"
#include "twell/tracer.hpp"

namespace twell::runtime {

enum class BackendChoice { Auto, Cuda, Cpu };
std::optional<BackendChoice> backend_choice_from_string(const std::string& name);

/// A backend with the tracer that times it.
struct Runtime {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Tracer> tracer;
  std::string note;  ///< why this backend/tracer was chosen, when it was not the first choice
};

/// Auto: CUDA (with CUPTI, or CUDA events when CUPTI cannot subscribe) when built with CUDA and a
/// device is present, else the CPU with its clock. Cuda: throws twell::Error when unavailable.
Runtime make_runtime(BackendChoice choice, int device = 0);

bool built_with_cuda() noexcept;
/// Every CUDA device (empty without CUDA or without a device).
std::vector<DeviceInfo> cuda_devices();
/// Why there is no CUDA device (not built with CUDA, no driver, no device).
std::string no_cuda_reason();
/// The FFN kernels of this build's CUDA backend, described (empty without CUDA); they do not need a
/// device.
std::vector<KernelVariant> cuda_kernel_variants();

}  // namespace twell::runtime
