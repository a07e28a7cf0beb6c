// Element types. graphrun uses TensorFlow's DataType enum (graph/proto/
// types.proto) directly so GraphDefs need no translation.
#ifndef GRAPHRUN_GRAPH_TYPES_H_
#define GRAPHRUN_GRAPH_TYPES_H_

#include <complex>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/proto/types.pb.h"

namespace graphrun {

using DataType = ::tensorflow::DataType;
using ::tensorflow::DT_BFLOAT16;
using ::tensorflow::DT_BOOL;
using ::tensorflow::DT_COMPLEX128;
using ::tensorflow::DT_COMPLEX64;
using ::tensorflow::DT_DOUBLE;
using ::tensorflow::DT_FLOAT;
using ::tensorflow::DT_HALF;
using ::tensorflow::DT_INT16;
using ::tensorflow::DT_INT32;
using ::tensorflow::DT_INT64;
using ::tensorflow::DT_INT8;
using ::tensorflow::DT_INVALID;
using ::tensorflow::DT_RESOURCE;
using ::tensorflow::DT_STRING;
using ::tensorflow::DT_UINT16;
using ::tensorflow::DT_UINT32;
using ::tensorflow::DT_UINT64;
using ::tensorflow::DT_UINT8;
using ::tensorflow::DT_VARIANT;

constexpr int kDataTypeRefOffset = 100;

// TensorFlow's reference types are 101..199 (DT_FLOAT_REF = 101); a
// larger value is no type at all, not a reference to one.
inline bool IsRefType(DataType dt) {
  return dt > kDataTypeRefOffset && dt < 2 * kDataTypeRefOffset;
}
inline DataType BaseType(DataType dt) {
  return IsRefType(dt) ? static_cast<DataType>(dt - kDataTypeRefOffset) : dt;
}
inline DataType MakeRefType(DataType dt) {
  return IsRefType(dt) ? dt : static_cast<DataType>(dt + kDataTypeRefOffset);
}

// Bytes per element for fixed-size types; 0 for string/resource/variant and
// for types graphrun cannot store.
int DataTypeSize(DataType dt);

// True when graphrun can hold tensors of this (base) type.
bool DataTypeSupported(DataType dt);

// TensorFlow's short spelling: "float", "int32", "float_ref", …
std::string DataTypeString(DataType dt);
// The enum spelling: "DT_FLOAT".
std::string DataTypeEnumName(DataType dt);
// Parses "float", "int32", "DT_FLOAT", … ; InvalidArgument otherwise.
absl::StatusOr<DataType> ParseDataType(absl::string_view s);

// Raw 16-bit storage for half / bfloat16: decoded and converted, not computed.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
inline float BFloat16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
uint16_t FloatToBFloat16(float f);

class ResourceHandle;
class Variant;

template <typename T>
struct DataTypeToEnum;
#define GR_TYPE_ENUM_(T, E)                            \
  template <>                                          \
  struct DataTypeToEnum<T> {                           \
    static constexpr DataType value = ::tensorflow::E; \
  }
GR_TYPE_ENUM_(float, DT_FLOAT);
GR_TYPE_ENUM_(double, DT_DOUBLE);
GR_TYPE_ENUM_(int32_t, DT_INT32);
GR_TYPE_ENUM_(int64_t, DT_INT64);
GR_TYPE_ENUM_(uint8_t, DT_UINT8);
GR_TYPE_ENUM_(int8_t, DT_INT8);
GR_TYPE_ENUM_(int16_t, DT_INT16);
GR_TYPE_ENUM_(uint16_t, DT_UINT16);
GR_TYPE_ENUM_(uint32_t, DT_UINT32);
GR_TYPE_ENUM_(uint64_t, DT_UINT64);
GR_TYPE_ENUM_(bool, DT_BOOL);
GR_TYPE_ENUM_(std::string, DT_STRING);
GR_TYPE_ENUM_(Half, DT_HALF);
GR_TYPE_ENUM_(std::complex<float>, DT_COMPLEX64);
GR_TYPE_ENUM_(std::complex<double>, DT_COMPLEX128);
GR_TYPE_ENUM_(BFloat16, DT_BFLOAT16);
GR_TYPE_ENUM_(ResourceHandle, DT_RESOURCE);
GR_TYPE_ENUM_(Variant, DT_VARIANT);
#undef GR_TYPE_ENUM_

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_TYPES_H_
