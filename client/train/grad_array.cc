// Gradients of the array and state ops: identities (which pass sparse
// gradients through), variable reads, reshapes, concat/split, transpose,
// pack/unpack, the gathers, whose gradients are IndexedSlices, and
// DynamicPartition/DynamicStitch, each the other's gradient.
#include "client/train/grad_internal.h"
#include "client/train/gradients.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using namespace internal;  // NOLINT: the op helpers

using Outs = absl::StatusOr<std::vector<Output>>;
using Grads = absl::StatusOr<std::vector<Gradient>>;

// Identity-like ops: every output's gradient goes to the same input.
Grads PassThrough(const Scope&, const Operation& op, const std::vector<Gradient>& dy) {
  std::vector<Gradient> out(static_cast<size_t>(op.node()->num_inputs()));
  for (size_t i = 0; i < out.size() && i < dy.size(); ++i) out[i] = dy[i];
  return out;
}

// `shape` as a static vector or, when not fully defined, the run-time
// Shape of `o`.
Output ShapeOf(const Scope& s, const Output& o) {
  PartialShape ps = o.shape();
  if (ps.known_rank() && ps.fully_defined()) {
    return IntVec(s, std::vector<int64_t>(ps.dims().begin(), ps.dims().end()));
  }
  return Shape(s, o);
}

Outs ReshapeGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return std::vector<Output>{Reshape(s, dy[0], ShapeOf(s, InputOf(op, 0))), Output()};
}
Outs SqueezeGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return std::vector<Output>{Reshape(s, dy[0], ShapeOf(s, InputOf(op, 0)))};
}

// A constant axis normalised against `rank`.
absl::StatusOr<int64_t> ConstAxis(const Output& axis, int rank) {
  std::vector<int64_t> v;
  if (!ConstInts(axis, &v) || v.size() != 1) {
    return absl::UnimplementedError("the gradient needs a constant scalar axis");
  }
  int64_t a = v[0];
  if (a < 0) {
    if (rank < 0) return absl::UnimplementedError("negative axis on an input of unknown rank");
    a += rank;
  }
  return a;
}

Outs ConcatV2Grad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  const int n = op.node()->num_inputs() - 1;
  Output axis_in = InputOf(op, n);
  PartialShape s0 = InputOf(op, 0).shape();
  GR_ASSIGN_OR_RETURN(int64_t axis, ConstAxis(axis_in, s0.known_rank() ? s0.rank() : -1));
  std::vector<int64_t> sizes;
  bool known = true;
  for (int i = 0; i < n; ++i) {
    PartialShape si = InputOf(op, i).shape();
    if (!si.known_rank() || si.dim(static_cast<int>(axis)) < 0) {
      known = false;
      break;
    }
    sizes.push_back(si.dim(static_cast<int>(axis)));
  }
  Output size_splits;
  if (known) {
    size_splits = IntVec(s, sizes);
  } else {
    std::vector<Output> parts;
    for (int i = 0; i < n; ++i) {
      parts.push_back(GatherV2(s, Shape(s, InputOf(op, i)), static_cast<int32_t>(axis), 0));
    }
    size_splits = Op(s, "Pack").InList(parts).Out();
  }
  std::vector<Output> out = Op(s, "SplitV")
                                .In(dy[0])
                                .In(size_splits)
                                .In(static_cast<int32_t>(axis))
                                .Attr("num_split", AInt(n))
                                .Outs();
  out.resize(static_cast<size_t>(n));
  out.push_back(Output());
  return out;
}

// Missing output gradients of a multi-output op become zeros.
std::vector<Output> FillZeros(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  std::vector<Output> out = dy;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].node() == nullptr) out[i] = ZerosLike(s, OutputOf(op, static_cast<int>(i)));
  }
  return out;
}

Outs SplitGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return std::vector<Output>{Output(), ConcatV2(s, FillZeros(s, op, dy), InputOf(op, 0))};
}
Outs SplitVGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return std::vector<Output>{ConcatV2(s, FillZeros(s, op, dy), InputOf(op, 2)), Output(), Output()};
}

Outs TransposeGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  Output perm = InputOf(op, 1);
  std::vector<int64_t> p;
  Output inv;
  if (ConstInts(perm, &p)) {
    std::vector<int64_t> q(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] < 0 || p[i] >= static_cast<int64_t>(p.size())) {
        return absl::InvalidArgumentError("perm is not a permutation");
      }
      q[p[i]] = static_cast<int64_t>(i);
    }
    inv = IntVec(s, q);
  } else {
    inv = Unary(s, "InvertPermutation", perm);
  }
  return std::vector<Output>{Binary(s, "Transpose", dy[0], inv), Output()};
}

Outs PackGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  int64_t axis = 0;
  GR_RETURN_IF_ERROR(NodeAttr(op, "axis", &axis));
  const int n = op.node()->num_inputs();
  std::vector<Output> out =
      Op(s, "Unpack").In(dy[0]).Attr("num", AInt(n)).Attr("axis", AInt(axis)).Outs();
  out.resize(static_cast<size_t>(n));
  return out;
}
Outs UnpackGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  int64_t axis = 0;
  GR_RETURN_IF_ERROR(NodeAttr(op, "axis", &axis));
  return std::vector<Output>{
      Op(s, "Pack").InList(FillZeros(s, op, dy)).Attr("axis", AInt(axis)).Out()};
}

// The IndexedSlices gradient of gathering rows `indices` of a tensor of
// shape `params_shape` (static dims, or -1 where unknown; `dynamic_shape`
// is used when any is unknown).
Gradient GatherSlices(const Scope& s, const Output& g, const Output& indices,
                      const PartialShape& params_shape, const Output& dynamic_shape) {
  Output values_shape, dense_shape;
  if (params_shape.known_rank() && params_shape.fully_defined()) {
    std::vector<int64_t> dims(params_shape.dims().begin(), params_shape.dims().end());
    dense_shape = IntVec(s, dims);
    dims[0] = -1;
    values_shape = IntVec(s, dims);
  } else {
    dense_shape = dynamic_shape;
    Output rest = Op(s, "Slice").In(dense_shape).In(IntVec(s, {1})).In(IntVec(s, {-1})).Out();
    values_shape = ConcatV2(s, {IntVec(s, {-1}), rest}, 0);
  }
  return IndexedSlices{Reshape(s, g, values_shape), Reshape(s, indices, IntVec(s, {-1})),
                       dense_shape};
}

Grads GatherGrad(const Scope& s, const Operation& op, const std::vector<Gradient>& dy) {
  Output params = InputOf(op, 0);
  if (op.node()->op() == "GatherV2") {
    int64_t batch_dims = 0;
    NodeAttr(op, "batch_dims", &batch_dims).IgnoreError();
    GR_ASSIGN_OR_RETURN(
        int64_t axis,
        ConstAxis(InputOf(op, 2), params.shape().known_rank() ? params.shape().rank() : -1));
    if (axis != 0 || batch_dims != 0) {
      return absl::UnimplementedError("GatherV2 gradient supports axis 0, batch_dims 0 only");
    }
  }
  std::vector<Gradient> out(static_cast<size_t>(op.node()->num_inputs()));
  if (dy[0].is_null()) return out;
  out[0] = GatherSlices(s, ToDense(s, dy[0]), InputOf(op, 1), params.shape(),
                        params.shape().fully_defined() ? Output() : Shape(s, params));
  return out;
}

Grads ResourceGatherGrad(const Scope& s, const Operation& op, const std::vector<Gradient>& dy) {
  std::vector<Gradient> out(2);
  if (dy[0].is_null()) return out;
  Output handle = InputOf(op, 0);
  PartialShape shape;
  if (handle.node()->op() == "VarHandleOp") {
    NodeAttr(Operation(handle.node()), "shape", &shape).IgnoreError();
  }
  Output dynamic;
  if (!shape.known_rank() || !shape.fully_defined()) {
    dynamic = Op(s, "VariableShape").In(handle).Out();
  }
  out[0] = GatherSlices(s, ToDense(s, dy[0]), InputOf(op, 1), shape, dynamic);
  return out;
}

// The number of elements of `o`: static when known, else a Size op.
Output SizeOf(const Scope& s, const Output& o) {
  const int64_t n = o.shape().known_rank() ? o.shape().num_elements() : -1;
  return n >= 0 ? Const(s, Tensor::Scalar<int32_t>(static_cast<int32_t>(n))) : Size(s, o);
}

// DynamicPartition: each output's gradient goes back to the rows it came
// from (TensorFlow's _DynamicPartitionGrads: stitch the gradients by the
// partitioned positions); outputs without one give zeros.
Outs DynamicPartitionGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  int64_t num_partitions = 0;
  GR_RETURN_IF_ERROR(NodeAttr(op, "num_partitions", &num_partitions));
  Output partitions = InputOf(op, 1);
  Output positions = Reshape(s, Op(s, "Range").In(0).In(SizeOf(s, partitions)).In(1).Out(),
                             ShapeOf(s, partitions));
  std::vector<Output> indices = Op(s, "DynamicPartition")
                                    .In(positions)
                                    .In(partitions)
                                    .Attr("num_partitions", AInt(num_partitions))
                                    .Outs();
  Output stitched = Op(s, "DynamicStitch").InList(indices).InList(FillZeros(s, op, dy)).Out();
  return std::vector<Output>{Reshape(s, stitched, ShapeOf(s, InputOf(op, 0))), Output()};
}

// DynamicStitch: data[m]'s gradient is the output gradient gathered at
// indices[m], zero for the elements a later index overwrote (TensorFlow's
// _DynamicStitchGrads: number every element, stitch the numbers, and keep
// the elements whose number won their row). Indices get none.
Outs DynamicStitchGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  const int n = op.node()->num_inputs() / 2;
  std::vector<Output> out(static_cast<size_t>(2 * n));
  if (dy[0].node() == nullptr) return out;
  std::vector<Output> indices, numbers;
  Output offset = Const(s, Tensor::Scalar<int32_t>(0));
  for (int m = 0; m < n; ++m) {
    indices.push_back(InputOf(op, m));
    Output end = Add(s, offset, SizeOf(s, indices[m]));
    numbers.push_back(
        Reshape(s, Op(s, "Range").In(offset).In(end).In(1).Out(), ShapeOf(s, indices[m])));
    offset = end;
  }
  Output winners = Op(s, "DynamicStitch").InList(indices).InList(numbers).Out();
  const PartialShape merged = OutputOf(op, 0).shape();
  for (int m = 0; m < n; ++m) {
    Output g = GatherV2(s, dy[0], indices[m], 0);
    Output won = Binary(s, "Equal", GatherV2(s, winners, indices[m], 0), numbers[m]);
    Output mask = Cast(s, won, dy[0].type());
    // One trailing 1 per dimension of a row, to broadcast over the rows.
    if (merged.known_rank()) {
      for (int d = 1; d < merged.rank(); ++d) mask = ExpandDims(s, mask, -1);
    } else {
      Output extra = Sub(s, Unary(s, "Rank", g), Unary(s, "Rank", indices[m]));
      Output ones = Op(s, "Fill").In(Reshape(s, extra, IntVec(s, {1}))).In(1).Out();
      mask = Reshape(s, mask, ConcatV2(s, {Shape(s, mask), ones}, 0));
    }
    out[n + m] = Mul(s, g, mask);
  }
  return out;
}

}  // namespace

void RegisterArrayGradients(GradientRegistry& r) {
  for (const char* op : {"Identity", "Snapshot", "IdentityN", "ReadVariableOp"}) {
    r.Add(op, PassThrough);
  }
  r.AddDense("Reshape", ReshapeGrad);
  r.AddDense("ExpandDims", ReshapeGrad);
  r.AddDense("Squeeze", SqueezeGrad);
  r.AddDense("ConcatV2", ConcatV2Grad);
  r.AddDense("Split", SplitGrad);
  r.AddDense("SplitV", SplitVGrad);
  r.AddDense("Transpose", TransposeGrad);
  r.AddDense("Pack", PackGrad);
  r.AddDense("Unpack", UnpackGrad);
  r.Add("Gather", GatherGrad);
  r.Add("GatherV2", GatherGrad);
  r.Add("ResourceGather", ResourceGatherGrad);
  r.AddDense("DynamicPartition", DynamicPartitionGrad);
  r.AddDense("DynamicStitch", DynamicStitchGrad);
  for (const char* op :
       {"StopGradient", "Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike", "OneHot",
        "Range", "Fill", "VariableShape", "RandomUniform", "RandomStandardNormal",
        "TruncatedNormal", "RandomUniformInt", "VarIsInitializedOp", "IsVariableInitialized"}) {
    r.AddNoGradient(op);
  }
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
