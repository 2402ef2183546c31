// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <stdexcept>
#include <string>

namespace twell {

/// Every failure twellscope reports to a user: the message names what failed and where
/// (file, tensor, layer, CUDA call...). Front ends print what() and map the kind to an exit code.
class Error : public std::runtime_error {
 public:
  enum class Kind {
    InvalidInput,     ///< malformed checkpoint, config, report, token file or option
    Unsupported,      ///< well-formed but not supported (dtype, architecture, shape)
    Io,               ///< file system failure
    Device,           ///< CUDA / cuBLAS failure, no device
    OutOfMemory,      ///< host or device allocation failed
    Cancelled,        ///< the user cancelled a long operation
    Internal,         ///< a bug: an invariant did not hold
  };
  Error(Kind kind, const std::string& message) : std::runtime_error(message), m_kind(kind) {}
  Kind kind() const noexcept { return m_kind; }

 private:
  Kind m_kind;
};

/// Process exit codes shared by the CLI and the GUI's command-line modes (documented in README).
int exit_code_for(Error::Kind kind) noexcept;

}  // namespace twell
