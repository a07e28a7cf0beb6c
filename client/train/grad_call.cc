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
// and the copy is differentiated as body. A function with a loop of its
// own, called in a loop body, is Unimplemented (its copy would be a loop
// nested in the backprop loop that neither side builds).
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

  // One call of the function on placeholders, inlined on import.
  tensorflow::GraphDef def;
  *def.mutable_library() = g->library();
  tensorflow::NodeDef* c = def.add_node();
  c->set_name("call");
  c->set_op(call->op());
  for (const auto& [name, v] : attrs) (*c->mutable_attr())[name] = v;
  (*c->mutable_attr())[kInlineAttr].set_b(true);
  absl::flat_hash_map<std::string, Output> input_map;
  std::vector<Output> xs;
  for (int i = 0; i < n_in; ++i) {
    const Edge* e = call->input_edge(i);
    if (e == nullptr) return absl::InternalError("a call input without an edge");
    const std::string arg = absl::StrCat("arg", i);
    tensorflow::NodeDef* p = def.add_node();
    p->set_name(arg);
    p->set_op("Placeholder");
    (*p->mutable_attr())["dtype"].set_type(
        static_cast<tensorflow::DataType>(BaseType(call->input_type(i))));
    c->add_input(arg);
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
  const int first = g->num_node_ids();
  GR_ASSIGN_OR_RETURN(ImportedGraph copy, ImportGraphDef(s, def, "recompute", input_map));
  // In a loop body, the copy is part of the body's gradient: it runs in the
  // backprop frame on the call's inputs (popped there like any forward
  // value the gradient reads), and is differentiated as body.
  const loop_grad::Traversal* t = loop_grad::CurrentTraversal();
  if (t != nullptr && t->graph != g) t = nullptr;  // (a traversal of another graph)
  const bool in_body = t != nullptr && t->body_frame != nullptr;
  if (in_body) {
    for (int id = first; id < g->num_node_ids(); ++id) {
      const Node* n = g->FindNodeId(id);
      if (n != nullptr && n->IsEnter()) {
        return absl::UnimplementedError(
            absl::StrCat("gradients: node '", call->name(), "' runs function '", fname,
                         "' as a call frame inside the loop '", *t->body_frame,
                         "', and the function has a loop of its own ('", n->name(),
                         "'): inline the function to differentiate it"));
      }
    }
  }
  size_t k = 0;
  for (int i = 0; i < n_out && i < static_cast<int>(dy.size()); ++i) {
    if (dy[i].node() == nullptr) continue;
    GR_ASSIGN_OR_RETURN(ys[k], copy.Tensor(absl::StrCat("call:", i)));
    ++k;
  }
  if (!s.ok()) return s.status();
  // The caller's options (its registry), but null for unconnected inputs.
  GradientOptions options = t != nullptr && t->options != nullptr ? *t->options : GradientOptions();
  options.unconnected_zeros = false;
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
