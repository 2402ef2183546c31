// SPDX-License-Identifier: GPL-3.0-or-later
#include "user_errors.hpp"

#include <QObject>
#include <new>

namespace twellscope {

QString adviceFor(twell::Error::Kind kind) {
  using Kind = twell::Error::Kind;
  switch (kind) {
    case Kind::InvalidInput:
      return QObject::tr(
          "Check the file named above: a checkpoint directory needs config.json and model.safetensors "
          "(or a sharded index); a report must be a twellscope report JSON.");
    case Kind::Unsupported:
      return QObject::tr(
          "twellscope cannot handle this input yet: see the message for the unsupported part.");
    case Kind::Io:
      return QObject::tr(
          "Check that the path exists, is readable (or writable, when saving) and that the disk is not "
          "full.");
    case Kind::Device:
      return QObject::tr(
          "No usable CUDA device: choose the CPU backend in the run panel, or open a report made on a "
          "GPU machine with twellscope-cli profile.");
    case Kind::OutOfMemory:
      return QObject::tr("Out of memory: lower batch × sequence in the run panel, or profile fewer layers.");
    case Kind::Cancelled:
      return QString();
    case Kind::Internal:
      return QObject::tr("This is a bug in twellscope: please report it with the message above.");
  }
  return QString();
}

UserError describeError(const QString& action, const twell::Error& error) {
  return {action + QStringLiteral(" failed: ") + QString::fromStdString(error.what()),
          adviceFor(error.kind())};
}

UserError describeError(const QString& action, const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error))
    return {action + QObject::tr(" failed: out of host memory"), adviceFor(twell::Error::Kind::OutOfMemory)};
  return {action + QStringLiteral(" failed: ") + QString::fromStdString(error.what()),
          adviceFor(twell::Error::Kind::Internal)};
}

}  // namespace twellscope
