// CPU kernels for array ops. Data movement is type-generic (keyed on the
// element size, strings copied element-wise) so one kernel class serves
// every type; only Range and OnesLike need per-type arithmetic.
#include <algorithm>
#include <complex>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "kernels/framework/array_util.h"
#include "kernels/math/register.h"

namespace graphrun {
namespace {

using array_util::AllTypes;
using array_util::AllTypesAndResource;
using array_util::CanonicalAxis;
using array_util::CopyElements;
using array_util::CopyRows;
using array_util::GetInput;
using array_util::IntValues;
using array_util::Prod;
using array_util::ScalarInt;

// ---------------------------------------------------------------------------
// Constants, placeholders, identities.

class ConstOp : public OpKernel {
 public:
  explicit ConstOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("value", &value_));
    DataType dt;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dt));
    if (value_.dtype() != dt) {
      ctx->SetStatus(
          ctx->Error(absl::StrCat("type mismatch between value (", DataTypeString(value_.dtype()),
                                  ") and dtype (", DataTypeString(dt), ")")));
    }
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->set_output(0, value_);
    return absl::OkStatus();
  }

 private:
  Tensor value_;
};

class PlaceholderOp : public OpKernel {
 public:
  explicit PlaceholderOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    DataType dt = DT_INVALID;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dt));
    PartialShape shape;
    if (ctx->HasAttr("shape")) GR_CTX_CHECK_OK(ctx, ctx->GetAttr("shape", &shape));
    message_ = absl::StrCat("You must feed a value for placeholder tensor '", name(),
                            "' with dtype ", DataTypeString(dt));
    if (shape.known_rank()) absl::StrAppend(&message_, " and shape ", shape.DebugString());
  }
  absl::Status Compute(OpKernelContext*) override { return absl::InvalidArgumentError(message_); }

 private:
  std::string message_;
};

// Identity, StopGradient, Snapshot, PlaceholderWithDefault: the input (a
// ref input arrives as a snapshot; later in-place updates of the variable
// copy on write, so the snapshot never changes).
class IdentityOp : public OpKernel {
 public:
  explicit IdentityOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(*this, ctx, i));
      ctx->set_output(i, *t);
    }
    return absl::OkStatus();
  }
};

class NoOp : public OpKernel {
 public:
  explicit NoOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext*) override { return absl::OkStatus(); }
};

// ---------------------------------------------------------------------------
// Shapes.

class ReshapeOp : public OpKernel {
 public:
  explicit ReshapeOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    const Tensor& shape_t = ctx->input(1);
    if (shape_t.dims() > 1) {
      return Error(absl::StrCat("sizes input must be 1-D, not ", shape_t.shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntValues(*this, shape_t, "shape"));
    int unknown = -1;
    int64_t product = 1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == -1) {
        if (unknown >= 0) {
          return Error(
              absl::StrCat("only one input size may be -1, not both ", unknown, " and ", i));
        }
        unknown = static_cast<int>(i);
      } else if (sizes[i] < 0) {
        return Error(absl::StrCat("size ", i, " must be non-negative, not ", sizes[i]));
      } else if (__builtin_mul_overflow(product, sizes[i], &product)) {
        return Error(absl::StrCat("the requested shape [", absl::StrJoin(sizes, ","),
                                  "] would overflow the element count"));
      }
    }
    const int64_t n = in->NumElements();
    if (unknown >= 0) {
      if (product == 0) {
        if (n != 0) {
          return Error(absl::StrCat("Input to reshape is a tensor with ", n,
                                    " values, but the requested shape has 0"));
        }
        return Error(
            "Reshape cannot infer the missing input size for an empty tensor "
            "unless all specified input sizes are non-zero");
      }
      if (n % product != 0) {
        return Error(absl::StrCat("Input to reshape is a tensor with ", n,
                                  " values, but the requested shape requires a "
                                  "multiple of ",
                                  product));
      }
      sizes[unknown] = n / product;
    } else if (product != n) {
      return Error(absl::StrCat("Input to reshape is a tensor with ", n,
                                " values, but the requested shape has ", product));
    }
    absl::StatusOr<TensorShape> shape = TensorShape::Make(sizes);
    if (!shape.ok()) return Error(shape.status().message());
    GR_ASSIGN_OR_RETURN(Tensor out, in->Reshaped(*shape));
    ctx->set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

// Writes `v` into an int32 or int64 output element.
absl::Status PutIndex(const OpKernel& k, const Tensor& out, int64_t i, int64_t v) {
  if (out.dtype() == DT_INT32) {
    if (v > INT32_MAX) {
      return k.Error(absl::StrCat("value ", v, " does not fit in int32 (use out_type int64)"));
    }
    out.base<int32_t>()[i] = static_cast<int32_t>(v);
  } else {
    out.base<int64_t>()[i] = v;
  }
  return absl::OkStatus();
}

class ShapeOp : public OpKernel {
 public:
  explicit ShapeOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({in->dims()})));
    for (int i = 0; i < in->dims(); ++i) {
      GR_RETURN_IF_ERROR(PutIndex(*this, *out, i, in->dim_size(i)));
    }
    return absl::OkStatus();
  }
};

class SizeOp : public OpKernel {
 public:
  explicit SizeOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape()));
    return PutIndex(*this, *out, 0, in->NumElements());
  }
};

class RankOp : public OpKernel {
 public:
  explicit RankOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    ctx->set_output(0, Tensor::Scalar<int32_t>(in->dims()));
    return absl::OkStatus();
  }
};

// Reads a shape vector input, checking sizes are non-negative.
absl::StatusOr<TensorShape> ShapeFromInput(const OpKernel& k, const Tensor& t,
                                           absl::string_view what) {
  if (t.dims() != 1) {
    return k.Error(absl::StrCat(what, " must be a vector, got shape ", t.shape().DebugString()));
  }
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntValues(k, t, what));
  auto s = TensorShape::Make(dims);
  if (!s.ok()) return k.Error(s.status().message());
  return *s;
}

class FillOp : public OpKernel {
 public:
  explicit FillOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromInput(*this, ctx->input(0), "dims"));
    GR_ASSIGN_OR_RETURN(const Tensor* value, GetInput(*this, ctx, 1));
    if (value->dims() != 0) {
      return Error(
          absl::StrCat("value must be a scalar, got shape ", value->shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    GR_RETURN_IF_ERROR(array_util::FillWith(*value, *out));
    return absl::OkStatus();
  }
};

// One, encoded in `dt`.
Tensor OneOf(DataType dt) {
  switch (dt) {
    case DT_FLOAT:
      return Tensor::Scalar<float>(1);
    case DT_DOUBLE:
      return Tensor::Scalar<double>(1);
    case DT_INT32:
      return Tensor::Scalar<int32_t>(1);
    case DT_INT64:
      return Tensor::Scalar<int64_t>(1);
    case DT_UINT8:
      return Tensor::Scalar<uint8_t>(1);
    case DT_INT8:
      return Tensor::Scalar<int8_t>(1);
    case DT_INT16:
      return Tensor::Scalar<int16_t>(1);
    case DT_UINT16:
      return Tensor::Scalar<uint16_t>(1);
    case DT_UINT32:
      return Tensor::Scalar<uint32_t>(1);
    case DT_UINT64:
      return Tensor::Scalar<uint64_t>(1);
    case DT_BOOL:
      return Tensor::Scalar<bool>(true);
    case DT_HALF:
      return Tensor::Scalar<Half>(Half{FloatToHalf(1.0f)});
    case DT_BFLOAT16:
      return Tensor::Scalar<BFloat16>(BFloat16{FloatToBFloat16(1.0f)});
    default:
      return Tensor();
  }
}

class ZerosOnesLikeOp : public OpKernel {
 public:
  ZerosOnesLikeOp(OpKernelConstruction* ctx, bool ones) : OpKernel(ctx), ones_(ones) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, in->shape()));
    if (ones_) {
      Tensor one = OneOf(out->dtype());
      if (!one.IsInitialized()) {
        return Error(absl::StrCat("unsupported type ", DataTypeString(out->dtype())));
      }
      GR_RETURN_IF_ERROR(array_util::FillWith(one, *out));
    } else if (out->dtype() != DT_STRING && out->dtype() != DT_RESOURCE) {
      // All-zero bits are zero for every fixed-size type.
      std::memset(out->raw_data(), 0, out->NumElements() * DataTypeSize(out->dtype()));
    }
    return absl::OkStatus();
  }

 private:
  bool ones_;
};
class ZerosLikeOp : public ZerosOnesLikeOp {
 public:
  explicit ZerosLikeOp(OpKernelConstruction* ctx) : ZerosOnesLikeOp(ctx, false) {}
};
class OnesLikeOp : public ZerosOnesLikeOp {
 public:
  explicit OnesLikeOp(OpKernelConstruction* ctx) : ZerosOnesLikeOp(ctx, true) {}
};

class ExpandDimsOp : public OpKernel {
 public:
  explicit ExpandDimsOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(int64_t dim, ScalarInt(*this, ctx->input(1), "dim"));
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(*this, dim, in->dims() + 1, "dim"));
    TensorShape s = in->shape();
    s.InsertDim(axis, 1);
    absl::StatusOr<Tensor> out = in->Reshaped(s);
    if (!out.ok()) return array_util::Annotate(*this, out.status());
    ctx->set_output(0, *std::move(out));
    return absl::OkStatus();
  }
};

class SqueezeOp : public OpKernel {
 public:
  explicit SqueezeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("squeeze_dims", &dims_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    std::vector<bool> drop(in->dims(), dims_.empty());
    for (int64_t d : dims_) {
      GR_ASSIGN_OR_RETURN(int a, CanonicalAxis(*this, d, in->dims(), "squeeze dim"));
      if (in->dim_size(a) != 1) {
        return Error(absl::StrCat("Can not squeeze dim[", a, "], expected a dimension of 1, got ",
                                  in->dim_size(a)));
      }
      drop[a] = true;
    }
    TensorShape s;
    for (int i = 0; i < in->dims(); ++i) {
      if (!(drop[i] && in->dim_size(i) == 1)) s.AddDim(in->dim_size(i));
    }
    absl::StatusOr<Tensor> out = in->Reshaped(s);
    if (!out.ok()) return array_util::Annotate(*this, out.status());
    ctx->set_output(0, *std::move(out));
    return absl::OkStatus();
  }

 private:
  std::vector<int64_t> dims_;
};

// ---------------------------------------------------------------------------
// Concat / split / pack / unpack: all views of a tensor as
// [outer, axis, inner] blocks.

class ConcatV2Op : public OpKernel {
 public:
  explicit ConcatV2Op(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs() - 1;
    GR_ASSIGN_OR_RETURN(int64_t axis_v, ScalarInt(*this, ctx->input(n), "axis"));
    std::vector<const Tensor*> in(n);
    for (int i = 0; i < n; ++i) {
      GR_ASSIGN_OR_RETURN(in[i], GetInput(*this, ctx, i));
    }
    const int rank = in[0]->dims();
    if (rank == 0) return Error("Can't concatenate scalars (use tf.stack instead)");
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(*this, axis_v, rank));
    TensorShape out_shape = in[0]->shape();
    int64_t total = 0;
    for (int i = 0; i < n; ++i) {
      if (in[i]->dims() != rank) {
        return Error(absl::StrCat("ConcatOp : Ranks of all input tensors should match: shape[0] = ",
                                  in[0]->shape().DebugString(), " vs. shape[", i,
                                  "] = ", in[i]->shape().DebugString()));
      }
      for (int d = 0; d < rank; ++d) {
        if (d != axis && in[i]->dim_size(d) != in[0]->dim_size(d)) {
          return Error(absl::StrCat(
              "ConcatOp : Dimension ", d,
              " in both shapes must be equal: shape[0] = ", in[0]->shape().DebugString(),
              " vs. shape[", i, "] = ", in[i]->shape().DebugString()));
        }
      }
      total += in[i]->dim_size(axis);
    }
    out_shape.set_dim(axis, total);
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    const int64_t outer = Prod(out_shape.dim_sizes(), 0, axis);
    const int64_t inner = Prod(out_shape.dim_sizes(), axis + 1, rank);
    const int64_t out_row = total * inner;
    int64_t col = 0;
    for (int i = 0; i < n; ++i) {
      const int64_t row = in[i]->dim_size(axis) * inner;
      GR_RETURN_IF_ERROR(CopyRows(*in[i], 0, row, *out, col, out_row, outer, row));
      col += row;
    }
    return absl::OkStatus();
  }
};

// Emits output `i` as input[..., start:start+len, ...] along `axis`
// (a zero-copy view when axis 0 makes it contiguous).
absl::Status EmitPart(OpKernelContext* ctx, int i, const Tensor& in, int axis, int64_t start,
                      int64_t len) {
  const int rank = in.dims();
  TensorShape s = in.shape();
  s.set_dim(axis, len);
  const int64_t outer = Prod(in.shape().dim_sizes(), 0, axis);
  if (outer == 1 && in.NumElements() > 0) {
    const int64_t inner = Prod(in.shape().dim_sizes(), axis + 1, rank);
    Tensor flat = *in.Reshaped(TensorShape({in.dim_size(axis), inner}));
    ctx->set_output(i, *flat.Slice(start, start + len).Reshaped(s));
    return absl::OkStatus();
  }
  Tensor out(in.dtype(), s);
  const int64_t inner = Prod(in.shape().dim_sizes(), axis + 1, rank);
  GR_RETURN_IF_ERROR(CopyRows(in, start * inner, in.dim_size(axis) * inner, out, 0, len * inner,
                              outer, len * inner));
  ctx->set_output(i, std::move(out));
  return absl::OkStatus();
}

class SplitOp : public OpKernel {
 public:
  explicit SplitOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(int64_t dim, ScalarInt(*this, ctx->input(0), "split_dim"));
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 1));
    const int num = ctx->num_outputs();
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(*this, dim, in->dims(), "split_dim"));
    const int64_t d = in->dim_size(axis);
    if (d % num != 0) {
      return Error(
          absl::StrCat("Number of ways to split should evenly divide the split dimension, "
                       "but got split_dim ",
                       axis, " (size = ", d, ") and num_split ", num));
    }
    for (int i = 0; i < num; ++i) {
      GR_RETURN_IF_ERROR(EmitPart(ctx, i, *in, axis, i * (d / num), d / num));
    }
    return absl::OkStatus();
  }
};

class SplitVOp : public OpKernel {
 public:
  explicit SplitVOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntValues(*this, ctx->input(1), "size_splits"));
    GR_ASSIGN_OR_RETURN(int64_t dim, ScalarInt(*this, ctx->input(2), "split_dim"));
    const int num = ctx->num_outputs();
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(*this, dim, in->dims(), "split_dim"));
    if (static_cast<int>(sizes.size()) != num) {
      return Error(
          absl::StrCat("length of size_splits should be equal to the "
                       "number of outputs: ",
                       sizes.size(), " vs. ", num));
    }
    const int64_t d = in->dim_size(axis);
    int neg = -1;
    int64_t sum = 0;
    for (int i = 0; i < num; ++i) {
      if (sizes[i] == -1) {
        if (neg >= 0) return Error("there can only be one -1 in size_splits");
        neg = i;
      } else if (sizes[i] < 0) {
        return Error(absl::StrCat("size_splits[", i, "] = ", sizes[i], " is negative"));
      } else {
        sum += sizes[i];
      }
    }
    if (neg >= 0) {
      if (sum > d) return Error("the sum of size_splits exceeds the split dimension");
      sizes[neg] = d - sum;
    } else if (sum != d) {
      return Error(
          absl::StrCat("Determined shape must either match input shape "
                       "along split_dim exactly if fully specified, or "
                       "be less than the size of the input along "
                       "split_dim if not fully specified. Got: ",
                       sum, " vs ", d));
    }
    int64_t start = 0;
    for (int i = 0; i < num; ++i) {
      GR_RETURN_IF_ERROR(EmitPart(ctx, i, *in, axis, start, sizes[i]));
      start += sizes[i];
    }
    return absl::OkStatus();
  }
};

class PackOp : public OpKernel {
 public:
  explicit PackOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("axis", &axis_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs();
    std::vector<const Tensor*> in(n);
    for (int i = 0; i < n; ++i) {
      GR_ASSIGN_OR_RETURN(in[i], GetInput(*this, ctx, i));
      if (in[i]->shape() != in[0]->shape()) {
        return Error(absl::StrCat(
            "Shapes of all inputs must match: values[0].shape = ", in[0]->shape().DebugString(),
            " != values[", i, "].shape = ", in[i]->shape().DebugString()));
      }
    }
    const int rank = in[0]->dims();
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(*this, axis_, rank + 1));
    TensorShape s = in[0]->shape();
    s.InsertDim(axis, n);
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, s));
    const int64_t outer = Prod(in[0]->shape().dim_sizes(), 0, axis);
    const int64_t inner = Prod(in[0]->shape().dim_sizes(), axis, rank);
    for (int i = 0; i < n; ++i) {
      GR_RETURN_IF_ERROR(CopyRows(*in[i], 0, inner, *out, i * inner, n * inner, outer, inner));
    }
    return absl::OkStatus();
  }

 private:
  int64_t axis_ = 0;
};

class UnpackOp : public OpKernel {
 public:
  explicit UnpackOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("axis", &axis_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    const int num = ctx->num_outputs();
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(*this, axis_, in->dims()));
    if (in->dim_size(axis) != num) {
      return Error(absl::StrCat("Input shape axis ", axis, " must equal ", num, ", got shape ",
                                in->shape().DebugString()));
    }
    TensorShape s = in->shape();
    s.RemoveDim(axis);
    for (int i = 0; i < num; ++i) {
      GR_RETURN_IF_ERROR(EmitPart(ctx, i, *in, axis, i, 1));
      Tensor part = ctx->mutable_outputs()->at(i).tensor;
      ctx->set_output(i, *part.Reshaped(s));
    }
    return absl::OkStatus();
  }

 private:
  int64_t axis_ = 0;
};

// ---------------------------------------------------------------------------
// Transpose.

// out[i] = in[src offset], walking output indices in order with an
// incremental source offset. `in_strides[d]` is the input stride of output
// dimension d.
template <typename T>
void TransposeLoop(const T* in, T* out, absl::Span<const int64_t> out_dims,
                   absl::Span<const int64_t> in_strides) {
  const int rank = static_cast<int>(out_dims.size());
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  if (total == 0) return;
  if (rank == 2) {
    // Blocked for cache locality.
    constexpr int64_t kB = 32;
    const int64_t r = out_dims[0], c = out_dims[1];
    const int64_t s0 = in_strides[0], s1 = in_strides[1];
    for (int64_t i0 = 0; i0 < r; i0 += kB) {
      for (int64_t j0 = 0; j0 < c; j0 += kB) {
        const int64_t i1 = std::min(r, i0 + kB), j1 = std::min(c, j0 + kB);
        for (int64_t i = i0; i < i1; ++i) {
          for (int64_t j = j0; j < j1; ++j) out[i * c + j] = in[i * s0 + j * s1];
        }
      }
    }
    return;
  }
  DimVector idx(rank, 0);
  int64_t src = 0;
  const int64_t last = out_dims[rank - 1], last_stride = in_strides[rank - 1];
  for (int64_t o = 0; o < total; o += last) {
    for (int64_t j = 0; j < last; ++j) out[o + j] = in[src + j * last_stride];
    for (int d = rank - 2; d >= 0; --d) {
      src += in_strides[d];
      if (++idx[d] < out_dims[d]) break;
      src -= in_strides[d] * out_dims[d];
      idx[d] = 0;
    }
  }
}

class TransposeOp : public OpKernel {
 public:
  explicit TransposeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    const Tensor& perm_t = ctx->input(1);
    if (perm_t.dims() != 1) {
      return Error(absl::StrCat("perm must be a vector, not ", perm_t.shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> perm, IntValues(*this, perm_t, "perm"));
    const int rank = in->dims();
    if (static_cast<int>(perm.size()) != rank) {
      return Error(absl::StrCat("transpose expects a vector of size ", rank,
                                ". But input(1) is a vector of size ", perm.size()));
    }
    std::vector<bool> seen(rank, false);
    DimVector in_strides(rank, 1);
    for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in->dim_size(d + 1);
    TensorShape out_shape;
    DimVector strides(rank);
    bool identity = true;
    for (int i = 0; i < rank; ++i) {
      if (perm[i] < 0 || perm[i] >= rank) {
        return Error(absl::StrCat(perm[i], " is out of range [0 .. ", rank, ")"));
      }
      if (seen[perm[i]]) return Error(absl::StrCat(perm[i], " is duplicated in perm"));
      seen[perm[i]] = true;
      identity &= perm[i] == i;
      out_shape.AddDim(in->dim_size(static_cast<int>(perm[i])));
      strides[i] = in_strides[perm[i]];
    }
    if (identity) {
      ctx->set_output(0, *in);
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    auto dims = out_shape.dim_sizes();
    switch (in->dtype()) {
      case DT_STRING:
        TransposeLoop(in->base<std::string>(), out->base<std::string>(), dims, strides);
        return absl::OkStatus();
      case DT_RESOURCE:
        TransposeLoop(in->base<ResourceHandle>(), out->base<ResourceHandle>(), dims, strides);
        return absl::OkStatus();
      default:
        break;
    }
    switch (DataTypeSize(in->dtype())) {
      case 1:
        TransposeLoop(in->base<uint8_t>(), out->base<uint8_t>(), dims, strides);
        break;
      case 2:
        TransposeLoop(in->base<uint16_t>(), out->base<uint16_t>(), dims, strides);
        break;
      case 4:
        TransposeLoop(in->base<uint32_t>(), out->base<uint32_t>(), dims, strides);
        break;
      case 8:
        TransposeLoop(in->base<uint64_t>(), out->base<uint64_t>(), dims, strides);
        break;
      case 16:
        TransposeLoop(in->base<std::complex<double>>(), out->base<std::complex<double>>(), dims,
                      strides);
        break;
      default:
        return Error("unsupported element type");
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Range.

template <typename T>
class RangeOp : public OpKernel {
 public:
  explicit RangeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < 3; ++i) {
      if (ctx->input(i).NumElements() != 1) {
        static const char* kNames[] = {"start", "limit", "delta"};
        return Error(absl::StrCat(kNames[i], " must be a scalar, not shape ",
                                  ctx->input(i).shape().DebugString()));
      }
    }
    const T start = ctx->input(0).base<T>()[0];
    const T limit = ctx->input(1).base<T>()[0];
    const T delta = ctx->input(2).base<T>()[0];
    int64_t size;
    if constexpr (std::is_integral_v<T>) {
      absl::StatusOr<int64_t> n = IntegerRangeSize(
          static_cast<int64_t>(start), static_cast<int64_t>(limit), static_cast<int64_t>(delta));
      if (!n.ok()) return Error(n.status().message());
      size = *n;
    } else {
      if (delta == T(0)) return Error(absl::StrCat("Requires delta != 0: ", delta));
      if (delta > T(0) && start > limit) {
        return Error(absl::StrCat("Requires start <= limit when delta > 0: ", start, "/", limit));
      }
      if (delta < T(0) && start < limit) {
        return Error(absl::StrCat("Requires start >= limit when delta < 0: ", start, "/", limit));
      }
      const double s = std::ceil(std::abs((static_cast<double>(limit) - start) / delta));
      if (!(s <= static_cast<double>(int64_t{1} << 40))) {
        return Error("Requires ((limit - start) / delta) <= 2^40");
      }
      size = static_cast<int64_t>(s);
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({size})));
    T* p = out->base<T>();
    if constexpr (std::is_integral_v<T>) {
      // start + i * delta, each within [start, limit): no step past the end
      // is ever taken (it may not fit T).
      for (int64_t i = 0; i < size; ++i) {
        p[i] = static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(start)) +
                              static_cast<uint64_t>(i) *
                                  static_cast<uint64_t>(static_cast<int64_t>(delta)));
      }
    } else {
      T v = start;
      for (int64_t i = 0; i < size; ++i) {
        p[i] = v;
        v += delta;
      }
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Slice / StridedSlice: a strided walk over the input, contiguous runs
// copied with memcpy.

}  // namespace

void RegisterArrayKernels(KernelRegistry& r) {
  RegisterArrayIndexKernels(r);
  const std::vector<DataType> all = AllTypes();
  const std::vector<DataType> all_res = AllTypesAndResource();
  r.Add(KernelDef("Const").Device(kDeviceCpu).TypeConstraint("dtype", all), MakeKernel<ConstOp>());
  r.Add(KernelDef("Placeholder").Device(kDeviceCpu).TypeConstraint("dtype", all_res),
        MakeKernel<PlaceholderOp>());
  r.Add(KernelDef("PlaceholderWithDefault").Device(kDeviceCpu).TypeConstraint("dtype", all_res),
        MakeKernel<IdentityOp>());
  for (const char* op : {"Identity", "StopGradient", "Snapshot"}) {
    r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint("T", all_res), MakeKernel<IdentityOp>());
  }
  r.Add(KernelDef("IdentityN").Device(kDeviceCpu).TypeConstraint("T", all_res),
        MakeKernel<IdentityOp>());
  r.Add(KernelDef("NoOp").Device(kDeviceCpu), MakeKernel<NoOp>());
  r.Add(KernelDef("Reshape").Device(kDeviceCpu).TypeConstraint("T", all_res),
        MakeKernel<ReshapeOp>());
  r.Add(KernelDef("Shape").Device(kDeviceCpu).TypeConstraint("T", all_res), MakeKernel<ShapeOp>());
  r.Add(KernelDef("Size").Device(kDeviceCpu).TypeConstraint("T", all_res), MakeKernel<SizeOp>());
  r.Add(KernelDef("Rank").Device(kDeviceCpu).TypeConstraint("T", all_res), MakeKernel<RankOp>());
  r.Add(KernelDef("Fill").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<FillOp>());
  r.Add(KernelDef("ZerosLike").Device(kDeviceCpu).TypeConstraint("T", all),
        MakeKernel<ZerosLikeOp>());
  r.Add(KernelDef("OnesLike").Device(kDeviceCpu), MakeKernel<OnesLikeOp>());
  r.Add(KernelDef("ExpandDims").Device(kDeviceCpu).TypeConstraint("T", all_res),
        MakeKernel<ExpandDimsOp>());
  r.Add(KernelDef("Squeeze").Device(kDeviceCpu).TypeConstraint("T", all_res),
        MakeKernel<SqueezeOp>());
  r.Add(KernelDef("ConcatV2").Device(kDeviceCpu).TypeConstraint("T", all),
        MakeKernel<ConcatV2Op>());
  r.Add(KernelDef("Split").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<SplitOp>());
  r.Add(KernelDef("SplitV").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<SplitVOp>());
  r.Add(KernelDef("Transpose").Device(kDeviceCpu).TypeConstraint("T", all),
        MakeKernel<TransposeOp>());
  r.Add(KernelDef("Pack").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<PackOp>());
  r.Add(KernelDef("Unpack").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<UnpackOp>());
  r.Add(KernelDef("Range").Device(kDeviceCpu).TypeConstraint<int32_t>("Tidx"),
        MakeKernel<RangeOp<int32_t>>());
  r.Add(KernelDef("Range").Device(kDeviceCpu).TypeConstraint<int64_t>("Tidx"),
        MakeKernel<RangeOp<int64_t>>());
  r.Add(KernelDef("Range").Device(kDeviceCpu).TypeConstraint<float>("Tidx"),
        MakeKernel<RangeOp<float>>());
  r.Add(KernelDef("Range").Device(kDeviceCpu).TypeConstraint<double>("Tidx"),
        MakeKernel<RangeOp<double>>());
}

}  // namespace graphrun
