// Out-of-line parts of array_util.h.
#include "kernels/framework/array_util.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"

namespace graphrun {
namespace array_util {

namespace array_util_internal {

absl::Status ChargeStringCopy(const Tensor& dst, const std::string* src, const std::string* d,
                              int64_t n) {
  TensorBuffer* b = dst.buffer().get();
  if (b == nullptr) return absl::OkStatus();
  const int64_t delta = StringContentsBytes(src, n) - StringContentsBytes(d, n);
  if (delta == 0 && b->contents_charged()) return absl::OkStatus();
  return b->ChargeContents(delta, absl::StrCat("the string contents copied into a ",
                                               dst.shape().DebugString(), " string tensor"));
}

}  // namespace array_util_internal

absl::Status CopyRows(const Tensor& src, int64_t src_off, int64_t src_stride, const Tensor& dst,
                      int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t row_elems) {
  if (src.dtype() == DT_STRING && dst.buffer() != nullptr && rows > 0 && row_elems > 0) {
    // One charge for every row, then the copies charge nothing more.
    const std::string* s = src.base<std::string>();
    const std::string* d = dst.base<std::string>();
    int64_t delta = 0;
    for (int64_t r = 0; r < rows; ++r) {
      delta += StringContentsBytes(s + src_off + r * src_stride, row_elems) -
               StringContentsBytes(d + dst_off + r * dst_stride, row_elems);
    }
    GR_RETURN_IF_ERROR(dst.buffer()->ChargeContents(
        delta, absl::StrCat("the string contents copied into a ", dst.shape().DebugString(),
                            " string tensor")));
    std::string* out = dst.base<std::string>();
    for (int64_t r = 0; r < rows; ++r) {
      std::copy(s + src_off + r * src_stride, s + src_off + r * src_stride + row_elems,
                out + dst_off + r * dst_stride);
    }
    return absl::OkStatus();
  }
  for (int64_t r = 0; r < rows; ++r) {
    GR_RETURN_IF_ERROR(
        CopyElements(src, src_off + r * src_stride, dst, dst_off + r * dst_stride, row_elems));
  }
  return absl::OkStatus();
}

absl::Status FillWith(const Tensor& value, const Tensor& out) {
  const int64_t n = out.NumElements();
  switch (out.dtype()) {
    case DT_STRING: {
      const std::string& v = value.scalar<std::string>();
      auto flat = out.flat<std::string>();
      if (out.buffer() != nullptr) {
        const int64_t each = StringHeapBytes(static_cast<int64_t>(v.size()));
        const int64_t old = StringContentsBytes(flat.data(), n);
        // Saturated: over any limit anyway.
        const int64_t total = each > 0 && n > std::numeric_limits<int64_t>::max() / each
                                  ? std::numeric_limits<int64_t>::max()
                                  : n * each;
        GR_RETURN_IF_ERROR(out.buffer()->ChargeContents(
            total - old, absl::StrCat("the string contents filled into a ",
                                      out.shape().DebugString(), " string tensor")));
      }
      for (auto& s : flat) s = v;
      return absl::OkStatus();
    }
    case DT_RESOURCE: {
      const ResourceHandle& v = value.scalar<ResourceHandle>();
      for (auto& s : out.flat<ResourceHandle>()) s = v;
      return absl::OkStatus();
    }
    default:
      break;
  }
  auto fill = [&](auto tag) {
    using U = decltype(tag);
    U v;
    std::memcpy(&v, value.raw_data(), sizeof(U));
    U* p = reinterpret_cast<U*>(out.raw_data());
    std::fill(p, p + n, v);
  };
  switch (DataTypeSize(out.dtype())) {
    case 1:
      fill(uint8_t{});
      break;
    case 2:
      fill(uint16_t{});
      break;
    case 4:
      fill(uint32_t{});
      break;
    case 8:
      fill(uint64_t{});
      break;
    case 16:
      fill(std::complex<double>{});
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> IntValues(const OpKernel& k, const Tensor& t,
                                               absl::string_view what) {
  std::vector<int64_t> v;
  v.reserve(t.NumElements());
  switch (t.dtype()) {
    case DT_INT32:
      for (int32_t x : t.flat<int32_t>()) v.push_back(x);
      break;
    case DT_INT64:
      for (int64_t x : t.flat<int64_t>()) v.push_back(x);
      break;
    case DT_INT16:
      for (int16_t x : t.flat<int16_t>()) v.push_back(x);
      break;
    case DT_INT8:
      for (int8_t x : t.flat<int8_t>()) v.push_back(x);
      break;
    default:
      return k.Error(
          absl::StrCat(what, " must be an integer tensor, got ", DataTypeString(t.dtype())));
  }
  return v;
}

absl::StatusOr<const Tensor*> GetInput(const OpKernel& k, OpKernelContext* ctx, int i) {
  const Tensor& t = ctx->input(i);
  if (!t.IsInitialized()) {
    if (ctx->input_is_ref(i)) {
      return Annotate(k, ctx->input_ref(i)->UninitializedError());
    }
    return k.Error(absl::StrCat("input ", i, " has no value"));
  }
  return &t;
}

absl::Status Annotate(const OpKernel& k, const absl::Status& s) {
  return AnnotateStatus(s, absl::StrCat("node '", k.name(), "' (op ", k.type_string(), "): "));
}

int64_t Prod(absl::Span<const int64_t> d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) p *= d[i];
  return p;
}

// Reads a scalar (or 1-element) integer input.
absl::StatusOr<int64_t> ScalarInt(const OpKernel& k, const Tensor& t, absl::string_view what) {
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntValues(k, t, what));
  if (v.size() != 1) {
    return k.Error(absl::StrCat(what, " must be a scalar, got shape ", t.shape().DebugString()));
  }
  return v[0];
}

absl::StatusOr<int> CanonicalAxis(const OpKernel& k, int64_t axis, int rank,
                                  absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    return k.Error(absl::StrCat(what, " ", axis, " is out of range [", -rank, ", ", rank, ")"));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace array_util

}  // namespace graphrun
