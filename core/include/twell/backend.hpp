// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "twell/activation_summary.hpp"
#include "twell/checkpoint.hpp"
#include "twell/ffn_dispatch.hpp"
#include "twell/kernel_variant.hpp"
#include "twell/matrix.hpp"
#include "twell/tokens.hpp"
#include "twell/tracer.hpp"
#include "twell/twell_kernel_request.hpp"

namespace twell {

/// The machine a backend runs on, as reports and `devices` show it.
struct DeviceInfo {
  std::string backend;             ///< "cpu" or "cuda"
  std::string name;                ///< GPU name or CPU model
  std::string compute_capability;  ///< "9.0"; empty on the CPU
  int multiprocessor_count = 0;    ///< SMs, or CPU threads used
  std::uint64_t memory_bytes = 0;
  std::string driver_version;
  std::string runtime_version;
  std::string kernel_family;  ///< "hopper-sm90a", "portable-sm80", "cpu-reference"
  bool operator==(const DeviceInfo&) const = default;
};

struct FfnOptions {
  std::uint32_t compression = 8;     ///< TwELL C: 8, 4 or 2
  bool highest_precision = false;    ///< all-fp32 up/down products (TwELL)
  TwellKernelRequest twell_kernels;  ///< the TwELL kernels to run (auto: the backend's choice)
};

struct LayerCapture {
  ActivationSummary summary;  ///< from the gate's ReLU mask
  Matrix hidden_out;          ///< residual stream after the layer, if keep_layer_hidden
  /// Rows that overflowed a TwELL tile (TwELL path), recomputed apart. A backend may read it only
  /// after the forward, so ForwardOptions::on_layer_done can see it still 0.
  std::uint64_t overflow_rows = 0;
};

struct ForwardOptions {
  FfnPath ffn_path = FfnPath::Dense;
  /// The path of each layer's FFN, in layer order (the per-layer dispatch); when empty, every
  /// layer runs on ffn_path. Otherwise it names every layer of the model, or the forward refuses.
  std::vector<FfnPath> layer_paths;
  FfnOptions ffn;
  bool capture_statistics = false;  ///< fill ForwardResult::layers[i].summary
  MapShape map_shape;
  bool keep_final_hidden = false;  ///< copy the final-normed hidden states to the host
  bool keep_layer_hidden = false;  ///< copy every layer's output hidden state (tests; small models)
  /// Called as each layer finishes (its FFN and statistics done), so a caller keeps the layers that
  /// finished when a later one fails.
  std::function<void(std::size_t layer, const LayerCapture& capture)> on_layer_done;

  FfnPath path_of(std::size_t layer) const;
  bool runs_any_layer_on(FfnPath path) const;
  /// Throws Error::InvalidInput when layer_paths is neither empty nor one path per layer.
  void check_layer_paths(std::size_t layer_count) const;
};

struct ForwardResult {
  std::vector<LayerCapture> layers;
  Matrix final_hidden;  ///< [M, D], if keep_final_hidden
};

/// Output comparison of two FFN runs on the same input (see core/metrics.hpp).
struct ErrorMetrics {
  double rel_frobenius = 0;  ///< ||b - a||_F / ||a||_F
  double max_abs = 0;
  double cosine = 1;
  bool operator==(const ErrorMetrics&) const = default;
};

/// Called during a forward with the layer index once that layer's FFN input is ready, before
/// its FFN runs; inside it the caller may run the layer's FFN on that input (run_layer_ffn).
/// Keeps memory at one layer's activations however many layers are profiled.
using LayerHook = std::function<void(std::size_t layer)>;

/// Runs a loaded model on one device. Implementations: CpuBackend (core), CudaBackend (kernels).
/// Every launch group is wrapped in the tracer's tags so timings are attributed to
/// (layer, path, op, repetition).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceInfo device() const = 0;
  /// Copies the weights into the backend's layouts (once). The Checkpoint may be closed after.
  virtual void load(const Checkpoint& checkpoint) = 0;
  virtual const ModelConfig& config() const = 0;
  virtual Activation activation() const = 0;

  /// The whole backbone (no LM head) on `tokens`. `tracer` may be null. Ops are tagged with
  /// `base_tag` plus layer and op. `hook`, if set, is called for each layer (see LayerHook).
  virtual ForwardResult forward(const TokenBatch& tokens, const ForwardOptions& options, Tracer* tracer,
                                const TraceTag& base_tag, const LayerHook& hook) = 0;

  /// Inside a LayerHook: runs `layer`'s FFN on its current input through `path`, tagged with `tag`
  /// (its op is filled per launch group). Returns the rows recomputed densely (TwELL overflow).
  virtual std::uint64_t run_layer_ffn(std::size_t layer, FfnPath path, const FfnOptions& options,
                                      Tracer* tracer, const TraceTag& tag) = 0;
  /// Inside a LayerHook, after both paths ran: compares the last outputs of `reference` and
  /// `candidate`, computed where they live.
  virtual ErrorMetrics compare_layer_ffn_outputs(FfnPath reference, FfnPath candidate) = 0;

  /// A layer's FFN on an explicit host input [M, D] (tests, ad hoc checks).
  virtual Matrix ffn(std::size_t layer, const Matrix& input, FfnPath path, const FfnOptions& options) = 0;

  /// The density past which this device runs a `tokens`-row FFN of the loaded model faster dense
  /// than TwELL: the per-layer dispatch's threshold (ffn_dispatch.hpp). Empty where the backend has
  /// no basis for one (the default; the CPU backend, whose timings do not predict a GPU's).
  virtual std::optional<FfnBreakEven> ffn_break_even(std::size_t tokens, const FfnOptions& options) const;

  /// Throws twell::Error (Kind::Unsupported) naming what this backend cannot run of `options`, e.g.
  /// TwELL kernels it does not have or that this device cannot run; a profile checks before it starts.
  virtual void check_ffn_options(const FfnOptions& options) const;

  /// The kernels this backend runs for the FFN ops, each described in a line (kernel_variant.hpp):
  /// what a report lists so that every FFN timing names the code that produced it.
  virtual std::vector<KernelVariant> kernel_variants() const { return {}; }

  /// The stream/queue its work runs on (cudaStream_t for CUDA; null on the CPU), for tracers.
  virtual void* native_stream() const { return nullptr; }
  /// Flushes the L2 cache between timed repetitions where the device has one (no-op on the CPU).
  virtual void flush_cache() {}
};

/// The CPU reference backend (threads over the machine's cores).
std::unique_ptr<Backend> make_cpu_backend(unsigned threads = 0);

}  // namespace twell
