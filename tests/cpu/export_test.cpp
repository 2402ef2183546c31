// SPDX-License-Identifier: GPL-3.0-or-later
// Exports checked structurally: CSV by an RFC 4180 parser, the Chrome trace by the nesting rule
// Perfetto needs, Markdown by its tables.
#include <gtest/gtest.h>

#include <charconv>
#include <clocale>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "report_fixture.hpp"
#include "twell/report_export.hpp"

namespace {

using nlohmann::json;
using Rows = std::vector<std::vector<std::string>>;

/// Strict RFC 4180: CRLF after every record, quoted fields with doubled quotes.
Rows parse_csv(const std::string& text) {
  Rows rows;
  std::vector<std::string> row;
  std::string field;
  std::size_t i = 0;
  bool field_started = false;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' && !field_started) {
      ++i;
      while (true) {
        if (i >= text.size()) throw std::runtime_error("unterminated quoted field");
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += text[i++];
      }
      field_started = true;
      if (i < text.size() && text[i] != ',' && text[i] != '\r')
        throw std::runtime_error("text after a closing quote");
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      field_started = false;
      ++i;
    } else if (c == '\r') {
      if (i + 1 >= text.size() || text[i + 1] != '\n') throw std::runtime_error("CR without LF");
      row.push_back(field);
      rows.push_back(row);
      row.clear();
      field.clear();
      field_started = false;
      i += 2;
    } else {
      if (c == '"' || c == '\n') throw std::runtime_error("bare quote or LF inside an unquoted field");
      field += c;
      field_started = true;
      ++i;
    }
  }
  if (!row.empty() || !field.empty()) throw std::runtime_error("last record not terminated by CRLF");
  return rows;
}

double number(const std::string& text) {
  double value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  EXPECT_TRUE(result.ec == std::errc() && result.ptr == text.data() + text.size())
      << "not a C-locale number: " << text;
  return value;
}

std::size_t column(const std::vector<std::string>& header, const std::string& name) {
  const auto it = std::find(header.begin(), header.end(), name);
  EXPECT_NE(it, header.end()) << name;
  return static_cast<std::size_t>(it - header.begin());
}

struct TraceSlice {
  long long start, end;
  std::string name;
};

/// Per (pid, tid): X slices that partly overlap, as "tid N: A overlaps B".
std::vector<std::string> overlapping_slices(const json& trace) {
  std::map<std::pair<int, int>, std::vector<TraceSlice>> tracks;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const long long start = std::llround(e["ts"].get<double>() * 1000.0);
    const long long end = start + std::llround(e["dur"].get<double>() * 1000.0);
    tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({start, end, e["name"].get<std::string>()});
  }
  std::vector<std::string> problems;
  for (auto& [track, slices] : tracks) {
    std::sort(slices.begin(), slices.end(), [](const TraceSlice& a, const TraceSlice& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<const TraceSlice*> open;
    for (const auto& s : slices) {
      while (!open.empty() && open.back()->end <= s.start) open.pop_back();
      if (!open.empty() && s.end > open.back()->end)
        problems.push_back("tid " + std::to_string(track.second) + ": " + s.name + " overlaps " +
                           open.back()->name);
      open.push_back(&s);
    }
  }
  return problems;
}

twell::Report report_with_awkward_names() {
  twell::test::SyntheticReportShape shape;
  shape.kernel_names = {"void gemm<float, 128>(Params, int)",
                        "name with \"quotes\", commas\nand a line break", "unicode ✓ 核"};
  twell::Report report = twell::test::make_synthetic_report(shape);
  report.model.source = "models/a|b";
  return report;
}

}  // namespace

TEST(ExportCsv, LayerTableHasTheDocumentedColumnsAndValues) {
  twell::Report report = twell::test::make_synthetic_report();
  report.layers[2].paths.pop_back();  // layer 2 without TwELL: its TwELL fields are empty
  report.layers[2].twell_vs_dense.reset();
  const Rows rows = parse_csv(twell::export_layers_csv(report));
  ASSERT_EQ(rows.size(), report.layers.size() + 1);
  const std::vector<std::string> required = {"layer",    "density",      "nnz_mean", "nnz_p99",
                                             "nnz_max",  "dead_neurons", "tile_max", "overflow_rows",
                                             "dense_us", "twell_us",     "speedup",  "rel_error"};
  const auto& header = rows[0];
  ASSERT_GE(header.size(), required.size());
  EXPECT_TRUE(std::equal(required.begin(), required.end(), header.begin()));
  for (std::size_t r = 1; r < rows.size(); ++r) {
    ASSERT_EQ(rows[r].size(), header.size()) << "row " << r;
    const twell::LayerReport& layer = report.layers[r - 1];
    EXPECT_EQ(rows[r][column(header, "layer")], std::to_string(layer.index));
    EXPECT_EQ(number(rows[r][column(header, "density")]), layer.sparsity.density);
    EXPECT_EQ(number(rows[r][column(header, "nnz_p99")]), layer.sparsity.nnz_per_token.p99);
    EXPECT_EQ(number(rows[r][column(header, "dead_neurons")]), layer.sparsity.dead_neurons);
    EXPECT_EQ(number(rows[r][column(header, "overflow_rows")]),
              double(layer.sparsity.capacity[0].overflow_rows));
    EXPECT_EQ(number(rows[r][column(header, "dense_us")]), layer.find_path("dense")->total.median_us);
    EXPECT_EQ(rows[r][column(header, "timing_clock")], "gpu");
  }
  EXPECT_EQ(number(rows[1][column(header, "speedup")]), *report.layers[0].speedup());
  EXPECT_EQ(number(rows[1][column(header, "rel_error")]), report.layers[0].twell_vs_dense->rel_frobenius);
  EXPECT_EQ(rows[3][column(header, "twell_us")], "");
  EXPECT_EQ(rows[3][column(header, "speedup")], "");
  EXPECT_EQ(rows[3][column(header, "rel_error")], "");
}

TEST(ExportCsv, KernelNamesAreQuotedAndSurviveExactly) {
  const twell::Report report = report_with_awkward_names();
  const std::string text = twell::export_kernels_csv(report);
  const Rows rows = parse_csv(text);
  ASSERT_EQ(rows.size(), report.kernels.size() + 1);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"layer", "path", "op", "kernel", "count", "median_us",
                                               "min_us", "max_us", "timing_clock"}));
  for (std::size_t r = 1; r < rows.size(); ++r) {
    ASSERT_EQ(rows[r].size(), rows[0].size());
    EXPECT_EQ(rows[r][3], report.kernels[r - 1].name);
    EXPECT_EQ(number(rows[r][5]), report.kernels[r - 1].time.median_us);
  }
  EXPECT_NE(text.find("\"void gemm<float, 128>(Params, int)\""), std::string::npos);
  EXPECT_NE(text.find("\"name with \"\"quotes\"\", commas\nand a line break\""), std::string::npos);
}

TEST(ExportCsv, NumbersIgnoreTheProcessLocale) {
  const twell::Report report = twell::test::make_synthetic_report();
  const std::string expected = twell::export_layers_csv(report);
  const char* german = std::setlocale(LC_NUMERIC, "de_DE.UTF-8");
  if (!german) german = std::setlocale(LC_NUMERIC, "de_DE");
  if (!german) GTEST_SKIP() << "no German locale installed to test with";
  const std::string under_german = twell::export_layers_csv(report);
  std::setlocale(LC_NUMERIC, "C");
  EXPECT_EQ(under_german, expected);
}

TEST(ExportTrace, ParsesWithTracksPerPathAndLayersNestingTheirKernels) {
  const twell::Report report = report_with_awkward_names();
  const json trace = json::parse(twell::export_chrome_trace(report));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_TRUE(trace.contains("baseTimeNanoseconds"));
  std::map<int, std::string> thread_names;
  std::set<int> tids;
  std::size_t kernel_slices = 0;
  std::map<std::string, std::set<int>> tids_of_path;
  for (const auto& e : trace["traceEvents"]) {
    for (const char* field : {"name", "ph", "pid"}) ASSERT_TRUE(e.contains(field)) << e.dump();
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    for (const char* field : {"ts", "dur", "tid", "cat", "args"}) ASSERT_TRUE(e.contains(field)) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    tids.insert(e["tid"].get<int>());
    if (e["cat"] == "kernel") ++kernel_slices;
    if (e["cat"] == "gpu_user_annotation") tids_of_path[e["args"]["path"]].insert(e["tid"].get<int>());
  }
  EXPECT_EQ(kernel_slices, report.timeline.size());
  for (int tid : tids) EXPECT_TRUE(thread_names.count(tid)) << "track " << tid << " has no name";
  ASSERT_EQ(tids_of_path["dense"].size(), 1u);
  ASSERT_EQ(tids_of_path["twell"].size(), 1u);
  EXPECT_NE(*tids_of_path["dense"].begin(), *tids_of_path["twell"].begin());
  EXPECT_EQ(thread_names[*tids_of_path["dense"].begin()], "dense: layer FFN");
  EXPECT_TRUE(overlapping_slices(trace).empty());

  // Every kernel lies inside its layer's slice on the same track.
  std::map<std::pair<int, int>, std::pair<double, double>> layer_slices;  // (tid, layer) -> [start, end]
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "gpu_user_annotation")
      layer_slices[{e["tid"], e["args"]["layer"]}] = {e["ts"],
                                                      e["ts"].get<double>() + e["dur"].get<double>()};
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "kernel") continue;
    const auto it = layer_slices.find({e["tid"], e["args"]["layer"]});
    ASSERT_NE(it, layer_slices.end()) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), it->second.first);
    EXPECT_LE(e["ts"].get<double>() + e["dur"].get<double>(), it->second.second + 1e-9);
  }
}

TEST(ExportTrace, OverlappingRecordsMoveToOverlapTracksSoNoTrackHasPartialOverlaps) {
  twell::Report report = twell::test::make_synthetic_report();
  report.timeline.clear();
  auto add = [&](std::uint64_t start, std::uint64_t end, const std::string& path, int layer,
                 const std::string& op, const std::string& phase = "layer_ffn") {
    twell::KernelRecord r;
    r.name = op + "@" + std::to_string(start);
    r.start_ns = start;
    r.end_ns = end;
    r.tag = {phase, layer, path, op, 0, false};
    r.attributed = true;
    report.timeline.push_back(r);
  };
  // Concurrent kernels (programmatic dependent launch) on the dense path of layer 0.
  add(1000, 5000, "dense", 0, "gate_up");
  add(4000, 9000, "dense", 0, "down");
  // A region tracer's nested regions plus one that straddles them on the TwELL path.
  add(10000, 20000, "twell", 0, "gate_pack");
  add(12000, 15000, "twell", 0, "pack_inner");
  add(14000, 25000, "twell", 0, "up_down");
  // Zero-length records and an end-to-end forward with layers.
  add(30000, 30000, "dense", 1, "empty");
  add(40000, 41000, "twell", 0, "attention", "end_to_end");
  add(41000, 43000, "twell", 0, "up_down", "end_to_end");
  add(43000, 44000, "twell", 1, "up_down", "end_to_end");
  add(39000, 39500, "twell", -1, "embedding", "end_to_end");

  const json trace = json::parse(twell::export_chrome_trace(report));
  const auto problems = overlapping_slices(trace);
  EXPECT_TRUE(problems.empty()) << problems.front();
  std::size_t records = 0;
  bool overlap_track = false;
  bool forward_slice = false;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] != "gpu_user_annotation") ++records;
    if (e["ph"] == "X" && e["name"] == "forward (twell)") {
      forward_slice = true;
      EXPECT_EQ(e["dur"].get<double>(), 5.0);  // 39000 .. 44000 ns
    }
    if (e["ph"] == "M" && e["name"] == "thread_name" &&
        e["args"]["name"].get<std::string>().find("(overlap 1)") != std::string::npos)
      overlap_track = true;
  }
  EXPECT_EQ(records, report.timeline.size());
  EXPECT_TRUE(overlap_track);
  EXPECT_TRUE(forward_slice);
}

TEST(ExportTrace, TheDispatchForwardsLayersSayWhichPathTheyRanOn) {
  twell::Report report = twell::test::make_synthetic_report();
  report.dispatch_break_even = twell::FfnBreakEven{0.5, true, "scripted"};
  report.layers[1].sparsity.density = 0.6;  // past the break-even: dense
  report.timeline.clear();
  for (int layer = 0; layer < 3; ++layer) {
    twell::KernelRecord r;
    r.name = "kernel" + std::to_string(layer);
    r.start_ns = 1000u * std::uint64_t(layer + 1);
    r.end_ns = r.start_ns + 500;
    r.tag = {"end_to_end", layer, twell::kDispatchForwardPath, layer == 1 ? "gate_up" : "gate_pack", 0,
             false};
    r.attributed = true;
    report.timeline.push_back(r);
  }
  const json trace = json::parse(twell::export_chrome_trace(report));
  std::set<std::string> layer_slices;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "gpu_user_annotation" && e["args"].contains("ran on"))
      layer_slices.insert(e["name"].get<std::string>() + " " + e["args"]["ran on"].get<std::string>());
  EXPECT_EQ(layer_slices,
            (std::set<std::string>{"layer 0 (dispatch: twell) twell", "layer 1 (dispatch: dense) dense",
                                   "layer 2 (dispatch: twell) twell"}));
}

TEST(ExportTrace, EmptyTimelineStillGivesAValidTrace) {
  twell::Report report = twell::test::make_synthetic_report();
  report.timeline.clear();
  const json trace = json::parse(twell::export_chrome_trace(report));
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["baseTimeNanoseconds"], 0);
}

TEST(ExportMarkdown, SummaryHasFactsWarningsAndOneRowPerLayer) {
  twell::Report report = report_with_awkward_names();
  report.tracer = {"cpu-clock", "cpu", "", false};
  const std::string text = twell::export_markdown(report);
  EXPECT_EQ(text.rfind("# twellscope report: models/a\\|b\n", 0), 0u) << text.substr(0, 80);
  EXPECT_NE(text.find("## Warnings\n\n- TwELL is slower"), std::string::npos);
  EXPECT_NE(text.find("CPU timings"), std::string::npos);
  EXPECT_NE(text.find("TwELL / dense throughput: **1.250x**"), std::string::npos);
  EXPECT_EQ(text.find("Per-layer dispatch"), std::string::npos);  // no dispatch forward ran
  report.end_to_end.push_back(
      {twell::kDispatchForwardPath, report.end_to_end[0].forward, report.end_to_end[0].tokens_per_ms * 1.5});
  const std::string with_dispatch = twell::export_markdown(report);
  EXPECT_NE(with_dispatch.find("| dispatch | "), std::string::npos);
  EXPECT_NE(with_dispatch.find("Per-layer dispatch / dense throughput: **1.500x**"), std::string::npos);
  // The device's busy share of each forward, where the report has it.
  EXPECT_NE(text.find("| tokens/ms | device busy |"), std::string::npos);
  EXPECT_NE(text.find(" | n/a |"), std::string::npos);
  twell::TimingStat occupied = report.end_to_end[0].forward;
  occupied.median_us *= 0.4;
  report.end_to_end[0].occupied = occupied;
  EXPECT_NE(twell::export_markdown(report).find(" | 40% |"), std::string::npos);
  const auto table = text.find("| layer | density |");
  ASSERT_NE(table, std::string::npos);
  for (const auto& layer : report.layers)
    EXPECT_NE(text.find("\n| " + std::to_string(layer.index) + " | ", table), std::string::npos)
        << layer.index;
  // Every table row has as many cells as its header.
  std::size_t pos = table;
  const auto cells = [](const std::string& line) { return std::count(line.begin(), line.end(), '|'); };
  const std::string header = text.substr(table, text.find('\n', table) - table);
  while ((pos = text.find('\n', pos)) != std::string::npos && pos + 1 < text.size() && text[pos + 1] == '|') {
    const std::string line = text.substr(pos + 1, text.find('\n', pos + 1) - pos - 1);
    EXPECT_EQ(cells(line), cells(header)) << line;
    ++pos;
  }
}

TEST(ExportFormat, NamesMapToFormatsAndBack) {
  for (const char* name : {"csv", "kernels-csv", "trace", "markdown"}) {
    const auto format = twell::export_format_from_string(name);
    ASSERT_TRUE(format) << name;
    EXPECT_STREQ(twell::to_string(*format), name);
  }
  EXPECT_FALSE(twell::export_format_from_string("pdf"));
}
