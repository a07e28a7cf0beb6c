// The Cast kernel: every pair of the numeric types (signed and unsigned
// integers of every width, float, double, half, bfloat16, complex64,
// complex128) and bool (graph/ops/math_ops.cc). Float-to-integer casts
// saturate (C++ leaves them undefined); half and bfloat16 go through float;
// Truncate rounds bfloat16 toward zero. As in TensorFlow, a complex number
// cast to a real type keeps its real part (to bool: true unless both parts
// are zero), and a real one becomes complex with a zero imaginary part.
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/math/cwise_util.h"
#include "kernels/math/register.h"

namespace graphrun {
namespace {

template <typename T>
struct IsComplex : std::false_type {};
template <typename T>
struct IsComplex<std::complex<T>> : std::true_type {};

template <typename D, typename S>
inline D ConvertValue(S v, bool truncate) {
  if constexpr (IsComplex<S>::value) {
    if constexpr (IsComplex<D>::value) {
      using R = typename D::value_type;
      return D(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    } else if constexpr (std::is_same_v<D, bool>) {
      return v != S(0);
    } else {
      return ConvertValue<D>(v.real(), truncate);
    }
  } else if constexpr (IsComplex<D>::value) {
    using R = typename D::value_type;
    return D(ConvertValue<R>(v, truncate), R(0));
  } else if constexpr (std::is_same_v<S, Half>) {
    return ConvertValue<D>(HalfToFloat(v.bits), truncate);
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return ConvertValue<D>(BFloat16ToFloat(v.bits), truncate);
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{FloatToHalf(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    const float f = static_cast<float>(v);
    if (truncate) {
      uint32_t u;
      __builtin_memcpy(&u, &f, 4);
      return BFloat16{static_cast<uint16_t>(u >> 16)};
    }
    return BFloat16{FloatToBFloat16(f)};
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S{0};
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    // Out-of-range and NaN conversions are undefined in C++: saturate.
    using L = std::numeric_limits<D>;
    if (!(v == v)) return D{0};
    if (v <= static_cast<S>(L::min())) return L::min();
    if (v >= static_cast<S>(L::max())) return L::max();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

using CastFn = void (*)(const void* in, void* out, int64_t n, bool truncate);

template <typename S, typename D>
inline void CastImpl(const S* __restrict a, D* __restrict o, int64_t n, bool truncate) {
  int64_t i = 0;
  for (; i + cwise::kBlock <= n; i += cwise::kBlock) {
    for (int j = 0; j < cwise::kBlock; ++j) {
      o[i + j] = ConvertValue<D>(a[i + j], truncate);
    }
  }
  for (; i < n; ++i) o[i] = ConvertValue<D>(a[i], truncate);
}

template <typename S, typename D>
void CastLoop(const void* in, void* out, int64_t n, bool truncate) {
  CastImpl<S, D>(static_cast<const S*>(in), static_cast<D*>(out), n, truncate);
}

// clang-format 14 does not reach a fixed point on this macro.
// clang-format off
#define GR_CAST_TYPES_(M)                                     \
  M(float, DT_FLOAT) M(double, DT_DOUBLE) M(int32_t, DT_INT32) \
  M(int64_t, DT_INT64) M(uint8_t, DT_UINT8) M(int8_t, DT_INT8) \
  M(int16_t, DT_INT16) M(uint16_t, DT_UINT16)                  \
  M(uint32_t, DT_UINT32) M(uint64_t, DT_UINT64) M(bool, DT_BOOL) \
  M(Half, DT_HALF) M(BFloat16, DT_BFLOAT16)                    \
  M(std::complex<float>, DT_COMPLEX64)                         \
  M(std::complex<double>, DT_COMPLEX128)
// clang-format on

template <typename S>
CastFn CastFrom(DataType dst) {
  switch (dst) {
#define GR_CASE_(D, E) \
  case E:              \
    return &CastLoop<S, D>;
    GR_CAST_TYPES_(GR_CASE_)
#undef GR_CASE_
    default:
      return nullptr;
  }
}

CastFn GetCastFn(DataType src, DataType dst) {
  switch (src) {
#define GR_CASE_(S, E) \
  case E:              \
    return CastFrom<S>(dst);
    GR_CAST_TYPES_(GR_CASE_)
#undef GR_CASE_
    default:
      return nullptr;
  }
}

const std::vector<DataType>& CastTypes() {
  static const auto* types = new std::vector<DataType>{
#define GR_ENUM_(T, E) E,
      GR_CAST_TYPES_(GR_ENUM_)
#undef GR_ENUM_
  };
  return *types;
}

class CastOp : public OpKernel {
 public:
  explicit CastOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, c->GetAttr("SrcT", &src_));
    GR_CTX_CHECK_OK(c, c->GetAttr("DstT", &dst_));
    GR_CTX_CHECK_OK(c, c->GetAttr("Truncate", &truncate_));
    fn_ = GetCastFn(src_, dst_);
    if (fn_ == nullptr) {
      c->SetStatus(c->Error(absl::StrCat("unsupported cast from ", DataTypeString(src_), " to ",
                                         DataTypeString(dst_))));
    }
    elem_in_ = DataTypeSize(src_);
    elem_out_ = DataTypeSize(dst_);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (!x.IsInitialized()) return Error("input is not initialized");
    if (src_ == dst_) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    const char* in = x.raw_data();
    char* o = out->raw_data();
    cwise::ParallelFor(ctx, x.NumElements(), 2, [&](int64_t b, int64_t e) {
      fn_(in + b * elem_in_, o + b * elem_out_, e - b, truncate_);
    });
    return absl::OkStatus();
  }

 private:
  DataType src_ = DT_INVALID, dst_ = DT_INVALID;
  bool truncate_ = false;
  CastFn fn_ = nullptr;
  int64_t elem_in_ = 0, elem_out_ = 0;
};

}  // namespace

void RegisterCastKernels(KernelRegistry& r) {
  r.Add(KernelDef("Cast")
            .Device(kDeviceCpu)
            .TypeConstraint("SrcT", CastTypes())
            .TypeConstraint("DstT", CastTypes()),
        MakeKernel<CastOp>());
}

}  // namespace graphrun
