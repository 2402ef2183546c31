// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <nvtx3/nvToolsExt.h>

#include <string>

namespace twell::gpu_trace::detail {

/// NVTX ranges in a "twellscope" domain, named like the trace tags, so that a run under
/// Nsight Systems shows its layers, paths and ops. Without an attached tool every call is a
/// cheap no-op (NVTX v3 is header-only and loads a tool only when one is injected).
class NvtxRanges {
 public:
  NvtxRanges() : m_domain(nvtxDomainCreateA("twellscope")) {}
  ~NvtxRanges() { nvtxDomainDestroy(m_domain); }
  NvtxRanges(const NvtxRanges&) = delete;
  NvtxRanges& operator=(const NvtxRanges&) = delete;

  void push(const std::string& name) {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name.c_str();
    nvtxDomainRangePushEx(m_domain, &attributes);
  }
  void pop() { nvtxDomainRangePop(m_domain); }

 private:
  nvtxDomainHandle_t m_domain;
};

}  // namespace twell::gpu_trace::detail
