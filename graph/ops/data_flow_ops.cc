// Data-flow array ops: DynamicPartition splits a tensor's rows by a
// partition id, DynamicStitch interleaves rows back by position. Together
// they route each id of an embedding lookup to the one part holding it.
// Unique (with UnsortedSegmentSum) merges a sparse gradient's repeated
// indices before an optimizer's sparse update.
// Names, args, attrs and shape functions are TensorFlow's.
#include <algorithm>
#include <vector>

#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/status.h"

namespace graphrun {
namespace {

// Requires `data` to start with the dims of `prefix` (both of known rank);
// InvalidArgument naming the node otherwise.
absl::Status CheckPrefix(const ShapeContext& c, const PartialShape& data,
                         const PartialShape& prefix, absl::string_view data_name,
                         absl::string_view prefix_name) {
  bool ok = data.rank() >= prefix.rank();
  for (int d = 0; ok && d < prefix.rank(); ++d) {
    ok = data.dim(d) < 0 || prefix.dim(d) < 0 || data.dim(d) == prefix.dim(d);
  }
  if (ok) return absl::OkStatus();
  return c.Error(absl::StrCat(data_name, ".shape ", data.DebugString(), " does not start with ",
                              prefix_name, ".shape ", prefix.DebugString()));
}

// data[r:] for a shape of known rank.
PartialShape Suffix(const PartialShape& s, int r) {
  return PartialShape(s.dims().subspan(static_cast<size_t>(r)));
}

// Every output: [?] + data.shape[rank(partitions):].
absl::Status DynamicPartitionShape(ShapeContext& c) {
  const PartialShape& data = c.input(0);
  const PartialShape& partitions = c.input(1);
  PartialShape out;
  if (partitions.known_rank() && data.known_rank()) {
    GR_RETURN_IF_ERROR(CheckPrefix(c, data, partitions, "data", "partitions"));
    DimVector dims{-1};
    const PartialShape rest = Suffix(data, partitions.rank());
    dims.insert(dims.end(), rest.dims().begin(), rest.dims().end());
    out = PartialShape(absl::MakeConstSpan(dims));
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, out);
  return absl::OkStatus();
}

// [max(indices) + 1 when every indices input is constant, else ?] + the
// shape every data[m] has after its indices[m] prefix (merged over m).
absl::Status DynamicStitchShape(ShapeContext& c) {
  int64_t n = 0;
  GR_RETURN_IF_ERROR(c.GetAttr("N", &n));
  if (c.num_inputs() != 2 * n) return c.Error("expected N indices and N data inputs");
  bool all_constant = true;
  int64_t max_index = -1;
  PartialShape extra;  // unknown until some input pins it
  for (int m = 0; m < n; ++m) {
    const Tensor* indices_t = c.input_tensor(m);
    if (indices_t == nullptr || indices_t->dtype() != DT_INT32) {
      all_constant = false;
    } else {
      for (int32_t v : indices_t->flat<int32_t>()) max_index = std::max<int64_t>(max_index, v);
    }
    const PartialShape& indices = c.input(m);
    const PartialShape& data = c.input(n + m);
    if (!indices.known_rank() || !data.known_rank()) continue;
    GR_RETURN_IF_ERROR(CheckPrefix(c, data, indices, absl::StrCat("data[", m, "]"),
                                   absl::StrCat("indices[", m, "]")));
    auto merged = extra.Merge(Suffix(data, indices.rank()));
    if (!merged.ok()) {
      return c.Error(absl::StrCat(
          "data[", m, "].shape ", data.DebugString(),
          " after its indices does not match the other data inputs: ", merged.status().message()));
    }
    extra = *merged;
  }
  if (!extra.known_rank()) {
    c.set_output(0, PartialShape());
    return absl::OkStatus();
  }
  DimVector dims{all_constant ? max_index + 1 : -1};
  dims.insert(dims.end(), extra.dims().begin(), extra.dims().end());
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

// y [?] and idx shaped like x (a vector).
absl::Status UniqueShape(ShapeContext& c) {
  const PartialShape& x = c.input(0);
  if (x.known_rank() && x.rank() != 1) {
    return c.Error(absl::StrCat("x must be a vector, got shape ", x.DebugString()));
  }
  c.set_output(0, PartialShape({-1}));
  c.set_output(1, x.known_rank() ? x : PartialShape({-1}));
  return absl::OkStatus();
}

}  // namespace

void RegisterDataFlowOps(OpRegistry& r) {
  r.Add(OpDefBuilder("Unique")
            .Input("x: T")
            .Output("y: T")
            .Output("idx: out_idx")
            .Attr("T: type")
            .Attr("out_idx: {int32, int64} = DT_INT32")
            .SetShapeFn(UniqueShape)
            .Doc("y = the distinct values of the vector x in order of first appearance; "
                 "x[i] = y[idx[i]]."));
  r.Add(OpDefBuilder("DynamicPartition")
            .Input("data: T")
            .Input("partitions: int32")
            .Output("outputs: num_partitions * T")
            .Attr("num_partitions: int >= 1")
            .Attr("T: type")
            .SetShapeFn(DynamicPartitionShape)
            .Doc("outputs[i] = the slices data[js, ...] with partitions[js] == i, in order; "
                 "data.shape must start with partitions.shape."));
  r.Add(OpDefBuilder("DynamicStitch")
            .Input("indices: N * int32")
            .Input("data: N * T")
            .Output("merged: T")
            .Attr("N: int >= 1")
            .Attr("T: type")
            .SetShapeFn(DynamicStitchShape)
            .Doc("merged[indices[m][i, ...], ...] = data[m][i, ..., ...]; later (m, i) win; "
                 "merged has max(indices) + 1 rows."));

  // Stacks: what a loop's gradient reads the forward iterations' values
  // from, in reverse (client/train/grad_while.cc).
  r.Add(OpDefBuilder("StackV2")
            .Input("max_size: int32")
            .Output("handle: resource")
            .Attr("elem_type: type")
            .Attr("stack_name: string = ''")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Scalar)
            .Doc("A new, empty stack of elem_type tensors for this step; max_size < 0 means "
                 "unbounded."));
  r.Add(OpDefBuilder("StackPushV2")
            .Input("handle: resource")
            .Input("elem: T")
            .Output("output: T")
            .Attr("T: type")
            .Attr("swap_memory: bool = false")
            .SetIsStateful()
            .SetShapeFn([](ShapeContext& c) {
              c.set_output(0, c.input(1));
              return absl::OkStatus();
            })
            .Doc("Pushes elem onto the stack; output = elem."));
  r.Add(OpDefBuilder("StackPopV2")
            .Input("handle: resource")
            .Output("elem: elem_type")
            .Attr("elem_type: type")
            .SetIsStateful()
            .SetShapeFn(shape_fns::Unknown)
            .Doc("Pops the top of the stack; InvalidArgument when it is empty."));
  r.Add(OpDefBuilder("StackCloseV2")
            .Input("handle: resource")
            .SetIsStateful()
            .SetShapeFn(shape_fns::NoOutputs)
            .Doc("Deletes the stack and what it holds."));
}

}  // namespace graphrun
