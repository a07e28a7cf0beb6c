// Queue and conditional-accumulator op schemas: the ops the
// SyncReplicasOptimizer scheme needs (docs/distributed.md, "Synchronous
// replication"). Queues are TensorFlow's V2 queues named by a DT_RESOURCE
// handle. Dense accumulators come in both of TensorFlow's forms: the
// resource-handle one (ResourceConditionalAccumulator, ResourceAccumulator*)
// and TensorFlow 1.x's ref-handle one (ConditionalAccumulator,
// AccumulatorApplyGradient, AccumulatorTakeGradient: a `Ref(string)` to the
// accumulator's [container, name]); the sparse one exists only in the ref
// form (SparseConditionalAccumulator, SparseAccumulator*). The ref-handle
// AccumulatorNumAccumulated and AccumulatorSetGlobalStep serve both dense
// and sparse ref accumulators, as in TensorFlow. Names, args, attrs and
// defaults are TensorFlow's.
#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/status.h"

namespace graphrun {

void RegisterQueueOps(OpRegistry& r) {
  r.Add(OpDefBuilder("FIFOQueueV2")
            .Output("handle: resource")
            .Attr("component_types: list(type) >= 1")
            .Attr("shapes: list(shape) >= 0 = []")
            .Attr("capacity: int = -1")
            .Attr("container: string = ''")
            .Attr("shared_name: string = ''")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("A first-in first-out queue of tuples of tensors, kept in the "
                 "device's resource manager."));
  r.Add(OpDefBuilder("QueueEnqueueV2")
            .Input("handle: resource")
            .Input("components: Tcomponents")
            .Attr("Tcomponents: list(type) >= 1")
            .Attr("timeout_ms: int = -1")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Appends one tuple; blocks while the queue is full."));
  r.Add(OpDefBuilder("QueueEnqueueManyV2")
            .Input("handle: resource")
            .Input("components: Tcomponents")
            .Attr("Tcomponents: list(type) >= 1")
            .Attr("timeout_ms: int = -1")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Appends the tuples sliced along dimension 0 of the components."));
  r.Add(OpDefBuilder("QueueDequeueV2")
            .Input("handle: resource")
            .Output("components: component_types")
            .Attr("component_types: list(type) >= 1")
            .Attr("timeout_ms: int = -1")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unknown)  // shapes live in the queue
            .Doc("Removes the oldest tuple; blocks while the queue is empty. "
                 "OutOfRange once the queue is closed and empty."));
  r.Add(OpDefBuilder("QueueDequeueManyV2")
            .Input("handle: resource")
            .Input("n: int32")
            .Output("components: component_types")
            .Attr("component_types: list(type) >= 1")
            .Attr("timeout_ms: int = -1")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unknown)
            .Doc("Removes the n oldest tuples, stacked along a new dimension 0."));
  r.Add(OpDefBuilder("QueueSizeV2")
            .Input("handle: resource")
            .Output("size: int32")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("The number of tuples in the queue."));
  r.Add(OpDefBuilder("QueueCloseV2")
            .Input("handle: resource")
            .Attr("cancel_pending_enqueues: bool = false")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Closes the queue: later enqueues fail; dequeues drain it, then "
                 "fail with OutOfRange."));

  r.Add(OpDefBuilder("ResourceConditionalAccumulator")
            .Output("handle: resource")
            .Attr("dtype: numbertype")
            .Attr("shape: shape")
            .Attr("container: string = ''")
            .Attr("shared_name: string = ''")
            .Attr("reduction_type: {'MEAN', 'SUM'} = 'MEAN'")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("An accumulator of gradients that drops stale ones (local_step < "
                 "its global step)."));
  r.Add(OpDefBuilder("ResourceAccumulatorApplyGradient")
            .Input("handle: resource")
            .Input("local_step: int64")
            .Input("gradient: dtype")
            .Attr("dtype: numbertype")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Adds the gradient unless local_step is older than the "
                 "accumulator's global step."));
  r.Add(OpDefBuilder("ResourceAccumulatorTakeGradient")
            .Input("handle: resource")
            .Input("num_required: int32")
            .Output("average: dtype")
            .Attr("dtype: numbertype")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unknown)  // the handle hides the shape
            .Doc("Blocks until num_required gradients are accumulated; returns "
                 "their mean (or sum), resets and increments the global step."));
  r.Add(OpDefBuilder("ResourceAccumulatorNumAccumulated")
            .Input("handle: resource")
            .Output("num_accumulated: int32")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("The number of gradients accumulated since the last take."));
  r.Add(OpDefBuilder("ResourceAccumulatorSetGlobalStep")
            .Input("handle: resource")
            .Input("new_global_step: int64")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Sets the global step (as TensorFlow, also backwards)."));

  r.Add(OpDefBuilder("ConditionalAccumulator")
            .Output("handle: Ref(string)")
            .Attr("dtype: numbertype")
            .Attr("shape: shape")
            .Attr("container: string = ''")
            .Attr("shared_name: string = ''")
            .Attr("reduction_type: {'MEAN', 'SUM'} = 'MEAN'")
            .SetIsStateful()
            .SetShapeFn([](ShapeContext& c) {
              c.set_output(0, PartialShape({2}));
              return absl::OkStatus();
            })
            .Doc("ResourceConditionalAccumulator with TensorFlow 1.x's ref "
                 "handle."));
  r.Add(OpDefBuilder("AccumulatorApplyGradient")
            .Input("handle: Ref(string)")
            .Input("local_step: int64")
            .Input("gradient: dtype")
            .Attr("dtype: numbertype")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("ResourceAccumulatorApplyGradient on a ref handle."));
  r.Add(OpDefBuilder("AccumulatorTakeGradient")
            .Input("handle: Ref(string)")
            .Input("num_required: int32")
            .Output("average: dtype")
            .Attr("dtype: numbertype")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unknown)  // the handle hides the shape
            .Doc("ResourceAccumulatorTakeGradient on a ref handle."));

  r.Add(OpDefBuilder("SparseConditionalAccumulator")
            .Output("handle: Ref(string)")
            .Attr("dtype: numbertype")
            .Attr("shape: shape")
            .Attr("container: string = ''")
            .Attr("shared_name: string = ''")
            .Attr("reduction_type: {'MEAN', 'SUM'} = 'MEAN'")
            .SetIsStateful()
            .SetShapeFn([](ShapeContext& c) {
              c.set_output(0, PartialShape({2}));
              return absl::OkStatus();
            })
            .Doc("An accumulator of sparse gradients (IndexedSlices) that drops "
                 "stale ones (local_step < its global step)."));
  r.Add(OpDefBuilder("SparseAccumulatorApplyGradient")
            .Input("handle: Ref(string)")
            .Input("local_step: int64")
            .Input("gradient_indices: int64")
            .Input("gradient_values: dtype")
            .Input("gradient_shape: int64")
            .Attr("dtype: numbertype")
            .Attr("has_known_shape: bool")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Adds the rows `gradient_values` at `gradient_indices` unless "
                 "local_step is older than the accumulator's global step; "
                 "gradient_shape (the dense shape) is checked when "
                 "has_known_shape."));
  r.Add(OpDefBuilder("SparseAccumulatorTakeGradient")
            .Input("handle: Ref(string)")
            .Input("num_required: int32")
            .Output("indices: int64")
            .Output("values: dtype")
            .Output("shape: int64")
            .Attr("dtype: numbertype")
            .SetIsStateful()
            .SetShapeFn([](ShapeContext& c) {
              c.set_output(0, PartialShape::UnknownOfRank(1));
              c.set_output(1, PartialShape::Unknown());  // the handle hides it
              c.set_output(2, PartialShape::UnknownOfRank(1));
              return absl::OkStatus();
            })
            .Doc("Blocks until num_required gradients are accumulated; returns "
                 "the union of their indices (sorted, unique), per index the mean "
                 "(or sum) of the rows, and the dense shape; resets and "
                 "increments the global step."));
  r.Add(OpDefBuilder("AccumulatorNumAccumulated")
            .Input("handle: Ref(string)")
            .Output("num_accumulated: int32")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("The number of gradients accumulated since the last take."));
  r.Add(OpDefBuilder("AccumulatorSetGlobalStep")
            .Input("handle: Ref(string)")
            .Input("new_global_step: int64")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Sets the global step (as TensorFlow, also backwards)."));
}

}  // namespace graphrun
