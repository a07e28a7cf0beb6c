#include "graph/types.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace graphrun {

int DataTypeSize(DataType dt) {
  switch (BaseType(dt)) {
    case DT_FLOAT:
      return 4;
    case DT_DOUBLE:
      return 8;
    case DT_INT32:
      return 4;
    case DT_INT64:
      return 8;
    case DT_UINT8:
      return 1;
    case DT_INT8:
      return 1;
    case DT_INT16:
      return 2;
    case DT_UINT16:
      return 2;
    case DT_UINT32:
      return 4;
    case DT_UINT64:
      return 8;
    case DT_BOOL:
      return 1;
    case DT_HALF:
      return 2;
    case DT_BFLOAT16:
      return 2;
    case DT_COMPLEX64:
      return 8;
    case DT_COMPLEX128:
      return 16;
    default:
      return 0;
  }
}

bool DataTypeSupported(DataType dt) {
  DataType b = BaseType(dt);
  return DataTypeSize(b) > 0 || b == DT_STRING || b == DT_RESOURCE || b == DT_VARIANT;
}

std::string DataTypeString(DataType dt) {
  if (IsRefType(dt)) return absl::StrCat(DataTypeString(BaseType(dt)), "_ref");
  switch (dt) {
    case DT_INVALID:
      return "INVALID";
    case DT_FLOAT:
      return "float";
    case DT_DOUBLE:
      return "double";
    case DT_INT32:
      return "int32";
    case DT_INT64:
      return "int64";
    case DT_UINT8:
      return "uint8";
    case DT_INT8:
      return "int8";
    case DT_INT16:
      return "int16";
    case DT_UINT16:
      return "uint16";
    case DT_UINT32:
      return "uint32";
    case DT_UINT64:
      return "uint64";
    case DT_BOOL:
      return "bool";
    case DT_STRING:
      return "string";
    case DT_HALF:
      return "half";
    case DT_BFLOAT16:
      return "bfloat16";
    case DT_RESOURCE:
      return "resource";
    case DT_VARIANT:
      return "variant";
    case tensorflow::DT_COMPLEX64:
      return "complex64";
    case tensorflow::DT_COMPLEX128:
      return "complex128";
    case tensorflow::DT_QINT8:
      return "qint8";
    case tensorflow::DT_QUINT8:
      return "quint8";
    case tensorflow::DT_QINT32:
      return "qint32";
    case tensorflow::DT_QINT16:
      return "qint16";
    case tensorflow::DT_QUINT16:
      return "quint16";
    default:
      return absl::StrCat("unknown_type_", static_cast<int>(dt));
  }
}

std::string DataTypeEnumName(DataType dt) {
  if (tensorflow::DataType_IsValid(dt)) return tensorflow::DataType_Name(dt);
  return absl::StrCat("DT_UNKNOWN_", static_cast<int>(dt));
}

absl::StatusOr<DataType> ParseDataType(absl::string_view s) {
  std::string lower = absl::AsciiStrToLower(s);
  if (absl::StartsWith(lower, "dt_")) lower = lower.substr(3);
  bool ref = false;
  if (absl::EndsWith(lower, "_ref")) {
    ref = true;
    lower = lower.substr(0, lower.size() - 4);
  }
  if (lower == "float32") lower = "float";
  if (lower == "float64") lower = "double";
  if (lower == "float16") lower = "half";
  for (int i = 1; i <= 23; ++i) {
    DataType dt = static_cast<DataType>(i);
    if (DataTypeString(dt) == lower) return ref ? MakeRefType(dt) : dt;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown data type '", s, "'"));
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 31) return sign | 0x7c00;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    uint32_t shift = 14 - exp;
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return sign | half_mant;
  }
  uint16_t h = sign | (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return h;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0 | ((u >> 16) & 0x8000);
  uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

}  // namespace graphrun
