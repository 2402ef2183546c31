// SPDX-License-Identifier: GPL-3.0-or-later
#include "runtime.hpp"

#include "twell/error.hpp"

#ifdef TWELLSCOPE_HAVE_CUDA
#include "twell/cupti/tracers.hpp"
#include "twell/kernels/cuda_backend.hpp"
#include "twell/kernels/kernel_registry.hpp"
#endif

namespace twell::runtime {

std::optional<BackendChoice> backend_choice_from_string(const std::string& name) {
  if (name == "auto") return BackendChoice::Auto;
  if (name == "cuda") return BackendChoice::Cuda;
  if (name == "cpu") return BackendChoice::Cpu;
  return std::nullopt;
}

bool built_with_cuda() noexcept {
#ifdef TWELLSCOPE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<DeviceInfo> cuda_devices() {
#ifdef TWELLSCOPE_HAVE_CUDA
  if (cuda::device_count() > 0) return cuda::list_devices();
#endif
  return {};
}

std::string no_cuda_reason() {
#ifdef TWELLSCOPE_HAVE_CUDA
  return cuda::device_count() > 0 ? std::string() : cuda::no_device_reason();
#else
  return "this build of twellscope has no CUDA backend (configured with TWELLSCOPE_WITH_CUDA=OFF)";
#endif
}

std::vector<KernelVariant> cuda_kernel_variants() {
#ifdef TWELLSCOPE_HAVE_CUDA
  return cuda::kernel_variants();
#else
  return {};
#endif
}

namespace {
Runtime cpu_runtime(std::string note) {
  Runtime runtime;
  runtime.backend = make_cpu_backend();
  runtime.tracer = make_cpu_clock_tracer();
  runtime.note = std::move(note);
  return runtime;
}
}  // namespace

Runtime make_runtime(BackendChoice choice, int device) {
  if (choice == BackendChoice::Cpu) return cpu_runtime({});
  const std::string reason = no_cuda_reason();
  if (!reason.empty()) {
    if (choice == BackendChoice::Cuda) throw Error(Error::Kind::Device, "--backend cuda: " + reason);
    return cpu_runtime("no CUDA device (" + reason + "): running the CPU backend; timings are CPU timings");
  }
#ifdef TWELLSCOPE_HAVE_CUDA
  Runtime runtime;
  runtime.backend = cuda::make_cuda_backend(device);
  runtime.tracer = gpu_trace::make_best_gpu_tracer(runtime.backend->native_stream());
  const std::string fallback = runtime.tracer->info().fallback_reason;
  if (!fallback.empty()) runtime.note = "CUPTI unavailable (" + fallback + "): timing with CUDA events";
  return runtime;
#else
  (void)device;
  return cpu_runtime({});
#endif
}

}  // namespace twell::runtime
