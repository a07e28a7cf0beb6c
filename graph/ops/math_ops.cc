// Math op schemas: element-wise arithmetic, comparisons, logic, Select,
// Cast, MatMul, reductions and ArgMax/ArgMin. Names, arguments, attrs and
// defaults follow TensorFlow's math_ops.cc so TensorFlow GraphDefs load; the
// allowed type lists are TensorFlow's restricted to what graphrun tensors
// can hold (no complex, no quantized types).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/status.h"

namespace graphrun {
namespace {

constexpr char kRealNumberTypes[] =
    "T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, "
    "int64}";
// kRealNumberTypes and complex: TensorFlow's NumberTypes for arithmetic.
constexpr char kNumberTypes[] =
    "T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, "
    "int64, complex64, complex128}";
constexpr char kSignedNumberTypes[] =
    "T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}";
constexpr char kFloatTypes[] = "T: {bfloat16, half, float, double}";
constexpr char kSignedTypes[] = "T: {bfloat16, half, float, double, int8, int16, int32, int64}";

// Merges the shapes of inputs [first, last) (all must be compatible).
absl::StatusOr<PartialShape> MergeInputs(ShapeContext& c, int first, int last) {
  PartialShape s = c.input(first);
  for (int i = first + 1; i < last; ++i) {
    auto m = s.Merge(c.input(i));
    if (!m.ok()) {
      return c.Error(absl::StrCat("inputs ", first, " and ", i, " must have the same shape, got ",
                                  c.input(first).DebugString(), " and ", c.input(i).DebugString()));
    }
    s = *std::move(m);
  }
  return s;
}

absl::Status AddNShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape s, MergeInputs(c, 0, c.num_inputs()));
  c.set_output(0, s);
  return absl::OkStatus();
}

// Equal / NotEqual: with incompatible_shape_error = false incompatible shapes
// give a scalar result, so the static shape is unknown in that case.
absl::Status EqualityShape(ShapeContext& c) {
  bool error = true;
  GR_RETURN_IF_ERROR(c.GetAttr("incompatible_shape_error", &error));
  auto s = shape_fns::BroadcastShapes(c.input(0), c.input(1));
  if (s.ok()) {
    c.set_output(0, *s);
    return absl::OkStatus();
  }
  if (error) return c.Error(s.status().message());
  c.set_output(0, PartialShape::Unknown());
  return absl::OkStatus();
}

// Select (v1): t and e have one shape; condition is a scalar, that shape,
// or a vector matching its first dimension.
absl::Status SelectShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape out, MergeInputs(c, 1, 3));
  const PartialShape& cond = c.input(0);
  if (cond.known_rank() && out.known_rank() && cond.rank() != 0 && !cond.IsCompatibleWith(out)) {
    bool vector_ok = cond.rank() == 1 && out.rank() >= 1 &&
                     (cond.dim(0) < 0 || out.dim(0) < 0 || cond.dim(0) == out.dim(0));
    if (!vector_ok) {
      return c.Error(
          absl::StrCat("condition must be a scalar, a vector matching the first dimension "
                       "or the shape of t, got ",
                       cond.DebugString(), " for t of shape ", out.DebugString()));
    }
  }
  c.set_output(0, out);
  return absl::OkStatus();
}

absl::Status SelectV2Shape(ShapeContext& c) {
  auto te = shape_fns::BroadcastShapes(c.input(1), c.input(2));
  if (!te.ok()) return c.Error(te.status().message());
  auto all = shape_fns::BroadcastShapes(c.input(0), *te);
  if (!all.ok()) return c.Error(all.status().message());
  c.set_output(0, *all);
  return absl::OkStatus();
}

absl::Status MatMulShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape a, c.WithRank(0, 2));
  GR_ASSIGN_OR_RETURN(PartialShape b, c.WithRank(1, 2));
  bool ta = false, tb = false;
  GR_RETURN_IF_ERROR(c.GetAttr("transpose_a", &ta));
  GR_RETURN_IF_ERROR(c.GetAttr("transpose_b", &tb));
  int64_t m = a.dim(ta ? 1 : 0), ka = a.dim(ta ? 0 : 1);
  int64_t kb = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  if (ka >= 0 && kb >= 0 && ka != kb) {
    return c.Error(absl::StrCat("inner dimensions differ: a is ", a.DebugString(), ", b is ",
                                b.DebugString(), " (transpose_a=", ta, ", transpose_b=", tb, ")"));
  }
  c.set_output(0, PartialShape({m, n}));
  return absl::OkStatus();
}

// Reads the constant axes of input `i` (scalar or vector of int32/int64).
// Returns false in `*known` when the input is not a constant.
absl::Status ConstantAxes(ShapeContext& c, int i, std::vector<int64_t>* axes, bool* known) {
  const Tensor* t = c.input_tensor(i);
  *known = t != nullptr;
  if (t == nullptr) return absl::OkStatus();
  if (t->dims() > 1) {
    return c.Error(
        absl::StrCat("axes must be a scalar or vector, got shape ", t->shape().DebugString()));
  }
  for (int64_t k = 0; k < t->NumElements(); ++k) {
    if (t->dtype() == DT_INT32) {
      axes->push_back(t->base<int32_t>()[k]);
    } else if (t->dtype() == DT_INT64) {
      axes->push_back(t->base<int64_t>()[k]);
    } else {
      return c.Error("axes must be int32 or int64");
    }
  }
  return absl::OkStatus();
}

absl::Status ReductionShape(ShapeContext& c) {
  bool keep_dims = false;
  GR_RETURN_IF_ERROR(c.GetAttr("keep_dims", &keep_dims));
  const PartialShape& in = c.input(0);
  std::vector<int64_t> axes;
  bool known = false;
  GR_RETURN_IF_ERROR(ConstantAxes(c, 1, &axes, &known));
  if (!in.known_rank()) {
    c.set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int rank = in.rank();
  if (!known) {
    c.set_output(0, keep_dims ? PartialShape::UnknownOfRank(rank) : PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<bool> reduce(rank, false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      return c.Error(
          absl::StrCat("reduction axis ", a, " is out of range for input of rank ", rank));
    }
    reduce[a < 0 ? a + rank : a] = true;
  }
  DimVector dims;
  for (int d = 0; d < rank; ++d) {
    if (!reduce[d]) {
      dims.push_back(in.dim(d));
    } else if (keep_dims) {
      dims.push_back(1);
    }
  }
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status ArgMinMaxShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  std::vector<int64_t> axes;
  bool known = false;
  GR_RETURN_IF_ERROR(ConstantAxes(c, 1, &axes, &known));
  if (known && axes.size() != 1) {
    return c.Error("dimension must be a single axis");
  }
  if (!in.known_rank()) {
    c.set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int rank = in.rank();
  if (rank == 0) return c.Error("input must have rank >= 1");
  if (!known) {
    c.set_output(0, PartialShape::UnknownOfRank(rank - 1));
    return absl::OkStatus();
  }
  int64_t a = axes[0];
  if (a < -rank || a >= rank) {
    return c.Error(absl::StrCat("dimension ", a, " is out of range for input of rank ", rank));
  }
  if (a < 0) a += rank;
  DimVector dims;
  for (int d = 0; d < rank; ++d) {
    if (d != a) dims.push_back(in.dim(d));
  }
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

// x [..., M, K] times y [..., K, N] (adjoints swap the last two): the
// batch dimensions broadcast (BatchMatMulV2) or must be equal (BatchMatMul).
absl::Status BatchMatMulShape(ShapeContext& c, const char* op) {
  const PartialShape &x = c.input(0), &y = c.input(1);
  if (!x.known_rank() || !y.known_rank()) {
    c.set_output(0, PartialShape());
    return absl::OkStatus();
  }
  if (x.rank() < 2 || y.rank() < 2) return c.Error("inputs must have rank >= 2");
  bool adj_x = false, adj_y = false;
  GR_RETURN_IF_ERROR(c.GetAttr("adj_x", &adj_x));
  GR_RETURN_IF_ERROR(c.GetAttr("adj_y", &adj_y));
  const int64_t m = x.dim(x.rank() - (adj_x ? 1 : 2)), kx = x.dim(x.rank() - (adj_x ? 2 : 1));
  const int64_t ky = y.dim(y.rank() - (adj_y ? 1 : 2)), n = y.dim(y.rank() - (adj_y ? 2 : 1));
  if (kx >= 0 && ky >= 0 && kx != ky) {
    return c.Error(absl::StrCat("contracting dimensions differ: ", kx, " and ", ky, " (x ",
                                x.DebugString(), ", y ", y.DebugString(), ")"));
  }
  PartialShape bx(x.dims().subspan(0, x.rank() - 2)), by(y.dims().subspan(0, y.rank() - 2));
  PartialShape batch;
  if (std::string(op) == "BatchMatMul") {
    auto merged = bx.Merge(by);
    if (!merged.ok()) return c.Error("batch dimensions differ");
    batch = *merged;
  } else {
    auto b = shape_fns::BroadcastShapes(bx, by);
    if (!b.ok()) return c.Error(b.status().message());
    batch = *b;
  }
  DimVector out(batch.dims().begin(), batch.dims().end());
  out.push_back(m);
  out.push_back(n);
  c.set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

void AddBinary(OpRegistry& r, const char* name, const char* types, bool commutative) {
  OpDefBuilder b(name);
  b.Input("x: T").Input("y: T").Output("z: T").Attr(types).SetShapeFn(shape_fns::Broadcast);
  if (commutative) b.SetIsCommutative();
  r.Add(b);
}

void AddUnary(OpRegistry& r, const char* name, const char* types) {
  r.Add(
      OpDefBuilder(name).Input("x: T").Output("y: T").Attr(types).SetShapeFn(shape_fns::Unchanged));
}

void AddComparison(OpRegistry& r, const char* name) {
  r.Add(OpDefBuilder(name)
            .Input("x: T")
            .Input("y: T")
            .Output("z: bool")
            .Attr(kRealNumberTypes)
            .SetShapeFn(shape_fns::Broadcast));
}

void AddReduction(OpRegistry& r, const char* name, const char* types) {
  r.Add(OpDefBuilder(name)
            .Input("input: T")
            .Input("reduction_indices: Tidx")
            .Output("output: T")
            .Attr("keep_dims: bool = false")
            .Attr(types)
            .Attr("Tidx: {int32, int64} = DT_INT32")
            .SetShapeFn(ReductionShape));
}

void AddArgMinMax(OpRegistry& r, const char* name) {
  r.Add(OpDefBuilder(name)
            .Input("input: T")
            .Input("dimension: Tidx")
            .Output("output: output_type")
            .Attr("T: {bfloat16, half, float, double, uint8, int8, uint16, "
                  "int16, int32, int64, bool}")
            .Attr("Tidx: {int16, int32, int64} = DT_INT32")
            .Attr("output_type: {int16, uint16, int32, int64} = DT_INT64")
            .SetShapeFn(ArgMinMaxShape));
}

// y = f(x) and its gradient op "dy * f'(x)" expressed through y.
void AddUnaryGrad(OpRegistry& r, const char* name) {
  r.Add(OpDefBuilder(name)
            .Input("y: T")
            .Input("dy: T")
            .Output("z: T")
            .Attr(kFloatTypes)
            .SetShapeFn(shape_fns::Unchanged));
}

}  // namespace

void RegisterMathOps(OpRegistry& r) {
  AddBinary(r, "Add", kNumberTypes, true);
  {
    OpDefBuilder b("AddV2");
    b.Input("x: T").Input("y: T").Output("z: T").Attr(kNumberTypes);
    b.SetIsCommutative().SetIsAggregate().SetShapeFn(shape_fns::Broadcast);
    r.Add(b);
  }
  AddBinary(r, "Sub", kNumberTypes, false);
  AddBinary(r, "Mul", kNumberTypes, true);
  AddBinary(r, "RealDiv", kNumberTypes, false);
  AddBinary(r, "Div", kNumberTypes, false);
  AddBinary(r, "FloorDiv", kRealNumberTypes, false);
  AddBinary(r, "FloorMod", kRealNumberTypes, false);
  AddBinary(r, "Maximum", kRealNumberTypes, true);
  AddBinary(r, "Minimum", kRealNumberTypes, true);
  AddBinary(r, "Pow", kSignedTypes, false);
  AddBinary(r, "SquaredDifference", kSignedTypes, true);

  AddUnary(r, "Neg", kSignedNumberTypes);
  AddUnary(r, "Square", kSignedNumberTypes);
  AddUnary(r, "Abs", kSignedTypes);
  AddUnary(r, "Sqrt", kFloatTypes);
  AddUnary(r, "Rsqrt", kFloatTypes);
  AddUnary(r, "Exp", kFloatTypes);
  AddUnary(r, "Log", kFloatTypes);
  AddUnary(r, "Sigmoid", kFloatTypes);
  AddUnary(r, "Tanh", kFloatTypes);
  AddUnaryGrad(r, "SigmoidGrad");
  AddUnaryGrad(r, "TanhGrad");

  r.Add(OpDefBuilder("AddN")
            .Input("inputs: N * T")
            .Output("sum: T")
            .Attr("N: int >= 1")
            .Attr(kRealNumberTypes)
            .SetIsCommutative()
            .SetIsAggregate()
            .SetShapeFn(AddNShape));

  AddComparison(r, "Less");
  AddComparison(r, "LessEqual");
  AddComparison(r, "Greater");
  AddComparison(r, "GreaterEqual");
  for (const char* name : {"Equal", "NotEqual"}) {
    r.Add(OpDefBuilder(name)
              .Input("x: T")
              .Input("y: T")
              .Output("z: bool")
              .Attr("T: type")
              .Attr("incompatible_shape_error: bool = true")
              .SetIsCommutative()
              .SetShapeFn(EqualityShape));
  }
  for (const char* name : {"LogicalAnd", "LogicalOr"}) {
    r.Add(OpDefBuilder(name)
              .Input("x: bool")
              .Input("y: bool")
              .Output("z: bool")
              .SetIsCommutative()
              .SetShapeFn(shape_fns::Broadcast));
  }
  r.Add(OpDefBuilder("LogicalNot")
            .Input("x: bool")
            .Output("y: bool")
            .SetShapeFn(shape_fns::Unchanged));

  r.Add(OpDefBuilder("Select")
            .Input("condition: bool")
            .Input("t: T")
            .Input("e: T")
            .Output("output: T")
            .Attr("T: type")
            .SetShapeFn(SelectShape));
  r.Add(OpDefBuilder("SelectV2")
            .Input("condition: bool")
            .Input("t: T")
            .Input("e: T")
            .Output("output: T")
            .Attr("T: type")
            .SetShapeFn(SelectV2Shape));

  r.Add(OpDefBuilder("Cast")
            .Input("x: SrcT")
            .Output("y: DstT")
            .Attr("SrcT: type")
            .Attr("DstT: type")
            .Attr("Truncate: bool = false")
            .SetShapeFn(shape_fns::Unchanged));

  r.Add(OpDefBuilder("MatMul")
            .Input("a: T")
            .Input("b: T")
            .Output("product: T")
            .Attr("transpose_a: bool = false")
            .Attr("transpose_b: bool = false")
            .Attr("T: {bfloat16, half, float, double, int32, int64}")
            // TensorFlow 2.x GraphDefs may carry these gradient hints.
            .Attr("grad_a: bool = false")
            .Attr("grad_b: bool = false")
            .SetShapeFn(MatMulShape));

  for (const char* op : {"BatchMatMul", "BatchMatMulV2"}) {
    r.Add(OpDefBuilder(op)
              .Input("x: T")
              .Input("y: T")
              .Output("output: T")
              .Attr("T: {bfloat16, half, float, double, int32, int64}")
              .Attr("adj_x: bool = false")
              .Attr("adj_y: bool = false")
              .Attr("grad_x: bool = false")
              .Attr("grad_y: bool = false")
              .SetShapeFn([op](ShapeContext& c) { return BatchMatMulShape(c, op); }));
  }

  AddReduction(r, "Sum", kRealNumberTypes);
  AddReduction(r, "Mean", kRealNumberTypes);
  AddReduction(r, "Prod", kRealNumberTypes);
  AddReduction(r, "Max", kRealNumberTypes);
  AddReduction(r, "Min", kRealNumberTypes);
  AddArgMinMax(r, "ArgMax");
  AddArgMinMax(r, "ArgMin");
}

}  // namespace graphrun
