// SPDX-License-Identifier: GPL-3.0-or-later
// CudaBackend: construction, the FFN entry points used inside a LayerHook, comparisons and ad hoc
// FFNs on host inputs. The forward is in cuda_backend_forward.cu, the weights in cuda_backend_load.cu.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cuda_backend_impl.hpp"
#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/l2_flush.hpp"
#include "twell/kernels/output_compare.hpp"
#include "twell/metrics.hpp"
#include "twell/numeric.hpp"

namespace twell::cuda {

namespace {

std::size_t path_index(FfnPath path) {
  return path == FfnPath::Dense ? 0 : 1;
}

/// Makes `device` current before any member allocates on it; returns it.
int activate_device(int device) {
  const int count = device_count();
  if (count == 0) throw Error(Error::Kind::Device, "no CUDA device: " + no_device_reason());
  if (device < 0 || device >= count)
    throw Error(Error::Kind::Device, "CUDA device " + std::to_string(device) + " does not exist (" +
                                         std::to_string(count) + " visible)");
  cudaDeviceProp properties{};
  TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  if (properties.major < 8)
    throw Error(Error::Kind::Unsupported,
                std::string("CUDA device ") + std::to_string(device) + " (" + properties.name +
                    ", compute capability " + std::to_string(properties.major) + "." +
                    std::to_string(properties.minor) + ") is older than the 8.0 the kernels need");
  TWELL_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

}  // namespace

CudaBackend::CudaBackend(int device) : m_device(activate_device(device)) {
  m_info = list_devices().at(static_cast<std::size_t>(m_device));
  m_ffn = std::make_unique<FfnRunner>(m_stream.get());
  m_compare_scratch.ensure(kErrorSumsScratchBytes);
}

CudaBackend::~CudaBackend() {
  // Pending work may still read buffers about to be freed.
  cudaStreamSynchronize(m_stream.get());
}

void CudaBackend::select_device() const {
  TWELL_CUDA_CHECK(cudaSetDevice(m_device));
}

void CudaBackend::require_loaded(const char* what) const {
  if (!m_loaded)
    throw Error(Error::Kind::Internal,
                std::string("CudaBackend::") + what + ": no model loaded (call load first)");
}

const ModelConfig& CudaBackend::config() const {
  require_loaded("config");
  return m_config;
}

Activation CudaBackend::activation() const {
  require_loaded("activation");
  return m_activation;
}

FfnDeviceWeights CudaBackend::ffn_weights(std::size_t layer) const {
  const DeviceLayer& weights = m_layers.at(layer);
  FfnDeviceWeights view;
  view.gate = weights.gate.data();
  view.up = weights.up.data();
  view.down = weights.down.data();
  view.down_t = weights.down_t.data();
  view.hidden = static_cast<int>(m_config.hidden_size);
  view.intermediate = static_cast<int>(m_config.intermediate_size);
  return view;
}

std::uint64_t CudaBackend::run_ffn(std::size_t layer, FfnPath path, const FfnOptions& options, const bf16* x,
                                   std::int64_t tokens, bf16* out, Tracer* tracer, const TraceTag& tag,
                                   const bf16** gate_preactivation) {
  launch_ffn(layer, path, options, x, tokens, out, tracer, tag, gate_preactivation);
  return path == FfnPath::Dense ? 0 : m_ffn->last_overflow_rows();
}

void CudaBackend::launch_ffn(std::size_t layer, FfnPath path, const FfnOptions& options, const bf16* x,
                             std::int64_t tokens, bf16* out, Tracer* tracer, const TraceTag& tag,
                             const bf16** gate_preactivation, std::uint32_t* counters_host) {
  TraceTag ffn_tag = tag;
  ffn_tag.layer = static_cast<int>(layer);
  if (ffn_tag.path.empty()) ffn_tag.path = to_string(path);
  const int rows = static_cast<int>(tokens);
  if (path == FfnPath::Dense) {
    m_ffn->dense(ffn_weights(layer), m_activation, x, rows, out, tracer, ffn_tag, gate_preactivation);
    return;
  }
  m_ffn->set_twell_kernels(twell_kernels_from_request(options.twell_kernels));
  m_ffn->twell(ffn_weights(layer), options, x, rows, out, tracer, ffn_tag, counters_host);
}

std::uint64_t CudaBackend::run_layer_ffn(std::size_t layer, FfnPath path, const FfnOptions& options,
                                         Tracer* tracer, const TraceTag& tag) {
  if (!m_hook.layer || *m_hook.layer != layer)
    throw Error(Error::Kind::Internal, "CudaBackend::run_layer_ffn(" + std::to_string(layer) +
                                           ") called outside the forward's hook for that layer");
  const std::int64_t tokens = m_forward_tokens;
  DeviceBuffer<bf16>& out = m_hook_outputs[path_index(path)];
  out.ensure(static_cast<std::size_t>(tokens * m_config.hidden_size));
  const std::uint64_t overflow =
      run_ffn(layer, path, options, m_activations.normed.data(), tokens, out.data(), tracer, tag, nullptr);
  m_hook.has_output[path_index(path)] = true;
  return overflow;
}

ErrorMetrics CudaBackend::compare_layer_ffn_outputs(FfnPath reference, FfnPath candidate) {
  for (FfnPath path : {reference, candidate}) {
    if (!m_hook.layer || !m_hook.has_output[path_index(path)])
      throw Error(Error::Kind::Internal,
                  std::string("CudaBackend::compare_layer_ffn_outputs: no ") + to_string(path) +
                      " output for the current layer (run_layer_ffn first, inside the hook)");
  }
  const ErrorSums sums = output_error_sums(
      m_hook_outputs[path_index(reference)].data(), m_hook_outputs[path_index(candidate)].data(),
      m_forward_tokens * m_config.hidden_size, m_compare_scratch.data(), m_stream.get());
  return error_metrics_from_sums(sums);
}

Matrix CudaBackend::ffn(std::size_t layer, const Matrix& input, FfnPath path, const FfnOptions& options) {
  require_loaded("ffn");
  select_device();
  if (layer >= m_layers.size())
    throw Error(Error::Kind::InvalidInput, "layer " + std::to_string(layer) +
                                               " does not exist (the model has " +
                                               std::to_string(m_layers.size()) + ")");
  const auto hidden = static_cast<std::size_t>(m_config.hidden_size);
  if (input.cols != hidden || input.data.size() != input.rows * input.cols)
    throw Error(Error::Kind::InvalidInput, "CudaBackend::ffn: the input has " + std::to_string(input.cols) +
                                               " columns, the model's hidden size is " +
                                               std::to_string(hidden));
  if (input.rows == 0) return Matrix(0, hidden);
  std::vector<std::uint16_t> bits(input.data.size());
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = float_to_bf16_bits(input.data[i]);
  DeviceBuffer<bf16> x(bits.size());
  DeviceBuffer<bf16> out(bits.size());
  TWELL_CUDA_CHECK(cudaMemcpyAsync(x.data(), bits.data(), bits.size() * sizeof(std::uint16_t),
                                   cudaMemcpyHostToDevice, m_stream.get()));
  run_ffn(layer, path, options, x.data(), static_cast<std::int64_t>(input.rows), out.data(), nullptr,
          TraceTag{}, nullptr);
  return copy_to_host(out.data(), static_cast<std::int64_t>(input.rows), static_cast<std::int64_t>(hidden));
}

Matrix CudaBackend::copy_to_host(const bf16* device, std::int64_t rows, std::int64_t cols) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(rows * cols));
  TWELL_CUDA_CHECK(cudaMemcpyAsync(bits.data(), device, bits.size() * sizeof(std::uint16_t),
                                   cudaMemcpyDeviceToHost, m_stream.get()));
  TWELL_CUDA_CHECK(cudaStreamSynchronize(m_stream.get()));
  Matrix out(static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  for (std::size_t i = 0; i < bits.size(); ++i) out.data[i] = bf16_bits_to_float(bits[i]);
  return out;
}

std::optional<FfnBreakEven> CudaBackend::ffn_break_even(std::size_t tokens, const FfnOptions& options) const {
  require_loaded("ffn_break_even");
  // load() bounds D and N far below int's range; a token count past it is as far from every
  // measured one as int's maximum.
  const FfnShape shape{static_cast<int>(std::min<std::size_t>(tokens, std::numeric_limits<int>::max())),
                       static_cast<int>(m_config.hidden_size), static_cast<int>(m_config.intermediate_size),
                       options.compression, m_config.gated_mlp};
  return twell_break_even(shape, m_device);
}

void CudaBackend::check_ffn_options(const FfnOptions& options) const {
  require_loaded("check_ffn_options");
  const TwellKernels kernels = twell_kernels_from_request(options.twell_kernels);
  const std::string requested = "TwELL kernels " + to_string(options.twell_kernels) + ": ";
  if (const std::string refusal = unbounded_route_refusal(kernels); !refusal.empty())
    throw Error(Error::Kind::Unsupported, requested + refusal);
  if (kernels.gate == GateKernel::Sm90 && !gate_kernel_sm90_available(m_device))
    throw Error(Error::Kind::Unsupported, requested +
                                              "the sm90 gate needs compute capability 9.0 and an "
                                              "sm_90a build; this device is " +
                                              m_info.name + " (" + m_info.kernel_family + ")");
  if (kernels.up_down == UpDownKernel::PerTokenWarp &&
      !up_down_per_token_warp_supported(m_config.hidden_size))
    throw Error(Error::Kind::Unsupported, requested +
                                              "the per_token_warp consumer needs hidden <= 2048; this "
                                              "model's is " +
                                              std::to_string(m_config.hidden_size));
}

void CudaBackend::flush_cache() {
  select_device();
  if (!m_l2_flusher) m_l2_flusher = std::make_unique<L2Flusher>();
  m_l2_flusher->flush(m_stream.get());
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return std::make_unique<CudaBackend>(device);
}

}  // namespace twell::cuda
