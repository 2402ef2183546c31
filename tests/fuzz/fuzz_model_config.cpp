// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer: config.json parsing and the activation resolution on arbitrary text.
#include <cstdint>
#include <string>

#include "twell/error.hpp"
#include <nlohmann/json.hpp>

#include "twell/model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto config = twell::ModelConfig::parse(text, "fuzz/config.json");
    (void)twell::resolve_activation(config, std::nullopt);
    (void)config.to_json().dump();
  } catch (const twell::Error&) {
  }
  return 0;
}
