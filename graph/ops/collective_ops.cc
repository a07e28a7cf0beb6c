// Collective ops, TensorFlow's V2 forms (group and instance keys as
// inputs): all-reduce, all-gather and broadcast among group_size devices.
// Input order, attrs and defaults are TensorFlow's, so graphs that use
// them load unchanged. Kernels: kernels/core/collective_kernels.cc.
#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"

namespace graphrun {
namespace {

// Gather: input [d0, ...] -> [?, ...] (d0 * group_size when known later).
absl::Status GatherShape(ShapeContext& c) {
  PartialShape in = c.input(0);
  if (!in.known_rank()) return shape_fns::Unknown(c);
  if (in.rank() == 0) {
    return absl::InvalidArgumentError("CollectiveGatherV2: input must have rank >= 1");
  }
  std::vector<int64_t> dims(in.dims().begin(), in.dims().end());
  dims[0] = -1;
  c.set_output(0, PartialShape(absl::Span<const int64_t>(dims)));
  return absl::OkStatus();
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& r) {
  r.Add(OpDefBuilder("CollectiveReduceV2")
            .Input("input: T")
            .Input("group_size: int32")
            .Input("group_key: int32")
            .Input("instance_key: int32")
            .Input("ordering_token: Nordering_token * resource")
            .Output("data: T")
            .Attr("T: {bfloat16, float, half, double, int32, int64}")
            .Attr("merge_op: {'Min', 'Max', 'Mul', 'Add'}")
            .Attr("final_op: {'Id', 'Div'}")
            .Attr("communication_hint: string = 'auto'")
            .Attr("timeout_seconds: float = 0")
            .Attr("is_stateless: bool = false")
            .Attr("Nordering_token: int >= 0 = 0")
            .Attr("max_subdivs_per_device: int = -1")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("All-reduce of `input` over the group's members: every member gets the "
                 "elementwise merge_op of all inputs, divided by group_size for final_op Div."));
  r.Add(OpDefBuilder("CollectiveGatherV2")
            .Input("input: T")
            .Input("group_size: int32")
            .Input("group_key: int32")
            .Input("instance_key: int32")
            .Input("ordering_token: Nordering_token * resource")
            .Output("data: T")
            .Attr("T: {float, half, double, int32, int64}")
            .Attr("communication_hint: string = 'auto'")
            .Attr("timeout_seconds: float = 0")
            .Attr("is_stateless: bool = false")
            .Attr("Nordering_token: int >= 0 = 0")
            .SetIsStateful()
            .SetShapeFn(GatherShape)
            .Doc("All-gather: the members' inputs concatenated along dimension 0, in rank "
                 "order (devices sorted by name)."));
  r.Add(OpDefBuilder("CollectiveBcastSendV2")
            .Input("input: T")
            .Input("group_size: int32")
            .Input("group_key: int32")
            .Input("instance_key: int32")
            .Output("data: T")
            .Attr("T: {bool, float, half, double, int32, int64}")
            .Attr("communication_hint: string = 'auto'")
            .Attr("timeout_seconds: float = 0")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unchanged)
            .Doc("Broadcasts `input` to the group's other members (CollectiveBcastRecvV2)."));
  r.Add(OpDefBuilder("CollectiveBcastRecvV2")
            .Input("group_size: int32")
            .Input("group_key: int32")
            .Input("instance_key: int32")
            .Input("shape: Tshape")
            .Output("data: T")
            .Attr("T: {bool, float, half, double, int32, int64}")
            .Attr("Tshape: {int32, int64} = DT_INT32")
            .Attr("communication_hint: string = 'auto'")
            .Attr("timeout_seconds: float = 0")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unknown)
            .Doc("Receives the tensor a member broadcast with CollectiveBcastSendV2."));
}

}  // namespace graphrun
