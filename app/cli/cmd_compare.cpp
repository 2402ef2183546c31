// SPDX-License-Identifier: GPL-3.0-or-later
// `twellscope-cli compare A.json B.json [--out FILE]`: B against the baseline A, layer by layer.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "twell/atomic_file.hpp"
#include "twell/error.hpp"
#include "twell/report_compare.hpp"
#include "twell/report_io.hpp"

namespace twell::cli {
namespace {

struct CompareArguments {
  std::string baseline, candidate;
  std::string out;
  std::string format;
  double threshold = 0.05;
};

void run_compare(const CompareArguments& a) {
  const Report baseline = load_report(a.baseline);
  const Report candidate = load_report(a.candidate);
  const ReportComparison comparison =
      compare_reports(baseline, candidate, a.baseline, a.candidate, a.threshold);
  const std::string format = !a.format.empty() ? a.format : a.out.empty() ? "text" : "markdown";
  const std::string text =
      format == "markdown" ? comparison_markdown(comparison) : comparison_text(comparison);
  if (a.out.empty() || a.out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  write_file_atomically(a.out, text);
  std::fprintf(stderr, "Wrote %s (%s)\n", a.out.c_str(), format.c_str());
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto a = std::make_shared<CompareArguments>();
  auto* command = app.add_subcommand(
      "compare",
      "Compare report B with baseline A: per-layer deltas of timings and sparsity, with a summary");
  command->add_option("A", a->baseline, "Baseline report (JSON)")->required()->check(CLI::ExistingFile);
  command->add_option("B", a->candidate, "Report to compare with the baseline (JSON)")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--out", a->out, "Write to this file (atomically) instead of standard output");
  command
      ->add_option("--format", a->format,
                   "text or markdown (default: text on standard output, markdown with --out)")
      ->check(CLI::IsMember({"text", "markdown"}));
  command->add_option("--threshold", a->threshold, "Relative time change counted as slower/faster, not noise")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->footer(kExitCodesHelp);
  command->callback([a] { run_compare(*a); });
}

}  // namespace twell::cli
