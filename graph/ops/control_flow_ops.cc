// TensorFlow v1 control flow: Switch/Merge for conditionals, and
// Enter/Exit/NextIteration/LoopCond for while-loop frames.
#include <string>

#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"

namespace graphrun {
namespace {

absl::Status SwitchShape(ShapeContext& c) {
  auto pred = c.WithRank(1, 0);
  if (!pred.ok()) return pred.status();
  c.set_output(0, c.input(0));
  c.set_output(1, c.input(0));
  return absl::OkStatus();
}

absl::Status MergeShape(ShapeContext& c) {
  // The output has the shape every input agrees on; unknown otherwise.
  PartialShape s = c.input(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    if (!(c.input(i) == s)) {
      s = PartialShape();
      break;
    }
  }
  c.set_output(0, s);
  c.set_output(1, PartialShape({}));
  return absl::OkStatus();
}

absl::Status SwitchNShape(ShapeContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, c.input(0));
  return absl::OkStatus();
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& r) {
  r.Add(OpDefBuilder("Switch")
            .Input("data: T")
            .Input("pred: bool")
            .Output("output_false: T")
            .Output("output_true: T")
            .Attr("T: type")
            .SetShapeFn(SwitchShape)
            .Doc("Forwards data to output_true if pred, else to output_false; "
                 "the other output is dead."));
  r.Add(OpDefBuilder("RefSwitch")
            .Input("data: Ref(T)")
            .Input("pred: bool")
            .Output("output_false: Ref(T)")
            .Output("output_true: Ref(T)")
            .Attr("T: type")
            .SetAllowsUninitializedInput()
            .SetShapeFn(SwitchShape));
  r.Add(OpDefBuilder("_SwitchN")
            .Input("data: T")
            .Input("output_index: int32")
            .Output("outputs: num_outs * T")
            .Attr("num_outs: int >= 1")
            .Attr("T: type")
            .SetShapeFn(SwitchNShape)
            .Doc("Forwards data to outputs[output_index] (the last output when out of range); "
                 "the others are dead. What Case lowers to."));
  r.Add(OpDefBuilder("Merge")
            .Input("inputs: N * T")
            .Output("output: T")
            .Output("value_index: int32")
            .Attr("T: type")
            .Attr("N: int >= 1")
            .SetShapeFn(MergeShape)
            .Doc("Forwards the first input that is alive, and its index."));
  r.Add(OpDefBuilder("RefMerge")
            .Input("inputs: Ref(N * T)")
            .Output("output: Ref(T)")
            .Output("value_index: int32")
            .Attr("T: type")
            .Attr("N: int >= 1")
            .SetShapeFn(MergeShape));
  r.Add(OpDefBuilder("Enter")
            .Input("data: T")
            .Output("output: T")
            .Attr("T: type")
            .Attr("frame_name: string")
            .Attr("is_constant: bool = false")
            .Attr("parallel_iterations: int = 10")
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("Makes data available to the child frame frame_name."));
  r.Add(OpDefBuilder("RefEnter")
            .Input("data: Ref(T)")
            .Output("output: Ref(T)")
            .Attr("T: type")
            .Attr("frame_name: string")
            .Attr("is_constant: bool = false")
            .Attr("parallel_iterations: int = 10")
            .SetShapeFn(shape_fns::Unchanged));
  r.Add(OpDefBuilder("Exit")
            .Input("data: T")
            .Output("output: T")
            .Attr("T: type")
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("Makes data available to the parent frame."));
  r.Add(OpDefBuilder("RefExit")
            .Input("data: Ref(T)")
            .Output("output: Ref(T)")
            .Attr("T: type")
            .SetShapeFn(shape_fns::Unchanged));
  r.Add(OpDefBuilder("NextIteration")
            .Input("data: T")
            .Output("output: T")
            .Attr("T: type")
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("Makes data available to the next iteration."));
  r.Add(OpDefBuilder("RefNextIteration")
            .Input("data: Ref(T)")
            .Output("output: Ref(T)")
            .Attr("T: type")
            .SetShapeFn(shape_fns::Unchanged));
  r.Add(OpDefBuilder("LoopCond")
            .Input("input: bool")
            .Output("output: bool")
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("The loop predicate of a while loop."));
  // Functional control flow and calls (TensorFlow 2). They have no
  // kernels: LowerFunctionCalls (graph/function_lowering.h) inlines them
  // into the ops above before a graph is built.
  for (const char* op : {"PartitionedCall", "StatefulPartitionedCall"}) {
    OpDefBuilder b(op);
    b.Input("args: Tin")
        .Output("output: Tout")
        .Attr("Tin: list(type) >= 0")
        .Attr("Tout: list(type) >= 0")
        .Attr("f: func")
        .Attr("config: string = ''")
        .Attr("config_proto: string = ''")
        .Attr("executor_type: string = ''")
        .Doc("Calls the function f; inlined at import.");
    if (std::string(op) == "StatefulPartitionedCall") b.SetIsStateful();
    r.Add(b);
  }
  for (const char* op : {"If", "StatelessIf"}) {
    OpDefBuilder b(op);
    b.Input("cond: Tcond")
        .Input("input: Tin")
        .Output("output: Tout")
        .Attr("Tcond: type")
        .Attr("Tin: list(type) >= 0")
        .Attr("Tout: list(type) >= 0")
        .Attr("then_branch: func")
        .Attr("else_branch: func")
        .Attr("output_shapes: list(shape) = []")
        .Doc("Calls then_branch if cond, else else_branch; lowered to Switch/Merge at import.");
    if (std::string(op) == "If") b.SetIsStateful();
    r.Add(b);
  }
  for (const char* op : {"Case", "StatelessCase"}) {
    OpDefBuilder b(op);
    b.Input("branch_index: int32")
        .Input("input: Tin")
        .Output("output: Tout")
        .Attr("Tin: list(type) >= 0")
        .Attr("Tout: list(type) >= 0")
        .Attr("branches: list(func) >= 1")
        .Attr("output_shapes: list(shape) = []")
        .Doc(
            "Calls branches[branch_index] (the last one when out of range); lowered to "
            "_SwitchN/Merge at import.");
    if (std::string(op) == "Case") b.SetIsStateful();
    r.Add(b);
  }
  for (const char* op : {"While", "StatelessWhile"}) {
    OpDefBuilder b(op);
    b.Input("input: T")
        .Output("output: T")
        .Attr("T: list(type) >= 0")
        .Attr("cond: func")
        .Attr("body: func")
        .Attr("output_shapes: list(shape) = []")
        .Attr("parallel_iterations: int = 10")
        .Doc("Runs body while cond holds; lowered to a loop frame at import.");
    if (std::string(op) == "While") b.SetIsStateful();
    r.Add(b);
  }
  r.Add(OpDefBuilder("ControlTrigger")
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Does nothing; runs even when its inputs are dead."));
}

}  // namespace graphrun
