// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer: the safetensors reader on arbitrary bytes. Every tensor that validates is converted,
// so the data paths (including misaligned copies) run too. Only twell::Error may escape the reader.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "twell/error.hpp"
#include "twell/safetensors.hpp"

namespace {
const std::filesystem::path& scratch_file() {
  static const std::filesystem::path path = [] {
    const char* shm = "/dev/shm";
    const auto dir = std::filesystem::exists(shm) ? std::filesystem::path(shm) : std::filesystem::temp_directory_path();
    return dir / ("twell-fuzz-safetensors-" + std::to_string(getpid()) + ".safetensors");
  }();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& path = scratch_file();
  if (FILE* file = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, file);
    std::fclose(file);
  } else {
    return 0;
  }
  try {
    const auto file = twell::SafetensorsFile::open(path);
    for (const auto& entry : file.entries()) {
      if (!entry.dtype) continue;
      const auto view = file.view(entry);
      volatile float sink = 0;
      for (const float value : view.to_float()) sink = sink + value;
      (void)view.to_bf16_bits();
    }
  } catch (const twell::Error&) {
  }
  return 0;
}
