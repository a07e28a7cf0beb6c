// Type-generic element movement for data-movement kernels: one code path
// per element *size* (memcpy-based) instead of one template instance per
// type, plus element-wise copies for non-POD types (string, resource).
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_ARRAY_UTIL_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_ARRAY_UTIL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {
namespace array_util {

// Every type data-movement kernels accept (fixed-size and string).
inline std::vector<DataType> AllTypes() {
  return {DT_FLOAT,    DT_DOUBLE, DT_INT32,     DT_INT64,     DT_UINT8, DT_INT8,
          DT_INT16,    DT_UINT16, DT_UINT32,    DT_UINT64,    DT_BOOL,  DT_HALF,
          DT_BFLOAT16, DT_STRING, DT_COMPLEX64, DT_COMPLEX128};
}
inline std::vector<DataType> AllTypesAndResource() {
  std::vector<DataType> t = AllTypes();
  t.push_back(DT_RESOURCE);
  return t;
}

namespace array_util_internal {
// Charges the string contents of src[0, n) copied over dst[0, n) to
// `dst`'s buffer (TensorBuffer::ChargeContents).
absl::Status ChargeStringCopy(const Tensor& dst, const std::string* src, const std::string* d,
                              int64_t n);
}  // namespace array_util_internal

// Copies `n` elements from src[src_off] to dst[dst_off] (element offsets).
// Strings' contents are charged to the memory budget first:
// ResourceExhausted (nothing copied) when they do not fit; the executor
// names the node. REQUIRES: same dtype, ranges in bounds.
inline absl::Status CopyElements(const Tensor& src, int64_t src_off, const Tensor& dst,
                                 int64_t dst_off, int64_t n) {
  if (n <= 0) return absl::OkStatus();
  DataType dt = src.dtype();
  if (dt == DT_STRING) {
    const std::string* s = src.base<std::string>() + src_off;
    std::string* d = dst.base<std::string>() + dst_off;
    absl::Status charged = array_util_internal::ChargeStringCopy(dst, s, d, n);
    if (!charged.ok()) return charged;
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else if (dt == DT_RESOURCE) {
    const ResourceHandle* s = src.base<ResourceHandle>() + src_off;
    ResourceHandle* d = dst.base<ResourceHandle>() + dst_off;
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    const int64_t sz = DataTypeSize(dt);
    std::memcpy(dst.raw_data() + dst_off * sz, src.raw_data() + src_off * sz,
                static_cast<size_t>(n * sz));
  }
  return absl::OkStatus();
}

// Copies `rows` blocks of `row_elems` elements; block r is read from
// src_off + r * src_stride and written to dst_off + r * dst_stride.
absl::Status CopyRows(const Tensor& src, int64_t src_off, int64_t src_stride, const Tensor& dst,
                      int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t row_elems);

// Sets every element of `out` to `value`'s single element (strings'
// contents charged first, as CopyElements does).
// REQUIRES: same dtype, value has one element.
absl::Status FillWith(const Tensor& value, const Tensor& out);

// The values of an int32/int64 (or int16/int8) tensor as int64.
absl::StatusOr<std::vector<int64_t>> IntValues(const OpKernel& k, const Tensor& t,
                                               absl::string_view what);

// Input `i`, or FailedPrecondition naming the variable behind an
// uninitialised ref input (and InvalidArgument for a missing value).
absl::StatusOr<const Tensor*> GetInput(const OpKernel& k, OpKernelContext* ctx, int i);

// `s` with "node 'name' (op X): " prepended, keeping the code.
absl::Status Annotate(const OpKernel& k, const absl::Status& s);

// The product of d[from, to).
int64_t Prod(absl::Span<const int64_t> d, int from, int to);
// A scalar (or one-element) integer input; InvalidArgument naming the node.
absl::StatusOr<int64_t> ScalarInt(const OpKernel& k, const Tensor& t, absl::string_view what);
// `axis` in [-rank, rank) made non-negative; InvalidArgument naming the node.
absl::StatusOr<int> CanonicalAxis(const OpKernel& k, int64_t axis, int rank,
                                  absl::string_view what = "axis");

}  // namespace array_util
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_ARRAY_UTIL_H_
