#include "tools/feeds.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "graph/function_lowering.h"
#include "graph/node_def_util.h"
#include "graph/ops/all_ops.h"
#include "graph/status.h"
#include "tools/npy.h"
#include "tools/tensor_json.h"

namespace graphrun {
namespace tools {

absl::StatusOr<DataType> FeedResolver::DtypeOf(absl::string_view node, int index) {
  const tensorflow::NodeDef* nd = nullptr;
  for (const auto& n : def_.node()) {
    if (n.name() == node) {
      nd = &n;
      break;
    }
  }
  if (nd == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no node named '", node, "' in the graph"));
  }
  const std::string& op = nd->op();
  if (index == 0 && (op == "Placeholder" || op == "PlaceholderV2" ||
                     op == "PlaceholderWithDefault" || op == "Const")) {
    DataType dt;
    if (GetAttr(*nd, "dtype", &dt).ok()) return BaseType(dt);
  }
  if (graph_ == nullptr) {
    ImportOptions options;
    options.infer_shapes = false;
    GR_ASSIGN_OR_RETURN(graph_, GraphFromGraphDef(def_, DefaultOpRegistry(), options));
  }
  const Node* n = graph_->FindNode(node);
  if (n == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no node named '", node, "' in the graph"));
  }
  if (index < 0 || index >= n->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", node, "' (", n->op(), ") has ",
                                                   n->num_outputs(),
                                                   " outputs; there is no output ", index));
  }
  return BaseType(n->output_type(index));
}

namespace {

// A placeholder's declared shape (its `shape` attr), when it has one of
// known rank: a fed value must be compatible with it, as TensorFlow's
// Session.run checks ("Cannot feed value of shape …").
absl::Status CheckPlaceholderShape(const tensorflow::GraphDef& def, absl::string_view node,
                                   int index, const Tensor& t, const std::string& prefix) {
  if (index != 0) return absl::OkStatus();
  for (const auto& n : def.node()) {
    if (n.name() != node) continue;
    if (n.op() != "Placeholder" && n.op() != "PlaceholderV2" &&
        n.op() != "PlaceholderWithDefault") {
      return absl::OkStatus();
    }
    PartialShape declared;
    if (!GetAttr(n, "shape", &declared).ok() || !declared.known_rank() ||
        HasLegacyUnknownPlaceholderShape(n, def.versions())) {
      return absl::OkStatus();
    }
    if (declared.IsCompatibleWith(t.shape())) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "cannot feed a value of shape ", t.shape().DebugString(),
                     " to a placeholder of shape ", declared.DebugString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> FeedResolver::MakeFeed(absl::string_view name, absl::string_view value) {
  const std::string prefix = absl::StrCat("feed '", name, "': ");
  size_t colon = name.rfind(':');
  int index = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(name.substr(colon + 1), &index)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "not a NAME:INDEX tensor name"));
  }
  auto dtype = DtypeOf(name.substr(0, colon), index);
  if (!dtype.ok()) return AnnotateStatus(dtype.status(), prefix);
  if (!value.empty() && value[0] == '@') {
    auto t = ReadNpyFile(std::string(value.substr(1)));
    if (!t.ok()) return AnnotateStatus(t.status(), prefix);
    if (t->dtype() != *dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, value.substr(1), " holds ", DataTypeString(t->dtype()),
                       " but the graph expects ", DataTypeString(*dtype)));
    }
    GR_RETURN_IF_ERROR(CheckPlaceholderShape(def_, name.substr(0, colon), index, *t, prefix));
    return t;
  }
  auto t = TensorFromJsonText(value, *dtype);
  if (!t.ok()) return AnnotateStatus(t.status(), prefix);
  GR_RETURN_IF_ERROR(CheckPlaceholderShape(def_, name.substr(0, colon), index, *t, prefix));
  return t;
}

}  // namespace tools
}  // namespace graphrun
