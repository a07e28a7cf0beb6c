#include "client/while_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/op_builder.h"
#include "graph/status.h"

namespace graphrun {
namespace client {
namespace internal {

void ReplaceInput(Graph* graph, Node* dst, int dst_input, const Output& src) {
  if (const Edge* old = dst->input_edge(dst_input); old != nullptr) graph->RemoveEdge(old);
  graph->AddEdge(src.node(), src.index(), dst, dst_input);
}

Output Enter(const Scope& scope, const Output& x, const std::string& frame, bool is_constant,
             int parallel_iterations) {
  OpBuilder b(scope, IsRefType(x.type()) ? "RefEnter" : "Enter", "enter");
  b.Input(x)
      .Attr("frame_name", AttrString(frame))
      .Attr("is_constant", AttrBool(is_constant))
      .Attr("parallel_iterations", AttrInt(parallel_iterations));
  Operation op = b.Finalize();
  return op.node() == nullptr ? Output() : Output(op, 0);
}

// `o` itself when it is in the frame, else its capture (made once).
absl::StatusOr<Output> Resolve(FrameCapture& f, const Output& o) {
  if (f.inside.contains(o.node()->id())) return o;
  const std::pair<int, int> key{o.node()->id(), o.index()};
  if (auto it = f.captured.find(key); it != f.captured.end()) return it->second;
  GR_ASSIGN_OR_RETURN(Output c, f.capture(o));
  if (c.node() == nullptr) {
    return absl::InternalError(absl::StrCat("capturing '", o.node()->name(), "' failed"));
  }
  f.captured[key] = c;
  f.inside.insert(c.node()->id());
  f.capture_ids.insert(c.node()->id());
  return c;
}

absl::Status MoveIntoFrame(Graph* graph, int begin, int end, FrameCapture& f) {
  for (int id = begin; id < end; ++id) {
    if (!f.skip.contains(id)) f.inside.insert(id);
  }
  for (int id = begin; id < end; ++id) {
    Node* n = graph->FindNodeId(id);
    if (n == nullptr || f.skip.contains(id)) continue;
    const std::vector<const Edge*> in(n->in_edges().begin(), n->in_edges().end());
    for (const Edge* e : in) {
      Node* src = e->src;
      if (f.inside.contains(src->id())) continue;
      if (e->IsControlEdge()) {
        f.outside_control.push_back(src);
        graph->RemoveEdge(e);
        continue;
      }
      const int slot = e->dst_input;
      GR_ASSIGN_OR_RETURN(Output c, Resolve(f, Output(src, e->src_output)));
      ReplaceInput(graph, n, slot, c);
    }
    // An op fed only by captures (or by nothing) would also run in the
    // iteration that ends the loop, and once for a loop that never
    // iterates: the pivot ties it to the iterations, as TensorFlow does.
    bool anchored = false;
    for (const Edge* e : n->in_edges()) anchored |= !f.capture_ids.contains(e->src->id());
    if (!anchored) graph->AddControlEdge(f.pivot.node(), n);
  }
  return absl::OkStatus();
}

}  // namespace internal

namespace {

using internal::AttrInt;
using internal::OpBuilder;

Operation Build(const Scope& s, const char* op, const char* name, std::vector<Input> in) {
  OpBuilder b(s.WithOpName(name), op);
  if (std::string(op) == "Merge") {
    b.InputList(InputList(in));
  } else {
    for (const Input& i : in) b.Input(i);
  }
  return b.Finalize();
}

absl::Status Fail(const Scope& s, absl::Status status) {
  s.UpdateStatus(status);
  return status;
}

}  // namespace

absl::StatusOr<std::vector<Output>> WhileLoop(const Scope& scope, const std::vector<Output>& inputs,
                                              const WhileCondFn& cond, const WhileBodyFn& body,
                                              const WhileLoopOptions& options) {
  if (!scope.ok()) return scope.status();
  if (inputs.empty()) {
    return Fail(scope, absl::InvalidArgumentError("WhileLoop: no loop variables"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].node() == nullptr) {
      return Fail(scope,
                  absl::InvalidArgumentError(absl::StrCat(
                      "WhileLoop: input ", i, " is a null Output (built in a failed scope?)")));
    }
  }
  const int pi = std::max(1, options.parallel_iterations);
  // The scope's control dependencies gate the Enters only: a control edge
  // from outside the frame into it would be invalid.
  Scope loop =
      scope.NewSubScope(options.name.empty() ? "while" : options.name).WithNoControlDependencies();
  const std::string frame = loop.name_prefix();
  Graph* g = scope.graph();
  const size_t k = inputs.size();

  std::vector<Output> enters(k), merges(k);
  internal::FrameCapture cap;
  for (size_t i = 0; i < k; ++i) {
    enters[i] = internal::Enter(loop.WithOpName("enter"), inputs[i], frame, false, pi);
    if (enters[i].node() == nullptr) return loop.status();
    Operation m = Build(loop, "Merge", "merge", {enters[i], enters[i]});
    if (m.node() == nullptr) return loop.status();
    merges[i] = Output(m, 0);
    cap.inside.insert(enters[i].node()->id());
    cap.inside.insert(m.node()->id());
  }
  cap.capture = [&](const Output& o) -> absl::StatusOr<Output> {
    Output e = internal::Enter(loop.WithOpName("capture"), o, frame, true, pi);
    if (e.node() == nullptr) return loop.status();
    return e;
  };

  // The condition, on the merged values.
  cap.pivot = merges[0];
  int begin = g->num_node_ids();
  absl::StatusOr<Output> pred = cond(loop.NewSubScope("cond"), merges);
  if (!pred.ok()) return Fail(scope, pred.status());
  if (!loop.ok()) return loop.status();
  if (pred->node() == nullptr) {
    return Fail(scope, absl::InvalidArgumentError(
                           absl::StrCat("WhileLoop '", frame, "': cond returned a null Output")));
  }
  if (absl::Status st = internal::MoveIntoFrame(g, begin, g->num_node_ids(), cap); !st.ok()) {
    return Fail(scope, st);
  }
  absl::StatusOr<Output> resolved = internal::Resolve(cap, *pred);
  if (!resolved.ok()) return Fail(scope, resolved.status());
  const Output p = *resolved;
  if (BaseType(p.type()) != DT_BOOL || (p.shape().known_rank() && p.shape().rank() != 0)) {
    return Fail(scope, absl::InvalidArgumentError(absl::StrCat(
                           "WhileLoop '", frame, "': cond returned ", DataTypeString(p.type()), " ",
                           p.shape().DebugString(), ", not a bool scalar")));
  }
  Operation lc = Build(loop, "LoopCond", "loop_cond", {p});
  if (lc.node() == nullptr) return loop.status();
  cap.inside.insert(lc.node()->id());

  std::vector<Output> switches(k), body_in(k);
  for (size_t i = 0; i < k; ++i) {
    Operation sw = Build(loop, "Switch", "switch", {merges[i], Output(lc, 0)});
    if (sw.node() == nullptr) return loop.status();
    switches[i] = Output(sw, 0);
    Operation id = Build(loop, "Identity", "body_input", {Output(sw, 1)});
    if (id.node() == nullptr) return loop.status();
    body_in[i] = Output(id, 0);
    cap.inside.insert(sw.node()->id());
    cap.inside.insert(id.node()->id());
  }

  // The body, on the values of an iteration that goes on.
  cap.pivot = body_in[0];
  begin = g->num_node_ids();
  absl::StatusOr<std::vector<Output>> outs = body(loop.NewSubScope("body"), body_in);
  if (!outs.ok()) return Fail(scope, outs.status());
  if (!loop.ok()) return loop.status();
  if (outs->size() != k) {
    return Fail(scope, absl::InvalidArgumentError(
                           absl::StrCat("WhileLoop '", frame, "': body returned ", outs->size(),
                                        " values for ", k, " loop variables")));
  }
  if (absl::Status st = internal::MoveIntoFrame(g, begin, g->num_node_ids(), cap); !st.ok()) {
    return Fail(scope, st);
  }
  std::vector<Output> exits(k);
  for (size_t i = 0; i < k; ++i) {
    if ((*outs)[i].node() == nullptr) {
      return Fail(scope,
                  absl::InvalidArgumentError(absl::StrCat(
                      "WhileLoop '", frame, "': body returned a null Output for variable ", i)));
    }
    absl::StatusOr<Output> resolved_out = internal::Resolve(cap, (*outs)[i]);
    if (!resolved_out.ok()) return Fail(scope, resolved_out.status());
    const Output o = *resolved_out;
    if (BaseType(o.type()) != BaseType(enters[i].type())) {
      return Fail(scope,
                  absl::InvalidArgumentError(absl::StrCat(
                      "WhileLoop '", frame, "': body returned ", DataTypeString(o.type()),
                      " for loop variable ", i, " of type ", DataTypeString(enters[i].type()))));
    }
    if (!o.shape().IsCompatibleWith(enters[i].shape())) {
      return Fail(scope, absl::InvalidArgumentError(
                             absl::StrCat("WhileLoop '", frame, "': loop variable ", i,
                                          " enters with shape ", enters[i].shape().DebugString(),
                                          " but the body makes it ", o.shape().DebugString())));
    }
    Operation next = Build(loop, "NextIteration", "next_iteration", {o});
    if (next.node() == nullptr) return loop.status();
    internal::ReplaceInput(g, merges[i].node(), 1, Output(next, 0));
    Operation exit = Build(loop, "Exit", "exit", {switches[i]});
    if (exit.node() == nullptr) return loop.status();
    exits[i] = Output(exit, 0);
  }
  std::vector<Node*> gates = cap.outside_control;
  for (const Operation& op : scope.control_dependencies()) gates.push_back(op.node());
  for (Node* c : gates) {
    for (const Output& e : enters) g->AddControlEdge(c, e.node());
  }
  return exits;
}

}  // namespace client
}  // namespace graphrun
