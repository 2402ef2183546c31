// SPDX-License-Identifier: GPL-3.0-or-later
// Renders a ReportComparison as Markdown or as aligned plain text; both say the same things.
#include <algorithm>
#include <cmath>

#include "markdown_table.hpp"
#include "text_format.hpp"
#include "twell/report_compare.hpp"

namespace twell {
namespace {

std::string value_or_dash(const std::optional<double>& value, int digits) {
  return value ? text::fixed(*value, digits) : std::string("-");
}

std::string ratio_text(const std::optional<double>& ratio) {
  return ratio ? text::fixed(*ratio, 3) + "x" : std::string("-");
}

std::string delta_points(const std::optional<double>& delta) {
  if (!delta) return "-";
  const double points = *delta * 100.0;
  std::string out = points >= 0 ? "+" : "";
  out += text::fixed(points, 2);
  return out;
}

std::string describe_ratio(const std::optional<double>& ratio, const std::string& what) {
  if (!ratio) return what + ": not measured in both";
  const double change = (*ratio - 1.0) * 100.0;
  if (std::abs(change) < 0.05) return what + ": " + text::fixed(*ratio, 3) + "x B/A (no change)";
  const std::string direction = change > 0 ? "slower" : "faster";
  return what + ": " + text::fixed(*ratio, 3) + "x B/A (" + text::fixed(std::abs(change), 1) + "% " +
         direction + ")";
}

std::string join(const std::vector<int>& layers) {
  std::string out;
  for (std::size_t i = 0; i < layers.size(); ++i) out += (i ? ", " : "") + std::to_string(layers[i]);
  return out;
}

struct Tables {
  std::vector<std::string> layer_header;
  std::vector<std::vector<std::string>> layer_rows;
  std::vector<std::string> e2e_header;
  std::vector<std::vector<std::string>> e2e_rows;
  std::vector<std::string> summary;
};

Tables build(const ReportComparison& c) {
  Tables t;
  t.layer_header = {"layer",     "density A",  "density B",  "delta (pp)", "dense us A", "dense us B",
                    "dense B/A", "TwELL us A", "TwELL us B", "TwELL B/A",  "speedup A",  "speedup B"};
  for (const auto& l : c.layers)
    t.layer_rows.push_back(
        {std::to_string(l.layer), l.density_a ? text::percent(*l.density_a, 2) : "-",
         l.density_b ? text::percent(*l.density_b, 2) : "-", delta_points(l.density_delta()),
         value_or_dash(l.dense_us_a, 1), value_or_dash(l.dense_us_b, 1), ratio_text(l.dense_ratio()),
         value_or_dash(l.twell_us_a, 1), value_or_dash(l.twell_us_b, 1), ratio_text(l.twell_ratio()),
         value_or_dash(l.speedup_a, 2), value_or_dash(l.speedup_b, 2)});
  t.e2e_header = {"path", "tokens/ms A", "tokens/ms B", "throughput B/A"};
  for (const auto& e : c.end_to_end)
    t.e2e_rows.push_back({e.path, value_or_dash(e.tokens_per_ms_a, 2), value_or_dash(e.tokens_per_ms_b, 2),
                          ratio_text(e.ratio())});

  t.summary.push_back(describe_ratio(c.twell_time_ratio, "TwELL layer time (geometric mean)"));
  t.summary.push_back(describe_ratio(c.dense_time_ratio, "dense layer time (geometric mean)"));
  const std::string threshold = text::fixed(c.threshold * 100.0, 0) + "%";
  t.summary.push_back(c.slower_layers.empty()
                          ? "no layer is more than " + threshold + " slower in B"
                          : "slower in B by more than " + threshold + ": layers " + join(c.slower_layers));
  if (!c.faster_layers.empty())
    t.summary.push_back("faster in B by more than " + threshold + ": layers " + join(c.faster_layers));
  for (const std::string& line : kernel_change_lines(c)) t.summary.push_back(line);
  return t;
}

std::string pad(const std::string& text, std::size_t width, bool right) {
  // Widths count bytes; the cells here are ASCII.
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

std::string text_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(header.size(), 0);
  for (std::size_t i = 0; i < header.size(); ++i) widths[i] = header[i].size();
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i) out += "  ";
      out += pad(cells[i], widths[i], i > 0);
    }
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& row : rows) out += line(row);
  return out;
}

}  // namespace

std::vector<std::string> kernel_change_lines(const ReportComparison& c) {
  auto names = [](const std::vector<std::string>& list) {
    std::string out;
    for (std::size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i];
    return out;
  };
  std::vector<std::string> lines;
  if (!c.kernels_only_a.empty())
    lines.push_back("FFN kernels that ran only in A: " + names(c.kernels_only_a));
  if (!c.kernels_only_b.empty())
    lines.push_back("FFN kernels that ran only in B: " + names(c.kernels_only_b));
  return lines;
}

std::string comparison_markdown(const ReportComparison& c) {
  const Tables t = build(c);
  std::string out = "# twellscope comparison\n\n";
  out += "- A (baseline): " + markdown::cell(c.label_a) + "\n- B: " + markdown::cell(c.label_b) + "\n\n";
  out += "## Summary\n\n";
  for (const auto& line : t.summary) out += "- " + markdown::cell(line) + "\n";
  if (!c.caveats.empty()) {
    out += "\n## Caveats\n\n";
    for (const auto& line : c.caveats) out += "- " + markdown::cell(line) + "\n";
  }
  if (!t.e2e_rows.empty()) {
    out += "\n## End to end\n\n";
    out += markdown::table(t.e2e_header, t.e2e_rows, {false, true, true, true});
  }
  out += "\n## Layers\n\n";
  out += markdown::table(t.layer_header, t.layer_rows, std::vector<bool>(t.layer_header.size(), true));
  return out;
}

std::string comparison_text(const ReportComparison& c) {
  const Tables t = build(c);
  std::string out = "A (baseline): " + c.label_a + "\nB:            " + c.label_b + "\n\n";
  for (const auto& line : t.summary) out += line + "\n";
  for (const auto& line : c.caveats) out += "caveat: " + line + "\n";
  if (!t.e2e_rows.empty()) out += "\nEnd to end\n" + text_table(t.e2e_header, t.e2e_rows);
  out += "\nLayers\n" + text_table(t.layer_header, t.layer_rows);
  return out;
}

}  // namespace twell
