// Helpers over NodeDef: typed attribute access, defaults, validation against
// an OpDef, and the input/output types an OpDef gives a node. Every error
// names the node.
#ifndef GRAPHRUN_GRAPH_NODE_DEF_UTIL_H_
#define GRAPHRUN_GRAPH_NODE_DEF_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "graph/proto/attr_value.pb.h"
#include "graph/proto/node_def.pb.h"
#include "graph/proto/op_def.pb.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace graphrun {

using DataTypeVector = absl::InlinedVector<DataType, 4>;
using AttrMap = google::protobuf::Map<std::string, tensorflow::AttrValue>;

constexpr int kControlSlot = -1;

// A parsed input string: "a" -> {a, 0}; "a:2" -> {a, 2}; "^a" -> {a, -1}.
struct TensorId {
  std::string node;
  int index = 0;
  bool IsControl() const { return index == kControlSlot; }
  std::string ToString() const;
  bool operator==(const TensorId& o) const { return node == o.node && index == o.index; }
};
// InvalidArgument for empty names or a bad index.
absl::StatusOr<TensorId> ParseTensorName(absl::string_view name);

// Typed attribute lookup. NotFound when absent, InvalidArgument when the
// attr has another type; both name the node and the attr.

// A view of a node's name and attrs, for messages.
struct NodeAttrs {
  const std::string& node_name;
  const AttrMap& attrs;
  NodeAttrs(const tensorflow::NodeDef& def)  // NOLINT: implicit by design
      : node_name(def.name()), attrs(def.attr()) {}
  NodeAttrs(const std::string& name, const AttrMap& a) : node_name(name), attrs(a) {}
};

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, int64_t* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, int32_t* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, float* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, bool* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::string* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, DataType* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, DataTypeVector* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, PartialShape* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::vector<int64_t>* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::vector<int32_t>* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::vector<std::string>* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::vector<float>* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, Tensor* v);
absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, const tensorflow::AttrValue** v);
bool HasAttr(const NodeAttrs& n, absl::string_view name);

// Adds every attr of `op_def` that has a default and is missing.
void AddDefaultsToNodeDef(const tensorflow::OpDef& op_def, tensorflow::NodeDef* node_def);

// Checks attrs against `op_def` (present, right kind, allowed values,
// minimums) and that no unknown attrs are set (attrs starting with '_' are
// always allowed). REQUIRES: defaults added.
absl::Status ValidateNodeDef(const tensorflow::NodeDef& node_def, const tensorflow::OpDef& op_def);

// The types of the node's inputs and outputs (ref types for Ref() args).
absl::Status InOutTypesForNode(const tensorflow::NodeDef& node_def, const tensorflow::OpDef& op_def,
                               DataTypeVector* inputs, DataTypeVector* outputs);

// The [start, end) output indices of the named output arg.
absl::Status NameRangeForOutput(const tensorflow::NodeDef& node_def,
                                const tensorflow::OpDef& op_def, absl::string_view arg,
                                std::pair<int, int>* range);

// The [start, end) input indices of the named input arg.
absl::Status NameRangeForInput(const tensorflow::NodeDef& node_def, const tensorflow::OpDef& op_def,
                               absl::string_view arg, std::pair<int, int>* range);

// Short text of an attr value for messages ("float", "[2,3]", "7").
std::string SummarizeAttrValue(const tensorflow::AttrValue& v);

// Attr builders for code that constructs NodeDefs.
tensorflow::AttrValue MakeAttr(int64_t v);
tensorflow::AttrValue MakeAttr(int v);
tensorflow::AttrValue MakeAttr(float v);
tensorflow::AttrValue MakeAttr(bool v);
tensorflow::AttrValue MakeAttr(const char* v);
tensorflow::AttrValue MakeAttr(const std::string& v);
tensorflow::AttrValue MakeAttr(DataType v);
tensorflow::AttrValue MakeAttr(const PartialShape& v);
tensorflow::AttrValue MakeAttr(const TensorShape& v);
tensorflow::AttrValue MakeAttr(const Tensor& v);
tensorflow::AttrValue MakeAttr(absl::Span<const DataType> v);
tensorflow::AttrValue MakeAttr(absl::Span<const int64_t> v);
tensorflow::AttrValue MakeAttr(absl::Span<const std::string> v);

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_NODE_DEF_UTIL_H_
