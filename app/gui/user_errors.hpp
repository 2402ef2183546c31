// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QString>
#include <exception>

#include "twell/error.hpp"

namespace twellscope {

/// What went wrong and what the user can do about it, for the error banner.
struct UserError {
  QString what;
  QString advice;
  QString text() const { return advice.isEmpty() ? what : what + QStringLiteral("\n") + advice; }
};

/// `action` says what was attempted ("Opening report R.json"); the exception says why it failed.
UserError describeError(const QString& action, const twell::Error& error);
/// For anything that is not a twell::Error (std::bad_alloc, a library's exception).
UserError describeError(const QString& action, const std::exception& error);
/// The advice for an error kind.
QString adviceFor(twell::Error::Kind kind);

}  // namespace twellscope
