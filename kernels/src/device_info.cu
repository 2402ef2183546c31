// SPDX-License-Identifier: GPL-3.0-or-later
// What `devices` and reports show about each CUDA device, and which kernel family it gets.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "twell/kernels/cuda_backend.hpp"
#include "twell/kernels/cuda_check.hpp"

namespace twell::cuda {

namespace {

std::string version_text(int encoded) {
  // CUDA encodes versions as 1000 * major + 10 * minor.
  return std::to_string(encoded / 1000) + "." + std::to_string((encoded % 1000) / 10);
}

}  // namespace

std::string kernel_family_for(int major, int minor) {
  if (major == 9 && minor == 0) return "hopper-sm90a";
  if (major >= 8) return "portable-sm80";
  return "unsupported (compute capability " + std::to_string(major) + "." + std::to_string(minor) +
         " is below 8.0)";
}

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

std::string no_device_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) return count > 0 ? std::string() : "no CUDA-capable device is visible";
  (void)cudaGetLastError();
  switch (status) {
    case cudaErrorNoDevice:
      return "no CUDA-capable device is visible";
    case cudaErrorInsufficientDriver:
      return "the installed NVIDIA driver is older than this build's CUDA runtime";
    case cudaErrorInitializationError:
    case cudaErrorCallRequiresNewerDriver:
      return std::string("the CUDA driver could not be initialised (") + cudaGetErrorName(status) + ")";
    default:
      return std::string("no usable CUDA driver (") + cudaGetErrorName(status) + ": " +
             cudaGetErrorString(status) + ")";
  }
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> devices;
  const int count = device_count();
  int driver = 0;
  int runtime = 0;
  TWELL_CUDA_CHECK(cudaDriverGetVersion(&driver));
  TWELL_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp properties{};
    TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, index));
    DeviceInfo info;
    info.backend = "cuda";
    info.name = properties.name;
    info.compute_capability = std::to_string(properties.major) + "." + std::to_string(properties.minor);
    info.multiprocessor_count = properties.multiProcessorCount;
    info.memory_bytes = properties.totalGlobalMem;
    info.driver_version = version_text(driver);
    info.runtime_version = version_text(runtime);
    info.kernel_family = kernel_family_for(properties.major, properties.minor);
    devices.push_back(std::move(info));
  }
  return devices;
}

}  // namespace twell::cuda
