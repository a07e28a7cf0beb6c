#include "tools/model_graph.h"

#include <vector>

#include "graph/function_lowering.h"
#include "graph/graph.h"
#include "graph/ops/all_ops.h"
#include "graph/status.h"

namespace graphrun {
namespace tools {

absl::StatusOr<tensorflow::GraphDef> ReadModelGraph(
    const std::string& path, std::ostream& warnings,
    absl::flat_hash_map<std::string, std::string>* origin) {
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef def, ReadGraphDefFile(path));
  std::vector<std::string> lines;
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef out,
                      CanonicalizeGraphDef(def, DefaultOpRegistry(), &lines, {}, origin));
  for (const std::string& l : lines) warnings << "warning: " << l << "\n";
  return out;
}

}  // namespace tools
}  // namespace graphrun
