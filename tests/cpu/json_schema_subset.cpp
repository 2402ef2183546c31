// SPDX-License-Identifier: GPL-3.0-or-later
#include "json_schema_subset.hpp"

#include <cmath>
#include <regex>
#include <set>
#include <stdexcept>

namespace twell::test {
namespace {

using nlohmann::json;

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    // Draft 2020-12: a number with a zero fractional part is an integer.
    return value.is_number_float() && std::isfinite(value.get<double>()) &&
           std::floor(value.get<double>()) == value.get<double>();
  }
  throw std::runtime_error("schema uses unknown type \"" + type + "\"");
}

class Validator {
 public:
  Validator(const json& root, bool report_undeclared)
      : m_root(root), m_report_undeclared(report_undeclared) {}

  void check(const json& schema, const json& value, const std::string& path) {
    static const std::set<std::string> annotations = {"title", "description", "$schema", "$id", "$defs"};
    for (const auto& [keyword, argument] : schema.items()) {
      if (annotations.count(keyword)) continue;
      if (keyword == "$ref") {
        check(resolve(argument.get<std::string>()), value, path);
      } else if (keyword == "type") {
        bool ok = false;
        if (argument.is_array()) {
          for (const auto& type : argument) ok = ok || has_type(value, type.get<std::string>());
        } else {
          ok = has_type(value, argument.get<std::string>());
        }
        if (!ok) fail(path, "expected type " + argument.dump() + ", found " + value.dump().substr(0, 60));
      } else if (keyword == "required") {
        if (!value.is_object()) continue;
        for (const auto& name : argument)
          if (!value.contains(name.get<std::string>()))
            fail(path, "missing required property " + name.dump());
      } else if (keyword == "properties") {
        if (!value.is_object()) continue;
        for (const auto& [name, property_schema] : argument.items())
          if (value.contains(name)) check(property_schema, value.at(name), path + "." + name);
        if (m_report_undeclared)
          for (const auto& [name, ignored] : value.items())
            if (!argument.contains(name))
              fail(path, "property \"" + name + "\" is not declared in the schema");
      } else if (keyword == "items") {
        if (!value.is_array()) continue;
        for (std::size_t i = 0; i < value.size(); ++i)
          check(argument, value[i], path + "[" + std::to_string(i) + "]");
      } else if (keyword == "enum") {
        bool found = false;
        for (const auto& allowed : argument) found = found || allowed == value;
        if (!found) fail(path, value.dump() + " is not one of " + argument.dump());
      } else if (keyword == "const") {
        if (argument != value) fail(path, value.dump() + " is not " + argument.dump());
      } else if (keyword == "minimum") {
        if (value.is_number() && value.get<double>() < argument.get<double>())
          fail(path, value.dump() + " is below the minimum " + argument.dump());
      } else if (keyword == "exclusiveMinimum") {
        if (value.is_number() && value.get<double>() <= argument.get<double>())
          fail(path, value.dump() + " is not above " + argument.dump());
      } else if (keyword == "exclusiveMaximum") {
        if (value.is_number() && value.get<double>() >= argument.get<double>())
          fail(path, value.dump() + " is not below " + argument.dump());
      } else if (keyword == "minItems") {
        if (value.is_array() && value.size() < argument.get<std::size_t>()) fail(path, "too few items");
      } else if (keyword == "maxItems") {
        if (value.is_array() && value.size() > argument.get<std::size_t>()) fail(path, "too many items");
      } else if (keyword == "pattern") {
        if (value.is_string() &&
            !std::regex_search(value.get<std::string>(), std::regex(argument.get<std::string>())))
          fail(path, value.dump() + " does not match " + argument.dump());
      } else {
        throw std::runtime_error("schema keyword \"" + keyword + "\" at " + path +
                                 " is not supported by this validator");
      }
    }
  }

  std::vector<std::string> errors;

 private:
  const json& resolve(const std::string& reference) {
    const std::string prefix = "#/$defs/";
    if (reference.rfind(prefix, 0) != 0) throw std::runtime_error("unsupported $ref " + reference);
    return m_root.at("$defs").at(reference.substr(prefix.size()));
  }
  void fail(const std::string& path, const std::string& what) { errors.push_back(path + ": " + what); }

  const json& m_root;
  bool m_report_undeclared;
};

}  // namespace

std::vector<std::string> validate_against_schema(const json& schema, const json& instance,
                                                 bool report_undeclared) {
  Validator validator(schema, report_undeclared);
  validator.check(schema, instance, "$");
  return validator.errors;
}

}  // namespace twell::test
