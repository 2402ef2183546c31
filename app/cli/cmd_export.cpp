// SPDX-License-Identifier: GPL-3.0-or-later
// `twellscope-cli export REPORT.json --format csv|kernels-csv|trace|markdown --out FILE`.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "twell/atomic_file.hpp"
#include "twell/error.hpp"
#include "twell/report_export.hpp"
#include "twell/report_io.hpp"

namespace twell::cli {
namespace {

struct ExportArguments {
  std::string report;
  std::string format;
  std::string out;
};

void run_export(const ExportArguments& a) {
  const auto format = export_format_from_string(a.format);
  if (!format)
    throw Error(Error::Kind::InvalidInput,
                "--format " + a.format + ": expected csv, kernels-csv, trace or markdown");
  const Report report = load_report(a.report);
  const std::string text = export_report(report, *format);
  if (a.out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  write_file_atomically(a.out, text);
  std::fprintf(stderr, "Wrote %s (%s, %zu bytes)\n", a.out.c_str(), to_string(*format), text.size());
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArguments>();
  auto* command =
      app.add_subcommand("export", "Export a report as CSV, a Chrome trace for Perfetto, or Markdown");
  command->add_option("REPORT", a->report, "Report written by `profile` (JSON)")
      ->required()
      ->check(CLI::ExistingFile);
  command
      ->add_option("--format", a->format,
                   "csv: one row per layer; kernels-csv: one row per kernel; trace: Chrome trace JSON "
                   "(open in ui.perfetto.dev); markdown: a summary")
      ->required()
      ->check(CLI::IsMember({"csv", "kernels-csv", "trace", "markdown"}));
  command->add_option("--out", a->out, "File to write (atomically), or - for standard output")->required();
  command->footer(kExitCodesHelp);
  command->callback([a] { run_export(*a); });
}

}  // namespace twell::cli
