// The in-memory dataflow graph: nodes (one NodeDef each, with the input and
// output types its OpDef gives it and the shapes inference found) joined by
// data edges (src:output -> dst:input) and control edges (slot
// kControlSlot). Cycles exist only through NextIteration -> Merge back edges
// of v1 while loops; everything else is a DAG (checked by import).
//
// A Graph owns its nodes and edges; pointers stay valid until the node or
// edge is removed or the graph dies. Not thread-safe for mutation; concurrent
// reads of a graph nobody mutates are safe.
#ifndef GRAPHRUN_GRAPH_GRAPH_H_
#define GRAPHRUN_GRAPH_GRAPH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/node_def_util.h"
#include "graph/op_registry.h"
#include "graph/proto/graph.pb.h"

namespace graphrun {

class Node;

struct Edge {
  Node* src;
  int src_output;  // kControlSlot for control edges
  Node* dst;
  int dst_input;  // kControlSlot for control edges
  int id;
  bool IsControlEdge() const { return src_output == kControlSlot; }
};

class Node {
 public:
  int id() const { return id_; }
  const std::string& name() const { return def_.name(); }
  const std::string& op() const { return def_.op(); }
  const tensorflow::NodeDef& def() const { return def_; }
  // Attribute edits only; changing name, op or inputs here is not allowed.
  tensorflow::NodeDef* mutable_def() { return &def_; }
  const tensorflow::OpDef& op_def() const { return reg_->op_def; }
  const OpRegistrationData& op_reg() const { return *reg_; }

  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  const DataTypeVector& input_types() const { return input_types_; }
  const DataTypeVector& output_types() const { return output_types_; }

  // The device the NodeDef asks for (may be partial or empty).
  const std::string& requested_device() const { return def_.device(); }
  // The full device name the placer chose ("" before placement).
  const std::string& assigned_device() const { return assigned_device_; }
  void set_assigned_device(std::string d) { assigned_device_ = std::move(d); }

  const std::vector<const Edge*>& in_edges() const { return in_edges_; }
  const std::vector<const Edge*>& out_edges() const { return out_edges_; }
  // The data edge feeding input `i`; nullptr if not connected yet.
  const Edge* input_edge(int i) const;

  // Output shapes found by shape inference (unknown if not run).
  const PartialShape& output_shape(int i) const { return output_shapes_[i]; }
  void set_output_shape(int i, PartialShape s) { output_shapes_[i] = std::move(s); }

  bool IsSwitch() const { return op() == "Switch" || op() == "RefSwitch"; }
  bool IsMerge() const { return op() == "Merge" || op() == "RefMerge"; }
  bool IsEnter() const { return op() == "Enter" || op() == "RefEnter"; }
  bool IsExit() const { return op() == "Exit" || op() == "RefExit"; }
  bool IsNextIteration() const { return op() == "NextIteration" || op() == "RefNextIteration"; }
  bool IsLoopCond() const { return op() == "LoopCond"; }
  bool IsControlFlow() const {
    return IsSwitch() || IsMerge() || IsEnter() || IsExit() || IsNextIteration() || IsLoopCond();
  }
  bool IsSend() const { return op() == "_Send" || op() == "_HostSend"; }
  bool IsRecv() const { return op() == "_Recv" || op() == "_HostRecv"; }
  bool IsStateful() const { return op_def().is_stateful(); }

 private:
  friend class Graph;
  Node() = default;
  int id_ = -1;
  tensorflow::NodeDef def_;
  const OpRegistrationData* reg_ = nullptr;
  DataTypeVector input_types_, output_types_;
  std::vector<PartialShape> output_shapes_;
  std::string assigned_device_;
  std::vector<const Edge*> in_edges_, out_edges_;
};

class Graph {
 public:
  explicit Graph(const OpRegistry* registry);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const OpRegistry& op_registry() const { return *registry_; }

  // Adds a node from `def` (its "input" field is ignored: edges are added
  // separately). Fills attr defaults, validates attrs against the OpDef and
  // computes input/output types. InvalidArgument naming the node for an
  // unknown op, a bad attr or a duplicate name.
  absl::StatusOr<Node*> AddNode(tensorflow::NodeDef def);
  // REQUIRES: indices in range and types compatible (import checks these).
  const Edge* AddEdge(Node* src, int src_output, Node* dst, int dst_input);
  const Edge* AddControlEdge(Node* src, Node* dst);
  void RemoveEdge(const Edge* e);
  // Removes the node and all its edges.
  void RemoveNode(Node* n);

  Node* FindNode(absl::string_view name) const;
  // nullptr for removed ids.
  Node* FindNodeId(int id) const { return nodes_[id].get(); }
  int num_node_ids() const { return static_cast<int>(nodes_.size()); }
  int num_nodes() const { return num_nodes_; }
  int num_edge_ids() const { return static_cast<int>(edges_.size()); }
  // Live nodes in id order.
  std::vector<Node*> nodes() const;

  // Exports: NodeDefs with inputs rebuilt from edges (data inputs in slot
  // order, then control inputs), devices as requested (or assigned when
  // `use_assigned_devices`), versions and library preserved.
  void ToGraphDef(tensorflow::GraphDef* out, bool use_assigned_devices = false) const;

  tensorflow::VersionDef* mutable_versions() { return &versions_; }
  const tensorflow::VersionDef& versions() const { return versions_; }
  tensorflow::FunctionDefLibrary* mutable_library() { return &library_; }
  const tensorflow::FunctionDefLibrary& library() const { return library_; }

  // A name not used by any node: `prefix`, or `prefix_N`.
  std::string NewName(absl::string_view prefix);

 private:
  const OpRegistry* registry_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Edge>> edges_;
  absl::flat_hash_map<std::string, Node*> by_name_;
  int num_nodes_ = 0;
  int name_counter_ = 0;
  tensorflow::VersionDef versions_;
  tensorflow::FunctionDefLibrary library_;
};

// Options for GraphFromGraphDef.
struct ImportOptions {
  // Run shape functions and fail on inconsistent shapes.
  bool infer_shapes = true;
};

// Builds and validates a Graph. Errors are InvalidArgument naming the node:
// unknown op, missing or bad attr, duplicate name, input naming a missing
// node or output, wrong number of inputs, input type mismatch, a cycle
// outside while-loop frames, inconsistent shapes. A graph with a function
// library or functional ops is lowered first (graph/function_lowering.h).
absl::StatusOr<std::unique_ptr<Graph>> GraphFromGraphDef(const tensorflow::GraphDef& def,
                                                         const OpRegistry& registry,
                                                         const ImportOptions& options = {});

// TensorFlow's rule for the node names of a graph a session runs (its
// GraphConstructor, internal ops allowed): [A-Za-z0-9._][A-Za-z0-9_./-]*,
// then any pieces '>'[A-Za-z0-9.][A-Za-z0-9_./-]*. Sessions check clients'
// graphs with it; graphrun's own rewrites (partitions' Send/Recv) name
// nodes after tensors and are not held to it.
bool IsValidNodeName(absl::string_view name);
// InvalidArgument naming the first node of `def` whose name breaks it.
absl::Status ValidateNodeNames(const tensorflow::GraphDef& def);

// Parses a GraphDef file: binary (.pb) or text (.pbtxt, comments allowed).
// The format is chosen by extension, falling back to trying both.
absl::StatusOr<tensorflow::GraphDef> ReadGraphDefFile(const std::string& path);
// The deepest nesting of messages a text proto may have: protobuf's limit
// for binary ones.
inline constexpr int kMaxProtoNesting = 100;
// Parses protobuf text format into `msg` without logging: InvalidArgument
// "line L, column C: ..." with the parser's first error.
absl::Status ParseTextProto(absl::string_view text, google::protobuf::Message* msg);
// Parses serialized bytes: binary first, then text.
absl::StatusOr<tensorflow::GraphDef> ParseGraphDef(absl::string_view bytes,
                                                   bool text_first = false);

// Runs shape inference over the whole graph (in topological order; loop
// back edges seen as unknown). InvalidArgument naming the node on conflict.
absl::Status InferShapes(Graph* graph);

// Nodes in a topological order that ignores NextIteration -> Merge back
// edges. InvalidArgument naming a node on a cycle otherwise.
absl::StatusOr<std::vector<Node*>> TopologicalOrder(const Graph& graph);

// True if `dst` may consume a value of type `src` (equal, or a ref of it).
inline bool TypesCompatible(DataType src, DataType dst) {
  return src == dst || (IsRefType(src) && BaseType(src) == dst);
}

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_GRAPH_H_
