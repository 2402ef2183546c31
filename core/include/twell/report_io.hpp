// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "twell/report.hpp"

/// The report's JSON form: documented by resources/schema/report.schema.json.
///
/// Versioning: "schemaVersion" is "MAJOR.MINOR". A reader accepts any report of its own major
/// version; minor versions only add fields, which older readers ignore. A newer major version is
/// refused with an error that says so. Keys are camelCase with units in their names (…Us, …Ns,
/// …Bytes); the token x neuron map cells are base64 of the row-major uint8 cells.
namespace twell {

nlohmann::json report_to_json(const Report& report);
/// Compact JSON text (one line), invalid UTF-8 in strings replaced by U+FFFD.
std::string report_to_json_text(const Report& report);

/// Validates while reading: every required field present with its type, the schema id and major
/// version, layer indices (none missing, repeated or out of order). `source` names the report in
/// errors, which also give the JSON path of the offending value (e.g. "$.layers[3].sparsity.density").
/// Throws twell::Error: InvalidInput for malformed reports, Unsupported for a newer major version.
Report report_from_json(const nlohmann::json& json, const std::string& source);
Report parse_report(std::string_view text, const std::string& source);

/// Writes the report atomically (see atomic_file.hpp).
void save_report(const Report& report, const std::filesystem::path& path);
Report load_report(const std::filesystem::path& path);

}  // namespace twell
