// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "twell/backend.hpp"
#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/report.hpp"
#include "twell/tokens.hpp"
#include "twell/tracer.hpp"

namespace twell {

/// Where a running session is, for progress bars.
struct SessionProgress {
  std::string stage;      ///< "layers" (forward with the per-layer FFN comparison), "end_to_end", "done"
  std::size_t layer = 0;  ///< layers (or end-to-end forwards) finished in this stage
  std::size_t layer_count = 0;         ///< of how many
  double fraction = 0;                 ///< of the whole session, 0..1, never decreasing
  std::optional<double> seconds_left;  ///< extrapolated once enough work is done to say
};
/// Called between units of work; returning false cancels the session (Error::Kind::Cancelled).
using ProgressCallback = std::function<bool(const SessionProgress&)>;

/// A run that failed (a GPU fault, out of memory...) after at least one layer finished: the error,
/// of the cause's kind, carries the report of the finished layers, marked incomplete in its first
/// warning, so a front end can keep it.
class IncompleteRunError : public Error {
 public:
  IncompleteRunError(Kind kind, const std::string& message, Report partial)
      : Error(kind, message), m_partial(std::make_shared<const Report>(std::move(partial))) {}
  const Report& partial_report() const noexcept { return *m_partial; }

 private:
  std::shared_ptr<const Report> m_partial;  // shared: exceptions are copied
};

/// The model part of a report, from an opened checkpoint; `source` is what the user named
/// (a directory, or "demo").
ModelSummary summarize_model(const Checkpoint& checkpoint, const std::string& source);

/// One profiling run (ARCHITECTURE.md, "How data flows"):
/// 1. a forward with the dense FFN capturing every layer's activation statistics; inside it, for
///    each selected layer and each path, warm-up then timed repetitions of that layer's FFN on
///    the captured input (tags: phase "layer_ffn", layer, path, repetition, warmup; the L2 is
///    flushed before each timed repetition when config.flush_l2), then TwELL's output compared
///    with dense's;
/// 2. when config.end_to_end, the whole forward with each FFN path (phase "end_to_end"), warm-up
///    then timed repetitions; tokens/ms from each repetition's span. When both paths are profiled
///    and the backend states a break-even, also the forward with each layer on the path the
///    per-layer dispatch picks for the density step 1 measured (path "dispatch");
/// 3. the Report, with warnings a reader must not miss (tile overflow at the chosen C, layers
///    where TwELL is slower than dense, CPU timings, a fallback tracer).
/// The backend must be loaded with the model `model` describes. A cancelled run throws Cancelled
/// and returns nothing. A run that fails after some layers finished throws IncompleteRunError with
/// the report of those layers (no end-to-end figures); one that fails before rethrows the cause.
class Session {
 public:
  Session(Backend& backend, Tracer& tracer, ModelSummary model);
  /// `tokens` overrides config.batch, sequence and token_source (the report says what ran).
  /// Throws twell::Error: InvalidInput for a bad configuration, Cancelled when `progress` said so,
  /// IncompleteRunError (see above) for a failure part-way.
  Report run(const ProfileConfig& config, const TokenBatch& tokens, const ProgressCallback& progress = {});

 private:
  /// What a run gathered, layer by layer; a layer without a summary did not finish.
  struct RunData {
    std::vector<bool> selected;
    std::vector<std::optional<ActivationSummary>> summaries;
    std::vector<std::uint64_t> overflow_rows;
    std::vector<std::optional<ErrorMetrics>> errors;
    std::vector<KernelRecord> layer_records, forward_records;
    std::optional<FfnBreakEven> break_even;  ///< the one set for the run, else the backend's
    std::vector<std::string> forward_paths;  ///< the end-to-end forwards, in the order they ran
  };
  Report assemble_report(const ProfileConfig& config, const TokenBatch& tokens, const RunData& data) const;
  [[noreturn]] void throw_incomplete(const Error& failure, const char* stage, const ProfileConfig& config,
                                     const TokenBatch& tokens, RunData data,
                                     std::size_t selected_count) const;

  Backend& m_backend;
  Tracer& m_tracer;
  ModelSummary m_model;
};

/// The warnings a finished report must carry, derived from its contents: tile overflow at the
/// chosen compression factor, layers where TwELL is slower than dense (below break-even), CPU
/// timings, a fallback tracer and why.
std::vector<std::string> derive_report_warnings(const Report& report);

/// ISO 8601 UTC time of now, to the second ("2026-12-02T08:00:00Z").
std::string utc_timestamp_now();

}  // namespace twell
