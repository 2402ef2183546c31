// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer: the report reader on arbitrary text; a report that parses must serialise again.
#include <cstdint>
#include <string>

#include "twell/error.hpp"
#include "twell/report_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto report = twell::parse_report(text, "fuzz/report.json");
    (void)twell::report_to_json_text(report);
  } catch (const twell::Error&) {
  }
  return 0;
}
