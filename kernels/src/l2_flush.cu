// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/kernels/l2_flush.hpp"

#include <algorithm>

namespace twell::cuda {

L2Flusher::L2Flusher() {
  int device = 0, l2_bytes = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  // Four times the L2: writes that only partly allocate in L2 still displace everything there.
  const std::size_t bytes =
      std::max<std::size_t>(std::size_t{4} * static_cast<std::size_t>(l2_bytes), std::size_t{64} << 20);
  m_buffer.ensure(bytes);
}

void L2Flusher::flush(cudaStream_t stream) {
  TWELL_CUDA_CHECK(cudaMemsetAsync(m_buffer.data(), 0, m_buffer.bytes(), stream));
}

}  // namespace twell::cuda
