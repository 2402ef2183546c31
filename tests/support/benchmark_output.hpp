// SPDX-License-Identifier: GPL-3.0-or-later
// What every benchmark does with its command line and its JSON result.
#pragma once
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "twell/atomic_file.hpp"

namespace twell::test {

/// The command as typed (arguments joined by spaces), for the record.
inline std::string command_line(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  return command;
}

/// The document, indented, to `output` (written atomically), or to stdout when `output` is empty.
inline void write_benchmark_json(const nlohmann::json& document, const std::string& output) {
  const std::string text = document.dump(2) + "\n";
  if (output.empty()) {
    std::cout << text;
  } else {
    twell::write_file_atomically(output, text);
    std::cerr << "wrote " << output << "\n";
  }
}

}  // namespace twell::test
