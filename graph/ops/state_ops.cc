// Variable ops, both kinds TensorFlow graphs use: ref variables
// (VariableV2 + Assign*) whose ref output points at the variable, and
// resource variables (VarHandleOp + *VariableOp) named by a DT_RESOURCE
// handle. Names, args, attrs and defaults are TensorFlow's.
#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/status.h"

namespace graphrun {
namespace {

absl::Status ShapeAttr(ShapeContext& c) {
  PartialShape s;
  GR_RETURN_IF_ERROR(c.GetAttr("shape", &s));
  c.set_output(0, s);
  return absl::OkStatus();
}

absl::Status AssignShape(ShapeContext& c) {
  bool validate = true;
  GR_RETURN_IF_ERROR(c.GetAttr("validate_shape", &validate));
  if (!validate) {
    c.set_output(0, c.input(1));
    return absl::OkStatus();
  }
  auto m = c.input(0).known_rank() ? c.input(0).Merge(c.input(1)) : c.input(1).Merge(c.input(0));
  if (!m.ok()) {
    return c.Error(absl::StrCat("shapes of both tensors must match: lhs ", c.input(0).DebugString(),
                                " rhs ", c.input(1).DebugString()));
  }
  c.set_output(0, *m);
  return absl::OkStatus();
}

absl::Status ScatterShape(ShapeContext& c) {
  c.set_output(0, c.input(0));
  return absl::OkStatus();
}

}  // namespace

void RegisterStateOps(OpRegistry& r) {
  // Ref variables.
  r.Add(OpDefBuilder("VariableV2")
            .Output("ref: Ref(dtype)")
            .Attr("shape: shape")
            .Attr("dtype: type")
            .Attr("container: string = ''")
            .Attr("shared_name: string = ''")
            .SetIsStateful()
            .SetShapeFn(ShapeAttr)
            .Doc("A ref variable kept in the device's resource manager."));
  r.Add(OpDefBuilder("Variable")
            .Output("ref: Ref(dtype)")
            .Attr("shape: shape")
            .Attr("dtype: type")
            .Attr("container: string = ''")
            .Attr("shared_name: string = ''")
            .SetIsStateful()
            .SetShapeFn(ShapeAttr)
            .Doc("Deprecated spelling of VariableV2."));
  r.Add(OpDefBuilder("Assign")
            .Input("ref: Ref(T)")
            .Input("value: T")
            .Output("output_ref: Ref(T)")
            .Attr("T: type")
            .Attr("validate_shape: bool = true")
            .Attr("use_locking: bool = true")
            .SetAllowsUninitializedInput()
            .SetShapeFn(AssignShape)
            .Doc("Stores `value` in the variable; outputs the ref."));
  for (const char* op : {"AssignAdd", "AssignSub"}) {
    r.Add(OpDefBuilder(op)
              .Input("ref: Ref(T)")
              .Input("value: T")
              .Output("output_ref: Ref(T)")
              .Attr("T: numbertype")
              .Attr("use_locking: bool = false")
              .SetShapeFn(shape_fns::Unchanged)
              .Doc("Adds (subtracts) `value` to the variable; outputs the ref."));
  }
  r.Add(OpDefBuilder("IsVariableInitialized")
            .Input("ref: Ref(dtype)")
            .Output("is_initialized: bool")
            .Attr("dtype: type")
            .SetAllowsUninitializedInput()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("Whether the variable has been assigned."));
  for (const char* op : {"ScatterAdd", "ScatterSub", "ScatterUpdate"}) {
    bool update = std::string(op) == "ScatterUpdate";
    r.Add(OpDefBuilder(op)
              .Input("ref: Ref(T)")
              .Input("indices: Tindices")
              .Input("updates: T")
              .Output("output_ref: Ref(T)")
              .Attr(update ? "T: type" : "T: numbertype")
              .Attr("Tindices: {int32, int64}")
              .Attr(update ? "use_locking: bool = true" : "use_locking: bool = false")
              .SetShapeFn(ScatterShape)
              .Doc("Sparse update of rows of the variable; outputs the ref."));
  }

  // Resource variables.
  r.Add(OpDefBuilder("VarHandleOp")
            .Output("resource: resource")
            .Attr("container: string = ''")
            .Attr("shared_name: string = ''")
            .Attr("dtype: type")
            .Attr("shape: shape")
            .Attr("allowed_devices: list(string) = []")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("A handle to a resource variable."));
  r.Add(OpDefBuilder("ReadVariableOp")
            .Input("resource: resource")
            .Output("value: dtype")
            .Attr("dtype: type")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unknown)
            .Doc("The variable's current value."));
  r.Add(OpDefBuilder("AssignVariableOp")
            .Input("resource: resource")
            .Input("value: dtype")
            .Attr("dtype: type")
            .Attr("validate_shape: bool = false")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Stores `value` in the variable, creating it if needed."));
  for (const char* op : {"AssignAddVariableOp", "AssignSubVariableOp"}) {
    r.Add(OpDefBuilder(op)
              .Input("resource: resource")
              .Input("value: dtype")
              .Attr("dtype: type")
              .SetIsStateful()
              .SetShapeFn(shape_fns::NoOutputs)
              .Doc("Adds (subtracts) `value` to the variable."));
  }
  r.Add(OpDefBuilder("VarIsInitializedOp")
            .Input("resource: resource")
            .Output("is_initialized: bool")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("Whether the resource variable exists and holds a value."));
  r.Add(OpDefBuilder("VariableShape")
            .Input("input: resource")
            .Output("output: out_type")
            .Attr("out_type: {int32, int64} = DT_INT32")
            .SetIsStateful()
            .SetShapeFn([](ShapeContext& c) {
              c.set_output(0, PartialShape({-1}));
              return absl::OkStatus();
            })
            .Doc("The shape of the variable's value."));
  // TensorFlow >= 2.10's savers read variables with copy-on-read turned off
  // (read_value_no_copy); graphrun's reads never copy, so it does nothing.
  r.Add(OpDefBuilder("DisableCopyOnRead")
            .Input("resource: resource")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Turns off copy-on-read for a variable: a no-op here (reads share buffers)."));
  r.Add(OpDefBuilder("DestroyResourceOp")
            .Input("resource: resource")
            .Attr("ignore_lookup_error: bool = true")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Deletes the resource the handle names."));
  r.Add(OpDefBuilder("ResourceGather")
            .Input("resource: resource")
            .Input("indices: Tindices")
            .Output("output: dtype")
            .Attr("batch_dims: int = 0")
            .Attr("validate_indices: bool = true")
            .Attr("dtype: type")
            .Attr("Tindices: {int32, int64}")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unknown)  // the handle hides the shape
            .Doc("Rows of the variable's value at indices."));
}

}  // namespace graphrun
