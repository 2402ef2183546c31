// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <optional>
#include <string>

#include "twell/report.hpp"

/// Exports of a Report. Every exporter returns the file's whole text; callers write it with
/// write_file_atomically. Numbers are written locale-independently ('.' decimal point, no
/// thousands separators), whatever the process locale.
namespace twell {

enum class ExportFormat {
  LayersCsv,    ///< "csv": one row per layer
  KernelsCsv,   ///< "kernels-csv": one row per kernel name within (layer, path, op)
  ChromeTrace,  ///< "trace": Chrome trace event JSON, for Perfetto (ui.perfetto.dev)
  Markdown,     ///< "markdown": a human summary
};
/// "csv", "kernels-csv", "trace", "markdown".
std::optional<ExportFormat> export_format_from_string(const std::string& name);
const char* to_string(ExportFormat format) noexcept;

/// RFC 4180 (CRLF line ends, fields quoted when they hold a comma, quote, CR or LF). Columns:
/// layer, density, nnz_mean, nnz_p99, nnz_max, dead_neurons, tile_max, overflow_rows, dense_us,
/// twell_us, speedup, rel_error, then nnz_p50, nnz_p90, tokens, neurons, compression,
/// tile_capacity, max_abs_error, cosine, timing_clock. overflow_rows is at the report's C; an
/// empty field is a value that was not measured.
std::string export_layers_csv(const Report& report);

/// RFC 4180. Columns: layer, path, op, kernel, count, median_us, min_us, max_us, timing_clock.
std::string export_kernels_csv(const Report& report);

/// Chrome trace event JSON of the report's timeline. One process; one track (tid) per (phase,
/// path): "dense: layer FFN", "twell: layer FFN", "dense: end to end", ...; each layer a slice
/// with its kernels nested inside, each end-to-end forward a slice around its layers. Slices on a
/// track never partly overlap: a record that would (concurrent kernels, or nested regions of a
/// region tracer) moves to an extra track of the same group ("... (overlap 1)"). Timestamps in µs
/// relative to baseTimeNanoseconds; per-layer density as a counter track.
std::string export_chrome_trace(const Report& report);

/// A Markdown summary: run facts, warnings, end-to-end throughput, a per-layer table.
std::string export_markdown(const Report& report);

std::string export_report(const Report& report, ExportFormat format);

}  // namespace twell
