// SPDX-License-Identifier: GPL-3.0-or-later
// A validator for the subset of JSON Schema (draft 2020-12) that resources/schema/report.schema.json
// uses: type, required, properties, items, enum, const, minimum, minItems, maxItems, pattern and
// local $ref ("#/$defs/name"); annotations (title, description, $schema, $id, $defs) are skipped.
// Any other keyword is an error, so the schema cannot silently use something unchecked here.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twell::test {

/// Every violation, each as "JSON path: what is wrong"; empty when `instance` is valid. With
/// `report_undeclared`, a property that the schema's "properties" does not declare is a violation
/// too (the schema allows them for forward compatibility; our own writer must not need that).
std::vector<std::string> validate_against_schema(const nlohmann::json& schema, const nlohmann::json& instance,
                                                 bool report_undeclared = false);

}  // namespace twell::test
