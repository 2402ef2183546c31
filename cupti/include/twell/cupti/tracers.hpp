// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <memory>
#include <string>

#include "twell/error.hpp"
#include "twell/tracer.hpp"
#include "twell/tracer_choice.hpp"

namespace twell::gpu_trace {

/// What make_cupti_tracer throws: a twell::Error (Kind::Device) whose message names the cause
/// and the failing call, and which also carries the cause so callers can fall back.
class CuptiUnavailableError : public Error {
 public:
  explicit CuptiUnavailableError(CuptiUnavailable failure)
      : Error(Kind::Device, "CUPTI tracer unavailable: " + describe(failure)),
        m_failure(std::move(failure)) {}
  const CuptiUnavailable& failure() const noexcept { return m_failure; }

 private:
  CuptiUnavailable m_failure;
};

/// The CUPTI Activity API tracer: one KernelRecord per kernel, memcpy and memset, attributed to
/// the innermost open tag through CUPTI external correlation ids (so every kernel of a cuBLAS
/// call is attributed, whatever its name), with an NVTX range of the same name per tag for
/// Nsight Systems. push/pop must be called on the thread that launches the tagged work;
/// collect() synchronizes the current device, flushes CUPTI and returns the records.
/// CUPTI allows one subscriber per process, so at most one such tracer lives at a time.
/// Throws CuptiUnavailableError when CUPTI cannot be used: another subscriber (Nsight Systems or
/// Compute, compute-sanitizer, cuda-gdb), insufficient privileges, no driver or device, or a
/// CUPTI tracer already live in this process.
std::unique_ptr<Tracer> make_cupti_tracer();

/// One CUDA-event pair per tagged region on `stream` (a cudaStream_t; null is the legacy
/// default stream): one record per region (kind "region"), named after the tag's op, timed on
/// the GPU. info().per_kernel is false and info().fallback_reason is `fallback_reason`. Work on
/// other streams is not seen. Also pushes NVTX ranges like the CUPTI tracer.
std::unique_ptr<Tracer> make_cuda_event_tracer(void* stream, std::string fallback_reason);

/// CUPTI when it can subscribe, else the CUDA-event fallback on `stream` with the reason
/// (choose_gpu_tracer in core) recorded in info().fallback_reason.
std::unique_ptr<Tracer> make_best_gpu_tracer(void* stream);

}  // namespace twell::gpu_trace
