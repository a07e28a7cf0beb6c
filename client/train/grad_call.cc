// Gradients through call frames: a PartitionedCall or StatefulPartitionedCall
// that lowering left in the graph (a `_noinline` function,
// graph/function_lowering.h) runs its body in an executor of its own, so
// nothing in the caller's graph can read the body's intermediate values.
// TensorFlow differentiates such a call through the function's gradient
// function; graphrun builds what that amounts to in the caller's graph:
//  - the body is instantiated once more, inlined (ImportGraphDef of one call
//    marked kInlineAttr), on the call's own inputs (its input_map);
//  - the gradient of the copy's results, weighted by the gradients of the
//    call's outputs, is the gradient of the call's inputs. Loops and
//    conditionals in the body, and further call frames, are differentiated
//    as anywhere else, with the caller's registry and options.
// A call inside a loop body is differentiated the same way while the
// body's gradient is built (grad_while.h's CurrentTraversal): the copy's
// nodes are part of that gradient, so they move into the backprop frame,
// where they read the call's inputs popped from the forward loop's stacks,
// and the copy is differentiated as body.
// A function with a loop of its own (at any depth of the functions it
// calls), called in a loop body, is differentiated as TensorFlow
// differentiates any call: through a gradient function. Its copy would be
// a loop nested in the backprop loop that neither side builds, so the
// gradient is built once in a graph of its own instead, where that loop is
// at the top level: the body inlined on placeholders for the call's inputs,
// differentiated with placeholders for the outputs' gradients, and stored
// in the library as a `_noinline` function `<f>_grad`, (inputs...,
// output gradients...) -> input gradients. The backprop frame calls it as a
// call frame, on the call's inputs popped there like any forward value.
// The copy computes the forward values again (as tf.recompute_grad does),
// so the function must have no side effects: a body, or a function it
// calls, with a stateful op other than creating or reading a resource
// variable handle is Unimplemented naming the function and the node.
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "client/graph_import.h"
#include "client/train/grad_internal.h"
#include "client/train/grad_while.h"
#include "client/train/gradients.h"
#include "google/protobuf/util/message_differencer.h"
#include "graph/function_lowering.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using namespace internal;  // NOLINT: the op helpers

using Outs = absl::StatusOr<std::vector<Output>>;

const tensorflow::FunctionDef* FindFunction(const tensorflow::FunctionDefLibrary& lib,
                                            const std::string& name) {
  for (const tensorflow::FunctionDef& f : lib.function()) {
    if (f.signature().name() == name) return &f;
  }
  return nullptr;
}

// Ops that are stateful only through what they call, or that only name or
// read a variable: running them twice in a step changes nothing.
bool Recomputable(const std::string& op) {
  return op == "ReadVariableOp" || op == "VarHandleOp" || op == "While" || op == "If" ||
         op == "StatefulPartitionedCall" || op == "PartitionedCall";
}

// OK when function `name` (and every function it calls) can run twice.
absl::Status CheckRecomputable(const tensorflow::FunctionDefLibrary& lib, const OpRegistry& ops,
                               const std::string& name, const std::string& call,
                               absl::flat_hash_set<std::string>* seen) {
  if (!seen->insert(name).second) return absl::OkStatus();
  const tensorflow::FunctionDef* f = FindFunction(lib, name);
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("gradients: node '", call, "' calls function '",
                                                   name, "', which is not in the library"));
  }
  for (const tensorflow::NodeDef& n : f->node_def()) {
    if (FindFunction(lib, n.op()) != nullptr) {
      GR_RETURN_IF_ERROR(CheckRecomputable(lib, ops, n.op(), call, seen));
      continue;
    }
    for (const auto& [attr, v] : n.attr()) {
      if (v.has_func())
        GR_RETURN_IF_ERROR(CheckRecomputable(lib, ops, v.func().name(), call, seen));
      for (const auto& fn : v.list().func()) {
        GR_RETURN_IF_ERROR(CheckRecomputable(lib, ops, fn.name(), call, seen));
      }
    }
    if (n.op() == "VarHandleOp") {
      auto it = n.attr().find("shared_name");
      if (it == n.attr().end() || it->second.s().empty()) {
        return absl::UnimplementedError(
            absl::StrCat("gradients: node '", call, "' runs function '", name,
                         "' as a call frame, and its node '", n.name(),
                         "' (op VarHandleOp) has no shared_name: a recomputed copy would name "
                         "another variable"));
      }
    }
    const OpRegistrationData* d = ops.LookUp(n.op());
    if (d != nullptr && d->op_def.is_stateful() && !Recomputable(n.op())) {
      return absl::UnimplementedError(absl::StrCat(
          "gradients: node '", call, "' runs function '", name, "' as a call frame, and its node '",
          n.name(), "' (op ", n.op(),
          ") is stateful: its gradient would run the body again (inline the function to "
          "differentiate it)"));
    }
  }
  return absl::OkStatus();
}

// True when function `name`, or one it calls, has a loop (a functional
// While, or a v1 frame's Enter).
bool HasLoop(const tensorflow::FunctionDefLibrary& lib, const std::string& name,
             absl::flat_hash_set<std::string>* seen) {
  if (!seen->insert(name).second) return false;
  const tensorflow::FunctionDef* f = FindFunction(lib, name);
  if (f == nullptr) return false;
  for (const tensorflow::NodeDef& n : f->node_def()) {
    if (n.op() == "While" || n.op() == "StatelessWhile" || n.op() == "Enter") return true;
    if (FindFunction(lib, n.op()) != nullptr && HasLoop(lib, n.op(), seen)) return true;
    for (const auto& [attr, v] : n.attr()) {
      if (v.has_func() && HasLoop(lib, v.func().name(), seen)) return true;
      for (const auto& fn : v.list().func()) {
        if (HasLoop(lib, fn.name(), seen)) return true;
      }
    }
  }
  return false;
}

// A GraphDef of one call of `call`'s function, inlined, on placeholders
// "arg<i>" (the call's inputs).
tensorflow::GraphDef OneInlinedCall(const Graph& g, const Node* call) {
  tensorflow::GraphDef def;
  *def.mutable_library() = g.library();
  tensorflow::NodeDef* c = def.add_node();
  c->set_name("call");
  c->set_op(call->op());
  for (const auto& [name, v] : call->def().attr()) (*c->mutable_attr())[name] = v;
  (*c->mutable_attr())[kInlineAttr].set_b(true);
  for (int i = 0; i < call->num_inputs(); ++i) {
    const std::string arg = absl::StrCat("arg", i);
    tensorflow::NodeDef* p = def.add_node();
    p->set_name(arg);
    p->set_op("Placeholder");
    (*p->mutable_attr())["dtype"].set_type(
        static_cast<tensorflow::DataType>(BaseType(call->input_type(i))));
    c->add_input(arg);
  }
  return def;
}

// The gradient of a call as a function of its own (see the top): adds
// `<f>_grad` (and any function its building adds) to the library of
// `s`'s graph and returns a call of it on `xs` and `grad_ys`, the
// gradients of outputs `outs`; one Output per input, null where none.
Outs CallThroughGradientFunction(const Scope& s, const Node* call, const std::string& fname,
                                 const std::vector<Output>& xs, const std::vector<int>& outs,
                                 const std::vector<Output>& grad_ys,
                                 const GradientOptions& options) {
  Graph* g = s.graph();
  const int n_in = call->num_inputs();
  tensorflow::GraphDef def = OneInlinedCall(*g, call);
  for (size_t k = 0; k < outs.size(); ++k) {
    tensorflow::NodeDef* p = def.add_node();
    p->set_name(absl::StrCat("dy", k));
    p->set_op("Placeholder");
    (*p->mutable_attr())["dtype"].set_type(
        static_cast<tensorflow::DataType>(BaseType(grad_ys[k].type())));
  }
  Scope fs = Scope::NewRootScope();
  GR_ASSIGN_OR_RETURN(ImportedGraph copy, ImportGraphDef(fs, def, ""));
  std::vector<Output> fx, fy, fdy;
  for (int i = 0; i < n_in; ++i) {
    GR_ASSIGN_OR_RETURN(Output x, copy.Tensor(absl::StrCat("arg", i)));
    fx.push_back(x);
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    GR_ASSIGN_OR_RETURN(Output y, copy.Tensor(absl::StrCat("call:", outs[k])));
    GR_ASSIGN_OR_RETURN(Output d, copy.Tensor(absl::StrCat("dy", k)));
    fy.push_back(y);
    fdy.push_back(d);
  }
  GR_ASSIGN_OR_RETURN(std::vector<Gradient> grads, ComputeGradients(fs, fy, fx, fdy, options));
  std::vector<Output> dx(static_cast<size_t>(n_in));
  for (int i = 0; i < n_in; ++i) {
    const Gradient& d = grads[static_cast<size_t>(i)];
    if (!d.is_null()) dx[static_cast<size_t>(i)] = ToDense(fs, d);
  }
  if (!fs.ok()) return fs.status();

  // The graph as a function: placeholders become arguments, the gradients
  // its results. Body inputs keep the graph's "node:index" form. Named
  // below, once its contents are known.
  std::string name;
  tensorflow::GraphDef body;
  fs.graph()->ToGraphDef(&body);
  tensorflow::FunctionDef fd;
  tensorflow::OpDef* sig = fd.mutable_signature();
  sig->set_is_stateful(true);
  (*fd.mutable_attr())[kNoInlineAttr].set_b(true);
  absl::flat_hash_set<std::string> args;
  std::vector<DataType> tin, tout;
  auto add_arg = [&](const std::string& arg, DataType t) {
    tensorflow::OpDef::ArgDef* a = sig->add_input_arg();
    a->set_name(arg);
    a->set_type(static_cast<tensorflow::DataType>(t));
    args.insert(arg);
    tin.push_back(t);
  };
  for (int i = 0; i < n_in; ++i) add_arg(absl::StrCat("arg", i), BaseType(call->input_type(i)));
  for (size_t k = 0; k < outs.size(); ++k) {
    add_arg(absl::StrCat("dy", k), BaseType(grad_ys[k].type()));
  }
  for (const tensorflow::NodeDef& n : body.node()) {
    if (args.contains(n.name())) continue;
    tensorflow::NodeDef* b = fd.add_node_def();
    *b = n;
    b->clear_device();
  }
  std::vector<int> result_of;  // input -> result index, or -1
  for (int i = 0; i < n_in; ++i) {
    const Output& d = dx[static_cast<size_t>(i)];
    if (d.node() == nullptr) {
      result_of.push_back(-1);
      continue;
    }
    result_of.push_back(static_cast<int>(tout.size()));
    const std::string ret = absl::StrCat("dx", i);
    tensorflow::OpDef::ArgDef* a = sig->add_output_arg();
    a->set_name(ret);
    a->set_type(static_cast<tensorflow::DataType>(BaseType(d.type())));
    tout.push_back(BaseType(d.type()));
    (*fd.mutable_ret())[ret] =
        d.index() == 0 ? d.node()->name() : absl::StrCat(d.node()->name(), ":", d.index());
  }
  std::vector<Output> out(static_cast<size_t>(n_in));
  if (tout.empty()) return out;
  // Functions the gradient's building added (gradient functions of calls
  // in this body), then this one.
  for (const tensorflow::FunctionDef& f : fs.graph()->library().function()) {
    if (FindFunction(g->library(), f.signature().name()) == nullptr) {
      *g->mutable_library()->add_function() = f;
    }
  }
  // `<f>_grad`, or `<f>_grad_2`, ... when that name holds another
  // function; the same gradient taken again (gradients of one graph asked
  // for twice) reuses the function it made the first time.
  for (int k = 1;; ++k) {
    name = k == 1 ? fname + "_grad" : absl::StrCat(fname, "_grad_", k);
    sig->set_name(name);
    const tensorflow::FunctionDef* have = FindFunction(g->library(), name);
    if (have == nullptr) {
      *g->mutable_library()->add_function() = std::move(fd);
      break;
    }
    if (google::protobuf::util::MessageDifferencer::Equals(*have, fd)) break;
  }

  std::vector<Input> in(xs.begin(), xs.end());
  in.insert(in.end(), grad_ys.begin(), grad_ys.end());
  tensorflow::AttrValue f;
  f.mutable_func()->set_name(name);
  Operation gc = Op(s.WithOpName(absl::StrCat(call->name(), "_grad")), "StatefulPartitionedCall")
                     .InList(InputList(in))
                     .Attr("Tin", client::internal::AttrTypeList(tin))
                     .Attr("Tout", client::internal::AttrTypeList(tout))
                     .Attr("f", f)
                     .Build();
  if (!s.ok()) return s.status();
  for (int i = 0; i < n_in; ++i) {
    const int r = result_of[static_cast<size_t>(i)];
    if (r >= 0) out[static_cast<size_t>(i)] = Output(gc, r);
  }
  return out;
}

Outs CallGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  Node* call = op.node();
  const int n_in = call->num_inputs(), n_out = call->num_outputs();
  std::vector<Output> out(static_cast<size_t>(n_in));
  std::vector<Output> ys, grad_ys;
  for (int i = 0; i < n_out && i < static_cast<int>(dy.size()); ++i) {
    if (dy[i].node() == nullptr) continue;
    ys.push_back(Output());  // set once the copy exists
    grad_ys.push_back(dy[i]);
  }
  if (grad_ys.empty()) return out;
  const auto& attrs = call->def().attr();
  auto f = attrs.find("f");
  if (f == attrs.end() || !f->second.has_func()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradients: node '", call->name(), "' (op ", call->op(), ") has no attr f"));
  }
  const std::string& fname = f->second.func().name();
  Graph* g = s.graph();
  absl::flat_hash_set<std::string> seen;
  GR_RETURN_IF_ERROR(CheckRecomputable(g->library(), g->op_registry(), fname, call->name(), &seen));

  const loop_grad::Traversal* t = loop_grad::CurrentTraversal();
  if (t != nullptr && t->graph != g) t = nullptr;  // (a traversal of another graph)
  const bool in_body = t != nullptr && t->body_frame != nullptr;
  // The caller's options (its registry), but null for unconnected inputs.
  GradientOptions options = t != nullptr && t->options != nullptr ? *t->options : GradientOptions();
  options.unconnected_zeros = false;

  absl::flat_hash_map<std::string, Output> input_map;
  std::vector<Output> xs;
  for (int i = 0; i < n_in; ++i) {
    const Edge* e = call->input_edge(i);
    if (e == nullptr) return absl::InternalError("a call input without an edge");
    const std::string arg = absl::StrCat("arg", i);
    // A fresh Identity per input, differentiated instead of the input
    // itself: two inputs that are the same tensor, or one computed from
    // the other, would otherwise count a path twice (the traversal would
    // reach one input through the other, and the caller adds both).
    Output x = Output(e->src, e->src_output);
    xs.push_back(IsRefType(x.type()) || BaseType(x.type()) == DT_RESOURCE
                     ? x
                     : Identity(s.NewSubScope(arg), x));
    input_map[arg] = xs.back();
  }
  absl::flat_hash_set<std::string> looked;
  if (in_body && HasLoop(g->library(), fname, &looked)) {
    std::vector<int> outs;
    for (int i = 0; i < n_out && i < static_cast<int>(dy.size()); ++i) {
      if (dy[i].node() != nullptr) outs.push_back(i);
    }
    return CallThroughGradientFunction(s, call, fname, xs, outs, grad_ys, options);
  }
  // One call of the function on the call's inputs, inlined on import. In a
  // loop body, the copy is part of the body's gradient: it runs in the
  // backprop frame on the call's inputs (popped there like any forward
  // value the gradient reads), and is differentiated as body.
  GR_ASSIGN_OR_RETURN(ImportedGraph copy,
                      ImportGraphDef(s, OneInlinedCall(*g, call), "recompute", input_map));
  size_t k = 0;
  for (int i = 0; i < n_out && i < static_cast<int>(dy.size()); ++i) {
    if (dy[i].node() == nullptr) continue;
    GR_ASSIGN_OR_RETURN(ys[k], copy.Tensor(absl::StrCat("call:", i)));
    ++k;
  }
  if (!s.ok()) return s.status();
  std::vector<Gradient> grads;
  if (in_body) {
    GR_ASSIGN_OR_RETURN(grads, loop_grad::ComputeBodyGradients(s, ys, xs, grad_ys, options,
                                                               *t->nesting, *t->body_frame));
  } else {
    GR_ASSIGN_OR_RETURN(grads, ComputeGradients(s, ys, xs, grad_ys, options));
  }
  for (int i = 0; i < n_in; ++i) {
    const Gradient& d = grads[static_cast<size_t>(i)];
    if (!d.is_null()) out[static_cast<size_t>(i)] = ToDense(s, d);
  }
  if (!s.ok()) return s.status();
  return out;
}

}  // namespace

void RegisterCallGradients(GradientRegistry& r) {
  r.AddDense("PartitionedCall", CallGrad);
  r.AddDense("StatefulPartitionedCall", CallGrad);
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
