#include "client/graph_import.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/function_lowering.h"
#include "graph/graph.h"
#include "graph/node_def_util.h"
#include "graph/status.h"

namespace graphrun {
namespace client {

absl::StatusOr<Operation> ImportedGraph::Op(absl::string_view name) const {
  auto it = ops_.find(name);
  if (it == ops_.end()) {
    return absl::NotFoundError(absl::StrCat("the imported graph has no node '", name, "'"));
  }
  return it->second;
}

absl::StatusOr<Output> ImportedGraph::Tensor(absl::string_view name) const {
  GR_ASSIGN_OR_RETURN(TensorId id, ParseTensorName(name));
  if (id.IsControl()) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' names no tensor"));
  }
  GR_ASSIGN_OR_RETURN(Operation op, Op(id.node));
  if (id.index >= op.num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", id.node, "' (op ", op.node()->op(),
                                                   ") has ", op.num_outputs(),
                                                   " outputs; there is no '", name, "'"));
  }
  return Output(op, id.index);
}

absl::StatusOr<ImportedGraph> ImportGraphDef(const Scope& scope, const tensorflow::GraphDef& def,
                                             absl::string_view prefix) {
  return ImportGraphDef(scope, def, prefix, {});
}

absl::StatusOr<ImportedGraph> ImportGraphDef(
    const Scope& scope, const tensorflow::GraphDef& def, absl::string_view prefix,
    const absl::flat_hash_map<std::string, Output>& input_map) {
  if (!scope.ok()) return scope.status();
  Graph* g = scope.graph();
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef canonical,
                      CanonicalizeGraphDefForSession(def, g->op_registry()));
  GR_ASSIGN_OR_RETURN(std::unique_ptr<Graph> src, GraphFromGraphDef(canonical, g->op_registry()));

  // input_map, by (source node id, output).
  absl::flat_hash_map<std::pair<int, int>, Output> mapped;
  for (const auto& entry : input_map) {
    const std::string& key = entry.first;
    const Output& value = entry.second;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("ImportGraphDef: input_map key '", key, "': ", why));
    };
    absl::StatusOr<TensorId> id = ParseTensorName(key);
    if (!id.ok() || id->IsControl()) return bad("not a tensor name");
    const Node* n = src->FindNode(std::string(id->node));
    if (n == nullptr) return bad("the graph has no such node");
    if (id->index >= n->num_outputs()) {
      return bad(absl::StrCat("node '", n->name(), "' has ", n->num_outputs(), " outputs"));
    }
    if (value.node() == nullptr) return bad("mapped to a null Output");
    if (g->FindNodeId(value.node()->id()) != value.node()) {
      return bad(absl::StrCat("'", value.node()->name(), "' is not in the scope's graph"));
    }
    if (BaseType(value.type()) != BaseType(n->output_type(id->index))) {
      return bad(absl::StrCat("the graph's tensor is ", DataTypeString(n->output_type(id->index)),
                              " but '", value.node()->name(), "' is ",
                              DataTypeString(value.type())));
    }
    if (!mapped.emplace(std::make_pair(n->id(), id->index), value).second) {
      return bad("another key names the same tensor");
    }
  }

  const std::string base =
      prefix.empty() ? scope.name_prefix() : scope.NewSubScope(prefix).name_prefix();
  auto rename = [&](absl::string_view n) {
    return base.empty() ? std::string(n) : absl::StrCat(base, "/", n);
  };
  const std::vector<Node*> nodes = src->nodes();
  const Scope names = scope.WithNameScope("");
  for (Node* n : nodes) {
    const std::string full = rename(n->name());
    if (g->FindNode(full) != nullptr || names.GetUniqueNameForOp(full) != full) {
      return absl::InvalidArgumentError(
          absl::StrCat("ImportGraphDef: node '", n->name(), "' would be named '", full,
                       "', which the graph already uses (import under another prefix)"));
    }
  }

  // Call frames left by lowering instantiate from the library.
  for (const tensorflow::FunctionDef& f : canonical.library().function()) {
    const std::string& fname = f.signature().name();
    const tensorflow::FunctionDef* have = nullptr;
    for (const tensorflow::FunctionDef& h : g->library().function()) {
      if (h.signature().name() == fname) have = &h;
    }
    if (have != nullptr && have->SerializeAsString() != f.SerializeAsString()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ImportGraphDef: function '", fname, "' is already in the graph's library, differently"));
    }
  }
  for (const tensorflow::FunctionDef& f : canonical.library().function()) {
    bool have = false;
    for (const tensorflow::FunctionDef& h : g->library().function()) {
      have |= h.signature().name() == f.signature().name();
    }
    if (!have) *g->mutable_library()->add_function() = f;
  }

  ImportedGraph out;
  std::vector<Node*> copy(static_cast<size_t>(src->num_node_ids()), nullptr);
  for (Node* n : nodes) {
    tensorflow::NodeDef d = n->def();
    d.set_name(rename(n->name()));
    d.clear_input();
    if (n->IsEnter()) {
      // Loop frames are named like nodes: two imports must not share one.
      auto it = d.mutable_attr()->find("frame_name");
      if (it != d.mutable_attr()->end()) it->second.set_s(rename(it->second.s()));
    }
    if (auto it = d.mutable_attr()->find("_class"); it != d.mutable_attr()->end()) {
      for (std::string& loc : *it->second.mutable_list()->mutable_s()) {
        if (absl::StartsWith(loc, "loc:@")) loc = absl::StrCat("loc:@", rename(loc.substr(5)));
      }
    }
    auto m = g->AddNode(std::move(d));
    if (!m.ok()) {
      scope.UpdateStatus(m.status());
      return m.status();
    }
    for (int i = 0; i < n->num_outputs(); ++i) (*m)->set_output_shape(i, n->output_shape(i));
    copy[n->id()] = *m;
    out.ops_[n->name()] = Operation(*m);
  }
  for (Node* n : nodes) {
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) {
        g->AddControlEdge(copy[e->src->id()], copy[n->id()]);
      } else if (auto m = mapped.find({e->src->id(), e->src_output}); m != mapped.end()) {
        g->AddEdge(m->second.node(), m->second.index(), copy[n->id()], e->dst_input);
      } else {
        g->AddEdge(copy[e->src->id()], e->src_output, copy[n->id()], e->dst_input);
      }
    }
  }
  return out;
}

}  // namespace client
}  // namespace graphrun
