// CPU kernels for the indexing array ops: Slice, StridedSlice, Gather,
// OneHot and Tile (split from array_kernels.cc; same type-generic approach).
#include <algorithm>
#include <limits>
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

// out = in[begin[d] + k * stride[d] for k < size[d]], out laid out densely
// in `size` order.
absl::Status StridedCopy(const Tensor& in, const Tensor& out, absl::Span<const int64_t> begin,
                         absl::Span<const int64_t> stride, absl::Span<const int64_t> size) {
  const int rank = static_cast<int>(size.size());
  int64_t total = 1;
  for (int64_t s : size) total *= s;
  if (total == 0) return absl::OkStatus();
  if (rank == 0) return CopyElements(in, 0, out, 0, 1);
  DimVector in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in.dim_size(d + 1);
  int64_t src = 0;
  for (int d = 0; d < rank; ++d) src += begin[d] * in_strides[d];
  DimVector idx(rank, 0);
  const int64_t last = size[rank - 1];
  const int64_t last_step = stride[rank - 1];
  for (int64_t o = 0; o < total; o += last) {
    if (last_step == 1) {
      GR_RETURN_IF_ERROR(CopyElements(in, src, out, o, last));
    } else {
      for (int64_t j = 0; j < last; ++j) {
        GR_RETURN_IF_ERROR(CopyElements(in, src + j * last_step, out, o + j, 1));
      }
    }
    for (int d = rank - 2; d >= 0; --d) {
      src += stride[d] * in_strides[d];
      if (++idx[d] < size[d]) break;
      src -= stride[d] * in_strides[d] * size[d];
      idx[d] = 0;
    }
  }
  return absl::OkStatus();
}

class SliceOp : public OpKernel {
 public:
  explicit SliceOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> begin, IntValues(*this, ctx->input(1), "begin"));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> size, IntValues(*this, ctx->input(2), "size"));
    const int rank = in->dims();
    if (static_cast<int>(begin.size()) != rank || static_cast<int>(size.size()) != rank) {
      return Error(absl::StrCat("Expected begin and size arguments to be 1-D tensors of size ",
                                rank, ", but got shapes ", ctx->input(1).shape().DebugString(),
                                " and ", ctx->input(2).shape().DebugString(), " instead."));
    }
    TensorShape out_shape;
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = in->dim_size(d);
      if (size[d] == -1) size[d] = dim - begin[d];
      if (begin[d] < 0 || size[d] < 0 || begin[d] + size[d] > dim) {
        return Error(absl::StrCat("Expected begin[", d, "] in [0, ", dim, "] and size[", d,
                                  "] in [0, ", dim - begin[d], "], but got ", begin[d], " and ",
                                  size[d]));
      }
      out_shape.AddDim(size[d]);
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    std::vector<int64_t> ones(rank, 1);
    GR_RETURN_IF_ERROR(StridedCopy(*in, *out, begin, ones, size));
    return absl::OkStatus();
  }
};

class StridedSliceOp : public OpKernel {
 public:
  explicit StridedSliceOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("begin_mask", &begin_mask_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("end_mask", &end_mask_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("ellipsis_mask", &ellipsis_mask_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("new_axis_mask", &new_axis_mask_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("shrink_axis_mask", &shrink_axis_mask_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> begin, IntValues(*this, ctx->input(1), "begin"));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> end, IntValues(*this, ctx->input(2), "end"));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> strides, IntValues(*this, ctx->input(3), "strides"));
    if (ctx->input(1).dims() != 1 || begin.size() != end.size() || begin.size() != strides.size()) {
      return Error("Expected begin, end, and strides to be 1D equal size tensors");
    }
    if (begin.size() > 32) return Error("begin has more than 32 entries");
    if ((ellipsis_mask_ & (ellipsis_mask_ - 1)) != 0) {
      return Error("Multiple ellipses in slice spec not allowed");
    }
    const int rank = in->dims();
    // Sparse spec -> dense spec (one entry per input dimension), as
    // TensorFlow's ValidateStridedSliceOp.
    int sparse_dims = static_cast<int>(begin.size());
    int64_t ellipsis = ellipsis_mask_;
    bool ellipsis_seen = false;
    int new_axes_after_ellipsis = 0;
    for (int i = 0; i < sparse_dims; ++i) {
      if (ellipsis_seen && ((new_axis_mask_ >> i) & 1)) ++new_axes_after_ellipsis;
      if ((ellipsis >> i) & 1) ellipsis_seen = true;
    }
    if (!ellipsis_seen) {
      ellipsis |= int64_t{1} << sparse_dims;
      ++sparse_dims;
    }
    constexpr int kNewAxis = -1, kShrink = -2;
    DimVector d_begin(rank, 0), d_end(rank, 0), d_stride(rank, 1);
    std::vector<bool> d_bmask(rank, false), d_emask(rank, false), d_shrink(rank, false);
    std::vector<int> gather;  // final shape: dense index, kNewAxis or kShrink
    int full = 0;
    for (int i = 0; i < sparse_dims; ++i) {
      if ((ellipsis >> i) & 1) {
        int next = std::min(rank - (sparse_dims - i) + 1 + new_axes_after_ellipsis, rank);
        for (; full < next; ++full) {
          d_bmask[full] = d_emask[full] = true;
          gather.push_back(full);
        }
      } else if ((new_axis_mask_ >> i) & 1) {
        gather.push_back(kNewAxis);
      } else {
        if (full >= rank) {
          return Error(absl::StrCat("Index out of range using input dim ", full,
                                    "; input has only ", rank, " dims"));
        }
        d_begin[full] = begin[i];
        d_end[full] = end[i];
        d_stride[full] = strides[i];
        d_bmask[full] = (begin_mask_ >> i) & 1;
        d_emask[full] = (end_mask_ >> i) & 1;
        d_shrink[full] = (shrink_axis_mask_ >> i) & 1;
        gather.push_back(d_shrink[full] ? kShrink : full);
        ++full;
      }
    }
    DimVector proc(rank);
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = in->dim_size(d);
      int64_t& b = d_begin[d];
      int64_t& e = d_end[d];
      int64_t& s = d_stride[d];
      if (s == 0) return Error(absl::StrCat("strides[", d, "] must be non-zero"));
      if (d_shrink[d]) {
        const int64_t x = b < 0 ? dim + b : b;
        if (x < 0 || x >= dim) {
          return Error(absl::StrCat("slice index ", b, " of dimension ", d, " out of bounds."));
        }
        b = x;
        e = x + 1;
        s = 1;
        proc[d] = 1;
        continue;
      }
      const int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? dim : dim - 1;
      auto canonical = [&](int64_t x, bool masked, bool is_begin) {
        if (masked) return (s > 0) == is_begin ? lo : hi;
        const int64_t f = x < 0 ? dim + x : x;
        return std::clamp(f, lo, hi);
      };
      b = canonical(b, d_bmask[d], true);
      e = canonical(e, d_emask[d], false);
      const int64_t len = e - b;
      if (len == 0 || ((len < 0) != (s < 0))) {
        proc[d] = 0;
      } else {
        proc[d] = len / s + (len % s != 0 ? 1 : 0);
      }
    }
    TensorShape final_shape;
    for (int g : gather) {
      if (g == kNewAxis)
        final_shape.AddDim(1);
      else if (g >= 0)
        final_shape.AddDim(proc[g]);
    }
    Tensor out(in->dtype(), TensorShape(absl::MakeConstSpan(proc)));
    GR_RETURN_IF_ERROR(StridedCopy(*in, out, d_begin, d_stride, proc));
    GR_ASSIGN_OR_RETURN(Tensor shaped, out.Reshaped(final_shape));
    ctx->set_output(0, std::move(shaped));
    return absl::OkStatus();
  }

 private:
  int64_t begin_mask_ = 0, end_mask_ = 0, ellipsis_mask_ = 0, new_axis_mask_ = 0,
          shrink_axis_mask_ = 0;
};

// ---------------------------------------------------------------------------
// Gather / OneHot / Tile.

// Gathers slices of `params` along `axis` at `indices`; InvalidArgument
// naming the node for an index out of range.
absl::Status DoGather(const OpKernel& k, OpKernelContext* ctx, const Tensor& params,
                      const Tensor& indices_t, int64_t axis_v) {
  if (params.dims() < 1) return k.Error("params must be at least 1 dimensional");
  GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(k, axis_v, params.dims()));
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> indices, IntValues(k, indices_t, "indices"));
  auto pd = params.shape().dim_sizes();
  TensorShape out_shape(pd.subspan(0, axis));
  for (int64_t d : indices_t.shape().dim_sizes()) out_shape.AddDim(d);
  for (int d = axis + 1; d < params.dims(); ++d) out_shape.AddDim(pd[d]);
  const int64_t outer = Prod(pd, 0, axis), inner = Prod(pd, axis + 1, params.dims());
  const int64_t limit = pd[axis];
  const int64_t n = static_cast<int64_t>(indices.size());
  for (int64_t i = 0; i < n; ++i) {
    if (indices[i] < 0 || indices[i] >= limit) {
      return k.Error(
          absl::StrCat("indices[", i, "] = ", indices[i], " is not in [0, ", limit, ")"));
    }
  }
  GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      GR_RETURN_IF_ERROR(
          CopyElements(params, (o * limit + indices[i]) * inner, *out, (o * n + i) * inner, inner));
    }
  }
  return absl::OkStatus();
}

class GatherOp : public OpKernel {
 public:
  explicit GatherOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    if (ctx->HasAttr("batch_dims")) {
      GR_CTX_CHECK_OK(ctx, ctx->GetAttr("batch_dims", &batch_dims_));
      if (batch_dims_ != 0) {
        ctx->SetStatus(ctx->Error("batch_dims != 0 is not supported"));
      }
    }
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* params, GetInput(*this, ctx, 0));
    int64_t axis = 0;
    if (ctx->num_inputs() == 3) {
      GR_ASSIGN_OR_RETURN(axis, ScalarInt(*this, ctx->input(2), "axis"));
    }
    return DoGather(*this, ctx, *params, ctx->input(1), axis);
  }

 private:
  int64_t batch_dims_ = 0;
};

class OneHotOp : public OpKernel {
 public:
  explicit OneHotOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("axis", &axis_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& indices_t = ctx->input(0);
    if (ctx->input(1).dims() != 0) {  // TensorFlow's OneHot: a scalar, not one element
      return Error(
          absl::StrCat("depth must be a scalar, but got: ", ctx->input(1).shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(int64_t depth, ScalarInt(*this, ctx->input(1), "depth"));
    const Tensor& on = ctx->input(2);
    const Tensor& off = ctx->input(3);
    if (on.dims() != 0 || off.dims() != 0) return Error("on_value and off_value must be scalars");
    if (depth < 0) return Error(absl::StrCat("depth must be non-negative, got: ", depth));
    const int rank = indices_t.dims();
    if (axis_ < -1 || axis_ > rank) {
      return Error(absl::StrCat("Expected axis to be -1 or between [0, ", rank,
                                "].  But received: ", axis_));
    }
    const int axis = axis_ == -1 ? rank : static_cast<int>(axis_);
    std::vector<int64_t> indices;
    if (indices_t.dtype() == DT_UINT8) {
      for (uint8_t v : indices_t.flat<uint8_t>()) indices.push_back(v);
    } else {
      GR_ASSIGN_OR_RETURN(indices, IntValues(*this, indices_t, "indices"));
    }
    TensorShape s = indices_t.shape();
    s.InsertDim(axis, depth);
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, s));
    const int64_t prefix = Prod(indices_t.shape().dim_sizes(), 0, axis);
    const int64_t suffix = Prod(indices_t.shape().dim_sizes(), axis, rank);
    int64_t o = 0;
    for (int64_t p = 0; p < prefix; ++p) {
      for (int64_t d = 0; d < depth; ++d) {
        for (int64_t q = 0; q < suffix; ++q, ++o) {
          GR_RETURN_IF_ERROR(CopyElements(indices[p * suffix + q] == d ? on : off, 0, *out, o, 1));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  int64_t axis_ = -1;
};

class TileOp : public OpKernel {
 public:
  explicit TileOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> mult, IntValues(*this, ctx->input(1), "multiples"));
    const int rank = in->dims();
    if (ctx->input(1).dims() != 1 || static_cast<int>(mult.size()) != rank) {
      return Error(absl::StrCat("Expected multiples argument to be a vector of length ", rank,
                                " but got length ", mult.size()));
    }
    DimVector dims(rank);
    for (int d = 0; d < rank; ++d) {
      if (mult[d] < 0)
        return Error(absl::StrCat("Expected multiples[", d, "] >= 0, but got ", mult[d]));
      if (mult[d] != 0 && in->dim_size(d) > std::numeric_limits<int64_t>::max() / mult[d]) {
        return Error(absl::StrCat("dimension ", d, " (", in->dim_size(d), ") times multiples[", d,
                                  "] (", mult[d], ") overflows"));
      }
      dims[d] = in->dim_size(d) * mult[d];
    }
    absl::StatusOr<TensorShape> shape = TensorShape::Make(dims);
    if (!shape.ok()) return Error(shape.status().message());
    const TensorShape& s = *shape;
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, s));
    if (rank == 0) {
      GR_RETURN_IF_ERROR(CopyElements(*in, 0, *out, 0, 1));
      return absl::OkStatus();
    }
    const int64_t total = out->NumElements();
    if (total == 0) return absl::OkStatus();
    const int64_t in_last = in->dim_size(rank - 1), out_last = s.dim_size(rank - 1);
    DimVector idx(rank, 0);
    for (int64_t o = 0; o < total; o += out_last) {
      int64_t src = 0;
      for (int d = 0; d < rank - 1; ++d) src = src * in->dim_size(d) + idx[d] % in->dim_size(d);
      src *= in_last;
      for (int64_t m = 0; m < mult[rank - 1]; ++m) {
        GR_RETURN_IF_ERROR(CopyElements(*in, src, *out, o + m * in_last, in_last));
      }
      for (int d = rank - 2; d >= 0; --d) {
        if (++idx[d] < s.dim_size(d)) break;
        idx[d] = 0;
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterArrayIndexKernels(KernelRegistry& r) {
  const std::vector<DataType> all = AllTypes();
  const std::vector<DataType> all_res = AllTypesAndResource();
  r.Add(KernelDef("Slice").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<SliceOp>());
  r.Add(KernelDef("StridedSlice").Device(kDeviceCpu).TypeConstraint("T", all),
        MakeKernel<StridedSliceOp>());
  r.Add(KernelDef("Gather").Device(kDeviceCpu).TypeConstraint("Tparams", all_res),
        MakeKernel<GatherOp>());
  r.Add(KernelDef("GatherV2").Device(kDeviceCpu).TypeConstraint("Tparams", all_res),
        MakeKernel<GatherOp>());
  r.Add(KernelDef("OneHot").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<OneHotOp>());
  r.Add(KernelDef("Tile").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<TileOp>());
}

}  // namespace graphrun
