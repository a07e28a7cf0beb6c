#include "graph/status.h"

#include <string>

namespace graphrun {

namespace {

// Bytes of a valid UTF-8 sequence starting at s[i] (a code point of 2 to 4
// bytes), or 0.
size_t Utf8Sequence(absl::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string OneLine(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (size_t n = c >= 0x80 ? Utf8Sequence(text, i) : 0; n > 0) {
      out.append(text.data() + i, n);
      i += n;
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
      ++i;
    }
  }
  return out;
}

std::string StatusToLine(const absl::Status& s) {
  if (s.ok()) return "OK";
  std::string code = absl::StatusCodeToString(s.code());
  // absl spells codes in SCREAMING_CASE; print TensorFlow's CamelCase.
  std::string out;
  bool upper = true;
  for (char c : code) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? c : static_cast<char>(std::tolower(c));
    upper = false;
  }
  if (s.code() == absl::StatusCode::kInvalidArgument) out = "InvalidArgument";
  if (s.code() == absl::StatusCode::kOutOfRange) out = "OutOfRange";
  return absl::StrCat(out, ": ", OneLine(s.message()));
}

}  // namespace graphrun
