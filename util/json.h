// A minimal JSON reader and writing helpers, shared by the CLI tools and
// the distributed runtime (cluster specs, TF_CONFIG). No JSON library is
// part of the build, and only RFC 8259 values of modest size are read
// (feeds on the command line, small config files).
//
// Numbers keep their source text, so an int64 or uint64 feed converts
// exactly instead of through double. Object members keep source order;
// duplicate keys are kept (lookups find the first).
#ifndef GRAPHRUN_UTIL_JSON_H_
#define GRAPHRUN_UTIL_JSON_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace graphrun {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;
  static JsonValue Null() { return JsonValue(); }
  static JsonValue Bool(bool b);
  // `text` must be a valid JSON number; it is kept verbatim.
  static JsonValue Number(std::string text);
  static JsonValue String(std::string s);
  static JsonValue Array(std::vector<JsonValue> items);
  static JsonValue Object(std::vector<std::pair<std::string, JsonValue>> members);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // REQUIRES: the matching kind.
  bool bool_value() const { return bool_; }
  // The number's source text, e.g. "-12", "3.5e-3".
  const std::string& number_text() const { return text_; }
  const std::string& string_value() const { return text_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }
  // The first member named `key`; nullptr if none or not an object.
  const JsonValue* Find(absl::string_view key) const;

  // Compact JSON in the tools' output style: ", " and ": " separators.
  std::string Serialize() const;

 private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  std::string text_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Parses one JSON value (surrounding whitespace allowed). InvalidArgument
// with the byte offset on malformed text; nesting deeper than 512 levels is
// rejected so hostile input cannot exhaust the stack.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// `s` as a quoted JSON string: escapes ", \, control characters (\n, \t,
// ..., \u00XX); other bytes (UTF-8) are copied unchanged.
std::string JsonQuote(absl::string_view s);

// Shortest decimal text that reads back as exactly `v` ("0.1", "1e-07",
// "3"). REQUIRES: v is finite.
std::string FormatFloatShortest(float v);
std::string FormatDoubleShortest(double v);
// `v` as a JSON value: FormatDoubleShortest when finite, else the strings
// "NaN", "Infinity" and "-Infinity" (JSON has no such numbers; this is
// how `graphrun run --format=json` writes them too, docs/cli.md).
std::string JsonNumber(double v);

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_JSON_H_
