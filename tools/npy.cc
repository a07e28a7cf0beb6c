#include "tools/npy.h"

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "graph/memory_budget.h"
#include "graph/status.h"
#include "tools/file_util.h"

namespace graphrun {
namespace tools {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;

struct DescrEntry {
  const char* code;  // type code without the byte-order character
  DataType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"f2", DT_HALF},      {"f4", DT_FLOAT},       {"f8", DT_DOUBLE}, {"i1", DT_INT8},
    {"i2", DT_INT16},     {"i4", DT_INT32},       {"i8", DT_INT64},  {"u1", DT_UINT8},
    {"u2", DT_UINT16},    {"u4", DT_UINT32},      {"u8", DT_UINT64}, {"b1", DT_BOOL},
    {"c8", DT_COMPLEX64}, {"c16", DT_COMPLEX128},
};

absl::StatusOr<DataType> DescrToDataType(absl::string_view descr) {
  if (descr.size() == 3 || descr.size() == 4) {
    char order = descr[0];
    absl::string_view code = descr.substr(1);
    for (const DescrEntry& e : kDescrs) {
      if (code != e.code) continue;
      bool one_byte = code.size() == 2 && code[1] == '1';
      if (order == '<' || order == '=' || (one_byte && order == '|')) return e.dtype;
      if (order == '>' && !one_byte) {
        return absl::InvalidArgumentError(
            absl::StrCat("big-endian dtype '", descr, "' is not supported"));
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported dtype '", descr, "'"));
}

absl::StatusOr<std::string> DataTypeToDescr(DataType dtype) {
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == dtype) {
      const bool one_byte = std::string_view(e.code).size() == 2 && e.code[1] == '1';
      return absl::StrCat(one_byte ? "|" : "<", e.code);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot write a ", DataTypeString(dtype), " tensor as .npy"));
}

// The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// This reads exactly that grammar: string keys; string, True/False or
// int-tuple values.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view s) : s_(s) {}

  absl::Status Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      GR_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(':')) return Error("expected ':'");
      SkipSpace();
      if (key == "descr") {
        GR_ASSIGN_OR_RETURN(*descr, ParseString());
        have_descr = true;
      } else if (key == "fortran_order") {
        if (ConsumeWord("True")) {
          *fortran = true;
        } else if (ConsumeWord("False")) {
          *fortran = false;
        } else {
          return Error("fortran_order must be True or False");
        }
        have_fortran = true;
      } else if (key == "shape") {
        GR_RETURN_IF_ERROR(ParseShape(shape));
        have_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Consume('}')) break;
      if (!Consume(',')) return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the dict");
    if (!have_descr || !have_fortran || !have_shape) {
      return Error("needs 'descr', 'fortran_order' and 'shape'");
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("bad header at offset ", pos_, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(absl::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  absl::StatusOr<std::string> ParseString() {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) {
      return Error("expected a quoted string");
    }
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  absl::Status ParseShape(std::vector<int64_t>* shape) {
    if (!Consume('(')) return Error("shape must be a tuple");
    while (true) {
      SkipSpace();
      if (Consume(')')) return absl::OkStatus();
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      int64_t d;
      if (!absl::SimpleAtoi(s_.substr(start, pos_ - start), &d)) {
        return Error("shape entries must be non-negative integers");
      }
      Consume('L');  // Python 2 longs
      shape->push_back(d);
      SkipSpace();
      if (Consume(')')) return absl::OkStatus();
      if (!Consume(',')) return Error("expected ',' or ')' in shape");
    }
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

uint32_t ReadLe(absl::string_view b, size_t pos, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(b[pos + i]);
  }
  return v;
}

absl::StatusOr<Tensor> ParseNpyImpl(absl::string_view bytes) {
  if (bytes.size() < kMagicLen + 2 ||
      bytes.substr(0, kMagicLen) != absl::string_view(kMagic, kMagicLen)) {
    return absl::InvalidArgumentError("not an .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported format version ", major, ".", minor));
  }
  const int len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicLen + 2 + len_bytes;
  if (bytes.size() < prefix) return absl::InvalidArgumentError("truncated header");
  const uint64_t header_len = ReadLe(bytes, kMagicLen + 2, len_bytes);
  if (bytes.size() - prefix < header_len) {
    return absl::InvalidArgumentError("truncated header");
  }
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> dims;
  GR_RETURN_IF_ERROR(HeaderParser(bytes.substr(prefix, header_len)).Parse(&descr, &fortran, &dims));
  if (fortran) {
    return absl::InvalidArgumentError("fortran_order arrays are not supported");
  }
  GR_ASSIGN_OR_RETURN(DataType dtype, DescrToDataType(descr));
  GR_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::Make(dims));
  absl::string_view data = bytes.substr(prefix + header_len);
  const uint64_t want = static_cast<uint64_t>(shape.num_elements()) * DataTypeSize(dtype);
  if (data.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("data is ", data.size(), " bytes but ", descr,
                                                   " shape ", shape.DebugString(), " needs ",
                                                   want));
  }
  GR_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  if (dtype == DT_BOOL) {
    for (size_t i = 0; i < data.size(); ++i) {
      unsigned char b = static_cast<unsigned char>(data[i]);
      if (b > 1) {
        return absl::InvalidArgumentError(absl::StrCat("bool element ", i, " has byte value ", b));
      }
      t.base<bool>()[i] = b != 0;
    }
  } else if (want > 0) {
    std::memcpy(t.raw_data(), data.data(), want);
  }
  return t;
}

}  // namespace

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view name) {
  auto t = ParseNpyImpl(bytes);
  if (!t.ok()) return AnnotateStatus(t.status(), absl::StrCat(name, ": "));
  return t;
}

absl::StatusOr<std::string> EncodeNpy(const Tensor& t) {
  GR_ASSIGN_OR_RETURN(std::string descr, DataTypeToDescr(t.dtype()));
  std::string shape = "(";
  for (int i = 0; i < t.dims(); ++i) {
    if (i) shape += ", ";
    absl::StrAppend(&shape, t.dim_size(i));
  }
  if (t.dims() == 1) shape += ",";
  shape += ")";
  std::string dict =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces and end with '\n' so magic + version + length + header
  // is a multiple of kAlign (numpy >= 1.14 behaviour).
  int major = 1;
  size_t prefix = kMagicLen + 2 + 2;
  if (dict.size() + 1 + kAlign > 65535) {
    major = 2;
    prefix = kMagicLen + 2 + 4;
  }
  size_t total = prefix + dict.size() + 1;
  size_t pad = (kAlign - total % kAlign) % kAlign;
  std::string header = dict + std::string(pad, ' ') + "\n";

  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < prefix - kMagicLen - 2; ++i) {
    out += static_cast<char>((len >> (8 * i)) & 0xFF);
  }
  out += header;
  const size_t n = static_cast<size_t>(t.NumElements()) * DataTypeSize(t.dtype());
  if (t.dtype() == DT_BOOL) {
    for (bool b : t.flat<bool>()) out += b ? '\1' : '\0';
  } else if (n > 0) {
    out.append(t.raw_data(), n);
  }
  return out;
}

absl::StatusOr<Tensor> ReadNpyFile(const std::string& path) {
  // The data is one tensor: at most the per-allocation cap, and a header.
  const uint64_t cap = static_cast<uint64_t>(GetMemoryLimits().max_allocation_bytes) + (1 << 20);
  GR_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path, cap));
  return ParseNpy(bytes, path);
}

absl::Status WriteNpyFile(const std::string& path, const Tensor& t) {
  auto bytes = EncodeNpy(t);
  if (!bytes.ok()) return AnnotateStatus(bytes.status(), absl::StrCat(path, ": "));
  return WriteStringToFile(path, *bytes);
}

}  // namespace tools
}  // namespace graphrun
