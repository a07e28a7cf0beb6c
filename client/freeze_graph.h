// Freezing: the inference graph `graphrun run` executes after training, as
// TensorFlow's freeze_graph. Variables become constants holding their
// trained values, and everything the outputs do not need (initializers,
// savers, the loss) is pruned, so the graph needs no checkpoint and no
// cluster: a self-contained GraphDef with placeholders in and the outputs
// out.
#ifndef GRAPHRUN_CLIENT_FREEZE_GRAPH_H_
#define GRAPHRUN_CLIENT_FREEZE_GRAPH_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/proto/graph.pb.h"
#include "graph/tensor.h"

namespace graphrun {
namespace client {

// `graph` pruned to the nodes `outputs` (node names, or "name:index")
// depend on, with each ReadVariableOp of a VarHandleOp replaced by a Const
// of the same name holding values[the VarHandleOp's name]. Devices are
// cleared (the frozen graph runs anywhere). Errors: an output that is not
// in the graph, a variable read with no value in `values` (NotFound naming
// both), a value whose dtype is not the variable's, or a needed node that
// still uses a variable other than by reading it (InvalidArgument naming
// the node: freezing would change what it computes).
absl::StatusOr<tensorflow::GraphDef> FreezeGraph(
    const tensorflow::GraphDef& graph, const std::vector<std::string>& outputs,
    const absl::flat_hash_map<std::string, Tensor>& values);

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_FREEZE_GRAPH_H_
