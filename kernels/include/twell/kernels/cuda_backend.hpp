// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <memory>
#include <string>
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
/// "hopper-sm90a" for compute capability 9.0, "portable-sm80" for 8.0 and newer, otherwise a text
/// beginning "unsupported" that says why.
std::string kernel_family_for(int major, int minor);
/// Device memory a forward of `tokens` tokens on `device` needs beyond the weights (one layer's
/// activations and the FFN runner's workspaces, ffn_workspace_bytes), as the CUDA backend plans it
/// before allocating; `with_hook` adds the outputs of run_layer_ffn. Forwards that do not fit throw
/// Error(Kind::OutOfMemory) naming it.
std::uint64_t planned_forward_bytes(const ModelConfig& config, std::uint64_t tokens,
                                    const ForwardOptions& options, bool with_hook, int device);
/// The CUDA backend on `device`. Throws twell::Error (Kind::Device) with the reason when it cannot.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace twell::cuda
