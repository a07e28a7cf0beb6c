#include "graph/node_def_util.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/status.h"

namespace graphrun {

using tensorflow::AttrValue;

std::string TensorId::ToString() const {
  if (index == kControlSlot) return absl::StrCat("^", node);
  if (index == 0) return node;
  return absl::StrCat(node, ":", index);
}

absl::StatusOr<TensorId> ParseTensorName(absl::string_view name) {
  TensorId id;
  if (absl::StartsWith(name, "^")) {
    id.node = std::string(name.substr(1));
    id.index = kControlSlot;
  } else {
    size_t colon = name.rfind(':');
    int idx = 0;
    if (colon != absl::string_view::npos && absl::SimpleAtoi(name.substr(colon + 1), &idx)) {
      if (idx < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor name '", name, "' has a negative index"));
      }
      id.node = std::string(name.substr(0, colon));
      id.index = idx;
    } else {
      id.node = std::string(name);
    }
  }
  if (id.node.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor name '", name, "' has no node name"));
  }
  return id;
}

namespace {

absl::Status Find(const NodeAttrs& n, absl::string_view name, const AttrValue** v) {
  auto it = n.attrs.find(std::string(name));
  if (it == n.attrs.end()) {
    return absl::NotFoundError(absl::StrCat("node '", n.node_name, "': missing attr '", name, "'"));
  }
  *v = &it->second;
  return absl::OkStatus();
}

absl::Status WrongKind(const NodeAttrs& n, absl::string_view name, absl::string_view want,
                       const AttrValue& v) {
  return absl::InvalidArgumentError(absl::StrCat("node '", n.node_name, "': attr '", name,
                                                 "' should be ", want, " but is ",
                                                 SummarizeAttrValue(v)));
}

}  // namespace

bool HasAttr(const NodeAttrs& n, absl::string_view name) {
  return n.attrs.find(std::string(name)) != n.attrs.end();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, const AttrValue** v) {
  return Find(n, name, v);
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, int64_t* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kI) return WrongKind(n, name, "int", *v);
  *out = v->i();
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, int32_t* out) {
  int64_t v;
  GR_RETURN_IF_ERROR(GetAttr(n, name, &v));
  if (v < INT32_MIN || v > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("node '", n.node_name, "': attr '", name,
                                                   "' value ", v, " out of int32 range"));
  }
  *out = static_cast<int32_t>(v);
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, float* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kF) return WrongKind(n, name, "float", *v);
  *out = v->f();
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, bool* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kB) return WrongKind(n, name, "bool", *v);
  *out = v->b();
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::string* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kS) return WrongKind(n, name, "string", *v);
  *out = v->s();
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, DataType* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kType) return WrongKind(n, name, "type", *v);
  *out = v->type();
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, DataTypeVector* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kList && v->value_case() != AttrValue::VALUE_NOT_SET) {
    return WrongKind(n, name, "list(type)", *v);
  }
  out->clear();
  for (int t : v->list().type()) out->push_back(static_cast<DataType>(t));
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, PartialShape* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kShape) return WrongKind(n, name, "shape", *v);
  *out = PartialShape::FromProto(v->shape());
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::vector<int64_t>* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kList && v->value_case() != AttrValue::VALUE_NOT_SET) {
    return WrongKind(n, name, "list(int)", *v);
  }
  out->assign(v->list().i().begin(), v->list().i().end());
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::vector<int32_t>* out) {
  std::vector<int64_t> v;
  GR_RETURN_IF_ERROR(GetAttr(n, name, &v));
  out->assign(v.begin(), v.end());
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::vector<float>* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kList && v->value_case() != AttrValue::VALUE_NOT_SET) {
    return WrongKind(n, name, "list(float)", *v);
  }
  out->assign(v->list().f().begin(), v->list().f().end());
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, std::vector<std::string>* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kList && v->value_case() != AttrValue::VALUE_NOT_SET) {
    return WrongKind(n, name, "list(string)", *v);
  }
  out->assign(v->list().s().begin(), v->list().s().end());
  return absl::OkStatus();
}

absl::Status GetAttr(const NodeAttrs& n, absl::string_view name, Tensor* out) {
  const AttrValue* v;
  GR_RETURN_IF_ERROR(Find(n, name, &v));
  if (v->value_case() != AttrValue::kTensor) return WrongKind(n, name, "tensor", *v);
  auto t = Tensor::FromProto(v->tensor());
  if (!t.ok()) {
    return AnnotateStatus(t.status(),
                          absl::StrCat("node '", n.node_name, "': attr '", name, "': "));
  }
  *out = *std::move(t);
  return absl::OkStatus();
}

void AddDefaultsToNodeDef(const tensorflow::OpDef& op_def, tensorflow::NodeDef* node_def) {
  for (const auto& a : op_def.attr()) {
    if (a.has_default_value() && !node_def->attr().contains(a.name())) {
      (*node_def->mutable_attr())[a.name()] = a.default_value();
    }
  }
}

namespace {

bool KindMatches(const std::string& type, const AttrValue& v) {
  auto c = v.value_case();
  if (absl::StartsWith(type, "list(")) {
    return c == AttrValue::kList || c == AttrValue::VALUE_NOT_SET;
  }
  if (type == "int") return c == AttrValue::kI;
  if (type == "float") return c == AttrValue::kF;
  if (type == "bool") return c == AttrValue::kB;
  if (type == "string") return c == AttrValue::kS;
  if (type == "type") return c == AttrValue::kType;
  if (type == "shape") return c == AttrValue::kShape;
  if (type == "tensor") return c == AttrValue::kTensor;
  if (type == "func") return c == AttrValue::kFunc;
  return true;
}

int ListSize(const AttrValue& v) {
  const auto& l = v.list();
  return l.s_size() + l.i_size() + l.f_size() + l.b_size() + l.type_size() + l.shape_size() +
         l.tensor_size() + l.func_size();
}

}  // namespace

absl::Status ValidateNodeDef(const tensorflow::NodeDef& node_def, const tensorflow::OpDef& op_def) {
  const std::string& node = node_def.name();
  for (const auto& a : op_def.attr()) {
    auto it = node_def.attr().find(a.name());
    if (it == node_def.attr().end()) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node, "' (op ", op_def.name(),
                                                     "): missing attr '", a.name(), "' of type ",
                                                     a.type()));
    }
    const AttrValue& v = it->second;
    if (!KindMatches(a.type(), v)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node, "' (op ", op_def.name(),
                                                     "): attr '", a.name(), "' should be ",
                                                     a.type(), " but is ", SummarizeAttrValue(v)));
    }
    // TensorFlow's limit on a shape's rank holds for shape attrs too.
    auto too_deep = [](const tensorflow::TensorShapeProto& s) {
      return !s.unknown_rank() && s.dim_size() > TensorShape::kMaxDims;
    };
    if ((a.type() == "shape" && too_deep(v.shape())) ||
        (a.type() == "list(shape)" &&
         std::any_of(v.list().shape().begin(), v.list().shape().end(), too_deep))) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", node, "' (op ", op_def.name(), "): attr '", a.name(),
                       "' has a shape of more than the ", TensorShape::kMaxDims,
                       " dimensions a tensor may have"));
    }
    if (a.has_minimum()) {
      int64_t have = absl::StartsWith(a.type(), "list(") ? ListSize(v) : v.i();
      if (have < a.minimum()) {
        return absl::InvalidArgumentError(absl::StrCat("node '", node, "' (op ", op_def.name(),
                                                       "): attr '", a.name(), "' is ", have,
                                                       ", below its minimum ", a.minimum()));
      }
    }
    if (a.has_allowed_values()) {
      const auto& allowed = a.allowed_values().list();
      auto type_ok = [&](int t) {
        for (int x : allowed.type()) {
          if (x == t) return true;
        }
        return false;
      };
      if (a.type() == "type" && !type_ok(v.type())) {
        std::vector<std::string> names;
        for (int x : allowed.type()) names.push_back(DataTypeString(static_cast<DataType>(x)));
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", node, "' (op ", op_def.name(), "): attr '", a.name(), "' is ",
            DataTypeString(v.type()), ", not one of {", absl::StrJoin(names, ", "), "}"));
      }
      if (a.type() == "list(type)") {
        for (int t : v.list().type()) {
          if (!type_ok(t)) {
            return absl::InvalidArgumentError(
                absl::StrCat("node '", node, "' (op ", op_def.name(), "): attr '", a.name(),
                             "' has disallowed type ", DataTypeString(static_cast<DataType>(t))));
          }
        }
      }
      if (a.type() == "string") {
        bool ok = false;
        for (const auto& s : allowed.s()) ok |= (s == v.s());
        if (!ok) {
          return absl::InvalidArgumentError(absl::StrCat("node '", node, "' (op ", op_def.name(),
                                                         "): attr '", a.name(),
                                                         "' has disallowed value '", v.s(), "'"));
        }
      }
    }
  }
  for (const auto& [name, v] : node_def.attr()) {
    if (absl::StartsWith(name, "_")) continue;
    bool known = false;
    for (const auto& a : op_def.attr()) known |= (a.name() == name);
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", node, "' (op ", op_def.name(), "): unknown attr '", name, "'"));
    }
  }
  return absl::OkStatus();
}

namespace {

absl::Status AddArgTypes(const tensorflow::NodeDef& node_def, const tensorflow::OpDef::ArgDef& arg,
                         DataTypeVector* out) {
  NodeAttrs attrs(node_def);
  int count = 1;
  if (!arg.number_attr().empty()) {
    int64_t n;
    GR_RETURN_IF_ERROR(GetAttr(attrs, arg.number_attr(), &n));
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", node_def.name(), "': attr '", arg.number_attr(), "' is negative"));
    }
    // A list argument's length comes from the NodeDef: bound it before
    // anything is allocated for it.
    constexpr int64_t kMaxListLength = int64_t{1} << 20;
    if (n > kMaxListLength) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node_def.name(), "': attr '",
                                                     arg.number_attr(), "' = ", n,
                                                     " is above the limit of ", kMaxListLength));
    }
    count = static_cast<int>(n);
  }
  if (!arg.type_list_attr().empty()) {
    DataTypeVector types;
    GR_RETURN_IF_ERROR(GetAttr(attrs, arg.type_list_attr(), &types));
    for (DataType t : types) out->push_back(arg.is_ref() ? MakeRefType(t) : t);
    return absl::OkStatus();
  }
  DataType t = arg.type();
  if (!arg.type_attr().empty()) {
    GR_RETURN_IF_ERROR(GetAttr(attrs, arg.type_attr(), &t));
  }
  if (arg.is_ref()) t = MakeRefType(t);
  for (int i = 0; i < count; ++i) out->push_back(t);
  return absl::OkStatus();
}

}  // namespace

absl::Status InOutTypesForNode(const tensorflow::NodeDef& node_def, const tensorflow::OpDef& op_def,
                               DataTypeVector* inputs, DataTypeVector* outputs) {
  inputs->clear();
  outputs->clear();
  for (const auto& arg : op_def.input_arg()) {
    GR_RETURN_IF_ERROR(AddArgTypes(node_def, arg, inputs));
  }
  for (const auto& arg : op_def.output_arg()) {
    GR_RETURN_IF_ERROR(AddArgTypes(node_def, arg, outputs));
  }
  return absl::OkStatus();
}

namespace {

absl::Status NameRange(const tensorflow::NodeDef& node_def, const tensorflow::OpDef& op_def,
                       const google::protobuf::RepeatedPtrField<tensorflow::OpDef::ArgDef>& args,
                       absl::string_view kind, absl::string_view name, std::pair<int, int>* range) {
  int start = 0;
  for (const auto& arg : args) {
    DataTypeVector types;
    GR_RETURN_IF_ERROR(AddArgTypes(node_def, arg, &types));
    int end = start + static_cast<int>(types.size());
    if (arg.name() == name) {
      *range = {start, end};
      return absl::OkStatus();
    }
    start = end;
  }
  return absl::InvalidArgumentError(absl::StrCat("node '", node_def.name(), "': op ", op_def.name(),
                                                 " has no ", kind, " '", name, "'"));
}

}  // namespace

absl::Status NameRangeForOutput(const tensorflow::NodeDef& node_def,
                                const tensorflow::OpDef& op_def, absl::string_view name,
                                std::pair<int, int>* range) {
  return NameRange(node_def, op_def, op_def.output_arg(), "output", name, range);
}

absl::Status NameRangeForInput(const tensorflow::NodeDef& node_def, const tensorflow::OpDef& op_def,
                               absl::string_view name, std::pair<int, int>* range) {
  return NameRange(node_def, op_def, op_def.input_arg(), "input", name, range);
}

std::string SummarizeAttrValue(const AttrValue& v) {
  switch (v.value_case()) {
    case AttrValue::kS:
      return absl::StrCat("'", v.s(), "'");
    case AttrValue::kI:
      return absl::StrCat(v.i());
    case AttrValue::kF:
      return absl::StrCat(v.f());
    case AttrValue::kB:
      return v.b() ? "true" : "false";
    case AttrValue::kType:
      return DataTypeString(v.type());
    case AttrValue::kShape:
      return PartialShape::FromProto(v.shape()).DebugString();
    case AttrValue::kTensor:
      return "<tensor>";
    case AttrValue::kList:
      return "<list>";
    case AttrValue::kFunc:
      return absl::StrCat("func ", v.func().name());
    case AttrValue::kPlaceholder:
      return absl::StrCat("$", v.placeholder());
    default:
      return "<unset>";
  }
}

AttrValue MakeAttr(int64_t v) {
  AttrValue a;
  a.set_i(v);
  return a;
}
AttrValue MakeAttr(int v) {
  AttrValue a;
  a.set_i(v);
  return a;
}
AttrValue MakeAttr(float v) {
  AttrValue a;
  a.set_f(v);
  return a;
}
AttrValue MakeAttr(bool v) {
  AttrValue a;
  a.set_b(v);
  return a;
}
AttrValue MakeAttr(const char* v) {
  AttrValue a;
  a.set_s(v);
  return a;
}
AttrValue MakeAttr(const std::string& v) {
  AttrValue a;
  a.set_s(v);
  return a;
}
AttrValue MakeAttr(DataType v) {
  AttrValue a;
  a.set_type(v);
  return a;
}
AttrValue MakeAttr(const PartialShape& v) {
  AttrValue a;
  v.AsProto(a.mutable_shape());
  return a;
}
AttrValue MakeAttr(const TensorShape& v) {
  AttrValue a;
  v.AsProto(a.mutable_shape());
  return a;
}
AttrValue MakeAttr(const Tensor& v) {
  AttrValue a;
  v.AsProtoTensorContent(a.mutable_tensor());
  return a;
}
AttrValue MakeAttr(absl::Span<const DataType> v) {
  AttrValue a;
  a.mutable_list();
  for (DataType t : v) a.mutable_list()->add_type(t);
  return a;
}
AttrValue MakeAttr(absl::Span<const int64_t> v) {
  AttrValue a;
  a.mutable_list();
  for (int64_t x : v) a.mutable_list()->add_i(x);
  return a;
}
AttrValue MakeAttr(absl::Span<const std::string> v) {
  AttrValue a;
  a.mutable_list();
  for (const auto& x : v) a.mutable_list()->add_s(x);
  return a;
}

}  // namespace graphrun
