#include "tools/tensor_json.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "graph/status.h"

namespace graphrun {
namespace tools {
namespace {

template <typename F>
std::string FloatToJson(F v) {
  if constexpr (sizeof(F) == sizeof(float)) {
    if (std::isfinite(v)) return FormatFloatShortest(v);
  }
  return JsonNumber(v);
}

std::string ElementToJson(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT:
      return FloatToJson(t.base<float>()[i]);
    case DT_DOUBLE:
      return FloatToJson(t.base<double>()[i]);
    case DT_HALF:
      return FloatToJson(HalfToFloat(t.base<uint16_t>()[i]));
    case DT_BFLOAT16:
      return FloatToJson(BFloat16ToFloat(t.base<uint16_t>()[i]));
    case DT_INT32:
      return absl::StrCat(t.base<int32_t>()[i]);
    case DT_INT64:
      return absl::StrCat(t.base<int64_t>()[i]);
    case DT_INT16:
      return absl::StrCat(t.base<int16_t>()[i]);
    case DT_INT8:
      return absl::StrCat(t.base<int8_t>()[i]);
    case DT_UINT8:
      return absl::StrCat(t.base<uint8_t>()[i]);
    case DT_UINT16:
      return absl::StrCat(t.base<uint16_t>()[i]);
    case DT_UINT32:
      return absl::StrCat(t.base<uint32_t>()[i]);
    case DT_UINT64:
      return absl::StrCat(t.base<uint64_t>()[i]);
    case DT_BOOL:
      return t.base<bool>()[i] ? "true" : "false";
    case DT_STRING:
      return JsonQuote(t.base<std::string>()[i]);
    case DT_RESOURCE:
      return JsonQuote(t.base<ResourceHandle>()[i].DebugString());
    case DT_COMPLEX64:
      return absl::StrCat("[", FloatToJson(t.base<std::complex<float>>()[i].real()), ", ",
                          FloatToJson(t.base<std::complex<float>>()[i].imag()), "]");
    case DT_COMPLEX128:
      return absl::StrCat("[", FloatToJson(t.base<std::complex<double>>()[i].real()), ", ",
                          FloatToJson(t.base<std::complex<double>>()[i].imag()), "]");
    default:
      return "null";
  }
}

// ---- JSON -> tensor ----

absl::Status LeafError(const JsonValue& v, DataType dtype, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("value ", v.Serialize(), " cannot be ", DataTypeString(dtype), ": ", why));
}

// Walks the first element of each level to find the shape.
void FindShape(const JsonValue& v, std::vector<int64_t>* dims) {
  const JsonValue* cur = &v;
  while (cur->is_array()) {
    dims->push_back(static_cast<int64_t>(cur->items().size()));
    if (cur->items().empty()) break;
    cur = &cur->items()[0];
  }
}

// Appends the leaves of `v` (row-major) after checking it has shape
// dims[depth:].
absl::Status CollectLeaves(const JsonValue& v, const std::vector<int64_t>& dims, size_t depth,
                           std::vector<const JsonValue*>* leaves) {
  if (depth == dims.size()) {
    if (v.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ragged array: expected a scalar at depth ", depth, ", got an array"));
    }
    leaves->push_back(&v);
    return absl::OkStatus();
  }
  if (!v.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("ragged array: expected an array of ",
                                                   dims[depth], " at depth ", depth, ", got ",
                                                   v.Serialize()));
  }
  if (static_cast<int64_t>(v.items().size()) != dims[depth]) {
    return absl::InvalidArgumentError(absl::StrCat("ragged array: expected ", dims[depth],
                                                   " elements at depth ", depth, ", got ",
                                                   v.items().size()));
  }
  for (const JsonValue& item : v.items()) {
    GR_RETURN_IF_ERROR(CollectLeaves(item, dims, depth + 1, leaves));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ToDouble(const JsonValue& v, DataType dtype) {
  if (v.is_string()) {
    const std::string& s = v.string_value();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    return LeafError(v, dtype,
                     "strings other than \"NaN\", \"Infinity\", "
                     "\"-Infinity\" are not numbers");
  }
  if (!v.is_number()) return LeafError(v, dtype, "not a number");
  errno = 0;
  double d = std::strtod(v.number_text().c_str(), nullptr);
  if (std::isinf(d)) return LeafError(v, dtype, "out of range");
  return d;
}

absl::StatusOr<float> ToFloat(const JsonValue& v, DataType dtype) {
  if (v.is_number()) {
    // strtof rounds the decimal text once; going through double would
    // round twice and can differ in the last bit.
    float f = std::strtof(v.number_text().c_str(), nullptr);
    if (std::isinf(f)) return LeafError(v, dtype, "out of range");
    return f;
  }
  GR_ASSIGN_OR_RETURN(double d, ToDouble(v, dtype));
  return static_cast<float>(d);
}

// The exact value of JSON number text ("-12.50e1") when it is an integer
// of at most 20 digits: "not an integer" or "out of range" otherwise.
absl::StatusOr<absl::int128> ExactInteger(const std::string& text) {
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  std::string digits;
  int64_t exponent = 0;  // value = digits * 10^exponent
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    digits += text[i];
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      digits += text[i];
      --exponent;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    int64_t e = 0;
    if (!absl::SimpleAtoi(absl::string_view(text).substr(i + 1), &e) || e > 1000 || e < -1000) {
      return absl::OutOfRangeError("out of range");
    }
    exponent += e;
  }
  // Leading zeros say nothing; trailing ones move into the exponent.
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  if (digits.empty()) return absl::int128(0);
  if (exponent < 0) return absl::InvalidArgumentError("not an integer");
  if (static_cast<int64_t>(digits.size()) + exponent > 20) {
    return absl::OutOfRangeError("out of range");
  }
  absl::uint128 value = 0;
  for (char c : digits) value = value * 10 + static_cast<unsigned>(c - '0');
  for (int64_t k = 0; k < exponent; ++k) value *= 10;
  const absl::int128 signed_value = static_cast<absl::int128>(value);
  return negative ? -signed_value : signed_value;
}

// Integral JSON numbers in [lo, hi]. Plain integer text converts exactly;
// "1e3" or "2.0" go through double and must be integral.
template <typename T>
absl::StatusOr<T> ToInt(const JsonValue& v, DataType dtype) {
  if (!v.is_number()) return LeafError(v, dtype, "not an integer");
  const std::string& text = v.number_text();
  constexpr T lo = std::numeric_limits<T>::min();
  constexpr T hi = std::numeric_limits<T>::max();
  if (text.find_first_of(".eE") == std::string::npos) {
    if constexpr (std::is_signed_v<T>) {
      int64_t x;
      if (!absl::SimpleAtoi(text, &x) || x < lo || x > hi) {
        return LeafError(v, dtype, "out of range");
      }
      return static_cast<T>(x);
    } else {
      uint64_t x;
      if (text.size() > 1 && text[0] == '-' &&
          text.find_first_not_of('0', 1) == std::string::npos) {
        return T(0);  // "-0"
      }
      if (text[0] == '-' || !absl::SimpleAtoi(text, &x) || x > hi) {
        return LeafError(v, dtype, "out of range");
      }
      return static_cast<T>(x);
    }
  }
  // "1e3", "2.0", "9007199254740993.0": the decimal's exact value, which
  // must be an integer in range (never rounded through a double).
  absl::StatusOr<absl::int128> x = ExactInteger(text);
  if (!x.ok()) return LeafError(v, dtype, x.status().message());
  if (*x < absl::int128(lo) || *x > absl::int128(hi)) return LeafError(v, dtype, "out of range");
  return static_cast<T>(*x);
}

absl::StatusOr<bool> ToBool(const JsonValue& v, DataType dtype) {
  if (v.is_bool()) return v.bool_value();
  if (v.is_number() && v.number_text() == "0") return false;
  if (v.is_number() && v.number_text() == "1") return true;
  return LeafError(v, dtype, "expected true or false");
}

template <typename T, typename Conv>
absl::Status Fill(const std::vector<const JsonValue*>& leaves, Tensor* t, Conv conv) {
  T* out = t->base<T>();
  for (size_t i = 0; i < leaves.size(); ++i) {
    GR_ASSIGN_OR_RETURN(out[i], conv(*leaves[i]));
  }
  return absl::OkStatus();
}

}  // namespace

std::string TensorValuesToJson(const Tensor& t) {
  std::string out = "[";
  const int64_t n = t.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += ElementToJson(t, i);
  }
  return out + "]";
}

std::string TensorToJson(const Tensor& t) {
  std::string shape = "[";
  for (int i = 0; i < t.dims(); ++i) {
    if (i) shape += ", ";
    absl::StrAppend(&shape, t.dim_size(i));
  }
  shape += "]";
  return absl::StrCat("{\"dtype\": \"", DataTypeEnumName(t.dtype()), "\", \"shape\": ", shape,
                      ", \"values\": ", TensorValuesToJson(t), "}");
}

absl::StatusOr<Tensor> TensorFromJson(const JsonValue& value, DataType dtype) {
  const DataType given = dtype;  // named as given (unknown_type_50_ref, not ..._50)
  dtype = BaseType(dtype);
  if (!DataTypeSupported(dtype) || dtype == DT_RESOURCE || dtype == DT_VARIANT) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot build a ", DataTypeString(given), " tensor from JSON"));
  }
  std::vector<int64_t> dims;
  FindShape(value, &dims);
  std::vector<const JsonValue*> leaves;
  GR_RETURN_IF_ERROR(CollectLeaves(value, dims, 0, &leaves));
  const bool complex = dtype == DT_COMPLEX64 || dtype == DT_COMPLEX128;
  if (complex) {
    // Each element is a [real, imag] pair, as TensorToJson prints it.
    if (dims.empty() || dims.back() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("a ", DataTypeString(dtype),
                       " value is a [real, imag] pair or nested arrays of them, got ",
                       value.Serialize().substr(0, 80)));
    }
    dims.pop_back();
  }
  GR_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::Make(dims));
  Tensor t(dtype, shape);
  auto fill_complex = [&](auto zero) -> absl::Status {
    using C = decltype(zero);
    C* out = t.base<C>();
    for (size_t i = 0; i + 1 < leaves.size(); i += 2) {
      using R = typename C::value_type;
      // complex64's parts are read as floats directly (one rounding).
      auto part = [&](const JsonValue& v) -> absl::StatusOr<R> {
        if constexpr (std::is_same_v<R, float>) {
          return ToFloat(v, dtype);
        } else {
          return ToDouble(v, dtype);
        }
      };
      GR_ASSIGN_OR_RETURN(R re, part(*leaves[i]));
      GR_ASSIGN_OR_RETURN(R im, part(*leaves[i + 1]));
      out[i / 2] = C(re, im);
    }
    return absl::OkStatus();
  };
  auto as = [dtype](auto conv) {
    return [dtype, conv](const JsonValue& v) { return conv(v, dtype); };
  };
  switch (dtype) {
    case DT_FLOAT:
      GR_RETURN_IF_ERROR(Fill<float>(leaves, &t, as(ToFloat)));
      break;
    case DT_DOUBLE:
      GR_RETURN_IF_ERROR(Fill<double>(leaves, &t, as(ToDouble)));
      break;
    case DT_HALF:
      GR_RETURN_IF_ERROR(
          Fill<uint16_t>(leaves, &t, [dtype](const JsonValue& v) -> absl::StatusOr<uint16_t> {
            GR_ASSIGN_OR_RETURN(float f, ToFloat(v, dtype));
            const uint16_t h = FloatToHalf(f);
            if (std::isinf(HalfToFloat(h)) && !std::isinf(f)) {
              return LeafError(v, dtype, "out of range");
            }
            return h;
          }));
      break;
    case DT_BFLOAT16:
      GR_RETURN_IF_ERROR(
          Fill<uint16_t>(leaves, &t, [dtype](const JsonValue& v) -> absl::StatusOr<uint16_t> {
            GR_ASSIGN_OR_RETURN(float f, ToFloat(v, dtype));
            const uint16_t b = FloatToBFloat16(f);
            if (std::isinf(BFloat16ToFloat(b)) && !std::isinf(f)) {
              return LeafError(v, dtype, "out of range");
            }
            return b;
          }));
      break;
    case DT_INT32:
      GR_RETURN_IF_ERROR(Fill<int32_t>(leaves, &t, as(ToInt<int32_t>)));
      break;
    case DT_INT64:
      GR_RETURN_IF_ERROR(Fill<int64_t>(leaves, &t, as(ToInt<int64_t>)));
      break;
    case DT_INT16:
      GR_RETURN_IF_ERROR(Fill<int16_t>(leaves, &t, as(ToInt<int16_t>)));
      break;
    case DT_INT8:
      GR_RETURN_IF_ERROR(Fill<int8_t>(leaves, &t, as(ToInt<int8_t>)));
      break;
    case DT_UINT8:
      GR_RETURN_IF_ERROR(Fill<uint8_t>(leaves, &t, as(ToInt<uint8_t>)));
      break;
    case DT_UINT16:
      GR_RETURN_IF_ERROR(Fill<uint16_t>(leaves, &t, as(ToInt<uint16_t>)));
      break;
    case DT_UINT32:
      GR_RETURN_IF_ERROR(Fill<uint32_t>(leaves, &t, as(ToInt<uint32_t>)));
      break;
    case DT_UINT64:
      GR_RETURN_IF_ERROR(Fill<uint64_t>(leaves, &t, as(ToInt<uint64_t>)));
      break;
    case DT_BOOL:
      GR_RETURN_IF_ERROR(Fill<bool>(leaves, &t, as(ToBool)));
      break;
    case DT_COMPLEX64:
      GR_RETURN_IF_ERROR(fill_complex(std::complex<float>()));
      break;
    case DT_COMPLEX128:
      GR_RETURN_IF_ERROR(fill_complex(std::complex<double>()));
      break;
    case DT_STRING:
      GR_RETURN_IF_ERROR(
          Fill<std::string>(leaves, &t, [dtype](const JsonValue& v) -> absl::StatusOr<std::string> {
            if (!v.is_string()) return LeafError(v, dtype, "not a string");
            return v.string_value();
          }));
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("cannot build a ", DataTypeString(dtype), " tensor from JSON"));
  }
  return t;
}

absl::StatusOr<Tensor> TensorFromJsonText(absl::string_view text, DataType dtype) {
  GR_ASSIGN_OR_RETURN(JsonValue v, ParseJson(text));
  return TensorFromJson(v, dtype);
}

}  // namespace tools
}  // namespace graphrun
