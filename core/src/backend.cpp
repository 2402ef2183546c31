// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/backend.hpp"

#include <algorithm>
#include <string>

#include "twell/error.hpp"

namespace twell {

const char* to_string(FfnPath path) noexcept {
  return path == FfnPath::Dense ? "dense" : "twell";
}

FfnPath ForwardOptions::path_of(std::size_t layer) const {
  return layer < layer_paths.size() ? layer_paths[layer] : ffn_path;
}

bool ForwardOptions::runs_any_layer_on(FfnPath path) const {
  if (layer_paths.empty()) return ffn_path == path;
  return std::find(layer_paths.begin(), layer_paths.end(), path) != layer_paths.end();
}

void ForwardOptions::check_layer_paths(std::size_t layer_count) const {
  if (!layer_paths.empty() && layer_paths.size() != layer_count)
    throw Error(Error::Kind::InvalidInput, "the forward was given FFN paths for " +
                                               std::to_string(layer_paths.size()) +
                                               " layers, but the model has " + std::to_string(layer_count));
}

// A backend with one kernel per FFN stage (the CPU reference) has nothing to choose between.
void Backend::check_ffn_options(const FfnOptions& options) const {
  if (!options.twell_kernels.is_auto())
    throw Error(Error::Kind::Unsupported, "TwELL kernels " + to_string(options.twell_kernels) +
                                              " were requested, but the " + device().kernel_family +
                                              " backend runs one kernel per FFN stage (only auto applies)");
}

std::optional<FfnBreakEven> Backend::ffn_break_even(std::size_t /*tokens*/,
                                                    const FfnOptions& /*options*/) const {
  return std::nullopt;
}

}  // namespace twell
