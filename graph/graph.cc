#include "graph/graph.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "graph/function_lowering.h"
#include "graph/status.h"
#include "util/file_read.h"

namespace graphrun {

const Edge* Node::input_edge(int i) const {
  for (const Edge* e : in_edges_) {
    if (e->dst_input == i) return e;
  }
  return nullptr;
}

Graph::Graph(const OpRegistry* registry) : registry_(registry) {
  versions_.set_producer(1395);  // within TensorFlow 2.x GraphDef range
}

absl::StatusOr<Node*> Graph::AddNode(tensorflow::NodeDef def) {
  if (def.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a node of op ", def.op(), " has an empty name"));
  }
  if (by_name_.contains(def.name())) {
    return absl::InvalidArgumentError(absl::StrCat("node '", def.name(), "': duplicate node name"));
  }
  const OpRegistrationData* reg = registry_->LookUp(def.op());
  if (reg == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", def.name(), "': op type not registered '", def.op(), "'"));
  }
  AddDefaultsToNodeDef(reg->op_def, &def);
  GR_RETURN_IF_ERROR(ValidateNodeDef(def, reg->op_def));
  auto node = std::unique_ptr<Node>(new Node());
  GR_RETURN_IF_ERROR(
      InOutTypesForNode(def, reg->op_def, &node->input_types_, &node->output_types_));
  for (DataType t : node->output_types_) {
    if (!DataTypeSupported(t) && BaseType(t) != DT_VARIANT) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", def.name(), "': unsupported type ", DataTypeString(t)));
    }
  }
  def.clear_input();
  node->id_ = static_cast<int>(nodes_.size());
  node->reg_ = reg;
  node->def_ = std::move(def);
  node->output_shapes_.resize(node->output_types_.size());
  Node* n = node.get();
  by_name_[n->name()] = n;
  nodes_.push_back(std::move(node));
  ++num_nodes_;
  return n;
}

const Edge* Graph::AddEdge(Node* src, int x, Node* dst, int y) {
  auto e = std::make_unique<Edge>();
  e->src = src;
  e->src_output = x;
  e->dst = dst;
  e->dst_input = y;
  e->id = static_cast<int>(edges_.size());
  const Edge* p = e.get();
  src->out_edges_.push_back(p);
  dst->in_edges_.push_back(p);
  edges_.push_back(std::move(e));
  return p;
}

const Edge* Graph::AddControlEdge(Node* src, Node* dst) {
  for (const Edge* e : dst->in_edges_) {
    if (e->IsControlEdge() && e->src == src) return e;
  }
  return AddEdge(src, kControlSlot, dst, kControlSlot);
}

void Graph::RemoveEdge(const Edge* e) {
  auto erase = [e](std::vector<const Edge*>& v) {
    v.erase(std::remove(v.begin(), v.end(), e), v.end());
  };
  erase(e->src->out_edges_);
  erase(e->dst->in_edges_);
  edges_[e->id].reset();
}

void Graph::RemoveNode(Node* n) {
  while (!n->in_edges_.empty()) RemoveEdge(n->in_edges_.back());
  while (!n->out_edges_.empty()) RemoveEdge(n->out_edges_.back());
  by_name_.erase(n->name());
  nodes_[n->id()].reset();
  --num_nodes_;
}

Node* Graph::FindNode(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(num_nodes_);
  for (const auto& n : nodes_) {
    if (n) out.push_back(n.get());
  }
  return out;
}

std::string Graph::NewName(absl::string_view prefix) {
  if (!by_name_.contains(prefix)) return std::string(prefix);
  while (true) {
    std::string name = absl::StrCat(prefix, "_", ++name_counter_);
    if (!by_name_.contains(name)) return name;
  }
}

void Graph::ToGraphDef(tensorflow::GraphDef* out, bool use_assigned) const {
  out->Clear();
  *out->mutable_versions() = versions_;
  if (library_.function_size() || library_.gradient_size()) {
    *out->mutable_library() = library_;
  }
  for (const auto& up : nodes_) {
    if (!up) continue;
    const Node* n = up.get();
    tensorflow::NodeDef* d = out->add_node();
    *d = n->def_;
    if (use_assigned && !n->assigned_device_.empty()) {
      d->set_device(n->assigned_device_);
    }
    std::vector<const Edge*> data(n->num_inputs(), nullptr);
    std::vector<std::string> control;
    for (const Edge* e : n->in_edges_) {
      if (e->IsControlEdge()) {
        control.push_back(absl::StrCat("^", e->src->name()));
      } else if (e->dst_input < static_cast<int>(data.size())) {
        data[e->dst_input] = e;
      }
    }
    for (const Edge* e : data) {
      if (e == nullptr) continue;
      d->add_input(e->src_output == 0 ? e->src->name()
                                      : absl::StrCat(e->src->name(), ":", e->src_output));
    }
    for (auto& c : control) d->add_input(std::move(c));
  }
}

absl::StatusOr<std::vector<Node*>> TopologicalOrder(const Graph& graph) {
  std::vector<int> pending(graph.num_node_ids(), 0);
  std::deque<Node*> ready;
  std::vector<Node*> order;
  auto counts = [](const Edge* e) { return !e->src->IsNextIteration(); };
  for (Node* n : graph.nodes()) {
    for (const Edge* e : n->in_edges()) pending[n->id()] += counts(e);
    if (pending[n->id()] == 0) ready.push_back(n);
  }
  while (!ready.empty()) {
    Node* n = ready.front();
    ready.pop_front();
    order.push_back(n);
    for (const Edge* e : n->out_edges()) {
      if (counts(e) && --pending[e->dst->id()] == 0) ready.push_back(e->dst);
    }
  }
  if (static_cast<int>(order.size()) != graph.num_nodes()) {
    for (Node* n : graph.nodes()) {
      if (pending[n->id()] > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", n->name(), "' (op ", n->op(),
                         ") is on a cycle that is not a while loop (no NextIteration back edge)"));
      }
    }
  }
  return order;
}

absl::Status InferShapes(Graph* graph) {
  GR_ASSIGN_OR_RETURN(std::vector<Node*> order, TopologicalOrder(*graph));
  absl::flat_hash_map<int, Tensor> constants;
  for (Node* n : order) {
    std::vector<PartialShape> in(n->num_inputs());
    std::vector<const Tensor*> tensors(n->num_inputs(), nullptr);
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() || e->src->IsNextIteration()) continue;
      in[e->dst_input] = e->src->output_shape(e->src_output);
      if (e->src->op() == "Const") {
        auto it = constants.find(e->src->id());
        if (it != constants.end()) tensors[e->dst_input] = &it->second;
      }
    }
    if (n->op() == "Const") {
      Tensor t;
      if (GetAttr(NodeAttrs(n->def()), "value", &t).ok()) {
        constants[n->id()] = t;
      }
    }
    const ShapeFn& fn = n->op_reg().shape_fn;
    if (!fn) continue;
    ShapeContext ctx(n->def(), n->op_def(), std::move(in), std::move(tensors), n->num_outputs());
    GR_RETURN_IF_ERROR(fn(ctx));
    std::vector<PartialShape> out = ctx.TakeOutputs();
    for (int i = 0; i < n->num_outputs(); ++i) n->set_output_shape(i, out[i]);
  }
  return absl::OkStatus();
}

bool IsValidNodeName(absl::string_view name) {
  auto letter_digit_dot = [](char c) { return absl::ascii_isalnum(c) || c == '.'; };
  auto body = [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/';
  };
  if (name.empty() || !(letter_digit_dot(name[0]) || name[0] == '_')) return false;
  size_t i = 1;
  while (true) {
    while (i < name.size() && body(name[i])) ++i;
    if (i == name.size()) return true;
    // Another piece: '>' and a letter, digit or dot.
    if (name[i] != '>' || i + 1 == name.size() || !letter_digit_dot(name[i + 1])) return false;
    i += 2;
  }
}

namespace {

absl::Status CheckNodeName(const tensorflow::NodeDef& n, absl::string_view where) {
  if (n.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a node", where, " (op ", n.op(), ") has an empty name"));
  }
  if (IsValidNodeName(n.name())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "node '", absl::CHexEscape(n.name()), "'", where, " (op ", absl::CHexEscape(n.op()),
      "): the name has characters TensorFlow does not allow in node names (its rule: "
      "[A-Za-z0-9._][A-Za-z0-9_./-]*, then pieces '>'[A-Za-z0-9.][A-Za-z0-9_./-]*)"));
}

}  // namespace

absl::Status ValidateNodeNames(const tensorflow::GraphDef& def) {
  for (const auto& n : def.node()) GR_RETURN_IF_ERROR(CheckNodeName(n, ""));
  // Function bodies too: those kept as call frames are not inlined, and
  // would otherwise escape the rule.
  for (const auto& f : def.library().function()) {
    const std::string where =
        absl::StrCat(" of function '", absl::CHexEscape(f.signature().name()), "'");
    for (const auto& n : f.node_def()) GR_RETURN_IF_ERROR(CheckNodeName(n, where));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Graph>> GraphFromGraphDef(const tensorflow::GraphDef& def,
                                                         const OpRegistry& registry,
                                                         const ImportOptions& options) {
  if (NeedsLowering(def)) {
    GR_ASSIGN_OR_RETURN(LoweredGraph lowered, LowerFunctionCalls(def, registry));
    auto graph = GraphFromGraphDef(lowered.graph_def, registry, options);
    if (!graph.ok()) return AnnotateLoweringError(graph.status(), lowered.origin);
    return graph;
  }
  auto graph = std::make_unique<Graph>(&registry);
  *graph->mutable_versions() = def.versions();
  // What call frames instantiate (lowering keeps it only for them).
  *graph->mutable_library() = def.library();
  std::vector<Node*> nodes;
  nodes.reserve(def.node_size());
  for (const auto& nd : def.node()) {
    GR_ASSIGN_OR_RETURN(Node * n, graph->AddNode(nd));
    nodes.push_back(n);
  }
  for (int k = 0; k < def.node_size(); ++k) {
    const auto& nd = def.node(k);
    Node* dst = nodes[k];
    int data_index = 0;
    bool seen_control = false;
    for (const std::string& in : nd.input()) {
      auto id = ParseTensorName(in);
      if (!id.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", nd.name(), "': ", id.status().message()));
      }
      Node* src = graph->FindNode(id->node);
      if (src == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", nd.name(), "': input '", in, "' names an unknown node"));
      }
      if (id->IsControl()) {
        seen_control = true;
        graph->AddControlEdge(src, dst);
        continue;
      }
      if (seen_control) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", nd.name(), "': data input '", in, "' after a control input"));
      }
      if (id->index >= src->num_outputs()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", nd.name(), "': input '", in, "' asks for output ", id->index, " but '",
            src->name(), "' (op ", src->op(), ") has ", src->num_outputs(), " outputs"));
      }
      if (data_index >= dst->num_inputs()) {
        return absl::InvalidArgumentError(absl::StrCat("node '", nd.name(), "' (op ", nd.op(),
                                                       "): expects ", dst->num_inputs(),
                                                       " inputs but has more"));
      }
      DataType have = src->output_type(id->index);
      DataType want = dst->input_type(data_index);
      if (!TypesCompatible(have, want)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", nd.name(), "' (op ", nd.op(), "): input ", data_index, " expects ",
            DataTypeString(want), " but '", in, "' is ", DataTypeString(have)));
      }
      graph->AddEdge(src, id->index, dst, data_index);
      ++data_index;
    }
    if (data_index != dst->num_inputs()) {
      return absl::InvalidArgumentError(absl::StrCat("node '", nd.name(), "' (op ", nd.op(),
                                                     "): expects ", dst->num_inputs(),
                                                     " inputs but has ", data_index));
    }
  }
  GR_RETURN_IF_ERROR(TopologicalOrder(*graph).status());
  if (options.infer_shapes) GR_RETURN_IF_ERROR(InferShapes(graph.get()));
  return graph;
}

absl::Status ParseTextProto(absl::string_view text, google::protobuf::Message* msg) {
  // The parser's errors, kept instead of logged (a CLI prints one line).
  struct FirstError : google::protobuf::io::ErrorCollector {
    std::string first;
    void AddError(int line, int column, const std::string& message) override {
      if (first.empty())
        absl::StrAppend(&first, "line ", line + 1, ", column ", column + 1, ": ", message);
    }
    void AddWarning(int, int, const std::string&) override {}
  } errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  // Nesting as deep as the binary parser allows (protobuf's default of 100):
  // unbounded, a 130 KB file of nested messages overflowed the stack.
  parser.SetRecursionLimit(kMaxProtoNesting);
  google::protobuf::io::ArrayInputStream in(text.data(), static_cast<int>(text.size()));
  if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError("text proto is larger than 2 GiB");
  }
  if (!parser.Parse(&in, msg)) {
    return absl::InvalidArgumentError(errors.first.empty() ? "not a text protobuf" : errors.first);
  }
  return absl::OkStatus();
}

absl::StatusOr<tensorflow::GraphDef> ParseGraphDef(absl::string_view bytes, bool text_first) {
  if (bytes.size() > (size_t{1} << 31) - 1) {
    return absl::InvalidArgumentError("GraphDef is larger than 2 GiB");
  }
  tensorflow::GraphDef def;
  auto try_binary = [&]() {
    def.Clear();
    return def.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  };
  absl::Status text_error;
  auto try_text = [&]() {
    def.Clear();
    text_error = ParseTextProto(bytes, &def);
    return text_error.ok();
  };
  if (text_first ? (try_text() || try_binary()) : (try_binary() || try_text())) {
    return def;
  }
  if (text_first) {
    return absl::InvalidArgumentError(absl::StrCat("could not parse GraphDef as text protobuf (",
                                                   text_error.message(), ") or binary"));
  }
  return absl::InvalidArgumentError("could not parse GraphDef as binary or text protobuf");
}

absl::StatusOr<tensorflow::GraphDef> ReadGraphDefFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a directory, not a GraphDef"));
  }
  // At most 2 GiB (or an endless file, such as /dev/zero, read so far).
  auto read = ReadFileCapped(path, (uint64_t{1} << 31) - 1);
  if (absl::IsNotFound(read.status())) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  }
  if (absl::IsResourceExhausted(read.status())) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': GraphDef is larger than 2 GiB"));
  }
  if (!read.ok()) return read.status();
  const std::string bytes = *std::move(read);
  bool text = absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".txt");
  auto def = ParseGraphDef(bytes, text);
  if (!def.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': ", def.status().message()));
  }
  return def;
}

}  // namespace graphrun
