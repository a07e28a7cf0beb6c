#include "tools/show_command.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/saved_model.h"
#include "graph/status.h"
#include "graph/types.h"
#include "tools/flags.h"

namespace graphrun {
namespace tools {
namespace {

template <typename Map>
std::vector<std::string> SortedKeys(const Map& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// "(-1, 784)", "()" for a scalar, "unknown_rank".
std::string ShapeText(const tensorflow::TensorShapeProto& s) {
  if (s.unknown_rank()) return "unknown_rank";
  std::vector<std::string> dims;
  for (const auto& d : s.dim()) dims.push_back(absl::StrCat(d.size()));
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

// A model's object graph can name one function from many places: its
// listing stops past this much output (29 KB of proto printed 2.1 GB).
constexpr size_t kMaxShowBytes = size_t{16} << 20;

void ShowTensors(const char* what,
                 const google::protobuf::Map<std::string, tensorflow::TensorInfo>& infos,
                 std::string* out) {
  absl::StrAppend(out, "  The given SavedModel SignatureDef contains the following ", what,
                  "(s):\n");
  for (const std::string& key : SortedKeys(infos)) {
    const tensorflow::TensorInfo& t = infos.at(key);
    absl::StrAppend(out, "    ", what, "s['", OneLine(key), "'] tensor_info:\n",
                    "        dtype: ", DataTypeEnumName(t.dtype()), "\n",
                    "        shape: ", ShapeText(t.tensor_shape()), "\n",
                    "        name: ", OneLine(t.name()), "\n");
  }
}

// TensorFlow's Python name of a dtype ("float32", "string").
std::string PyDtype(tensorflow::DataType dt) {
  switch (dt) {
    case tensorflow::DT_FLOAT:
      return "float32";
    case tensorflow::DT_DOUBLE:
      return "float64";
    case tensorflow::DT_HALF:
      return "float16";
    default: {
      std::string name = DataTypeEnumName(dt);  // "DT_INT32", "DT_UNKNOWN_999"
      if (name.rfind("DT_", 0) == 0) name = name.substr(3);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return name;
    }
  }
}

// str(tf.TensorShape): "(None, 2)", "(3,)", "()", "<unknown>".
std::string PyShape(const tensorflow::TensorShapeProto& s) {
  if (s.unknown_rank()) return "<unknown>";
  std::vector<std::string> dims;
  for (const auto& d : s.dim()) dims.push_back(d.size() < 0 ? "None" : absl::StrCat(d.size()));
  if (dims.size() == 1) return absl::StrCat("(", dims[0], ",)");
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

std::string PyQuoted(const std::string& s) { return absl::StrCat("'", s, "'"); }

// repr() of a value in a function signature, as Python prints it.
std::string PyRepr(const tensorflow::StructuredValue& v) {
  using V = tensorflow::StructuredValue;
  switch (v.kind_case()) {
    case V::kNoneValue:
      return "None";
    case V::kFloat64Value:
      return absl::StrCat(v.float64_value());
    case V::kInt64Value:
      return absl::StrCat(v.int64_value());
    case V::kStringValue:
      return PyQuoted(v.string_value());
    case V::kBoolValue:
      return v.bool_value() ? "True" : "False";
    case V::kTensorShapeValue:
      return absl::StrCat("TensorShape(", PyShape(v.tensor_shape_value()), ")");
    case V::kTensorDtypeValue:
      return absl::StrCat("tf.", PyDtype(v.tensor_dtype_value()));
    case V::kTensorSpecValue:
    case V::kBoundedTensorSpecValue: {
      const bool bounded = v.kind_case() == V::kBoundedTensorSpecValue;
      const auto& name =
          bounded ? v.bounded_tensor_spec_value().name() : v.tensor_spec_value().name();
      const auto& shape =
          bounded ? v.bounded_tensor_spec_value().shape() : v.tensor_spec_value().shape();
      const auto dtype =
          bounded ? v.bounded_tensor_spec_value().dtype() : v.tensor_spec_value().dtype();
      return absl::StrCat(bounded ? "BoundedTensorSpec" : "TensorSpec", "(shape=", PyShape(shape),
                          ", dtype=tf.", PyDtype(dtype),
                          ", name=", name.empty() ? "None" : PyQuoted(name), ")");
    }
    case V::kTypeSpecValue:
      return absl::StrCat(
          v.type_spec_value().type_spec_class_name().empty()
              ? tensorflow::TypeSpecProto::TypeSpecClass_Name(v.type_spec_value().type_spec_class())
              : v.type_spec_value().type_spec_class_name(),
          "(...)");
    case V::kListValue:
    case V::kTupleValue: {
      const auto& vals =
          v.kind_case() == V::kListValue ? v.list_value().values() : v.tuple_value().values();
      std::vector<std::string> parts;
      for (const auto& x : vals) parts.push_back(PyRepr(x));
      if (v.kind_case() == V::kListValue) return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
      if (parts.size() == 1) return absl::StrCat("(", parts[0], ",)");
      return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
    }
    case V::kDictValue: {
      std::vector<std::string> parts;
      for (const std::string& k : SortedKeys(v.dict_value().fields())) {
        parts.push_back(absl::StrCat(PyQuoted(k), ": ", PyRepr(v.dict_value().fields().at(k))));
      }
      return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
    }
    case V::kNamedTupleValue: {
      std::vector<std::string> parts;
      for (const auto& p : v.named_tuple_value().values()) {
        parts.push_back(absl::StrCat(p.key(), "=", PyRepr(p.value())));
      }
      return absl::StrCat(v.named_tuple_value().name(), "(", absl::StrJoin(parts, ", "), ")");
    }
    default:
      return "None";
  }
}

// type(x).__name__ of a Python value in a signature.
std::string PyTypeName(const tensorflow::StructuredValue& v) {
  using V = tensorflow::StructuredValue;
  switch (v.kind_case()) {
    case V::kNoneValue:
      return "NoneType";
    case V::kFloat64Value:
      return "float";
    case V::kInt64Value:
      return "int";
    case V::kStringValue:
      return "str";
    case V::kBoolValue:
      return "bool";
    case V::kListValue:
      return "list";
    case V::kTupleValue:
      return "tuple";
    case V::kDictValue:
      return "dict";
    case V::kNamedTupleValue:
      return v.named_tuple_value().name();
    case V::kTensorShapeValue:
      return "TensorShape";
    case V::kTensorDtypeValue:
      return "DType";
    default:
      return "TypeSpec";
  }
}

// saved_model_cli's _print_args at indent 4: "Argument #i", then a
// TensorSpec as "name: repr", anything else as its type and value.
void ShowArguments(const std::vector<const tensorflow::StructuredValue*>& args, const char* label,
                   std::string* out) {
  const std::string in(8, ' ');
  for (size_t i = 0; i < args.size(); ++i) {
    const tensorflow::StructuredValue& a = *args[i];
    absl::StrAppend(out, in, label, " #", i + 1, "\n");
    if (a.has_tensor_spec_value()) {
      absl::StrAppend(out, in, "  ", OneLine(a.tensor_spec_value().name()), ": ", PyRepr(a), "\n");
    } else if (a.kind_case() == tensorflow::StructuredValue::kStringValue) {
      absl::StrAppend(out, in, "  ", OneLine(a.string_value()), "\n");
    } else {
      absl::StrAppend(out, in, "  DType: ", PyTypeName(a), "\n", in, "  Value: ", PyRepr(a), "\n");
    }
  }
}

// saved_model_cli's "Concrete Functions" section: the root object's
// functions, by name, each concrete function (by name) with the positional
// and named arguments of its input signature.
void ShowConcreteFunctions(const tensorflow::SavedObjectGraph& g, std::string* out) {
  absl::StrAppend(out, "\nConcrete Functions:");
  if (g.nodes_size() == 0) {
    absl::StrAppend(out, "\n");
    return;
  }
  std::vector<std::pair<std::string, int>> children;
  for (const auto& c : g.nodes(0).children()) children.emplace_back(c.local_name(), c.node_id());
  std::sort(children.begin(), children.end());
  for (const auto& [name, id] : children) {
    if (id < 0 || id >= g.nodes_size()) continue;
    const tensorflow::SavedObject& node = g.nodes(id);
    std::vector<std::string> fns;
    if (node.has_function()) {
      fns.assign(node.function().concrete_functions().begin(),
                 node.function().concrete_functions().end());
    } else if (node.has_bare_concrete_function()) {
      fns.push_back(node.bare_concrete_function().concrete_function_name());
    } else {
      continue;
    }
    std::sort(fns.begin(), fns.end());
    if (out->size() > kMaxShowBytes) {  // children x functions x arguments
      absl::StrAppend(out, "\n  ... (more functions left out: over ", kMaxShowBytes,
                      " bytes of output)\n");
      return;
    }
    absl::StrAppend(out, "\n  Function Name: '", OneLine(name), "'\n");
    for (size_t i = 0; i < fns.size() && out->size() <= kMaxShowBytes; ++i) {
      auto it = g.concrete_functions().find(fns[i]);
      if (it == g.concrete_functions().end()) continue;
      const tensorflow::StructuredValue& sig = it->second.canonicalized_input_signature();
      // (args tuple, kwargs dict)
      // Named arguments print as their names, as saved_model_cli does.
      std::vector<const tensorflow::StructuredValue*> args, kwargs;
      std::vector<tensorflow::StructuredValue> names;
      if (sig.has_tuple_value() && sig.tuple_value().values_size() == 2) {
        const auto& a = sig.tuple_value().values(0);
        const auto& k = sig.tuple_value().values(1);
        const auto* vals = a.has_tuple_value()  ? &a.tuple_value().values()
                           : a.has_list_value() ? &a.list_value().values()
                                                : nullptr;
        if (vals != nullptr) {
          for (const auto& v : *vals) args.push_back(&v);
        }
        if (k.has_dict_value()) {
          for (const std::string& key : SortedKeys(k.dict_value().fields())) {
            names.emplace_back().set_string_value(key);
          }
          for (const auto& n : names) kwargs.push_back(&n);
        }
      }
      if (!args.empty()) {
        absl::StrAppend(out, "    Option #", i + 1, "\n      Callable with:\n");
        ShowArguments(args, "Argument", out);
      }
      if (!kwargs.empty()) ShowArguments(kwargs, "Named Argument", out);
    }
  }
}
}  // namespace

std::string ShowSavedModel(const tensorflow::SavedModel& model) {
  std::vector<std::pair<std::string, const tensorflow::MetaGraphDef*>> graphs;
  for (const auto& mg : model.meta_graphs()) {
    std::vector<std::string> tags(mg.meta_info_def().tags().begin(),
                                  mg.meta_info_def().tags().end());
    graphs.emplace_back(OneLine(absl::StrJoin(tags, ", ")), &mg);
  }
  std::sort(graphs.begin(), graphs.end());
  std::string out;
  for (const auto& [tags, mg] : graphs) {
    absl::StrAppend(&out, "\nMetaGraphDef with tag-set: '", tags,
                    "' contains the following SignatureDefs:\n");
    for (const std::string& key : SortedKeys(mg->signature_def())) {
      const tensorflow::SignatureDef& sig = mg->signature_def().at(key);
      absl::StrAppend(&out, "\nsignature_def['", OneLine(key), "']:\n");
      ShowTensors("input", sig.inputs(), &out);
      ShowTensors("output", sig.outputs(), &out);
      absl::StrAppend(&out, "  Method name is: ", OneLine(sig.method_name()), "\n");
    }
  }
  // TF 2 models: the object graph's functions (the first meta graph that
  // has one, as tf.saved_model.load reads one).
  for (const auto& mg : model.meta_graphs()) {
    if (!mg.has_object_graph_def()) continue;
    ShowConcreteFunctions(mg.object_graph_def(), &out);
    break;
  }
  return out;
}

std::string ShowUsage() {
  return "usage: graphrun show SAVED_MODEL_DIR\n\n"
         "Prints a SavedModel's tag sets and signatures, each input and output with its\n"
         "dtype, shape and tensor name, and for a TF 2 model the functions of its object\n"
         "graph with their arguments (the layout of saved_model_cli show --all).\n";
}

int ShowCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  auto flags = FlagSet().Parse(args);
  if (!flags.ok()) {
    err << StatusToLine(flags.status()) << "\n";
    return kExitUsage;
  }
  if (flags->positional().size() != 1) {
    err << StatusToLine(absl::InvalidArgumentError("show: usage: graphrun show SAVED_MODEL_DIR"))
        << "\n";
    return kExitUsage;
  }
  auto model = ReadSavedModel(flags->positional()[0]);
  if (!model.ok()) {
    err << StatusToLine(model.status()) << "\n";
    return kExitFailure;
  }
  out << ShowSavedModel(*model);
  return kExitOk;
}

}  // namespace tools
}  // namespace graphrun
