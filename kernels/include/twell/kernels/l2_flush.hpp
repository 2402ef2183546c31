// SPDX-License-Identifier: GPL-3.0-or-later
// Evicts the L2 cache between timed repetitions by overwriting a buffer several times its size,
// so each repetition starts from HBM as a layer would in a real forward.
#pragma once
#include <cuda_runtime.h>

#include "twell/kernels/device_buffer.hpp"

namespace twell::cuda {

class L2Flusher {
 public:
  L2Flusher();  ///< sized from the current device's L2
  void flush(cudaStream_t stream);
  std::size_t bytes() const { return m_buffer.bytes(); }

 private:
  DeviceBuffer<unsigned char> m_buffer;
};

}  // namespace twell::cuda
