// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/error.hpp"

namespace twell {

int exit_code_for(Error::Kind kind) noexcept {
  switch (kind) {
    case Error::Kind::InvalidInput: return 3;
    case Error::Kind::Unsupported: return 4;
    case Error::Kind::Io: return 5;
    case Error::Kind::Device: return 6;
    case Error::Kind::OutOfMemory: return 7;
    case Error::Kind::Cancelled: return 130;
    case Error::Kind::Internal: return 70;
  }
  return 70;
}

}  // namespace twell
