// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <memory>
#include <vector>

#include "twell/backend.hpp"

namespace twell::cuda {

/// CUDA devices visible to this process; 0 when there is no driver or no device (never throws).
int device_count() noexcept;
/// Why device_count() is 0 ("no CUDA driver", "no CUDA-capable device"...), empty otherwise.
std::string no_device_reason();
/// Every visible device with its compute capability, SMs, memory, driver and runtime versions and
/// the kernel family it gets.
std::vector<DeviceInfo> list_devices();
/// The CUDA backend on `device`. Throws twell::Error (Kind::Device) with the reason when it cannot.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace twell::cuda
