// SPDX-License-Identifier: GPL-3.0-or-later
// Helpers for the gpu-labelled suites: skipping without a device, and moving bf16 matrices.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controlled_density.hpp"
#include "test_support.hpp"
#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/twell_gate_pack.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/matrix.hpp"
#include "twell/model_generator.hpp"
#include "twell/numeric.hpp"
#include "twell/twell_format.hpp"

namespace twell::test {

/// The generator's tiny preset (d_model 256, 4 heads of 64, 2 KV heads, d_ff 768, 2 layers) at 5 %
/// density, generated once per test process.
inline const std::filesystem::path& generated_tiny_model() {
  static TempDir directory("twellscope-gpu-tiny");
  static const std::filesystem::path model = [] {
    GeneratorOptions options;
    options.preset = "tiny";
    options.density = 0.05;
    options.seed = 11;
    generate_model(options, directory.path() / "tiny");
    return directory.path() / "tiny";
  }();
  return model;
}

/// Why CUDA tests cannot run here ("" when a device is usable).
inline std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorName(status) + " (" +
           cudaGetErrorString(status) + ")";
  }
  if (count == 0) return "no CUDA device";
  return {};
}

inline cuda::DeviceBuffer<__nv_bfloat16> upload_bf16(const Matrix& matrix) {
  const std::vector<std::uint16_t> bits = to_bf16_bits(matrix);
  cuda::DeviceBuffer<__nv_bfloat16> buffer(bits.size());
  TWELL_CUDA_CHECK(cudaMemcpy(buffer.data(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  return buffer;
}

inline Matrix download_bf16(const __nv_bfloat16* device, std::size_t rows, std::size_t cols) {
  std::vector<std::uint16_t> bits(rows * cols);
  TWELL_CUDA_CHECK(cudaDeviceSynchronize());
  TWELL_CUDA_CHECK(cudaMemcpy(bits.data(), device, bits.size() * 2, cudaMemcpyDeviceToHost));
  Matrix out(rows, cols);
  for (std::size_t i = 0; i < bits.size(); ++i) out.data[i] = bf16_bits_to_float(bits[i]);
  return out;
}

/// A poisoned output buffer: NaN bit patterns, so an unwritten element fails every comparison.
inline cuda::DeviceBuffer<__nv_bfloat16> poisoned_bf16(std::size_t count) {
  cuda::DeviceBuffer<__nv_bfloat16> buffer(count);
  TWELL_CUDA_CHECK(cudaMemset(buffer.data(), 0xff, count * 2));
  return buffer;
}

/// A controlled FFN problem's weights on the device.
struct DeviceFfn {
  explicit DeviceFfn(const ControlledFfn& problem)
      : gate(problem.gate.empty() ? cuda::DeviceBuffer<__nv_bfloat16>() : upload_bf16(problem.gate)),
        up(upload_bf16(problem.up)),
        down(upload_bf16(problem.down)),
        down_t(upload_bf16(problem.down_t)),
        hidden(static_cast<int>(problem.up.cols)),
        intermediate(static_cast<int>(problem.up.rows)) {}
  cuda::FfnDeviceWeights weights() const {
    cuda::FfnDeviceWeights w;
    w.gate = gate.empty() ? nullptr : gate.data();
    w.up = up.data();
    w.down = down.data();
    w.down_t = down_t.data();
    w.hidden = hidden;
    w.intermediate = intermediate;
    return w;
  }
  cuda::DeviceBuffer<__nv_bfloat16> gate, up, down, down_t;
  int hidden, intermediate;
};

/// A problem's rows packed by the portable gate: the packed words, and the overflow state the gate
/// writes ([0] rows flagged, [1] tiles over capacity, then one flag per row) and its row list.
struct PortablePacked {
  cuda::DeviceBuffer<std::uint32_t> packed, state, list;
  const std::uint32_t* row_flags() const { return state.data() + 2; }
};
inline PortablePacked pack_with_portable_gate(const __nv_bfloat16* x, const DeviceFfn& ffn, int rows,
                                              std::uint32_t compression = 8) {
  const std::size_t tiles = static_cast<std::size_t>(cuda::twell_padded_neurons(ffn.intermediate)) / 256;
  PortablePacked result{cuda::DeviceBuffer<std::uint32_t>(static_cast<std::size_t>(rows) * tiles *
                                                          twell_slots_per_tile(compression)),
                        cuda::DeviceBuffer<std::uint32_t>(2 + static_cast<std::size_t>(rows)),
                        cuda::DeviceBuffer<std::uint32_t>(static_cast<std::size_t>(rows))};
  TWELL_CUDA_CHECK(cudaMemset(result.state.data(), 0, result.state.bytes()));
  cuda::GatePackArgs pack;
  pack.x = x;
  pack.weight = ffn.gate.data();
  pack.rows = rows;
  pack.hidden = ffn.hidden;
  pack.neurons = ffn.intermediate;
  pack.compression = compression;
  pack.packed = result.packed.data();
  pack.overflow = {result.state.data(), result.state.data() + 2, result.list.data()};
  cuda::launch_twell_gate_pack(pack, nullptr);
  return result;
}

/// The portable gate's overflow flag of each of `rows` rows (non-zero: the row overflowed a tile).
inline std::vector<std::uint32_t> download_row_flags(const PortablePacked& packed, int rows) {
  std::vector<std::uint32_t> flags(static_cast<std::size_t>(rows));
  TWELL_CUDA_CHECK(cudaMemcpy(flags.data(), packed.row_flags(), flags.size() * 4, cudaMemcpyDeviceToHost));
  return flags;
}

/// `packed`'s `rows` rows of `neurons` at `compression` as core's TwellPacked, its flagged rows listed as
/// overflowing.
inline TwellPacked download_twell_packed(const PortablePacked& packed, int rows, int neurons,
                                         std::uint32_t compression = 8) {
  TwellPacked host;
  host.rows = static_cast<std::uint32_t>(rows);
  host.neurons = static_cast<std::uint32_t>(neurons);
  host.padded_neurons = static_cast<std::uint32_t>(cuda::twell_padded_neurons(neurons));
  host.compression = compression;
  host.words.resize(packed.packed.size());
  TWELL_CUDA_CHECK(
      cudaMemcpy(host.words.data(), packed.packed.data(), packed.packed.bytes(), cudaMemcpyDeviceToHost));
  const std::vector<std::uint32_t> flags = download_row_flags(packed, rows);
  for (int r = 0; r < rows; ++r)
    if (flags[r] != 0) host.overflow_rows.push_back(static_cast<std::uint32_t>(r));
  return host;
}

/// The consumer's arguments for a gated problem over `packed` (its flagged rows skipped) into `out`.
inline cuda::UpDownArgs gated_consumer_args(const __nv_bfloat16* x, const DeviceFfn& ffn,
                                            const PortablePacked& packed, __nv_bfloat16* out, int rows,
                                            std::uint32_t compression = 8) {
  cuda::UpDownArgs args;
  args.x = x;
  args.packed = packed.packed.data();
  args.up = ffn.up.data();
  args.down_t = ffn.down_t.data();
  args.row_flags = packed.row_flags();
  args.out = out;
  args.rows = rows;
  args.hidden = ffn.hidden;
  args.padded_neurons = cuda::twell_padded_neurons(ffn.intermediate);
  args.compression = compression;
  return args;
}

}  // namespace twell::test

/// Skips the current test, with the reason, when no CUDA device is usable. A macro because only
/// the test body itself can return early.
#define TWELL_REQUIRE_CUDA_DEVICE()                                                       \
  do {                                                                                    \
    const std::string twell_no_device_reason_ = ::twell::test::cuda_unavailable_reason(); \
    if (!twell_no_device_reason_.empty()) GTEST_SKIP() << twell_no_device_reason_;        \
  } while (0)
