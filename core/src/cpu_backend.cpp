// SPDX-License-Identifier: GPL-3.0-or-later
// CpuBackend: the Backend interface over the fp32 CPU reference (reference_forward, the FFN stages).
#include <unistd.h>

#include <array>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "cpu_ffn_stages.hpp"
#include "twell/backend.hpp"
#include "twell/error.hpp"
#include "twell/metrics.hpp"
#include "twell/reference_forward.hpp"

namespace twell {
namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const auto start = line.find_first_not_of(" \t", colon + 1);
        if (start != std::string::npos) return line.substr(start);
      }
    }
  }
  return "CPU";
}

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size)
             : 0;
}

TraceTag with_op(const TraceTag& base, int layer, const std::string& path, const char* op) {
  TraceTag tag = base;
  tag.layer = layer;
  if (tag.path.empty()) tag.path = path;  // a forward's own path ("dispatch") names all its ops
  tag.op = op;
  return tag;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(unsigned threads)
      : m_threads(threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency())) {}

  DeviceInfo device() const override {
    DeviceInfo info;
    info.backend = "cpu";
    info.name = cpu_model_name();
    info.multiprocessor_count = static_cast<int>(m_threads);
    info.memory_bytes = physical_memory_bytes();
    info.kernel_family = "cpu-reference";
    return info;
  }

  std::vector<KernelVariant> kernel_variants() const override { return cpu::stage_variants(); }

  void load(const Checkpoint& checkpoint) override {
    m_weights.reset();
    m_weights = reference::load_model_weights(checkpoint, m_threads);
  }

  const ModelConfig& config() const override { return weights().config; }
  Activation activation() const override { return weights().activation; }

  ForwardResult forward(const TokenBatch& tokens, const ForwardOptions& options, Tracer* tracer,
                        const TraceTag& base_tag, const LayerHook& hook) override {
    const auto& model = weights();
    ForwardResult result;
    options.check_layer_paths(model.layers.size());
    result.layers.resize(model.layers.size());

    auto ffn_step = [&](std::size_t layer, const Matrix& input) -> Matrix {
      m_current_layer = layer;
      m_current_input = &input;
      m_last_output = {};
      if (hook) hook(layer);
      Matrix gate_pre;
      const FfnPath path = options.path_of(layer);
      Matrix out = run_path(layer, input, path, options.ffn, tracer,
                            with_op(base_tag, int(layer), to_string(path), ""), &gate_pre,
                            &result.layers[layer].overflow_rows);
      if (options.capture_statistics) {
        const ScopedTrace scope(tracer, with_op(base_tag, static_cast<int>(layer), "", "statistics"));
        result.layers[layer].summary =
            summarize_preactivations(gate_pre.data.data(), static_cast<std::uint32_t>(gate_pre.rows),
                                     static_cast<std::uint32_t>(gate_pre.cols), options.map_shape);
      }
      if (options.on_layer_done) options.on_layer_done(layer, result.layers[layer]);
      return out;
    };
    auto observer = [&](std::size_t layer, const Matrix& hidden) {
      if (options.keep_layer_hidden) result.layers[layer].hidden_out = hidden;
    };

    struct ClearLayerState {
      CpuBackend& backend;
      ~ClearLayerState() {
        backend.m_current_layer.reset();
        backend.m_current_input = nullptr;
        backend.m_last_output = {};
      }
    } clear_on_exit{*this};
    Matrix final_hidden =
        reference::forward_backbone(model, tokens, ffn_step, observer, tracer, base_tag, m_threads);
    if (options.keep_final_hidden) result.final_hidden = std::move(final_hidden);
    return result;
  }

  std::uint64_t run_layer_ffn(std::size_t layer, FfnPath path, const FfnOptions& options, Tracer* tracer,
                              const TraceTag& tag) override {
    if (!m_current_layer || *m_current_layer != layer || m_current_input == nullptr) {
      throw Error(Error::Kind::Internal, "CpuBackend::run_layer_ffn(" + std::to_string(layer) +
                                             ") called outside the forward's hook for that layer");
    }
    std::uint64_t overflow_rows = 0;
    TraceTag base = tag;
    base.layer = static_cast<int>(layer);
    if (base.path.empty()) base.path = to_string(path);
    Matrix out = run_path(layer, *m_current_input, path, options, tracer, base, nullptr, &overflow_rows);
    m_last_output[index_of(path)] = std::move(out);
    return overflow_rows;
  }

  ErrorMetrics compare_layer_ffn_outputs(FfnPath reference, FfnPath candidate) override {
    const auto& a = m_last_output[index_of(reference)];
    const auto& b = m_last_output[index_of(candidate)];
    if (!a || !b) {
      throw Error(Error::Kind::Internal, std::string("CpuBackend::compare_layer_ffn_outputs: no ") +
                                             to_string(!a ? reference : candidate) +
                                             " output for the current layer (run_layer_ffn first)");
    }
    return compare_outputs(*a, *b);
  }

  Matrix ffn(std::size_t layer, const Matrix& input, FfnPath path, const FfnOptions& options) override {
    const auto& model = weights();
    if (layer >= model.layers.size()) {
      throw Error(Error::Kind::InvalidInput, "layer " + std::to_string(layer) +
                                                 " does not exist (the model has " +
                                                 std::to_string(model.layers.size()) + ")");
    }
    std::uint64_t overflow_rows = 0;
    return run_path(layer, input, path, options, nullptr, TraceTag{}, nullptr, &overflow_rows);
  }

 private:
  static std::size_t index_of(FfnPath path) { return path == FfnPath::Dense ? 0 : 1; }

  const reference::ModelWeights& weights() const {
    if (!m_weights) throw Error(Error::Kind::Internal, "CpuBackend: no model loaded (call load first)");
    return *m_weights;
  }

  /// One FFN on `input` through `path`, each stage under its own tag. The fp32 CPU path computes
  /// every product in fp32 already, so FfnOptions::highest_precision changes nothing here.
  Matrix run_path(std::size_t layer, const Matrix& input, FfnPath path, const FfnOptions& options,
                  Tracer* tracer, const TraceTag& tag, Matrix* gate_pre_out, std::uint64_t* overflow_rows) {
    const auto& weights_of_layer = weights().layers[layer];
    cpu::FfnLayerView view;
    view.gate = weights_of_layer.gate.empty() ? nullptr : &weights_of_layer.gate;
    view.up = &weights_of_layer.up;
    view.down = &weights_of_layer.down;
    view.down_t = &weights_of_layer.down_t;
    view.activation = weights().activation;
    const int layer_index = static_cast<int>(layer);
    Matrix gate_pre;
    Matrix out;
    if (path == FfnPath::Dense) {
      Matrix hidden;
      {
        const ScopedTrace scope(tracer, with_op(tag, layer_index, "", "gate_up"));
        cpu::dense_gate_up(input, view, gate_pre, hidden, m_threads);
      }
      const ScopedTrace scope(tracer, with_op(tag, layer_index, "", "down"));
      cpu::dense_down(hidden, view, out, m_threads);
      *overflow_rows = 0;
    } else {
      TwellPacked packed;
      {
        const ScopedTrace scope(tracer, with_op(tag, layer_index, "", "gate_pack"));
        packed = cpu::twell_gate_pack(input, view, options.compression, gate_pre, m_threads);
      }
      {
        const ScopedTrace scope(tracer, with_op(tag, layer_index, "", "up_down"));
        cpu::twell_up_down(input, packed, gate_pre, view, out, m_threads);
      }
      if (!packed.overflow_rows.empty()) {
        const ScopedTrace scope(tracer, with_op(tag, layer_index, "", "overflow_dense"));
        cpu::twell_overflow_dense(input, packed, gate_pre, view, out, m_threads);
      }
      *overflow_rows = packed.overflow_rows.size();
    }
    if (gate_pre_out != nullptr) *gate_pre_out = std::move(gate_pre);
    return out;
  }

  unsigned m_threads;
  std::optional<reference::ModelWeights> m_weights;
  std::optional<std::size_t> m_current_layer;
  const Matrix* m_current_input = nullptr;
  std::array<std::optional<Matrix>, 2> m_last_output;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(unsigned threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace twell
