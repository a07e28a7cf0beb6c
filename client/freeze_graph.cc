#include "client/freeze_graph.h"

#include <deque>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "graph/node_def_util.h"
#include "graph/status.h"
#include "graph/types.h"

namespace graphrun {
namespace client {
namespace {

// The node an input string ("^ctrl", "name:1", "name") names.
absl::StatusOr<std::string> InputNode(absl::string_view input) {
  GR_ASSIGN_OR_RETURN(TensorId id, ParseTensorName(input));
  return std::move(id.node);
}

}  // namespace

absl::StatusOr<tensorflow::GraphDef> FreezeGraph(
    const tensorflow::GraphDef& graph, const std::vector<std::string>& outputs,
    const absl::flat_hash_map<std::string, Tensor>& values) {
  absl::flat_hash_map<std::string, const tensorflow::NodeDef*> by_name;
  for (const auto& n : graph.node()) by_name[n.name()] = &n;

  // Backwards from the outputs; a variable read stops the walk (its
  // VarHandleOp and initializer are not needed once it is a constant).
  absl::flat_hash_set<std::string> needed;
  std::deque<std::string> queue;
  for (const std::string& o : outputs) {
    GR_ASSIGN_OR_RETURN(std::string name, InputNode(o));
    if (!by_name.contains(name)) {
      return absl::NotFoundError(absl::StrCat("freeze: output '", o, "' is not in the graph"));
    }
    if (needed.insert(name).second) queue.push_back(name);
  }
  absl::flat_hash_map<std::string, std::string> read_of;  // ReadVariableOp -> VarHandleOp
  while (!queue.empty()) {
    const tensorflow::NodeDef& n = *by_name[queue.front()];
    queue.pop_front();
    if (n.op() == "ReadVariableOp" && n.input_size() >= 1) {
      GR_ASSIGN_OR_RETURN(std::string var, InputNode(n.input(0)));
      auto it = by_name.find(var);
      if (it != by_name.end() && it->second->op() == "VarHandleOp") {
        read_of[n.name()] = var;
        continue;
      }
    }
    for (const std::string& in : n.input()) {
      GR_ASSIGN_OR_RETURN(std::string src, InputNode(in));
      auto it = by_name.find(src);
      if (it == by_name.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("freeze: node '", n.name(), "' has input '", in, "', not in the graph"));
      }
      // An ordering edge on a variable's handle orders nothing once the
      // variable is a constant: dropped below.
      if (absl::StartsWith(in, "^") && it->second->op() == "VarHandleOp") continue;
      if (it->second->op() == "VarHandleOp") {
        return absl::InvalidArgumentError(
            absl::StrCat("freeze: node '", n.name(), "' (op ", n.op(), ") uses variable '", src,
                         "' other than by ReadVariableOp; freezing would change what it computes"));
      }
      if (needed.insert(src).second) queue.push_back(src);
    }
  }

  tensorflow::GraphDef out;
  *out.mutable_versions() = graph.versions();
  *out.mutable_library() = graph.library();
  for (const auto& n : graph.node()) {
    if (!needed.contains(n.name())) continue;
    tensorflow::NodeDef* copy = out.add_node();
    auto read = read_of.find(n.name());
    if (read == read_of.end()) {
      *copy = n;
      copy->clear_device();
      copy->clear_input();
      for (const std::string& in : n.input()) {
        if (!needed.contains(*InputNode(in))) continue;  // a ^variable (parsed above)
        copy->add_input(in);
      }
      continue;
    }
    auto value = values.find(read->second);
    if (value == values.end()) {
      return absl::NotFoundError(absl::StrCat("freeze: no value for variable '", read->second,
                                              "' (read by '", n.name(), "')"));
    }
    auto dtype = n.attr().find("dtype");
    if (dtype != n.attr().end() && dtype->second.type() != value->second.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "freeze: variable '", read->second, "' holds ", DataTypeString(dtype->second.type()),
          " but its value is ", DataTypeString(value->second.dtype())));
    }
    copy->set_name(n.name());
    copy->set_op("Const");
    (*copy->mutable_attr())["dtype"].set_type(value->second.dtype());
    value->second.AsProtoTensorContent((*copy->mutable_attr())["value"].mutable_tensor());
  }
  return out;
}

}  // namespace client
}  // namespace graphrun
