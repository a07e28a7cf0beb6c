#include "graph/function_lowering.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "graph/function_calls.h"
#include "graph/graph.h"
#include "graph/node_def_util.h"
#include "graph/status.h"

namespace graphrun {
namespace {

using function_calls::BodyNamesATask;
using function_calls::Callees;
using function_calls::FunctionMap;
using function_calls::StaysCallFrame;
using tensorflow::AttrValue;
using tensorflow::FunctionDef;
using tensorflow::GraphDef;
using tensorflow::NodeDef;
using tensorflow::OpDef;

bool IsCall(const std::string& op) {
  return op == "PartitionedCall" || op == "StatefulPartitionedCall";
}
bool IsIf(const std::string& op) { return op == "If" || op == "StatelessIf"; }
bool IsCase(const std::string& op) { return op == "Case" || op == "StatelessCase"; }
bool IsWhile(const std::string& op) { return op == "While" || op == "StatelessWhile"; }

// What the body of one inlined function sees.
struct Scope {
  const FunctionDef* fn = nullptr;  // null at the top level
  std::string caller;               // the call node's new name
  // Body node name -> new name.
  absl::flat_hash_map<std::string, std::string> names;
  // Body node name -> its NodeDef after attr substitution (for output
  // ranges), and the OpDef its outputs follow.
  absl::flat_hash_map<std::string, std::pair<NodeDef, const OpDef*>> nodes;
  // Argument name -> the caller's tensors it stands for.
  absl::flat_hash_map<std::string, std::vector<std::string>> args;
  // Values for the function's placeholder attrs.
  const google::protobuf::Map<std::string, AttrValue>* attrs = nullptr;
  // Nodes with no inputs get a control input from this node ("" = none).
  std::string entry;
  // The device a body node without one takes.
  std::string device;
  // Function names being inlined, outermost first.
  std::vector<std::string> stack;

  std::string Where(const std::string& node) const {
    if (fn == nullptr) return absl::StrCat("node '", node, "'");
    return absl::StrCat("node '", node, "' of function '", fn->signature().name(), "' (called by '",
                        caller, "')");
  }
};

// A function body's return values and control returns, as tensors and
// node names of the lowered graph.
struct BodyResult {
  std::vector<std::string> rets;
  std::vector<std::string> control;  // "^name"
};

// "[float, int32]".
std::string DataTypeVectorString(const DataTypeVector& types) {
  std::vector<std::string> names;
  for (DataType t : types) names.push_back(DataTypeString(t));
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

std::string NodeOf(const std::string& tensor) {
  std::string s = tensor;
  if (!s.empty() && s[0] == '^') s = s.substr(1);
  auto colon = s.find(':');
  return colon == std::string::npos ? s : s.substr(0, colon);
}

class Lowering {
 public:
  Lowering(const GraphDef& def, const OpRegistry& registry, const LoweringOptions& options)
      : def_(def), registry_(registry), options_(options) {}

  absl::StatusOr<LoweredGraph> Run() {
    for (const FunctionDef& f : def_.library().function()) {
      const std::string& name = f.signature().name();
      if (name.empty()) return absl::InvalidArgumentError("a library function has no name");
      if (registry_.LookUp(name) != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "function '", name, "': has the name of an op; a function may not shadow an op"));
      }
      if (!functions_.emplace(name, &f).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("function '", name, "': defined twice in the library"));
      }
    }
    for (const NodeDef& n : def_.node()) {
      used_.insert(n.name());
      top_nodes_[n.name()] = &n;
    }
    *out_.graph_def.mutable_versions() = def_.versions();

    Scope top;
    for (const NodeDef& n : def_.node()) top.names[n.name()] = n.name();
    GR_RETURN_IF_ERROR(ProcessNodes(std::vector<const NodeDef*>(AllNodes(def_.node())), top));
    // Call frames instantiate their functions from the library at run time.
    if (keep_library_) *out_.graph_def.mutable_library() = def_.library();
    return std::move(out_);
  }

 private:
  template <typename Nodes>
  static std::vector<const NodeDef*> AllNodes(const Nodes& nodes) {
    std::vector<const NodeDef*> v;
    v.reserve(nodes.size());
    for (const NodeDef& n : nodes) v.push_back(&n);
    return v;
  }

  std::string Unique(const std::string& base) {
    if (used_.insert(base).second) return base;
    for (int i = 1;; ++i) {
      std::string s = absl::StrCat(base, "_", i);
      if (used_.insert(s).second) return s;
    }
  }

  // Replaces placeholder attrs (also inside func attrs) with the caller's.
  absl::Status Substitute(const Scope& scope, const std::string& node, AttrValue* v) {
    if (!v->placeholder().empty()) {
      const std::string ph = v->placeholder();
      if (scope.attrs == nullptr || !scope.attrs->contains(ph)) {
        return absl::InvalidArgumentError(absl::StrCat(scope.Where(node), ": attr placeholder '",
                                                       ph, "' is not set by the call"));
      }
      *v = scope.attrs->at(ph);
      return absl::OkStatus();
    }
    if (v->has_func()) {
      for (auto& [k, a] : *v->mutable_func()->mutable_attr()) {
        GR_RETURN_IF_ERROR(Substitute(scope, node, &a));
      }
    }
    if (v->has_list()) {
      for (auto& f : *v->mutable_list()->mutable_func()) {
        for (auto& [k, a] : *f.mutable_attr()) GR_RETURN_IF_ERROR(Substitute(scope, node, &a));
      }
    }
    return absl::OkStatus();
  }

  // The OpDef whose outputs a node of `op` has: a registered op's, or a
  // library function's signature. nullptr when neither.
  const OpDef* OpDefFor(const std::string& op) const {
    if (const OpRegistrationData* r = registry_.LookUp(op)) return &r->op_def;
    auto it = functions_.find(op);
    return it == functions_.end() ? nullptr : &it->second->signature();
  }

  // Maps an input string of a function body to the lowered graph.
  absl::StatusOr<std::string> Resolve(const Scope& scope, const std::string& node,
                                      const std::string& in) {
    if (scope.fn == nullptr) return in;  // top level: names are kept
    bool control = !in.empty() && in[0] == '^';
    std::string s = control ? in.substr(1) : in;
    std::vector<std::string> parts = absl::StrSplit(s, ':');
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat(scope.Where(node), ": input '", in, "' ", why));
    };
    auto arg = scope.args.find(parts[0]);
    if (arg != scope.args.end()) {
      int index = 0;
      if (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &index)) return bad("is malformed");
      if (parts.size() > 2) return bad("is malformed");
      if (index < 0 || index >= static_cast<int>(arg->second.size())) {
        return bad("asks for an element the argument does not have");
      }
      const std::string& t = arg->second[index];
      return control ? absl::StrCat("^", NodeOf(t)) : t;
    }
    auto name = scope.names.find(parts[0]);
    if (name == scope.names.end()) return bad("names no argument or node of the function");
    if (control) {
      if (parts.size() != 1) return bad("is malformed");
      return absl::StrCat("^", name->second);
    }
    if (parts.size() == 1) return name->second;  // output 0
    if (parts.size() == 2) {
      int index;
      if (!absl::SimpleAtoi(parts[1], &index) || index < 0) return bad("is malformed");
      return absl::StrCat(name->second, ":", index);
    }
    if (parts.size() != 3) return bad("is malformed");
    int index;
    if (!absl::SimpleAtoi(parts[2], &index) || index < 0) return bad("is malformed");
    const auto& [src_def, src_op] = scope.nodes.at(parts[0]);
    if (src_op == nullptr) return bad("names a node of an unknown op");
    std::pair<int, int> range;
    absl::Status st = NameRangeForOutput(src_def, *src_op, parts[1], &range);
    if (!st.ok()) return bad(absl::StrCat("cannot be resolved: ", st.message()));
    if (index >= range.second - range.first) {
      return bad(absl::StrCat("asks for element ", index, " of output '", parts[1], "', which has ",
                              range.second - range.first));
    }
    int flat = range.first + index;
    return flat == 0 ? name->second : absl::StrCat(name->second, ":", flat);
  }

  absl::Status Emit(NodeDef n, const Scope& scope) {
    if (n.input_size() == 0 && !scope.entry.empty()) n.add_input(absl::StrCat("^", scope.entry));
    if (n.device().empty()) n.set_device(scope.device);
    if (out_.graph_def.node_size() >= options_.max_nodes) {
      return absl::ResourceExhaustedError(absl::StrCat("inlining function calls makes more than ",
                                                       options_.max_nodes, " nodes (at ",
                                                       scope.Where(n.name()), ")"));
    }
    if (scope.fn != nullptr) out_.origin[n.name()] = scope.Where(n.name());
    *out_.graph_def.add_node() = std::move(n);
    return absl::OkStatus();
  }

  // A node made by lowering (Switch, Merge, IdentityN, ...).
  NodeDef Make(const std::string& name, const std::string& op, std::vector<std::string> inputs,
               const std::string& device) {
    NodeDef n;
    n.set_name(name);
    n.set_op(op);
    n.set_device(device);
    for (auto& i : inputs) n.add_input(std::move(i));
    return n;
  }

  const FunctionDef* FindFunction(const AttrValue* v) const {
    if (v == nullptr || !v->has_func()) return nullptr;
    auto it = functions_.find(v->func().name());
    return it == functions_.end() ? nullptr : it->second;
  }

  absl::StatusOr<const FunctionDef*> FuncAttr(const Scope& scope, const NodeDef& n,
                                              const std::string& attr) {
    auto it = n.attr().find(attr);
    if (it == n.attr().end() || !it->second.has_func()) {
      return absl::InvalidArgumentError(absl::StrCat(scope.Where(n.name()), " (op ", n.op(),
                                                     "): has no function attr '", attr, "'"));
    }
    const FunctionDef* f = FindFunction(&it->second);
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          scope.Where(n.name()), " (op ", n.op(), "): attr '", attr, "' names function '",
          it->second.func().name(), "', which is not in the graph's function library"));
    }
    return f;
  }

  // The flat input and output types of `fn`'s signature under the call's
  // attrs. InvalidArgument naming the function and the call when they do
  // not resolve or the call passes another number of inputs.
  static absl::Status CallTypes(const FunctionDef& fn, const std::string& call,
                                const google::protobuf::Map<std::string, AttrValue>& attrs,
                                size_t num_inputs, DataTypeVector* in, DataTypeVector* out) {
    const std::string& fname = fn.signature().name();
    NodeDef sig_node;
    sig_node.set_name(call);
    *sig_node.mutable_attr() = attrs;
    absl::Status st = InOutTypesForNode(sig_node, fn.signature(), in, out);
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("function '", fname, "' called by '", call, "': ", st.message()));
    }
    if (in->size() != num_inputs) {
      return absl::InvalidArgumentError(absl::StrCat("function '", fname, "' called by '", call,
                                                     "': takes ", in->size(),
                                                     " inputs but the call passes ", num_inputs));
    }
    return absl::OkStatus();
  }

  // Inlines `fn`'s body with its arguments bound to `inputs` (flat).
  absl::StatusOr<BodyResult> InlineBody(const FunctionDef& fn, const Scope& parent,
                                        const NodeDef& call, const std::string& prefix,
                                        const google::protobuf::Map<std::string, AttrValue>& attrs,
                                        const std::vector<std::string>& inputs,
                                        const std::string& entry) {
    const std::string& fname = fn.signature().name();
    for (const std::string& s : parent.stack) {
      if (s == fname) {
        return absl::InvalidArgumentError(absl::StrCat(
            "function '", fname, "' calls itself (", absl::StrJoin(parent.stack, " -> "), " -> ",
            fname, "); recursive functions cannot be inlined"));
      }
    }
    if (static_cast<int>(parent.stack.size()) >= options_.max_depth) {
      return absl::InvalidArgumentError(
          absl::StrCat("function '", fname, "': calls nest deeper than ", options_.max_depth));
    }
    Scope scope;
    scope.fn = &fn;
    scope.caller = call.name();
    scope.attrs = &attrs;
    scope.entry = entry;
    scope.device = call.device();
    scope.stack = parent.stack;
    scope.stack.push_back(fname);

    DataTypeVector in_types, out_types;
    GR_RETURN_IF_ERROR(CallTypes(fn, call.name(), attrs, inputs.size(), &in_types, &out_types));
    NodeDef sig_node;  // each argument's tensor count, with the call's attrs
    sig_node.set_name(call.name());
    *sig_node.mutable_attr() = attrs;
    size_t k = 0;
    for (const auto& arg : fn.signature().input_arg()) {
      DataTypeVector t;
      GR_RETURN_IF_ERROR(InOutTypesForNode(sig_node, OpDefWithInput(arg), &t, &out_unused_));
      std::vector<std::string>& bound = scope.args[arg.name()];
      for (size_t j = 0; j < t.size(); ++j) bound.push_back(inputs[k++]);
    }

    std::vector<const NodeDef*> body = AllNodes(fn.node_def());
    for (const NodeDef* n : body) {
      if (scope.names.contains(n->name()) || scope.args.contains(n->name())) {
        return absl::InvalidArgumentError(
            absl::StrCat(scope.Where(n->name()), ": the name is used twice in the function"));
      }
      scope.names[n->name()] = Unique(absl::StrCat(prefix, "/", n->name()));
    }
    GR_RETURN_IF_ERROR(ProcessNodes(body, scope));

    BodyResult result;
    for (const auto& arg : fn.signature().output_arg()) {
      if (!arg.number_attr().empty() || !arg.type_list_attr().empty()) {
        return absl::UnimplementedError(
            absl::StrCat("function '", fname, "': output '", arg.name(), "' is a list"));
      }
      auto it = fn.ret().find(arg.name());
      if (it == fn.ret().end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("function '", fname, "': output '", arg.name(), "' has no return value"));
      }
      GR_ASSIGN_OR_RETURN(std::string t,
                          Resolve(scope, absl::StrCat("return '", arg.name(), "'"), it->second));
      result.rets.push_back(std::move(t));
    }
    for (const auto& [name, node] : fn.control_ret()) {
      auto it = scope.names.find(node);
      if (it == scope.names.end()) {
        return absl::InvalidArgumentError(absl::StrCat("function '", fname, "': control return '",
                                                       name, "' names no node '", node, "'"));
      }
      result.control.push_back(absl::StrCat("^", it->second));
    }
    return result;
  }

  // An OpDef with just `arg` as input, to count an argument's tensors.
  static OpDef OpDefWithInput(const OpDef::ArgDef& arg) {
    OpDef d;
    *d.add_input_arg() = arg;
    return d;
  }

  // Nodes with no inputs in a lowered scope wait on this: the call's
  // control inputs (a NoOp) or the enclosing scope's entry.
  absl::StatusOr<std::string> EntryFor(const NodeDef& call, const std::vector<std::string>& control,
                                       const Scope& parent) {
    if (control.empty()) return parent.entry;
    std::vector<std::string> in = control;
    if (!parent.entry.empty()) in.push_back(absl::StrCat("^", parent.entry));
    std::string name = Unique(absl::StrCat(call.name(), "/input_control_node"));
    GR_RETURN_IF_ERROR(Emit(Make(name, "NoOp", std::move(in), call.device()), parent));
    return name;
  }

  absl::Status EmitOutputs(const NodeDef& call, const Scope& parent, const BodyResult& r,
                           const DataTypeVector& types) {
    if (types.size() != r.rets.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(parent.Where(call.name()), " (op ", call.op(), "): declares ", types.size(),
                       " outputs but its function returns ", r.rets.size()));
    }
    std::vector<std::string> in = r.rets;
    in.insert(in.end(), r.control.begin(), r.control.end());
    NodeDef out =
        Make(call.name(), types.empty() ? "NoOp" : "IdentityN", std::move(in), call.device());
    if (!types.empty()) (*out.mutable_attr())["T"] = MakeAttr(absl::MakeConstSpan(types));
    for (const auto& [k, v] : call.attr()) {
      if (!k.empty() && k[0] == '_') (*out.mutable_attr())[k] = v;
    }
    return Emit(std::move(out), parent);
  }

  // InvalidArgument when `fname` reaches itself through the functions its
  // body calls (inlined or not) or is already being inlined.
  absl::Status CheckNotRecursive(const std::string& fname, const Scope& parent) {
    std::vector<std::string> path = parent.stack;
    for (const std::string& s : parent.stack) {
      if (s == fname) {
        return absl::InvalidArgumentError(absl::StrCat("function '", fname, "' calls itself (",
                                                       absl::StrJoin(path, " -> "), " -> ", fname,
                                                       "); recursive functions are not supported"));
      }
    }
    // Depth-first over the call graph from fname, with the path.
    absl::flat_hash_set<std::string> done;
    std::vector<std::string> chain = {fname};
    std::function<bool(const std::string&)> reaches = [&](const std::string& g) -> bool {
      auto it = functions_.find(g);
      if (it == functions_.end()) return false;
      for (const std::string& c : Callees(*it->second)) {
        if (!functions_.contains(c)) continue;
        if (c == fname) {
          chain.push_back(c);
          return true;
        }
        if (!done.insert(c).second) continue;
        chain.push_back(c);
        if (reaches(c)) return true;
        chain.pop_back();
      }
      return false;
    };
    if (reaches(fname)) {
      return absl::InvalidArgumentError(absl::StrCat("function '", fname, "' calls itself (",
                                                     absl::StrJoin(chain, " -> "),
                                                     "); recursive functions are not supported"));
    }
    return absl::OkStatus();
  }

  // A call that stays a call frame: one (Stateful)PartitionedCall node
  // named as the call, its function instantiated at run time.
  absl::Status EmitCallFrame(const NodeDef& n, const FunctionDef& fn,
                             const google::protobuf::Map<std::string, AttrValue>& attrs,
                             const std::vector<std::string>& data,
                             const std::vector<std::string>& control, const Scope& parent,
                             bool stateful) {
    const std::string& fname = fn.signature().name();
    GR_RETURN_IF_ERROR(CheckNotRecursive(fname, parent));
    DataTypeVector in_types, out_types;
    GR_RETURN_IF_ERROR(CallTypes(fn, n.name(), attrs, data.size(), &in_types, &out_types));
    std::vector<std::string> in = data;
    in.insert(in.end(), control.begin(), control.end());
    NodeDef c = Make(n.name(), stateful ? "StatefulPartitionedCall" : "PartitionedCall",
                     std::move(in), n.device());
    AttrValue f;
    f.mutable_func()->set_name(fname);
    *f.mutable_func()->mutable_attr() = attrs;
    (*c.mutable_attr())["f"] = std::move(f);
    (*c.mutable_attr())["Tin"] = MakeAttr(absl::MakeConstSpan(in_types));
    (*c.mutable_attr())["Tout"] = MakeAttr(absl::MakeConstSpan(out_types));
    for (const auto& [k, v] : n.attr()) {
      if (!k.empty() && k[0] == '_' && k != kInlineAttr) (*c.mutable_attr())[k] = v;
    }
    keep_library_ = true;
    return Emit(std::move(c), parent);
  }

  absl::Status LowerCall(const NodeDef& n, const FunctionDef& fn,
                         const google::protobuf::Map<std::string, AttrValue>& attrs,
                         const std::vector<std::string>& data,
                         const std::vector<std::string>& control, const Scope& parent) {
    DataTypeVector in_types, out_types;
    GR_RETURN_IF_ERROR(CallTypes(fn, n.name(), attrs, data.size(), &in_types, &out_types));
    // A call node's own Tin and Tout (a function used as an op has none)
    // must be the function's types, as TensorFlow checks them when it
    // instantiates the function.
    for (const auto& [attr, types] :
         {std::pair<const char*, const DataTypeVector*>{"Tin", &in_types}, {"Tout", &out_types}}) {
      if (!n.attr().contains(attr)) continue;
      DataTypeVector declared;
      GR_RETURN_IF_ERROR(GetAttr(n, attr, &declared));
      if (declared != *types) {
        return absl::InvalidArgumentError(absl::StrCat(
            parent.Where(n.name()), " (op ", n.op(), "): ", attr, " lists ",
            DataTypeVectorString(declared), " but function '", fn.signature().name(), "' ",
            attr == std::string("Tin") ? "takes " : "returns ", DataTypeVectorString(*types)));
      }
    }
    // The arguments pass through one IdentityN of the function's input
    // types, as TensorFlow's inliner puts an Identity per input: a tensor
    // of another type is then an edge type error naming the call.
    std::vector<std::string> args = data;
    // (Not needed when every input is a top-level _Arg of its type: a call
    // frame's body instantiated at run time.)
    bool typed = parent.fn == nullptr;
    for (size_t i = 0; typed && i < data.size(); ++i) {
      auto it = top_nodes_.find(data[i]);
      DataType t = DT_INVALID;
      typed = it != top_nodes_.end() && it->second->op() == "_Arg" &&
              GetAttr(*it->second, "T", &t).ok() && t == in_types[i];
    }
    if (!data.empty() && !typed) {
      NodeDef in = Make(Unique(n.name() + "/args"), "IdentityN", data, n.device());
      (*in.mutable_attr())["T"] = MakeAttr(absl::MakeConstSpan(in_types));
      for (size_t i = 0; i < data.size(); ++i) args[i] = absl::StrCat(in.name(), ":", i);
      const std::string name = in.name();
      GR_RETURN_IF_ERROR(Emit(std::move(in), parent));
      out_.origin[name] = absl::StrCat("the arguments of ", parent.Where(n.name()),
                                       ", a call of function '", fn.signature().name(), "'");
    }
    GR_ASSIGN_OR_RETURN(std::string entry, EntryFor(n, control, parent));
    GR_ASSIGN_OR_RETURN(BodyResult r, InlineBody(fn, parent, n, n.name(), attrs, args, entry));
    return EmitOutputs(n, parent, r, out_types);
  }

  // A bool predicate for Switch/LoopCond: `t` itself, or a Cast of it.
  absl::StatusOr<std::string> AsBool(const std::string& t, DataType type, const std::string& name,
                                     const Scope& scope, const std::string& device) {
    if (type == DT_BOOL) return t;
    NodeDef c = Make(Unique(name), "Cast", {t}, device);
    (*c.mutable_attr())["SrcT"] = MakeAttr(type);
    (*c.mutable_attr())["DstT"] = MakeAttr(DT_BOOL);
    std::string out = c.name();
    GR_RETURN_IF_ERROR(Emit(std::move(c), scope));
    return out;
  }

  // If and Case: the predicate (Switch) or the branch index (_SwitchN)
  // routes every input to one branch, each branch is inlined behind a
  // pivot of its own, and one Merge per output joins the branches. If's
  // branches are [else, then], Switch's output order.
  absl::Status LowerBranches(const NodeDef& n, const std::vector<std::string>& data,
                             const std::vector<std::string>& control, const Scope& parent) {
    const bool is_case = IsCase(n.op());
    struct Branch {
      const FunctionDef* fn;
      const google::protobuf::Map<std::string, AttrValue>* attrs;
      std::string body, pivot;  // name suffixes
    };
    std::vector<Branch> branches;
    if (is_case) {
      auto it = n.attr().find("branches");
      if (it == n.attr().end() || it->second.list().func_size() == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(parent.Where(n.name()), " (op ", n.op(), "): has no branches"));
      }
      for (int b = 0; b < it->second.list().func_size(); ++b) {
        const auto& f = it->second.list().func(b);
        auto fn = functions_.find(f.name());
        if (fn == functions_.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              parent.Where(n.name()), " (op ", n.op(), "): branch ", b, " names function '",
              f.name(), "', which is not in the graph's function library"));
        }
        branches.push_back(
            {fn->second, &f.attr(), absl::StrCat("branch", b), absl::StrCat("pivot_", b)});
      }
    } else {
      GR_ASSIGN_OR_RETURN(const FunctionDef* then_fn, FuncAttr(parent, n, "then_branch"));
      GR_ASSIGN_OR_RETURN(const FunctionDef* else_fn, FuncAttr(parent, n, "else_branch"));
      branches.push_back({else_fn, &n.attr().at("else_branch").func().attr(), "else", "pivot_f"});
      branches.push_back({then_fn, &n.attr().at("then_branch").func().attr(), "then", "pivot_t"});
    }
    const int num = static_cast<int>(branches.size());
    DataTypeVector tin, tout;
    GR_RETURN_IF_ERROR(GetAttr(n, "Tin", &tin));
    GR_RETURN_IF_ERROR(GetAttr(n, "Tout", &tout));
    if (data.empty() || data.size() != tin.size() + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          parent.Where(n.name()), " (op ", n.op(), "): has ", data.size(), " inputs but Tin lists ",
          tin.size(), " after the ", is_case ? "branch index" : "predicate"));
    }
    const std::string& dev = n.device();
    const std::string& p = n.name();
    std::string by = data[0];  // the predicate or the index
    DataType by_type = DT_INT32;
    if (!is_case) {
      DataType tcond = DT_BOOL;
      GR_RETURN_IF_ERROR(GetAttr(n, "Tcond", &tcond));
      GR_ASSIGN_OR_RETURN(by, AsBool(data[0], tcond, p + "/cond_bool", parent, dev));
      by_type = DT_BOOL;
    }
    // A Switch (or _SwitchN) of `value` by the predicate (or index).
    auto route = [&](const std::string& name, const std::string& value, DataType type) {
      std::vector<std::string> in = {value, by};
      in.insert(in.end(), control.begin(), control.end());
      NodeDef r = Make(Unique(name), is_case ? "_SwitchN" : "Switch", std::move(in), dev);
      (*r.mutable_attr())["T"] = MakeAttr(type);
      if (is_case) (*r.mutable_attr())["num_outs"] = MakeAttr(num);
      return r;
    };
    NodeDef sp = route(p + "/switch_pred", by, by_type);
    const std::string switch_pred = sp.name();
    GR_RETURN_IF_ERROR(Emit(std::move(sp), parent));
    std::vector<std::string> pivots;
    for (int b = 0; b < num; ++b) {
      NodeDef id = Make(Unique(p + "/" + branches[b].pivot), "Identity",
                        {absl::StrCat(switch_pred, ":", b)}, dev);
      (*id.mutable_attr())["T"] = MakeAttr(by_type);
      pivots.push_back(id.name());
      GR_RETURN_IF_ERROR(Emit(std::move(id), parent));
    }
    std::vector<std::vector<std::string>> ins(num);
    for (size_t i = 0; i < tin.size(); ++i) {
      NodeDef sw = route(absl::StrCat(p, "/switch_", i), data[i + 1], tin[i]);
      for (int b = 0; b < num; ++b) ins[b].push_back(absl::StrCat(sw.name(), ":", b));
      GR_RETURN_IF_ERROR(Emit(std::move(sw), parent));
    }
    std::vector<BodyResult> rs;
    for (int b = 0; b < num; ++b) {
      GR_ASSIGN_OR_RETURN(BodyResult r,
                          InlineBody(*branches[b].fn, parent, n, p + "/" + branches[b].body,
                                     *branches[b].attrs, ins[b], pivots[b]));
      rs.push_back(std::move(r));
    }
    for (int b = 0; b < num; ++b) {
      if (rs[b].rets.size() == tout.size()) continue;
      const std::string head =
          absl::StrCat(parent.Where(n.name()), " (op ", n.op(), "): Tout lists ", tout.size());
      return absl::InvalidArgumentError(
          is_case ? absl::StrCat(head, " outputs but branch ", b, " returns ", rs[b].rets.size())
                  : absl::StrCat(head, " outputs but then_branch returns ", rs[1].rets.size(),
                                 " and else_branch ", rs[0].rets.size()));
    }
    BodyResult merged;
    bool controls = tout.empty();
    for (int b = 0; b < num; ++b) controls = controls || !rs[b].control.empty();
    for (size_t j = 0; j < tout.size(); ++j) {
      std::vector<std::string> in;
      for (int b = 0; b < num; ++b) in.push_back(rs[b].rets[j]);
      NodeDef m = Make(Unique(absl::StrCat(p, "/merge_", j)), "Merge", std::move(in), dev);
      (*m.mutable_attr())["T"] = MakeAttr(tout[j]);
      (*m.mutable_attr())["N"] = MakeAttr(num);
      merged.rets.push_back(m.name());
      GR_RETURN_IF_ERROR(Emit(std::move(m), parent));
    }
    if (controls) {
      // Which branch ran, once its control returns have: a Merge of one
      // live and the other dead Identities of the pivots.
      std::vector<std::string> done;
      for (int b = 0; b < num; ++b) {
        std::vector<std::string> in = {pivots[b]};
        in.insert(in.end(), rs[b].control.begin(), rs[b].control.end());
        NodeDef id = Make(Unique(pivots[b] + "_done"), "Identity", std::move(in), dev);
        (*id.mutable_attr())["T"] = MakeAttr(by_type);
        done.push_back(id.name());
        GR_RETURN_IF_ERROR(Emit(std::move(id), parent));
      }
      NodeDef m = Make(Unique(p + "/branch_executed"), "Merge", done, dev);
      (*m.mutable_attr())["T"] = MakeAttr(by_type);
      (*m.mutable_attr())["N"] = MakeAttr(num);
      merged.control.push_back(absl::StrCat("^", m.name()));
      GR_RETURN_IF_ERROR(Emit(std::move(m), parent));
    }
    return EmitOutputs(n, parent, merged, tout);
  }

  absl::Status LowerWhile(const NodeDef& n, const std::vector<std::string>& data,
                          const std::vector<std::string>& control, const Scope& parent) {
    GR_ASSIGN_OR_RETURN(const FunctionDef* cond_fn, FuncAttr(parent, n, "cond"));
    GR_ASSIGN_OR_RETURN(const FunctionDef* body_fn, FuncAttr(parent, n, "body"));
    DataTypeVector types;
    GR_RETURN_IF_ERROR(GetAttr(n, "T", &types));
    int64_t parallel = 10;
    if (HasAttr(n, "parallel_iterations"))
      GR_RETURN_IF_ERROR(GetAttr(n, "parallel_iterations", &parallel));
    if (types.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(parent.Where(n.name()), " (op ", n.op(), "): has no loop variables"));
    }
    if (data.size() != types.size()) {
      return absl::InvalidArgumentError(absl::StrCat(parent.Where(n.name()), " (op ", n.op(),
                                                     "): has ", data.size(), " inputs but T lists ",
                                                     types.size()));
    }
    const std::string& dev = n.device();
    const std::string& p = n.name();
    const size_t k = types.size();
    std::vector<std::string> merges(k), nexts(k), switches(k), idents(k);
    for (size_t i = 0; i < k; ++i) {
      std::vector<std::string> in = {data[i]};
      in.insert(in.end(), control.begin(), control.end());
      NodeDef e = Make(Unique(absl::StrCat(p, "/enter_", i)), "Enter", std::move(in), dev);
      (*e.mutable_attr())["T"] = MakeAttr(types[i]);
      (*e.mutable_attr())["frame_name"] = MakeAttr(p);
      (*e.mutable_attr())["is_constant"] = MakeAttr(false);
      (*e.mutable_attr())["parallel_iterations"] = MakeAttr(parallel);
      merges[i] = Unique(absl::StrCat(p, "/merge_", i));
      nexts[i] = Unique(absl::StrCat(p, "/next_iteration_", i));
      NodeDef m = Make(merges[i], "Merge", {e.name(), nexts[i]}, dev);
      (*m.mutable_attr())["T"] = MakeAttr(types[i]);
      (*m.mutable_attr())["N"] = MakeAttr(2);
      GR_RETURN_IF_ERROR(Emit(std::move(e), parent));
      GR_RETURN_IF_ERROR(Emit(std::move(m), parent));
    }
    const auto& cattrs = n.attr().at("cond").func().attr();
    const auto& battrs = n.attr().at("body").func().attr();
    GR_ASSIGN_OR_RETURN(BodyResult rc,
                        InlineBody(*cond_fn, parent, n, p + "/cond", cattrs, merges, merges[0]));
    if (rc.rets.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("function '", cond_fn->signature().name(),
                                                     "' (cond of '", p, "'): returns ",
                                                     rc.rets.size(), " values, not 1"));
    }
    NodeDef sig_node;
    sig_node.set_name(p);
    *sig_node.mutable_attr() = cattrs;
    DataTypeVector cin, cout;
    GR_RETURN_IF_ERROR(InOutTypesForNode(sig_node, cond_fn->signature(), &cin, &cout));
    GR_ASSIGN_OR_RETURN(std::string pred,
                        AsBool(rc.rets[0], cout[0], p + "/cond_bool", parent, dev));
    NodeDef lc = Make(Unique(p + "/loop_cond"), "LoopCond", {pred}, dev);
    const std::string loop_cond = lc.name();
    GR_RETURN_IF_ERROR(Emit(std::move(lc), parent));
    for (size_t i = 0; i < k; ++i) {
      NodeDef sw =
          Make(Unique(absl::StrCat(p, "/switch_", i)), "Switch", {merges[i], loop_cond}, dev);
      (*sw.mutable_attr())["T"] = MakeAttr(types[i]);
      switches[i] = sw.name();
      GR_RETURN_IF_ERROR(Emit(std::move(sw), parent));
      NodeDef id = Make(Unique(absl::StrCat(p, "/body_input_", i)), "Identity",
                        {absl::StrCat(switches[i], ":1")}, dev);
      (*id.mutable_attr())["T"] = MakeAttr(types[i]);
      idents[i] = id.name();
      GR_RETURN_IF_ERROR(Emit(std::move(id), parent));
    }
    GR_ASSIGN_OR_RETURN(BodyResult rb,
                        InlineBody(*body_fn, parent, n, p + "/body", battrs, idents, idents[0]));
    if (rb.rets.size() != k) {
      return absl::InvalidArgumentError(
          absl::StrCat("function '", body_fn->signature().name(), "' (body of '", p, "'): returns ",
                       rb.rets.size(), " values for ", k, " loop variables"));
    }
    BodyResult exits;
    for (size_t i = 0; i < k; ++i) {
      std::vector<std::string> in = {rb.rets[i]};
      in.insert(in.end(), rb.control.begin(), rb.control.end());
      NodeDef ni = Make(nexts[i], "NextIteration", std::move(in), dev);
      (*ni.mutable_attr())["T"] = MakeAttr(types[i]);
      GR_RETURN_IF_ERROR(Emit(std::move(ni), parent));
      NodeDef ex = Make(Unique(absl::StrCat(p, "/exit_", i)), "Exit", {switches[i]}, dev);
      (*ex.mutable_attr())["T"] = MakeAttr(types[i]);
      exits.rets.push_back(ex.name());
      GR_RETURN_IF_ERROR(Emit(std::move(ex), parent));
    }
    return EmitOutputs(n, parent, exits, types);
  }

  absl::Status ProcessNodes(const std::vector<const NodeDef*>& nodes, Scope& scope) {
    // Substitute attrs first: output ranges of any node may be needed by
    // the inputs of any other.
    if (scope.fn != nullptr) {
      for (const NodeDef* n : nodes) {
        NodeDef copy = *n;
        for (auto& [k, v] : *copy.mutable_attr())
          GR_RETURN_IF_ERROR(Substitute(scope, n->name(), &v));
        const OpDef* op = OpDefFor(n->op());
        scope.nodes.emplace(n->name(), std::make_pair(std::move(copy), op));
      }
    }
    for (const NodeDef* orig : nodes) {
      const NodeDef& src = scope.fn != nullptr ? scope.nodes.at(orig->name()).first : *orig;
      NodeDef n = src;
      n.set_name(scope.names.at(src.name()));
      n.clear_input();
      std::vector<std::string> data, control;
      for (const std::string& in : src.input()) {
        if (in.empty() || in == "^") {
          return absl::InvalidArgumentError(
              absl::StrCat(scope.Where(src.name()), ": has an empty input name"));
        }
        GR_ASSIGN_OR_RETURN(std::string t, Resolve(scope, src.name(), in));
        (t[0] == '^' ? control : data).push_back(std::move(t));
      }
      if (scope.fn != nullptr) {
        if (n.device().empty()) n.set_device(scope.device);
        auto cls = n.mutable_attr()->find("_class");
        if (cls != n.mutable_attr()->end()) {
          for (std::string& c : *cls->second.mutable_list()->mutable_s()) {
            if (c.rfind("loc:@", 0) != 0) continue;
            auto it = scope.names.find(c.substr(5));
            if (it != scope.names.end()) c = "loc:@" + it->second;
          }
        }
      }
      auto fn = functions_.find(src.op());
      if (fn != functions_.end()) {
        if (StaysCallFrame(*fn->second, n, functions_, &names_task_)) {
          // Attrs of a function used as an op are the function's.
          google::protobuf::Map<std::string, AttrValue> attrs;
          for (const auto& [k, v] : n.attr()) {
            if (k.empty() || k[0] != '_') attrs[k] = v;
          }
          GR_RETURN_IF_ERROR(EmitCallFrame(n, *fn->second, attrs, data, control, scope, true));
        } else {
          GR_RETURN_IF_ERROR(LowerCall(n, *fn->second, n.attr(), data, control, scope));
        }
      } else if (IsCall(src.op())) {
        GR_ASSIGN_OR_RETURN(const FunctionDef* f, FuncAttr(scope, n, "f"));
        const auto attrs = n.attr().at("f").func().attr();
        if (StaysCallFrame(*f, n, functions_, &names_task_)) {
          GR_RETURN_IF_ERROR(EmitCallFrame(n, *f, attrs, data, control, scope,
                                           src.op() == "StatefulPartitionedCall"));
        } else {
          GR_RETURN_IF_ERROR(LowerCall(n, *f, attrs, data, control, scope));
        }
      } else if (IsIf(src.op()) || IsCase(src.op())) {
        GR_RETURN_IF_ERROR(LowerBranches(n, data, control, scope));
      } else if (IsWhile(src.op())) {
        GR_RETURN_IF_ERROR(LowerWhile(n, data, control, scope));
      } else {
        for (auto& d : data) n.add_input(std::move(d));
        for (auto& c : control) n.add_input(std::move(c));
        GR_RETURN_IF_ERROR(Emit(std::move(n), scope));
      }
    }
    return absl::OkStatus();
  }

  const GraphDef& def_;
  const OpRegistry& registry_;
  const LoweringOptions options_;
  absl::flat_hash_map<std::string, const FunctionDef*> functions_;
  // Whether a function's body names a task (StaysCallFrame), per function.
  absl::flat_hash_map<const FunctionDef*, bool> names_task_;
  absl::flat_hash_set<std::string> used_;
  // The graph's own nodes by name.
  absl::flat_hash_map<std::string, const NodeDef*> top_nodes_;
  LoweredGraph out_;
  DataTypeVector out_unused_;
  bool keep_library_ = false;
};

}  // namespace

bool NeedsLowering(const GraphDef& def) {
  FunctionMap fns;
  for (const FunctionDef& f : def.library().function()) fns[f.signature().name()] = &f;
  bool calls = false;  // some node calls into the library
  absl::flat_hash_map<const FunctionDef*, bool> names_task;
  for (const NodeDef& n : def.node()) {
    if (IsIf(n.op()) || IsCase(n.op()) || IsWhile(n.op())) return true;
    // A function used as an op becomes a call (inlined or a call frame).
    if (fns.contains(n.op())) return true;
    if (!IsCall(n.op())) continue;
    auto a = n.attr().find("f");
    if (a == n.attr().end() || !a->second.has_func()) return true;
    auto it = fns.find(a->second.func().name());
    if (it == fns.end() || !StaysCallFrame(*it->second, n, fns, &names_task)) return true;
    calls = true;
  }
  // A library nothing calls is dropped (and checked) by lowering; one whose
  // calls all stay call frames is what lowering leaves.
  return !fns.empty() && !calls;
}

absl::StatusOr<LoweredGraph> LowerFunctionCalls(const GraphDef& def, const OpRegistry& registry,
                                                const LoweringOptions& options) {
  return Lowering(def, registry, options).Run();
}

absl::Status AnnotateLoweringError(const absl::Status& status,
                                   const absl::flat_hash_map<std::string, std::string>& origin) {
  if (status.ok() || origin.empty()) return status;
  std::string msg(status.message());
  size_t pos = 0;
  while ((pos = msg.find("node '", pos)) != std::string::npos) {
    size_t start = pos + 6;
    size_t end = msg.find('\'', start);
    if (end == std::string::npos) break;
    auto it = origin.find(msg.substr(start, end - start));
    if (it != origin.end()) {
      msg.replace(pos, end + 1 - pos, it->second);
      return absl::Status(status.code(), msg);
    }
    pos = end;
  }
  return status;
}

}  // namespace graphrun
