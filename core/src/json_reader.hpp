// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "twell/error.hpp"

namespace twell::json_reader {

/// A JSON value together with its path from the document root ("$.layers[3].density"), so that
/// every validation error names the file, the exact place and what was expected there.
class Node {
 public:
  Node(const nlohmann::json& value, std::string path, const std::string& source)
      : m_value(&value), m_path(std::move(path)), m_source(&source) {}

  const nlohmann::json& value() const { return *m_value; }
  const std::string& path() const { return m_path; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(Error::Kind::InvalidInput, *m_source + ": " + m_path + ": " + what);
  }

  /// A required member of an object.
  Node at(std::string_view key) const {
    require_object();
    const auto it = m_value->find(key);
    if (it == m_value->end()) fail("missing required field \"" + std::string(key) + "\"");
    return child(*it, key);
  }
  /// An optional member; a null value counts as absent.
  std::optional<Node> find(std::string_view key) const {
    require_object();
    const auto it = m_value->find(key);
    if (it == m_value->end() || it->is_null()) return std::nullopt;
    return child(*it, key);
  }

  std::vector<Node> items() const {
    require(m_value->is_array(), "an array");
    std::vector<Node> out;
    out.reserve(m_value->size());
    for (std::size_t i = 0; i < m_value->size(); ++i)
      out.emplace_back((*m_value)[i], m_path + "[" + std::to_string(i) + "]", *m_source);
    return out;
  }

  std::string string() const {
    require(m_value->is_string(), "a string");
    return m_value->get<std::string>();
  }
  bool boolean() const {
    require(m_value->is_boolean(), "a boolean");
    return m_value->get<bool>();
  }
  /// A number; null stands for a measurement that was not finite (see the writer).
  double real() const {
    if (m_value->is_null()) return std::numeric_limits<double>::quiet_NaN();
    require(m_value->is_number(), "a number");
    return m_value->get<double>();
  }

  template <typename T>
  T integer() const {
    return integer_of<T>(*m_value, [this](const std::string& what) { fail(what); });
  }

  /// An array of integers, checked element by element without building a path per element.
  template <typename T>
  std::vector<T> integer_array() const {
    require(m_value->is_array(), "an array");
    std::vector<T> out;
    out.reserve(m_value->size());
    for (std::size_t i = 0; i < m_value->size(); ++i) {
      out.push_back(integer_of<T>((*m_value)[i], [&](const std::string& what) {
        Node((*m_value)[i], m_path + "[" + std::to_string(i) + "]", *m_source).fail(what);
      }));
    }
    return out;
  }

  std::vector<std::string> string_array() const {
    std::vector<std::string> out;
    for (const Node& item : items()) out.push_back(item.string());
    return out;
  }

 private:
  Node child(const nlohmann::json& value, std::string_view key) const {
    return Node(value, m_path + "." + std::string(key), *m_source);
  }
  void require_object() const { require(m_value->is_object(), "an object"); }
  void require(bool ok, const char* expected) const {
    if (!ok) fail(std::string("expected ") + expected + ", found " + describe(*m_value));
  }

  static std::string describe(const nlohmann::json& value) {
    if (value.is_number_float()) return "a non-integer number";
    if (value.is_number()) return "a number";
    if (value.is_null()) return "null";
    if (value.is_boolean()) return "a boolean";
    if (value.is_string()) return "a string";
    if (value.is_array()) return "an array";
    return "an object";
  }

  template <typename T, typename Fail>
  static T integer_of(const nlohmann::json& value, const Fail& fail_with) {
    static_assert(std::is_integral_v<T>);
    if (value.is_number_unsigned()) {
      const auto v = value.get<std::uint64_t>();
      if (v <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(v);
    } else if (value.is_number_integer()) {
      const auto v = value.get<std::int64_t>();
      if constexpr (std::is_signed_v<T>) {
        if (v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max())
          return static_cast<T>(v);
      } else {
        if (v >= 0 && static_cast<std::uint64_t>(v) <= std::numeric_limits<T>::max())
          return static_cast<T>(v);
      }
    } else {
      fail_with("expected an integer, found " + describe(value));
    }
    fail_with("integer " + value.dump() + " is out of range (" +
              std::to_string(std::numeric_limits<T>::min()) + " to " +
              std::to_string(std::numeric_limits<T>::max()) + ")");
    return T{};  // not reached: fail_with throws
  }

  const nlohmann::json* m_value;
  std::string m_path;
  const std::string* m_source;
};

}  // namespace twell::json_reader
