// The graph a user hands a tool (`graphrun run GRAPH`, placeviz): read from
// a GraphDef file, binary or text, and canonicalized as sessions see it —
// function calls and functional control flow lowered, undeclared attrs
// dropped (graph/function_lowering.h).
#ifndef GRAPHRUN_TOOLS_MODEL_GRAPH_H_
#define GRAPHRUN_TOOLS_MODEL_GRAPH_H_

#include <ostream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/proto/graph.pb.h"

namespace graphrun {
namespace tools {

// Reads and canonicalizes the GraphDef at `path`; each warning (a dropped
// attr) goes to `warnings` as one line "warning: ...". Errors name the path
// or the node (and the function a node came from). `origin`, when given,
// receives where each inlined node came from, so that errors found later
// (placement, a step) name its function too (AnnotateLoweringError).
absl::StatusOr<tensorflow::GraphDef> ReadModelGraph(
    const std::string& path, std::ostream& warnings,
    absl::flat_hash_map<std::string, std::string>* origin = nullptr);

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_MODEL_GRAPH_H_
