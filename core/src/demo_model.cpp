// SPDX-License-Identifier: GPL-3.0-or-later
// The built-in demo model: generated once per version into the user's cache directory.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "twell/error.hpp"
#include "twell/model_generator.hpp"
#include "twell/version.hpp"

namespace twell {
namespace {

bool is_complete_model(const std::filesystem::path& directory) {
  std::error_code error;
  return std::filesystem::is_regular_file(directory / "config.json", error) &&
         std::filesystem::is_regular_file(directory / "model.safetensors", error);
}

}  // namespace

std::filesystem::path demo_model_directory() {
  std::filesystem::path cache;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    cache = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    cache = std::filesystem::path(home) / ".cache";
  } else {
    cache = std::filesystem::temp_directory_path();
  }
  return cache / "twellscope" /
         (std::string("demo-") + version() + "-g" + std::to_string(kGeneratorRevision));
}

std::filesystem::path ensure_generated_model(const GeneratorOptions& options,
                                             const std::filesystem::path& target) {
  if (is_complete_model(target)) return target;

  std::error_code error;
  std::filesystem::create_directories(target.parent_path(), error);
  if (error)
    throw Error(Error::Kind::Io, "cannot create " + target.parent_path().string() + ": " + error.message());
  // A private staging directory next to the target, renamed into place once complete: a reader
  // sees either no demo model or a whole one, and a killed generation leaves only staging behind.
  const std::filesystem::path staging =
      target.parent_path() / (".staging-" + target.filename().string() + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(staging, error);
  try {
    generate_model(options, staging);
  } catch (...) {
    std::filesystem::remove_all(staging, error);
    throw;
  }
  std::filesystem::rename(staging, target, error);
  if (error) {
    std::error_code ignored;
    std::filesystem::remove_all(staging, ignored);
    // Another process may have finished first; its model is as good as ours.
    if (is_complete_model(target)) return target;
    throw Error(Error::Kind::Io,
                "cannot move the generated model into " + target.string() + ": " + error.message());
  }
  return target;
}

std::filesystem::path ensure_demo_model(const std::function<void(const std::string&)>& progress) {
  GeneratorOptions options;
  options.preset = "demo";
  options.progress = progress;
  return ensure_generated_model(options, demo_model_directory());
}

}  // namespace twell
