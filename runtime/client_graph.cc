#include "runtime/client_graph.h"

#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "graph/status.h"

namespace graphrun {

std::string ClientGraphKey(const std::vector<std::string>& feeds,
                           const std::vector<std::string>& fetches,
                           const std::vector<std::string>& targets) {
  std::string key;
  for (const auto* list : {&feeds, &fetches, &targets}) {
    absl::StrAppend(&key, list->size(), ":");
    for (const std::string& name : *list) absl::StrAppend(&key, name.size(), ":", name);
  }
  return key;
}

void PruneGraph(Graph* graph, const std::vector<Node*>& keep) {
  std::vector<bool> needed(graph->num_node_ids(), false);
  std::deque<Node*> queue;
  for (Node* n : keep) {
    if (!needed[n->id()]) {
      needed[n->id()] = true;
      queue.push_back(n);
    }
  }
  while (!queue.empty()) {
    Node* n = queue.front();
    queue.pop_front();
    for (const Edge* e : n->in_edges()) {
      if (!needed[e->src->id()]) {
        needed[e->src->id()] = true;
        queue.push_back(e->src);
      }
    }
  }
  for (Node* n : graph->nodes()) {
    if (!needed[n->id()]) graph->RemoveNode(n);
  }
}

namespace {

absl::StatusOr<std::pair<Node*, int>> Resolve(const Graph& g, const std::string& name,
                                              absl::string_view what) {
  auto id = ParseTensorName(name);
  if (!id.ok() || id->IsControl()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", name, "' is not a valid tensor name"));
  }
  Node* n = g.FindNode(id->node);
  if (n == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", name, "': node '", id->node, "' is not in the graph"));
  }
  if (id->index >= n->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "': node '", id->node,
                                                   "' (op ", n->op(), ") has ", n->num_outputs(),
                                                   " outputs"));
  }
  return std::make_pair(n, id->index);
}

std::string SafeName(const std::string& s) {
  return absl::StrReplaceAll(s, {{":", "_"}, {"/", "_"}});
}

}  // namespace

absl::StatusOr<ClientGraph> BuildClientGraph(const tensorflow::GraphDef& def,
                                             const OpRegistry& registry,
                                             const ClientGraphSpec& spec) {
  ImportOptions opts;
  opts.infer_shapes = false;  // validated when the session got the graph
  GR_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, GraphFromGraphDef(def, registry, opts));
  ClientGraph out;
  std::vector<Node*> keep;
  absl::flat_hash_map<std::string, Node*> fed;  // "node:i" -> _Arg
  // Nodes that take a fed tensor by reference (an Assign of a fed
  // variable): an error only if the step runs them, as in TensorFlow,
  // where feeding a variable's value to a step that reads it is fine.
  std::vector<std::pair<std::string, std::string>> ref_takers;  // feed, node
  for (int k = 0; k < static_cast<int>(spec.feeds.size()); ++k) {
    GR_ASSIGN_OR_RETURN(auto src, Resolve(*g, spec.feeds[k], "feed"));
    std::string key = absl::StrCat(src.first->name(), ":", src.second);
    if (fed.contains(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", spec.feeds[k], "': tensor fed twice"));
    }
    DataType t = BaseType(src.first->output_type(src.second));
    tensorflow::NodeDef nd;
    nd.set_name(g->NewName(absl::StrCat("_arg_", SafeName(key))));
    nd.set_op("_Arg");
    nd.set_device(spec.client_device);
    (*nd.mutable_attr())["T"] = MakeAttr(t);
    (*nd.mutable_attr())["index"] = MakeAttr(int64_t{k});
    GR_ASSIGN_OR_RETURN(Node * arg, g->AddNode(nd));
    std::vector<const Edge*> redirect;
    for (const Edge* e : src.first->out_edges()) {
      // As TensorFlow does, a fed Placeholder also hands its outgoing
      // control edges to the feed, so nothing still waits on it.
      bool placeholder_control =
          e->IsControlEdge() &&
          (src.first->op() == "Placeholder" || src.first->op() == "PlaceholderWithDefault");
      if (e->src_output == src.second || placeholder_control) redirect.push_back(e);
    }
    for (const Edge* e : redirect) {
      Node* dst = e->dst;
      int slot = e->dst_input;
      g->RemoveEdge(e);
      if (slot == kControlSlot) {
        g->AddControlEdge(arg, dst);
        continue;
      }
      if (IsRefType(dst->input_type(slot))) {
        ref_takers.emplace_back(spec.feeds[k], dst->name());
        continue;
      }
      g->AddEdge(arg, 0, dst, slot);
    }
    fed[key] = arg;
    out.feed_types.push_back(t);
  }
  for (int k = 0; k < static_cast<int>(spec.fetches.size()); ++k) {
    GR_ASSIGN_OR_RETURN(auto src, Resolve(*g, spec.fetches[k], "fetch"));
    std::string key = absl::StrCat(src.first->name(), ":", src.second);
    Node* from = src.first;
    int slot = src.second;
    auto it = fed.find(key);
    if (it != fed.end()) {
      from = it->second;
      slot = 0;
    }
    DataType t = BaseType(from->output_type(slot));
    tensorflow::NodeDef nd;
    nd.set_name(g->NewName(absl::StrCat("_retval_", SafeName(key))));
    nd.set_op("_Retval");
    nd.set_device(spec.client_device);
    (*nd.mutable_attr())["T"] = MakeAttr(t);
    (*nd.mutable_attr())["index"] = MakeAttr(int64_t{k});
    GR_ASSIGN_OR_RETURN(Node * ret, g->AddNode(nd));
    g->AddEdge(from, slot, ret, 0);
    keep.push_back(ret);
    out.fetch_types.push_back(t);
  }
  for (const std::string& t : spec.targets) {
    std::string name = t;
    if (!name.empty() && name[0] == '^') name = name.substr(1);
    Node* n = g->FindNode(name);
    if (n == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("target '", t, "' is not a node of the graph"));
    }
    keep.push_back(n);
  }
  PruneGraph(g.get(), keep);
  for (const auto& [feed, node] : ref_takers) {
    if (g->FindNode(node) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", feed, "': node '", node,
                       "' needs a reference to it and cannot take a fed value"));
    }
  }
  out.graph = std::move(g);
  return out;
}

}  // namespace graphrun
