// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/session.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <set>

#include "text_format.hpp"
#include "twell/error.hpp"
#include "twell/sparsity_stats.hpp"
#include "twell/timing_aggregate.hpp"
#include "twell/trace_attribution.hpp"
#include "twell/version.hpp"

namespace twell {
namespace {

constexpr const char* kLayerPhase = "layer_ffn";
constexpr const char* kEndToEndPhase = "end_to_end";
constexpr const char* kCapturePhase = "capture";

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown";
  return buffer;
}

FfnOptions ffn_options(const ProfileConfig& config) {
  FfnOptions options;
  options.compression = config.compression;
  options.highest_precision = config.highest_precision;
  options.twell_kernels = config.twell_kernels;
  return options;
}

FfnPath path_from_name(const std::string& name) {
  return name == "dense" ? FfnPath::Dense : FfnPath::Twell;
}

/// Each layer's path by the density the capture forward measured on this batch.
std::vector<FfnPath> dispatch_layer_paths(const std::vector<std::optional<ActivationSummary>>& summaries,
                                          const FfnBreakEven& break_even) {
  std::vector<double> densities;
  densities.reserve(summaries.size());
  for (const auto& summary : summaries) densities.push_back(compute_sparsity_stats(*summary).density);
  return choose_ffn_paths(densities, break_even);
}

/// Work is counted in "FFN runs": a whole forward costs about one per layer, so the per-layer
/// repetitions and the end-to-end forwards share one scale and the fraction moves evenly.
class ProgressTracker {
 public:
  ProgressTracker(const ProgressCallback& callback, double total_units)
      : m_callback(callback),
        m_total(std::max(total_units, 1.0)),
        m_start(std::chrono::steady_clock::now()) {}

  void advance(double units, const std::string& stage, std::size_t done, std::size_t count) {
    m_done = std::min(m_total, m_done + units);
    report(stage, done, count, m_done / m_total);
  }
  /// Counts work inside a unit the caller reports with advance(); calls back at most every 50 ms,
  /// so a long layer still shows movement and can be cancelled without flooding the callback.
  void tick(double units, const std::string& stage, std::size_t done, std::size_t count) {
    m_done = std::min(m_total, m_done + units);
    if (std::chrono::steady_clock::now() - m_last_report >= std::chrono::milliseconds(50))
      report(stage, done, count, m_done / m_total);
  }
  void finish() { report("done", 1, 1, 1.0); }
  void start(const std::string& stage, std::size_t count) { report(stage, 0, count, m_done / m_total); }

 private:
  void report(const std::string& stage, std::size_t done, std::size_t count, double fraction) {
    if (!m_callback) return;
    m_last_report = std::chrono::steady_clock::now();
    SessionProgress progress;
    progress.stage = stage;
    progress.layer = done;
    progress.layer_count = count;
    progress.fraction = fraction;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    // Extrapolating from the first few percent mostly measures start-up; wait a little.
    if (fraction >= 0.02 && fraction < 1.0) progress.seconds_left = elapsed * (1.0 - fraction) / fraction;
    if (fraction >= 1.0) progress.seconds_left = 0.0;
    if (!m_callback(progress)) throw Error(Error::Kind::Cancelled, "profiling cancelled");
  }

  const ProgressCallback& m_callback;
  double m_total;
  double m_done = 0;
  std::chrono::steady_clock::time_point m_start;
  std::chrono::steady_clock::time_point m_last_report{};
};

void validate(const ProfileConfig& config, const TokenBatch& tokens, const ModelSummary& model) {
  auto invalid = [](const std::string& what) {
    throw Error(Error::Kind::InvalidInput, "profile configuration: " + what);
  };
  if (config.paths.empty()) invalid("no FFN path selected (choose dense, twell or both)");
  std::set<std::string> seen;
  for (const auto& path : config.paths) {
    if (path != "dense" && path != "twell")
      invalid("unknown FFN path \"" + path + "\" (expected dense or twell)");
    if (!seen.insert(path).second) invalid("FFN path \"" + path + "\" listed twice");
  }
  if (std::find(std::begin(kCompressionFactors), std::end(kCompressionFactors), config.compression) ==
      std::end(kCompressionFactors))
    invalid("compression factor C=" + std::to_string(config.compression) + " is not one of 8, 4, 2");
  if (config.repetitions == 0) invalid("at least one timed repetition is needed");
  const auto layer_count = model.config.num_hidden_layers;
  for (int layer : config.layers)
    if (layer < 0 || layer >= layer_count)
      invalid("layer " + std::to_string(layer) + " does not exist (the model has " +
              std::to_string(layer_count) + " layers, 0 to " + std::to_string(layer_count - 1) + ")");
  if (tokens.count() == 0 || tokens.count() != std::size_t(tokens.batch) * tokens.sequence)
    invalid("the token batch is empty or not batch x sequence");
  if (config.dispatch_break_even && !is_settable_break_even(*config.dispatch_break_even))
    invalid("the dispatch break-even " + std::to_string(*config.dispatch_break_even) +
            " is not a density fraction in (0, 1), e.g. 0.013 for 1.3 %");
}

/// The break-even the run's dispatch applies: the configured one, else the backend's.
std::optional<FfnBreakEven> run_break_even(const ProfileConfig& config, const Backend& backend,
                                           std::size_t tokens, const FfnOptions& ffn) {
  if (!config.dispatch_break_even) return backend.ffn_break_even(tokens, ffn);
  std::string basis = "set for this run";
  if (const auto device = backend.ffn_break_even(tokens, ffn))
    basis += " (the device's own: " + text::percent(device->density, 2) + ", " + device->basis + ")";
  return FfnBreakEven{*config.dispatch_break_even, false, basis};
}

}  // namespace

ModelSummary summarize_model(const Checkpoint& checkpoint, const std::string& source) {
  ModelSummary summary;
  summary.source = source;
  summary.config = checkpoint.config();
  summary.activation = checkpoint.activation();
  summary.parameters = checkpoint.parameter_count();
  return summary;
}

std::string utc_timestamp_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

Session::Session(Backend& backend, Tracer& tracer, ModelSummary model)
    : m_backend(backend), m_tracer(tracer), m_model(std::move(model)) {}

Report Session::run(const ProfileConfig& requested, const TokenBatch& tokens,
                    const ProgressCallback& progress) {
  validate(requested, tokens, m_model);
  ProfileConfig config = requested;
  config.batch = tokens.batch;
  config.sequence = tokens.sequence;
  if (!tokens.source.empty()) config.token_source = tokens.source;
  std::sort(config.layers.begin(), config.layers.end());
  config.layers.erase(std::unique(config.layers.begin(), config.layers.end()), config.layers.end());

  const auto layer_count = static_cast<std::size_t>(m_model.config.num_hidden_layers);
  RunData data;
  std::vector<bool>& selected = data.selected;
  selected.assign(layer_count, config.layers.empty());
  for (int layer : config.layers) selected[static_cast<std::size_t>(layer)] = true;
  const auto selected_count = static_cast<std::size_t>(std::count(selected.begin(), selected.end(), true));
  const bool compare_paths =
      std::find(config.paths.begin(), config.paths.end(), "dense") != config.paths.end() &&
      std::find(config.paths.begin(), config.paths.end(), "twell") != config.paths.end();

  const FfnOptions ffn = ffn_options(config);
  m_backend.check_ffn_options(ffn);  // before anything runs: kernels this backend or device lacks
  data.break_even = run_break_even(config, m_backend, tokens.count(), ffn);
  // The dispatch forward needs both paths measured and a break-even to choose between them by.
  std::vector<std::string>& forward_paths = data.forward_paths;
  if (config.end_to_end) {
    forward_paths = config.paths;
    if (compare_paths && data.break_even) forward_paths.push_back(kDispatchForwardPath);
  }
  const double runs_per_path = double(config.warmup) + double(config.repetitions);
  const double layer_units = double(config.paths.size()) * runs_per_path;
  const double forward_units = double(layer_count);
  const double total_units = forward_units + double(selected_count) * layer_units +
                             double(forward_paths.size()) * runs_per_path * forward_units;
  ProgressTracker tracker(progress, total_units);

  // Records left over from earlier work on this tracer belong to nobody in this report.
  m_tracer.collect();

  // 1. Capture forward, with the per-layer comparison inside its hook.
  data.overflow_rows.assign(layer_count, 0);
  data.errors.resize(layer_count);
  data.summaries.resize(layer_count);  // filled as layers finish, so a failure keeps them
  std::size_t layers_done = 0;
  const char* stage = "the per-layer comparison";
  try {
    tracker.start("layers", layer_count);
    auto hook = [&](std::size_t layer) {
      if (layer < layer_count && selected[layer]) {
        for (const auto& path_name : config.paths) {
          const FfnPath path = path_from_name(path_name);
          for (std::uint32_t rep = 0; rep < config.warmup; ++rep) {
            m_backend.run_layer_ffn(layer, path, ffn, &m_tracer,
                                    {kLayerPhase, int(layer), path_name, "", int(rep), true});
            tracker.tick(1.0, "layers", layers_done, layer_count);
          }
          for (std::uint32_t rep = 0; rep < config.repetitions; ++rep) {
            if (config.flush_l2) m_backend.flush_cache();
            data.overflow_rows[layer] = m_backend.run_layer_ffn(
                layer, path, ffn, &m_tracer, {kLayerPhase, int(layer), path_name, "", int(rep), false});
            tracker.tick(1.0, "layers", layers_done, layer_count);
          }
        }
        if (compare_paths)
          data.errors[layer] = m_backend.compare_layer_ffn_outputs(FfnPath::Dense, FfnPath::Twell);
      }
      for (auto& record : m_tracer.collect())
        if (record.tag.phase != kCapturePhase) data.layer_records.push_back(std::move(record));
      tracker.advance(1.0, "layers", ++layers_done, layer_count);
    };
    ForwardOptions capture;
    capture.ffn_path = FfnPath::Dense;
    capture.ffn = ffn;
    capture.capture_statistics = true;
    capture.map_shape = config.map_shape;
    capture.on_layer_done = [&](std::size_t layer, const LayerCapture& done) {
      if (layer < layer_count) data.summaries[layer] = done.summary;
    };
    ForwardResult captured =
        m_backend.forward(tokens, capture, &m_tracer, {kCapturePhase, -1, "", "", 0, false}, hook);
    for (auto& record : m_tracer.collect())
      if (record.tag.phase != kCapturePhase) data.layer_records.push_back(std::move(record));
    if (captured.layers.size() != layer_count)
      throw Error(Error::Kind::Internal, "the backend's forward returned " +
                                             std::to_string(captured.layers.size()) +
                                             " layers for a model of " + std::to_string(layer_count));
    for (std::size_t layer = 0; layer < layer_count; ++layer)
      if (!data.summaries[layer])
        throw Error(Error::Kind::Internal, "the backend's forward did not report layer " +
                                               std::to_string(layer) +
                                               " as done (ForwardOptions::on_layer_done)");

    // 2. End to end.
    stage = "the end-to-end forwards";
    if (!forward_paths.empty()) {
      const std::size_t forwards = forward_paths.size() * std::size_t(runs_per_path);
      std::size_t forwards_done = 0;
      tracker.start("end_to_end", forwards);
      for (const auto& path_name : forward_paths) {
        ForwardOptions options;
        if (path_name == kDispatchForwardPath)
          options.layer_paths = dispatch_layer_paths(data.summaries, *data.break_even);
        else
          options.ffn_path = path_from_name(path_name);
        options.ffn = ffn;
        for (std::uint32_t rep = 0; rep < config.warmup + config.repetitions; ++rep) {
          const bool warmup = rep < config.warmup;
          const int number = int(warmup ? rep : rep - config.warmup);
          if (!warmup && config.flush_l2) m_backend.flush_cache();
          m_backend.forward(tokens, options, &m_tracer, {kEndToEndPhase, -1, path_name, "", number, warmup},
                            {});
          for (auto& record : m_tracer.collect())
            if (record.tag.phase == kEndToEndPhase) data.forward_records.push_back(std::move(record));
          tracker.advance(forward_units, "end_to_end", ++forwards_done, forwards);
        }
      }
    }
  } catch (const Error& failure) {
    if (failure.kind() == Error::Kind::Cancelled) throw;
    throw_incomplete(failure, stage, config, tokens, std::move(data), selected_count);
  }

  Report report = assemble_report(config, tokens, data);
  tracker.finish();
  return report;
}

Report Session::assemble_report(const ProfileConfig& config, const TokenBatch& tokens,
                                const RunData& data) const {
  Report report;
  report.tool_version = version();
  report.tool_commit = git_commit();
  report.created_utc = utc_timestamp_now();
  report.host = host_name();
  report.device = m_backend.device();
  report.kernel_variants = m_backend.kernel_variants();
  report.tracer = m_tracer.info();
  report.model = m_model;
  report.config = config;
  for (std::size_t layer = 0; layer < data.selected.size(); ++layer) {
    if (!data.selected[layer]) continue;
    LayerReport entry;
    entry.index = int(layer);
    entry.sparsity = compute_sparsity_stats(*data.summaries[layer]);
    entry.paths = timing::path_timings(data.layer_records, int(layer), kLayerPhase);
    for (auto& path : entry.paths)
      if (path.path == "twell") path.overflow_rows = data.overflow_rows[layer];
    entry.twell_vs_dense = data.errors[layer];
    report.layers.push_back(std::move(entry));
  }
  for (const auto& path_name : data.forward_paths) {
    timing::RecordFilter filter;
    filter.phase = kEndToEndPhase;
    filter.path = path_name;
    EndToEndPath entry;
    entry.path = path_name;
    entry.forward = timing::span_stat(data.forward_records, filter);
    if (entry.forward.count > 0) entry.occupied = timing::occupied_stat(data.forward_records, filter);
    if (entry.forward.median_us > 0)
      entry.tokens_per_ms = double(tokens.count()) / (entry.forward.median_us / 1000.0);
    report.end_to_end.push_back(std::move(entry));
  }
  report.kernels = timing::kernel_stats(data.layer_records, kLayerPhase);

  // The timeline: the first timed repetition of every layer's comparison and of each forward.
  for (const auto* records : {&data.layer_records, &data.forward_records}) {
    timing::RecordFilter filter;
    filter.phase = records == &data.layer_records ? kLayerPhase : kEndToEndPhase;
    if (const auto rep = timing::first_timed_repetition(*records, filter)) {
      auto chosen = timing::records_of_repetition(*records, *rep, filter);
      report.timeline.insert(report.timeline.end(), std::make_move_iterator(chosen.begin()),
                             std::make_move_iterator(chosen.end()));
    }
  }
  sort_by_start(report.timeline);
  report.dispatch_break_even = data.break_even;
  report.warnings = derive_report_warnings(report);
  return report;
}

void Session::throw_incomplete(const Error& failure, const char* stage, const ProfileConfig& config,
                               const TokenBatch& tokens, RunData data, std::size_t selected_count) const {
  // Keep what finished: the selected layers whose comparison and statistics both completed.
  std::vector<int> finished;
  for (std::size_t layer = 0; layer < data.selected.size(); ++layer) {
    if (data.selected[layer] && !data.summaries[layer]) data.selected[layer] = false;
    if (data.selected[layer]) finished.push_back(int(layer));
  }
  if (finished.empty()) throw;  // called inside the handler: rethrows the cause as it was
  std::erase_if(data.layer_records, [&](const KernelRecord& record) {
    return record.tag.layer < 0 || std::size_t(record.tag.layer) >= data.selected.size() ||
           !data.selected[std::size_t(record.tag.layer)];
  });
  data.forward_records.clear();
  data.forward_paths.clear();
  ProfileConfig finished_config = config;
  finished_config.layers = finished;
  finished_config.end_to_end = false;
  Report partial = assemble_report(finished_config, tokens, data);
  partial.warnings.insert(partial.warnings.begin(),
                          std::string("INCOMPLETE: the run failed during ") + stage + " after " +
                              std::to_string(finished.size()) + " of " + std::to_string(selected_count) +
                              " selected layers; this report holds those layers only" +
                              (config.end_to_end ? ", without end-to-end throughput" : "") +
                              ". The failure: " + failure.what());
  throw IncompleteRunError(failure.kind(),
                           std::string(failure.what()) + " (the report of the " +
                               std::to_string(finished.size()) + " layers that finished is kept)",
                           std::move(partial));
}

}  // namespace twell
