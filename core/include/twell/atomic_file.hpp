// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <filesystem>
#include <string_view>

namespace twell {

/// Replaces `path` with `bytes` so that readers, and a process killed mid-write, see either the old
/// file or the complete new one, never a truncated mix: the bytes go to a temporary file in the same
/// directory, which is flushed, fsync'ed and renamed over `path`; then the directory is fsync'ed so
/// the rename itself survives a crash. An existing file's permission bits are kept.
/// Throws twell::Error (Io) naming the path and the failing call.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace twell
