#include "util/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace graphrun {

JsonValue JsonValue::Bool(bool b) {
  JsonValue v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

JsonValue JsonValue::Number(std::string text) {
  JsonValue v;
  v.kind_ = Kind::kNumber;
  v.text_ = std::move(text);
  return v;
}

JsonValue JsonValue::String(std::string s) {
  JsonValue v;
  v.kind_ = Kind::kString;
  v.text_ = std::move(s);
  return v;
}

JsonValue JsonValue::Array(std::vector<JsonValue> items) {
  JsonValue v;
  v.kind_ = Kind::kArray;
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::Object(std::vector<std::pair<std::string, JsonValue>> members) {
  JsonValue v;
  v.kind_ = Kind::kObject;
  v.members_ = std::move(members);
  return v;
}

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& m : members_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

std::string JsonValue::Serialize() const {
  switch (kind_) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return bool_ ? "true" : "false";
    case Kind::kNumber:
      return text_;
    case Kind::kString:
      return JsonQuote(text_);
    case Kind::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ", ";
        out += items_[i].Serialize();
      }
      return out + "]";
    }
    case Kind::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i) out += ", ";
        absl::StrAppend(&out, JsonQuote(members_[i].first), ": ", members_[i].second.Serialize());
      }
      return out + "}";
    }
  }
  return "null";
}

namespace {

constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(absl::string_view text) : s_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    SkipSpace();
    auto v = ParseValue(0);
    if (!v.ok()) return v;
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the value");
    return v;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON at offset ", pos_, ": ", what));
  }

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(absl::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::StatusOr<JsonValue> ParseValue(int depth) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    if (pos_ >= s_.size()) return Error("unexpected end of text");
    char c = s_[pos_];
    if (c == '{') return ParseObject(depth);
    if (c == '[') return ParseArray(depth);
    if (c == '"') {
      auto s = ParseString();
      if (!s.ok()) return s.status();
      return JsonValue::String(*std::move(s));
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
    if (Consume("true")) return JsonValue::Bool(true);
    if (Consume("false")) return JsonValue::Bool(false);
    if (Consume("null")) return JsonValue::Null();
    return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }

  absl::StatusOr<JsonValue> ParseArray(int depth) {
    ++pos_;  // '['
    std::vector<JsonValue> items;
    SkipSpace();
    if (Consume("]")) return JsonValue::Array(std::move(items));
    while (true) {
      SkipSpace();
      auto v = ParseValue(depth + 1);
      if (!v.ok()) return v;
      items.push_back(*std::move(v));
      SkipSpace();
      if (Consume("]")) return JsonValue::Array(std::move(items));
      if (!Consume(",")) return Error("expected ',' or ']' in array");
    }
  }

  absl::StatusOr<JsonValue> ParseObject(int depth) {
    ++pos_;  // '{'
    std::vector<std::pair<std::string, JsonValue>> members;
    SkipSpace();
    if (Consume("}")) return JsonValue::Object(std::move(members));
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        return Error("expected a string key in object");
      }
      auto key = ParseString();
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Consume(":")) return Error("expected ':' after object key");
      SkipSpace();
      auto v = ParseValue(depth + 1);
      if (!v.ok()) return v;
      members.emplace_back(*std::move(key), *std::move(v));
      SkipSpace();
      if (Consume("}")) return JsonValue::Object(std::move(members));
      if (!Consume(",")) return Error("expected ',' or '}' in object");
    }
  }

  absl::StatusOr<JsonValue> ParseNumber() {
    size_t start = pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Error("expected digits in number");
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Error("expected digits after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("expected digits in exponent");
    }
    return JsonValue::Number(std::string(s_.substr(start, pos_ - start)));
  }

  absl::StatusOr<unsigned> ParseHex4() {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        v |= c - 'A' + 10;
      } else {
        return Error("bad hex digit in \\u escape");
      }
    }
    return v;
  }

  static void AppendUtf8(unsigned cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  absl::StatusOr<std::string> ParseString() {
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in string");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          auto hi = ParseHex4();
          if (!hi.ok()) return hi.status();
          unsigned cp = *hi;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!Consume("\\u")) return Error("unpaired surrogate in \\u escape");
            auto lo = ParseHex4();
            if (!lo.ok()) return lo.status();
            if (*lo < 0xDC00 || *lo > 0xDFFF) {
              return Error("unpaired surrogate in \\u escape");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (*lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Error("unpaired surrogate in \\u escape");
          }
          AppendUtf8(cp, &out);
          break;
        }
        default:
          return Error(absl::StrCat("bad escape '\\", std::string(1, e), "'"));
      }
    }
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) { return Parser(text).ParseDocument(); }

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

namespace {

// The shortest %g form of `v` that reads back as `v`; between 1 and 1e16
// in magnitude, fixed notation rather than an exponent ("10", "150", not
// "1e+01", "1.5e+02"), with as few decimals as read back exactly.
template <typename F>
std::string Shortest(F v, int max_precision, F (*parse)(const char*, char**)) {
  char buf[48];
  for (int precision = 1; precision <= max_precision; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, static_cast<double>(v));
    if (parse(buf, nullptr) == v) break;
  }
  const double mag = std::fabs(static_cast<double>(v));
  if (std::strchr(buf, 'e') != nullptr && mag >= 1 && mag < 1e16) {
    char fixed[48];
    for (int decimals = 0; decimals <= max_precision; ++decimals) {
      std::snprintf(fixed, sizeof(fixed), "%.*f", decimals, static_cast<double>(v));
      if (parse(fixed, nullptr) == v) return fixed;
    }
  }
  return buf;
}

}  // namespace

std::string FormatFloatShortest(float v) { return Shortest<float>(v, 9, std::strtof); }

std::string FormatDoubleShortest(double v) { return Shortest<double>(v, 17, std::strtod); }

std::string JsonNumber(double v) {
  if (std::isnan(v)) return "\"NaN\"";
  if (std::isinf(v)) return v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  return FormatDoubleShortest(v);
}

}  // namespace graphrun
