// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace twell::markdown {

/// Text safe inside a GitHub-flavoured Markdown table cell: pipes escaped, line breaks flattened,
/// and < > & as entities so that template kernel names are not read as HTML tags.
inline std::string cell(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '\r':
      case '\n':
        out += ' ';
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '*':
        out += "\\*";
        break;
      case '`':
        out += "\\`";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// A table with a header row; cells are escaped here. `right_aligned[i]` marks numeric columns.
inline std::string table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right_aligned = {}) {
  std::string out = "|";
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on " " + std::string.
  for (const auto& name : header) {
    out += ' ';
    out += cell(name);
    out += " |";
  }
  out += "\n|";
  for (std::size_t i = 0; i < header.size(); ++i)
    out += i < right_aligned.size() && right_aligned[i] ? "---:|" : "---|";
  out += "\n";
  for (const auto& row : rows) {
    out += "|";
    for (const auto& value : row) {
      out += ' ';
      out += cell(value);
      out += " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace twell::markdown
