// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "text_format.hpp"

namespace twell::csv {

/// Builds RFC 4180 text: CRLF line ends; a field is quoted when it holds a comma, a double
/// quote, CR or LF (or starts/ends with a space, which some readers trim), quotes doubled inside.
class Writer {
 public:
  void header(std::initializer_list<std::string_view> names) {
    for (auto name : names) field(name);
    end_row();
  }
  void field(std::string_view value) {
    separate();
    const bool quote = value.find_first_of(",\"\r\n") != std::string_view::npos ||
                       (!value.empty() && (value.front() == ' ' || value.back() == ' '));
    if (!quote) {
      m_text.append(value);
      return;
    }
    m_text += '"';
    for (char c : value) {
      if (c == '"') m_text += '"';
      m_text += c;
    }
    m_text += '"';
  }
  void field(double value) { field(text::shortest(value)); }
  void field(std::uint64_t value) { field(std::to_string(value)); }
  void field(std::uint32_t value) { field(std::to_string(value)); }
  void field(int value) { field(std::to_string(value)); }
  void field(const std::optional<double>& value) { field(value ? text::shortest(*value) : std::string()); }
  void field(const char* value) { field(std::string_view(value)); }
  void field(const std::string& value) { field(std::string_view(value)); }
  void end_row() {
    m_text += "\r\n";
    m_row_open = false;
  }
  const std::string& text() const { return m_text; }

 private:
  void separate() {
    if (m_row_open) m_text += ',';
    m_row_open = true;
  }
  std::string m_text;
  bool m_row_open = false;
};

}  // namespace twell::csv
