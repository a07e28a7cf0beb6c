#include "client/train/gradients.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/train/grad_while.h"
#include "client/train/ops_internal.h"

namespace graphrun {
namespace client {
namespace train {

using internal::Op;

Output IndexedSlicesToDense(const Scope& scope, const IndexedSlices& s) {
  Output rows = internal::GatherV2(scope, s.dense_shape, 0, 0);
  return Op(scope, "UnsortedSegmentSum").In(s.values).In(s.indices).In(rows).Out();
}

Output ToDense(const Scope& scope, const Gradient& g) {
  if (g.is_sparse()) return IndexedSlicesToDense(scope, *g.sparse);
  return g.dense;
}

void GradientRegistry::Add(const std::string& op, GradFunc f) { funcs_[op] = std::move(f); }

void GradientRegistry::AddDense(const std::string& op, DenseGradFunc f) {
  funcs_[op] = [f = std::move(f)](
                   const Scope& s, const Operation& o,
                   const std::vector<Gradient>& dys) -> absl::StatusOr<std::vector<Gradient>> {
    std::vector<Output> dense;
    dense.reserve(dys.size());
    for (const Gradient& g : dys) dense.push_back(ToDense(s, g));
    auto r = f(s, o, dense);
    if (!r.ok()) return r.status();
    return std::vector<Gradient>(r->begin(), r->end());
  };
}

void GradientRegistry::AddNoGradient(const std::string& op) {
  funcs_[op] = [](const Scope&, const Operation& o,
                  const std::vector<Gradient>&) -> absl::StatusOr<std::vector<Gradient>> {
    return std::vector<Gradient>(static_cast<size_t>(o.node()->num_inputs()));
  };
}

const GradFunc* GradientRegistry::Lookup(const std::string& op) const {
  auto it = funcs_.find(op);
  return it == funcs_.end() ? nullptr : &it->second;
}

void RegisterAllGradients(GradientRegistry& r) {
  RegisterMathGradients(r);
  RegisterNnGradients(r);
  RegisterArrayGradients(r);
  RegisterControlFlowGradients(r);
  RegisterCallGradients(r);
}

const GradientRegistry& DefaultGradientRegistry() {
  static const GradientRegistry* r = [] {
    auto* reg = new GradientRegistry();
    RegisterAllGradients(*reg);
    return reg;
  }();
  return *r;
}

namespace {

// A value that can carry a gradient.
bool Trainable(DataType t) { return internal::IsFloat(t) || BaseType(t) == DT_RESOURCE; }

bool TrainableEdge(const Edge* e) {
  return !e->IsControlEdge() && Trainable(e->src->output_type(e->src_output));
}

// Sums the gradients reaching one tensor.
Gradient SumGradients(const Scope& s, const std::vector<Gradient>& gs) {
  std::vector<const Gradient*> live;
  for (const Gradient& g : gs) {
    if (!g.is_null()) live.push_back(&g);
  }
  if (live.empty()) return Gradient();
  if (live.size() == 1) return *live[0];
  bool all_sparse = true;
  for (const Gradient* g : live) all_sparse &= g->is_sparse();
  if (all_sparse) {
    std::vector<Output> values, indices;
    bool any64 = false;
    for (const Gradient* g : live) any64 |= g->sparse->indices.type() == DT_INT64;
    for (const Gradient* g : live) {
      values.push_back(g->sparse->values);
      Output idx = g->sparse->indices;
      if (any64 && idx.type() != DT_INT64) idx = internal::Cast(s, idx, DT_INT64);
      indices.push_back(idx);
    }
    return IndexedSlices{internal::ConcatV2(s, values, 0), internal::ConcatV2(s, indices, 0),
                         live[0]->sparse->dense_shape};
  }
  std::vector<Output> dense;
  for (const Gradient* g : live) dense.push_back(ToDense(s, *g));
  return internal::AddN(s, dense);
}

thread_local const loop_grad::Traversal* current_traversal = nullptr;

absl::Status NullInput(const char* what, size_t i) {
  return absl::InvalidArgumentError(
      absl::StrCat("gradients: ", what, "[", i, "] is a null Output (built in a failed scope?)"));
}

// The gradient traversal. `body_frame` null: a whole graph, where loops are
// single nodes from their Exits to their Enters (grad_while.cc builds their
// gradients). Non-null: the body of that loop, for its backprop loop; the
// traversal stops at the xs (the body's inputs), and loops nested in the
// body are built with `nesting` (grad_while.h).
absl::StatusOr<std::vector<Gradient>> GradientsImpl(
    const Scope& scope, const std::vector<Output>& ys, const std::vector<Output>& xs,
    const std::vector<Output>& grad_ys, const GradientOptions& options,
    const std::string* body_frame, const loop_grad::Nesting* nesting) {
  if (!scope.ok()) return scope.status();
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradients: ", ys.size(), " ys but ", grad_ys.size(), " grad_ys"));
  }
  for (size_t i = 0; i < ys.size(); ++i) {
    if (ys[i].node() == nullptr) return NullInput("ys", i);
    if (!grad_ys.empty() && grad_ys[i].node() == nullptr) return NullInput("grad_ys", i);
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].node() == nullptr) return NullInput("xs", i);
  }
  const GradientRegistry& registry =
      options.registry != nullptr ? *options.registry : DefaultGradientRegistry();
  const loop_grad::Traversal traversal{scope.graph(), &options, body_frame, nesting};
  const loop_grad::ActiveTraversal active(&traversal);
  Graph* graph = scope.graph();
  const int n_ids = graph->num_node_ids();
  const bool in_body = body_frame != nullptr;
  // Loops. In a body, the body's own loop is no node (its Enters and
  // Exits are ordinary there); loops nested in it are.
  loop_grad::Loops loops = loop_grad::FindLoops(*graph);
  int body_loop = -1;
  if (in_body) {
    for (size_t l = 0; l < loops.loops.size(); ++l) {
      if (loops.loops[l].frame == *body_frame) body_loop = static_cast<int>(l);
    }
    if (body_loop < 0) {
      return absl::InternalError(absl::StrCat("gradients: no loop '", *body_frame, "'"));
    }
    const loop_grad::Loop& b = loops.loops[body_loop];
    for (Node* e : b.enters) loops.enter_of[e->id()] = -1;
    for (Node* e : b.invariants) loops.enter_of[e->id()] = -1;
    for (const auto& exits : b.exits) {
      for (Node* e : exits) loops.exit_of[e->id()] = -1;
    }
  }
  auto loop_of = [&](const std::vector<int>& table, const Node* n) {
    return n->id() < static_cast<int>(table.size()) ? table[n->id()] : -1;
  };
  for (const auto* v : {&xs, &ys}) {
    for (const Output& o : *v) {
      const int l = loop_of(loops.inside, o.node());
      if (l < 0 || l == body_loop) continue;
      return absl::UnimplementedError(
          absl::StrCat("gradients: '", o.node()->name(), "' (", v == &xs ? "an x" : "a y",
                       ") is inside the loop '", loops.loops[l].frame,
                       "': gradients are taken of whole loops, from their exits to their entries"));
    }
  }
  // A loop's successors are its Exits (forward) and its predecessors its
  // Enters (backward); what is between them belongs to its gradient.
  auto enters_of = [&](int l) {
    std::vector<Node*> all = loops.loops[l].enters;
    all.insert(all.end(), loops.loops[l].invariants.begin(), loops.loops[l].invariants.end());
    return all;
  };

  // Nodes reachable forward from xs along trainable edges.
  std::vector<bool> forward(n_ids, false), is_x(n_ids, false);
  std::deque<Node*> queue;
  auto reach = [&](Node* dst) {
    if (forward[dst->id()]) return;
    forward[dst->id()] = true;
    queue.push_back(dst);
  };
  for (const Output& x : xs) {
    is_x[x.node()->id()] = true;
    if (!Trainable(x.type())) continue;
    for (const Edge* e : x.node()->out_edges()) {
      if (e->IsControlEdge() || e->src_output != x.index()) continue;
      reach(e->dst);
    }
  }
  while (!queue.empty()) {
    Node* n = queue.front();
    queue.pop_front();
    if (const int l = loop_of(loops.enter_of, n); l >= 0) {
      for (const auto& exits : loops.loops[l].exits) {
        for (Node* x : exits) reach(x);
      }
      continue;
    }
    for (const Edge* e : n->out_edges()) {
      if (TrainableEdge(e)) reach(e->dst);
    }
  }
  // Of those (and the xs), the nodes some y depends on.
  std::vector<bool> relevant(n_ids, false);
  auto mark = [&](Node* n) {
    if (relevant[n->id()] || !(forward[n->id()] || is_x[n->id()])) return;
    relevant[n->id()] = true;
    queue.push_back(n);
  };
  for (const Output& y : ys) mark(y.node());
  while (!queue.empty()) {
    Node* n = queue.front();
    queue.pop_front();
    if (in_body && is_x[n->id()]) continue;
    if (const int l = loop_of(loops.exit_of, n); l >= 0) {
      for (Node* e : enters_of(l)) mark(e);
      continue;
    }
    for (const Edge* e : n->in_edges()) {
      if (TrainableEdge(e)) mark(e->src);
    }
  }
  if (in_body) {
    for (Node* n : graph->nodes()) {
      if (n->id() >= n_ids || !relevant[n->id()] || is_x[n->id()] || !n->IsControlFlow()) continue;
      if (n->IsSwitch() || n->IsMerge()) continue;  // a conditional: grad_while.cc gates it
      if (loop_of(loops.enter_of, n) >= 0 || loop_of(loops.exit_of, n) >= 0) continue;  // nested
      return absl::UnimplementedError(absl::StrCat(
          "gradients of the loop '", *body_frame, "': node '", n->name(), "' (op ", n->op(),
          ") is on its body's gradient path and belongs to no loop found there"));
    }
  }

  // Pending count: trainable out edges of a node into relevant nodes.
  std::vector<int> pending(n_ids, 0);
  for (Node* n : graph->nodes()) {
    if (!relevant[n->id()]) continue;
    for (const Edge* e : n->out_edges()) {
      if (TrainableEdge(e) && relevant[e->dst->id()]) ++pending[n->id()];
    }
  }

  Scope grad_root = scope.NewSubScope("gradients");
  absl::flat_hash_map<std::pair<int, int>, std::vector<Gradient>> incoming;
  for (size_t i = 0; i < ys.size(); ++i) {
    const Output& y = ys[i];
    if (!relevant[y.node()->id()]) continue;
    Output dy = grad_ys.empty()
                    ? internal::OnesLike(grad_root.NewSubScope(y.node()->name() + "_ones"), y)
                    : grad_ys[i];
    incoming[{y.node()->id(), y.index()}].push_back(dy);
  }
  // The ones above are new nodes, with ids past the tables': only nodes
  // that existed on entry are looked up in them from here on.
  auto is_relevant = [&](const Node* n) { return n->id() < n_ids && relevant[n->id()]; };
  // A loop waits for the gradients of its relevant Exits; its Enters wait
  // for the loop's gradient.
  std::vector<int> loop_waiting(loops.loops.size(), 0);
  std::vector<absl::flat_hash_map<int, Gradient>> exit_grads(loops.loops.size());
  for (Node* n : graph->nodes()) {
    if (!is_relevant(n)) continue;
    if (const int l = loop_of(loops.exit_of, n); l >= 0) ++loop_waiting[l];
    if (pending[n->id()] == 0 && loop_of(loops.enter_of, n) < 0) queue.push_back(n);
  }

  absl::flat_hash_map<std::pair<int, int>, Gradient> x_grads;
  while (!queue.empty()) {
    Node* n = queue.front();
    queue.pop_front();
    Scope s = grad_root.NewSubScope(n->name() + "_grad");
    if (options.colocate_gradients_with_ops) s = s.ColocateWith(Operation(n));

    std::vector<Gradient> dys(n->num_outputs());
    bool any = false;
    for (int i = 0; i < n->num_outputs(); ++i) {
      auto it = incoming.find({n->id(), i});
      if (it == incoming.end()) continue;
      dys[i] = SumGradients(s, it->second);
      any |= !dys[i].is_null();
    }
    if (is_x[n->id()]) {
      for (int i = 0; i < n->num_outputs(); ++i) x_grads[{n->id(), i}] = dys[i];
    }
    if (const int l = loop_of(loops.exit_of, n); l >= 0) {
      if (!dys[0].is_null()) exit_grads[l][n->id()] = dys[0];
      if (--loop_waiting[l] > 0) continue;
      bool needed = false;
      for (Node* e : enters_of(l)) needed |= is_relevant(e);
      if (!needed) continue;  // the Exits were xs: nothing flows into the loop
      auto g = loop_grad::BuildLoopGradient(grad_root, loops, loops.loops[l], exit_grads[l],
                                            options, nesting);
      if (!g.ok()) return g.status();
      for (Node* e : enters_of(l)) {
        if (!is_relevant(e)) continue;
        auto it = g->find(e->id());
        if (it != g->end() && !it->second.is_null()) incoming[{e->id(), 0}].push_back(it->second);
        queue.push_back(e);
      }
      continue;
    }

    bool has_relevant_input = false;
    for (const Edge* e : n->in_edges()) {
      has_relevant_input |= TrainableEdge(e) && is_relevant(e->src);
    }
    if (!has_relevant_input) continue;

    std::vector<Gradient> dxs(n->num_inputs());
    if (loop_of(loops.enter_of, n) >= 0) {
      dxs[0] = dys[0];  // the loop's gradient, for the Enter's input
    } else if (any) {
      const GradFunc* f = registry.Lookup(n->op());
      if (f == nullptr) {
        return absl::UnimplementedError(absl::StrCat("gradients: no gradient defined for node '",
                                                     n->name(), "' (op ", n->op(), ")"));
      }
      auto r = (*f)(s, Operation(n), dys);
      if (!r.ok()) {
        return absl::Status(r.status().code(),
                            absl::StrCat("gradients of node '", n->name(), "' (op ", n->op(),
                                         "): ", r.status().message()));
      }
      if (static_cast<int>(r->size()) != n->num_inputs()) {
        return absl::InternalError(absl::StrCat("gradient function of op ", n->op(), " returned ",
                                                r->size(), " gradients for ", n->num_inputs(),
                                                " inputs (node '", n->name(), "')"));
      }
      dxs = *std::move(r);
      if (!scope.ok()) return scope.status();
    }
    for (const Edge* e : n->in_edges()) {
      if (!TrainableEdge(e) || !is_relevant(e->src)) continue;
      if (!dxs[e->dst_input].is_null()) {
        incoming[{e->src->id(), e->src_output}].push_back(dxs[e->dst_input]);
      }
      if (--pending[e->src->id()] == 0) queue.push_back(e->src);
    }
  }
  if (!scope.ok()) return scope.status();

  std::vector<Gradient> out(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    auto it = x_grads.find({xs[i].node()->id(), xs[i].index()});
    if (it != x_grads.end()) out[i] = it->second;
    if (out[i].is_null() && options.unconnected_zeros && internal::IsFloat(xs[i].type())) {
      out[i] = internal::ZerosLike(grad_root, xs[i]);
    }
  }
  if (!scope.ok()) return scope.status();
  return out;
}

}  // namespace

const loop_grad::Traversal* loop_grad::CurrentTraversal() { return current_traversal; }
loop_grad::ActiveTraversal::ActiveTraversal(const Traversal* t) : previous_(current_traversal) {
  current_traversal = t;
}
loop_grad::ActiveTraversal::~ActiveTraversal() { current_traversal = previous_; }

absl::StatusOr<std::vector<Gradient>> ComputeGradients(const Scope& scope,
                                                       const std::vector<Output>& ys,
                                                       const std::vector<Output>& xs,
                                                       const std::vector<Output>& grad_ys,
                                                       const GradientOptions& options) {
  return GradientsImpl(scope, ys, xs, grad_ys, options, nullptr, nullptr);
}

absl::StatusOr<std::vector<Gradient>> loop_grad::ComputeBodyGradients(
    const Scope& scope, const std::vector<Output>& ys, const std::vector<Output>& xs,
    const std::vector<Output>& grad_ys, const GradientOptions& options, const Nesting& nesting,
    const std::string& frame) {
  return GradientsImpl(scope, ys, xs, grad_ys, options, &frame, &nesting);
}

absl::StatusOr<std::vector<Output>> AddSymbolicGradients(const Scope& scope,
                                                         const std::vector<Output>& ys,
                                                         const std::vector<Output>& xs,
                                                         const std::vector<Output>& grad_ys) {
  auto grads = ComputeGradients(scope, ys, xs, grad_ys);
  if (!grads.ok()) return grads.status();
  std::vector<Output> out;
  Scope s = scope.NewSubScope("gradients_dense");
  for (const Gradient& g : *grads) out.push_back(ToDense(s, g));
  if (!scope.ok()) return scope.status();
  return out;
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
