// Array ops: constants, placeholders, identities and data movement
// (reshape, concat, split, transpose, slicing, gather, …). Names, args,
// attrs and defaults are TensorFlow's so real GraphDefs load unchanged.
#include <algorithm>
#include <limits>
#include <vector>

#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/status.h"

namespace graphrun {
namespace {

// The values of a constant int32/int64 tensor; InvalidArgument naming the
// node for other types.
absl::StatusOr<std::vector<int64_t>> IntValues(const ShapeContext& c, const Tensor& t) {
  std::vector<int64_t> v;
  if (t.dtype() == DT_INT32) {
    for (int32_t x : t.flat<int32_t>()) v.push_back(x);
  } else if (t.dtype() == DT_INT64) {
    for (int64_t x : t.flat<int64_t>()) v.push_back(x);
  } else {
    return c.Error("expected an int32 or int64 tensor");
  }
  return v;
}

// The constant scalar value of input `i`, if known.
absl::StatusOr<bool> ConstScalar(const ShapeContext& c, int i, int64_t* v) {
  const Tensor* t = c.input_tensor(i);
  if (t == nullptr) return false;
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> vals, IntValues(c, *t));
  if (vals.size() != 1) return c.Error(absl::StrCat("input ", i, " must be a scalar"));
  *v = vals[0];
  return true;
}

// Canonicalises `axis` into [0, rank); InvalidArgument otherwise.
absl::StatusOr<int> CanonicalAxis(const ShapeContext& c, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return c.Error(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

absl::Status ConstShape(ShapeContext& c) {
  Tensor value;
  GR_RETURN_IF_ERROR(c.GetAttr("value", &value));
  c.set_output(0, PartialShape(value.shape()));
  return absl::OkStatus();
}

absl::Status ShapeAttr(ShapeContext& c) {
  PartialShape s;
  GR_RETURN_IF_ERROR(c.GetAttr("shape", &s));
  c.set_output(0, s);
  return absl::OkStatus();
}

absl::Status PlaceholderWithDefaultShape(ShapeContext& c) {
  PartialShape s;
  GR_RETURN_IF_ERROR(c.GetAttr("shape", &s));
  if (!s.IsCompatibleWith(c.input(0))) {
    return c.Error(absl::StrCat("default value shape ", c.input(0).DebugString(),
                                " is not compatible with shape ", s.DebugString()));
  }
  c.set_output(0, s);
  return absl::OkStatus();
}

// Pad, PadV2, MirrorPad: paddings is [rank, 2]; a constant one gives the
// output dims, otherwise only the rank is known.
absl::Status PadShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor* p = c.input_tensor(1);
  if (p == nullptr) {
    c.set_output(0, in.known_rank() ? PartialShape::UnknownOfRank(in.rank()) : PartialShape());
    return absl::OkStatus();
  }
  if (p->dims() != 2 || p->dim_size(1) != 2) {
    return c.Error(
        absl::StrCat("paddings must be a matrix with 2 columns, got ", p->shape().DebugString()));
  }
  const int rank = static_cast<int>(p->dim_size(0));
  if (in.known_rank() && in.rank() != rank) {
    return c.Error(absl::StrCat("paddings has ", rank, " rows for an input of rank ", in.rank()));
  }
  DimVector out(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t before =
        p->dtype() == DT_INT32 ? p->flat<int32_t>()[2 * d] : p->flat<int64_t>()[2 * d];
    const int64_t after =
        p->dtype() == DT_INT32 ? p->flat<int32_t>()[2 * d + 1] : p->flat<int64_t>()[2 * d + 1];
    if (before < 0 || after < 0) return c.Error("paddings must be non-negative");
    const int64_t dim = in.known_rank() ? in.dim(d) : -1;
    constexpr int64_t kMaxDim = int64_t{1} << 40;  // as the kernel's bound
    if (before > kMaxDim || after > kMaxDim || (dim >= 0 && dim + before + after > kMaxDim)) {
      return c.Error(absl::StrCat("padded size is too large: dimension ", d, " padded by [", before,
                                  ", ", after, "]"));
    }
    out[d] = dim < 0 ? -1 : dim + before + after;
  }
  c.set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status IdentityNShape(ShapeContext& c) {
  for (int i = 0; i < c.num_outputs() && i < c.num_inputs(); ++i) {
    c.set_output(i, c.input(i));
  }
  return absl::OkStatus();
}

absl::Status ReshapeShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape target, c.ShapeFromInputTensor(1));
  if (!target.known_rank() || c.input_tensor(1) == nullptr) {
    c.set_output(0, target);
    return absl::OkStatus();
  }
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> raw, IntValues(c, *c.input_tensor(1)));
  int unknown = -1;
  int64_t known = 1;
  DimVector dims(target.dims().begin(), target.dims().end());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == -1) {
      if (unknown >= 0) return c.Error("only one input size may be -1");
      unknown = static_cast<int>(i);
    } else if (raw[i] < 0) {
      return c.Error(absl::StrCat("size ", i, " must be non-negative, not ", raw[i]));
    } else {
      known *= raw[i];
    }
  }
  int64_t n = c.input(0).num_elements();
  if (n >= 0) {
    if (unknown >= 0) {
      if (known == 0 || n % known != 0) {
        if (known != 0 || n != 0) {
          return c.Error(absl::StrCat("cannot reshape a tensor with ", n, " elements to shape ",
                                      target.DebugString()));
        }
      } else {
        dims[unknown] = n / known;
      }
    } else if (known != n) {
      return c.Error(absl::StrCat("cannot reshape a tensor with ", n, " elements to shape ",
                                  target.DebugString()));
    }
  }
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status ShapeShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  c.set_output(0, PartialShape({in.known_rank() ? in.rank() : -1}));
  return absl::OkStatus();
}

absl::Status FillShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape s, c.ShapeFromInputTensor(0));
  c.set_output(0, s);
  return absl::OkStatus();
}

absl::Status ExpandDimsShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  int64_t dim;
  GR_ASSIGN_OR_RETURN(bool known, ConstScalar(c, 1, &dim));
  if (!in.known_rank()) {
    c.set_output(0, PartialShape());
    return absl::OkStatus();
  }
  if (!known) {
    c.set_output(0, PartialShape::UnknownOfRank(in.rank() + 1));
    return absl::OkStatus();
  }
  GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(c, dim, in.rank() + 1));
  DimVector dims(in.dims().begin(), in.dims().end());
  dims.insert(dims.begin() + axis, 1);
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status SqueezeShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  std::vector<int64_t> sq;
  GR_RETURN_IF_ERROR(c.GetAttr("squeeze_dims", &sq));
  if (!in.known_rank()) {
    c.set_output(0, PartialShape());
    return absl::OkStatus();
  }
  std::vector<bool> drop(in.rank(), false);
  for (int64_t d : sq) {
    GR_ASSIGN_OR_RETURN(int a, CanonicalAxis(c, d, in.rank()));
    if (in.dim(a) != 1 && in.dim(a) != -1) {
      return c.Error(
          absl::StrCat("can not squeeze dim[", a, "], expected a dimension of 1, got ", in.dim(a)));
    }
    drop[a] = true;
  }
  DimVector dims;
  for (int i = 0; i < in.rank(); ++i) {
    if (sq.empty()) {
      if (in.dim(i) == -1) {
        c.set_output(0, PartialShape());
        return absl::OkStatus();
      }
      if (in.dim(i) == 1) continue;
    } else if (drop[i]) {
      continue;
    }
    dims.push_back(in.dim(i));
  }
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status ConcatV2Shape(ShapeContext& c) {
  int n = c.num_inputs() - 1;
  int rank = -1;
  for (int i = 0; i < n; ++i) {
    if (c.input(i).known_rank()) {
      if (rank >= 0 && rank != c.input(i).rank()) {
        return c.Error("all inputs to ConcatV2 must have the same rank");
      }
      rank = c.input(i).rank();
    }
  }
  int64_t axis_v;
  GR_ASSIGN_OR_RETURN(bool known, ConstScalar(c, n, &axis_v));
  if (rank < 0) {
    c.set_output(0, PartialShape());
    return absl::OkStatus();
  }
  if (rank == 0) return c.Error("can't concatenate scalars (use tf.stack instead)");
  if (!known) {
    c.set_output(0, PartialShape::UnknownOfRank(rank));
    return absl::OkStatus();
  }
  GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(c, axis_v, rank));
  DimVector dims(rank, -1);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const PartialShape& s = c.input(i);
    if (!s.known_rank()) {
      total = -1;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      if (dims[d] == -1) {
        dims[d] = s.dim(d);
      } else if (s.dim(d) != -1 && s.dim(d) != dims[d]) {
        return c.Error(absl::StrCat("dimension ", d, " of input ", i, " is ", s.dim(d),
                                    " but input 0 has ", dims[d]));
      }
    }
    if (total >= 0) total = s.dim(axis) < 0 ? -1 : total + s.dim(axis);
  }
  dims[axis] = total;
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

// Split-like: every output is the input with dim `axis` divided.
absl::Status SplitShape(ShapeContext& c) {
  int64_t num_split;
  GR_RETURN_IF_ERROR(c.GetAttr("num_split", &num_split));
  const PartialShape& in = c.input(1);
  int64_t axis_v;
  GR_ASSIGN_OR_RETURN(bool known, ConstScalar(c, 0, &axis_v));
  PartialShape out;
  if (in.known_rank() && !known) {
    out = PartialShape::UnknownOfRank(in.rank());
  } else if (in.known_rank()) {
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(c, axis_v, in.rank()));
    DimVector dims(in.dims().begin(), in.dims().end());
    if (dims[axis] >= 0) {
      if (dims[axis] % num_split != 0) {
        return c.Error(absl::StrCat(
            "number of ways to split should evenly divide the split dimension, but got split_dim ",
            axis, " (size = ", dims[axis], ") and num_split ", num_split));
      }
      dims[axis] /= num_split;
    }
    out = PartialShape(absl::MakeConstSpan(dims));
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, out);
  return absl::OkStatus();
}

absl::Status SplitVShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  PartialShape out = in.known_rank() ? PartialShape::UnknownOfRank(in.rank()) : PartialShape();
  int64_t axis_v;
  GR_ASSIGN_OR_RETURN(bool known, ConstScalar(c, 2, &axis_v));
  const Tensor* sizes = c.input_tensor(1);
  if (in.known_rank() && known && sizes != nullptr &&
      (sizes->dtype() == DT_INT32 || sizes->dtype() == DT_INT64) &&
      sizes->NumElements() == c.num_outputs()) {
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(c, axis_v, in.rank()));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> sz, IntValues(c, *sizes));
    int64_t sum = 0;
    int neg = -1;
    for (size_t i = 0; i < sz.size(); ++i) {
      if (sz[i] == -1)
        neg = static_cast<int>(i);
      else
        sum += sz[i];
    }
    if (neg >= 0 && in.dim(axis) >= 0) sz[neg] = in.dim(axis) - sum;
    for (int i = 0; i < c.num_outputs(); ++i) {
      DimVector dims(in.dims().begin(), in.dims().end());
      dims[axis] = sz[i] < 0 ? -1 : sz[i];
      c.set_output(i, PartialShape(absl::MakeConstSpan(dims)));
    }
    return absl::OkStatus();
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, out);
  return absl::OkStatus();
}

absl::Status TransposeShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor* perm_t = c.input_tensor(1);
  if (perm_t == nullptr) {
    c.set_output(0, in.known_rank() ? PartialShape::UnknownOfRank(in.rank()) : PartialShape());
    return absl::OkStatus();
  }
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> perm, IntValues(c, *perm_t));
  int rank = static_cast<int>(perm.size());
  if (in.known_rank() && in.rank() != rank) {
    return c.Error(absl::StrCat("transpose expects a vector of size ", in.rank(),
                                ". But input(1) is a vector of size ", rank));
  }
  DimVector dims(rank, -1);
  for (int i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank) {
      return c.Error(absl::StrCat(perm[i], " is out of range [0 .. ", rank, ")"));
    }
    if (in.known_rank()) dims[i] = in.dim(static_cast<int>(perm[i]));
  }
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status PackShape(ShapeContext& c) {
  int64_t axis_v;
  GR_RETURN_IF_ERROR(c.GetAttr("axis", &axis_v));
  PartialShape merged;
  for (int i = 0; i < c.num_inputs(); ++i) {
    auto m = merged.known_rank() ? merged.Merge(c.input(i)) : c.input(i).Merge(merged);
    if (!m.ok()) {
      return c.Error(absl::StrCat(
          "shapes of all inputs must match: values[0].shape = ", c.input(0).DebugString(),
          " != values[", i, "].shape = ", c.input(i).DebugString()));
    }
    merged = *m;
  }
  if (!merged.known_rank()) {
    c.set_output(0, PartialShape());
    return absl::OkStatus();
  }
  GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(c, axis_v, merged.rank() + 1));
  DimVector dims(merged.dims().begin(), merged.dims().end());
  dims.insert(dims.begin() + axis, c.num_inputs());
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status UnpackShape(ShapeContext& c) {
  int64_t axis_v;
  GR_RETURN_IF_ERROR(c.GetAttr("axis", &axis_v));
  const PartialShape& in = c.input(0);
  PartialShape out;
  if (in.known_rank()) {
    GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(c, axis_v, in.rank()));
    if (in.dim(axis) >= 0 && in.dim(axis) != c.num_outputs()) {
      return c.Error(absl::StrCat("dimension ", axis, " has size ", in.dim(axis), " but num is ",
                                  c.num_outputs()));
    }
    DimVector dims(in.dims().begin(), in.dims().end());
    dims.erase(dims.begin() + axis);
    out = PartialShape(absl::MakeConstSpan(dims));
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, out);
  return absl::OkStatus();
}

absl::Status RangeShape(ShapeContext& c) {
  const Tensor* s = c.input_tensor(0);
  const Tensor* l = c.input_tensor(1);
  const Tensor* d = c.input_tensor(2);
  if (s && l && d && s->NumElements() == 1 && l->NumElements() == 1 && d->NumElements() == 1 &&
      (s->dtype() == DT_INT32 || s->dtype() == DT_INT64)) {
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> sv, IntValues(c, *s));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> lv, IntValues(c, *l));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> dv, IntValues(c, *d));
    absl::StatusOr<int64_t> n = IntegerRangeSize(sv[0], lv[0], dv[0]);
    if (!n.ok()) return c.Error(n.status().message());
    c.set_output(0, PartialShape({*n}));
    return absl::OkStatus();
  }
  c.set_output(0, PartialShape({-1}));
  return absl::OkStatus();
}

absl::Status SliceShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor* b = c.input_tensor(1);
  const Tensor* s = c.input_tensor(2);
  if (s != nullptr) {
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntValues(c, *s));
    if (in.known_rank() && static_cast<int>(sizes.size()) != in.rank()) {
      return c.Error("size must have one entry per input dimension");
    }
    DimVector dims(sizes.size(), -1);
    std::vector<int64_t> begin;
    if (b != nullptr) {
      GR_ASSIGN_OR_RETURN(begin, IntValues(c, *b));
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] >= 0) {
        dims[i] = sizes[i];
      } else if (sizes[i] == -1 && in.known_rank() && in.dim(i) >= 0 &&
                 begin.size() == sizes.size()) {
        dims[i] = in.dim(i) - begin[i];
      }
    }
    c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
    return absl::OkStatus();
  }
  c.set_output(0, in.known_rank() ? PartialShape::UnknownOfRank(in.rank()) : PartialShape());
  return absl::OkStatus();
}

absl::Status GatherShapeImpl(ShapeContext& c, bool has_axis) {
  const PartialShape& params = c.input(0);
  const PartialShape& indices = c.input(1);
  int64_t axis_v = 0;
  bool known = true;
  if (has_axis) {
    GR_ASSIGN_OR_RETURN(known, ConstScalar(c, 2, &axis_v));
  }
  if (!params.known_rank() || !indices.known_rank() || !known) {
    c.set_output(0, PartialShape());
    return absl::OkStatus();
  }
  if (params.rank() == 0) return c.Error("params must be at least 1 dimensional");
  GR_ASSIGN_OR_RETURN(int axis, CanonicalAxis(c, axis_v, params.rank()));
  DimVector dims(params.dims().begin(), params.dims().begin() + axis);
  dims.insert(dims.end(), indices.dims().begin(), indices.dims().end());
  dims.insert(dims.end(), params.dims().begin() + axis + 1, params.dims().end());
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status OneHotShape(ShapeContext& c) {
  int64_t axis_v;
  GR_RETURN_IF_ERROR(c.GetAttr("axis", &axis_v));
  const PartialShape& in = c.input(0);
  if (!in.known_rank()) {
    c.set_output(0, PartialShape());
    return absl::OkStatus();
  }
  if (axis_v < -1 || axis_v > in.rank()) {
    return c.Error(
        absl::StrCat("expected axis to be -1 or between [0, ", in.rank(), "], but got ", axis_v));
  }
  int64_t depth = -1;
  GR_ASSIGN_OR_RETURN(bool known, ConstScalar(c, 1, &depth));
  if (!known) depth = -1;
  DimVector dims(in.dims().begin(), in.dims().end());
  dims.insert(dims.begin() + (axis_v == -1 ? in.rank() : axis_v), depth);
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status TileShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor* m = c.input_tensor(1);
  if (m == nullptr) {
    c.set_output(0, in.known_rank() ? PartialShape::UnknownOfRank(in.rank()) : PartialShape());
    return absl::OkStatus();
  }
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> mult, IntValues(c, *m));
  if (in.known_rank() && static_cast<int>(mult.size()) != in.rank()) {
    return c.Error("multiples must have one entry per input dimension");
  }
  DimVector dims(mult.size(), -1);
  for (size_t i = 0; i < mult.size(); ++i) {
    if (mult[i] < 0) {
      return c.Error(absl::StrCat("Expected multiples[", i, "] >= 0, but got ", mult[i]));
    }
    if (!in.known_rank() || in.dim(i) < 0) continue;
    if (mult[i] != 0 && in.dim(i) > std::numeric_limits<int64_t>::max() / mult[i]) {
      return c.Error(absl::StrCat("dimension ", i, " (", in.dim(i), ") times multiples[", i, "] (",
                                  mult[i], ") overflows"));
    }
    dims[i] = in.dim(i) * mult[i];
  }
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

constexpr char kIndexAttr32Or64[] = "{int32, int64} = DT_INT32";

}  // namespace

void RegisterArrayOps(OpRegistry& r) {
  const std::string idx = kIndexAttr32Or64;
  r.Add(OpDefBuilder("Const")
            .Output("output: dtype")
            .Attr("value: tensor")
            .Attr("dtype: type")
            .SetShapeFn(ConstShape)
            .Doc("A constant tensor: the value attr."));
  r.Add(OpDefBuilder("Placeholder")
            .Output("output: dtype")
            .Attr("dtype: type")
            .Attr("shape: shape = { unknown_rank: true }")
            .SetShapeFn(ShapeAttr)
            .Doc("A value the client must feed."));
  r.Add(OpDefBuilder("PlaceholderWithDefault")
            .Input("input: dtype")
            .Output("output: dtype")
            .Attr("dtype: type")
            .Attr("shape: shape")
            .SetShapeFn(PlaceholderWithDefaultShape)
            .Doc("Passes `input` through unless fed."));
  for (const char* op : {"Identity", "StopGradient", "Snapshot"}) {
    r.Add(OpDefBuilder(op)
              .Input("input: T")
              .Output("output: T")
              .Attr("T: type")
              .SetShapeFn(shape_fns::Unchanged)
              .Doc("Returns the input."));
  }
  r.Add(OpDefBuilder("Pad")
            .Input("input: T")
            .Input("paddings: Tpaddings")
            .Output("output: T")
            .Attr("T: type")
            .Attr("Tpaddings: {int32, int64} = DT_INT32")
            .SetShapeFn(PadShape)
            .Doc("Pads each dimension with zeros: paddings[d] = [before, after]."));
  r.Add(OpDefBuilder("PadV2")
            .Input("input: T")
            .Input("paddings: Tpaddings")
            .Input("constant_values: T")
            .Output("output: T")
            .Attr("T: type")
            .Attr("Tpaddings: {int32, int64} = DT_INT32")
            .SetShapeFn(PadShape)
            .Doc("Pads each dimension with constant_values."));
  r.Add(OpDefBuilder("MirrorPad")
            .Input("input: T")
            .Input("paddings: Tpaddings")
            .Output("output: T")
            .Attr("T: type")
            .Attr("Tpaddings: {int32, int64} = DT_INT32")
            .Attr("mode: {'REFLECT', 'SYMMETRIC'}")
            .SetShapeFn(PadShape)
            .Doc("Pads each dimension with a mirror of the input."));
  r.Add(OpDefBuilder("IdentityN")
            .Input("input: T")
            .Output("output: T")
            .Attr("T: list(type)")
            .SetShapeFn(IdentityNShape)
            .Doc("Returns the list of inputs."));
  r.Add(OpDefBuilder("NoOp").SetShapeFn(shape_fns::NoOutputs).Doc("Does nothing."));
  r.Add(OpDefBuilder("Reshape")
            .Input("tensor: T")
            .Input("shape: Tshape")
            .Output("output: T")
            .Attr("T: type")
            .Attr("Tshape: " + idx)
            .SetShapeFn(ReshapeShape)
            .Doc("The same values with another shape; one size may be -1."));
  r.Add(OpDefBuilder("Shape")
            .Input("input: T")
            .Output("output: out_type")
            .Attr("T: type")
            .Attr("out_type: " + idx)
            .SetShapeFn(ShapeShape)
            .Doc("The shape of the input as a vector."));
  r.Add(OpDefBuilder("Size")
            .Input("input: T")
            .Output("output: out_type")
            .Attr("T: type")
            .Attr("out_type: " + idx)
            .SetShapeFn(shape_fns::Scalar)
            .Doc("The number of elements of the input."));
  r.Add(OpDefBuilder("Rank")
            .Input("input: T")
            .Output("output: int32")
            .Attr("T: type")
            .SetShapeFn(shape_fns::Scalar)
            .Doc("The rank of the input."));
  r.Add(OpDefBuilder("Fill")
            .Input("dims: index_type")
            .Input("value: T")
            .Output("output: T")
            .Attr("T: type")
            .Attr("index_type: " + idx)
            .SetShapeFn(FillShape)
            .Doc("A tensor of shape `dims` filled with the scalar `value`."));
  r.Add(OpDefBuilder("ZerosLike")
            .Input("x: T")
            .Output("y: T")
            .Attr("T: type")
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("Zeros of the input's shape and type."));
  r.Add(OpDefBuilder("OnesLike")
            .Input("x: T")
            .Output("y: T")
            .Attr("T: {bfloat16, half, float, double, int8, uint8, int16, uint16, "
                  "int32, uint32, int64, uint64, bool}")
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("Ones of the input's shape and type."));
  r.Add(OpDefBuilder("ExpandDims")
            .Input("input: T")
            .Input("dim: Tdim")
            .Output("output: T")
            .Attr("T: type")
            .Attr("Tdim: " + idx)
            .SetShapeFn(ExpandDimsShape)
            .Doc("Inserts a dimension of size 1 at `dim`."));
  r.Add(OpDefBuilder("Squeeze")
            .Input("input: T")
            .Output("output: T")
            .Attr("T: type")
            .Attr("squeeze_dims: list(int) >= 0 = []")
            .SetShapeFn(SqueezeShape)
            .Doc("Removes dimensions of size 1 (all, or those listed)."));
  r.Add(OpDefBuilder("ConcatV2")
            .Input("values: N * T")
            .Input("axis: Tidx")
            .Output("output: T")
            .Attr("N: int >= 2")
            .Attr("T: type")
            .Attr("Tidx: " + idx)
            .SetShapeFn(ConcatV2Shape)
            .Doc("Concatenates tensors along `axis`."));
  r.Add(OpDefBuilder("Split")
            .Input("split_dim: int32")
            .Input("value: T")
            .Output("output: num_split * T")
            .Attr("num_split: int >= 1")
            .Attr("T: type")
            .SetShapeFn(SplitShape)
            .Doc("Splits `value` into num_split equal parts along split_dim."));
  r.Add(OpDefBuilder("SplitV")
            .Input("value: T")
            .Input("size_splits: Tlen")
            .Input("split_dim: int32")
            .Output("output: num_split * T")
            .Attr("num_split: int >= 1")
            .Attr("T: type")
            .Attr("Tlen: {int8, int32, int64} = DT_INT64")
            .SetShapeFn(SplitVShape)
            .Doc("Splits `value` into parts of the given sizes (one may be -1)."));
  r.Add(OpDefBuilder("Transpose")
            .Input("x: T")
            .Input("perm: Tperm")
            .Output("y: T")
            .Attr("T: type")
            .Attr("Tperm: " + idx)
            .SetShapeFn(TransposeShape)
            .Doc("Permutes dimensions: y.shape[i] = x.shape[perm[i]]."));
  r.Add(OpDefBuilder("Pack")
            .Input("values: N * T")
            .Output("output: T")
            .Attr("N: int >= 1")
            .Attr("T: type")
            .Attr("axis: int = 0")
            .SetShapeFn(PackShape)
            .Doc("Stacks N same-shaped tensors along a new axis."));
  r.Add(OpDefBuilder("Unpack")
            .Input("value: T")
            .Output("output: num * T")
            .Attr("num: int >= 0")
            .Attr("T: type")
            .Attr("axis: int = 0")
            .SetShapeFn(UnpackShape)
            .Doc("Unstacks a tensor along `axis` into `num` tensors."));
  r.Add(OpDefBuilder("Range")
            .Input("start: Tidx")
            .Input("limit: Tidx")
            .Input("delta: Tidx")
            .Output("output: Tidx")
            .Attr("Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, "
                  "uint16, uint32} = DT_INT32")
            .SetShapeFn(RangeShape)
            .Doc("[start, start + delta, …) up to but excluding limit."));
  r.Add(OpDefBuilder("Slice")
            .Input("input: T")
            .Input("begin: Index")
            .Input("size: Index")
            .Output("output: T")
            .Attr("T: type")
            .Attr("Index: {int32, int64}")
            .SetShapeFn(SliceShape)
            .Doc("input[begin : begin + size]; size -1 means to the end."));
  r.Add(OpDefBuilder("StridedSlice")
            .Input("input: T")
            .Input("begin: Index")
            .Input("end: Index")
            .Input("strides: Index")
            .Output("output: T")
            .Attr("T: type")
            .Attr("Index: {int16, int32, int64}")
            .Attr("begin_mask: int = 0")
            .Attr("end_mask: int = 0")
            .Attr("ellipsis_mask: int = 0")
            .Attr("new_axis_mask: int = 0")
            .Attr("shrink_axis_mask: int = 0")
            .SetShapeFn(shape_fns::Unknown)
            .Doc("NumPy-style strided slicing with masks."));
  r.Add(OpDefBuilder("Gather")
            .Input("params: Tparams")
            .Input("indices: Tindices")
            .Output("output: Tparams")
            .Attr("validate_indices: bool = true")
            .Attr("Tparams: type")
            .Attr("Tindices: {int32, int64}")
            .SetShapeFn([](ShapeContext& c) { return GatherShapeImpl(c, false); })
            .Doc("Rows of params at indices."));
  r.Add(OpDefBuilder("GatherV2")
            .Input("params: Tparams")
            .Input("indices: Tindices")
            .Input("axis: Taxis")
            .Output("output: Tparams")
            .Attr("batch_dims: int = 0")
            .Attr("Tparams: type")
            .Attr("Tindices: {int16, int32, int64}")
            .Attr("Taxis: {int32, int64}")
            .SetShapeFn([](ShapeContext& c) { return GatherShapeImpl(c, true); })
            .Doc("Slices of params at indices along axis."));
  r.Add(OpDefBuilder("OneHot")
            .Input("indices: TI")
            .Input("depth: int32")
            .Input("on_value: T")
            .Input("off_value: T")
            .Output("output: T")
            .Attr("axis: int = -1")
            .Attr("T: type")
            .Attr("TI: {uint8, int8, int32, int64} = DT_INT64")
            .SetShapeFn(OneHotShape)
            .Doc("One-hot encoding of indices along a new axis of size depth."));
  r.Add(OpDefBuilder("Tile")
            .Input("input: T")
            .Input("multiples: Tmultiples")
            .Output("output: T")
            .Attr("T: type")
            .Attr("Tmultiples: " + idx)
            .SetShapeFn(TileShape)
            .Doc("Repeats the input multiples[i] times along dimension i."));
}

}  // namespace graphrun
