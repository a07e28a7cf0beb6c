// Gradients through while loops: the loop finder and the backprop loop
// (the design is in grad_while.h).
#include "client/train/grad_while.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/train/grad_internal.h"
#include "client/while_loop.h"

namespace graphrun {
namespace client {
namespace train {
namespace loop_grad {

using namespace internal;  // NOLINT: the op helpers

namespace {

std::string FrameOf(const Node* enter) {
  std::string frame;
  GetAttr(NodeAttrs(enter->def()), "frame_name", &frame).IgnoreError();
  return frame;
}

bool IsConstantEnter(const Node* n) {
  bool c = false;
  if (n->IsEnter()) GetAttr(NodeAttrs(n->def()), "is_constant", &c).IgnoreError();
  return c;
}

// The loop whose variable Switch `sw0` is, or nullopt when the nodes
// around it are not a loop's.
std::optional<Loop> LoopAt(Node* sw0) {
  const Edge* pe = sw0->input_edge(1);
  if (pe == nullptr || !pe->src->IsLoopCond()) return std::nullopt;
  Loop l;
  l.loop_cond = pe->src;
  for (const Edge* o : l.loop_cond->out_edges()) {
    if (o->IsControlEdge() || o->dst_input != 1 || !o->dst->IsSwitch()) continue;
    Node* sw = o->dst;
    const Edge* me = sw->input_edge(0);
    if (me == nullptr || !me->src->IsMerge() || me->src->num_inputs() != 2) return std::nullopt;
    Node *enter = nullptr, *next = nullptr;
    for (const Edge* mi : me->src->in_edges()) {
      if (mi->IsControlEdge()) continue;
      if (mi->src->IsEnter()) enter = mi->src;
      if (mi->src->IsNextIteration()) next = mi->src;
    }
    if (enter == nullptr || next == nullptr) return std::nullopt;
    std::vector<Node*> exits;
    for (const Edge* so : sw->out_edges()) {
      if (!so->IsControlEdge() && so->src_output == 0 && so->dst->IsExit()) {
        exits.push_back(so->dst);
      }
    }
    l.enters.push_back(enter);
    l.merges.push_back(me->src);
    l.switches.push_back(sw);
    l.nexts.push_back(next);
    l.exits.push_back(std::move(exits));
  }
  if (l.enters.empty()) return std::nullopt;
  l.frame = FrameOf(l.enters[0]);
  int64_t pi = 10;
  GetAttr(NodeAttrs(l.enters[0]->def()), "parallel_iterations", &pi).IgnoreError();
  l.parallel_iterations = static_cast<int>(std::max<int64_t>(1, pi));
  return l;
}

}  // namespace

Loops FindLoops(const Graph& graph) {
  Loops r;
  const int n = graph.num_node_ids();
  absl::flat_hash_map<std::string, std::vector<Node*>> constant_enters;
  bool any_exit = false;
  for (Node* node : graph.nodes()) {
    any_exit |= node->IsExit();
    if (IsConstantEnter(node)) constant_enters[FrameOf(node)].push_back(node);
  }
  if (!any_exit) return r;
  r.exit_of.assign(n, -1);
  r.enter_of.assign(n, -1);
  r.inside.assign(n, -1);
  r.exit_var.assign(n, -1);
  // The loops, by their Exits.
  for (Node* x : graph.nodes()) {
    if (!x->IsExit() || r.exit_of[x->id()] >= 0) continue;
    const Edge* e = x->input_edge(0);
    if (e == nullptr || !e->src->IsSwitch()) continue;
    std::optional<Loop> found = LoopAt(e->src);
    if (!found) continue;
    Loop& l = *found;
    l.invariants = constant_enters[l.frame];
    const int li = static_cast<int>(r.loops.size());
    for (size_t v = 0; v < l.enters.size(); ++v) {
      r.enter_of[l.enters[v]->id()] = li;
      for (Node* ex : l.exits[v]) {
        r.exit_of[ex->id()] = li;
        r.exit_var[ex->id()] = static_cast<int>(v);
      }
    }
    for (Node* c : l.invariants) r.enter_of[c->id()] = li;
    r.loops.push_back(std::move(l));
  }
  // Each loop's frame: what its Enters reach before its Exits. A loop met
  // on the way is nested in this one: passed over, from its Enters to its
  // Exits (whose outputs are in this frame).
  // `seen` and `passed` hold the loop that saw a node or passed a nested
  // loop, so the walks cost what the frames hold, not loops x nodes.
  std::vector<int> seen(n, -1), passed(r.loops.size(), -1);
  for (int li = 0; li < static_cast<int>(r.loops.size()); ++li) {
    Loop& l = r.loops[li];
    std::deque<Node*> queue;
    auto add = [&](Node* d) {
      seen[d->id()] = li;
      r.inside[d->id()] = li;
      queue.push_back(d);
    };
    for (Node* en : l.enters) add(en);
    for (Node* c : l.invariants) add(c);
    for (const auto& exits : l.exits) {
      for (Node* ex : exits) seen[ex->id()] = li;
    }
    while (!queue.empty()) {
      Node* node = queue.front();
      queue.pop_front();
      for (const Edge* o : node->out_edges()) {
        Node* d = o->dst;
        if (seen[d->id()] == li) continue;
        seen[d->id()] = li;
        if (const int m = r.enter_of[d->id()]; m >= 0 && m != li) {
          if (r.loops[m].parent < 0) r.loops[m].parent = li;
          if (passed[m] == li) continue;
          passed[m] = li;
          for (const auto& exits : r.loops[m].exits) {
            for (Node* ex : exits) {
              if (seen[ex->id()] != li) add(ex);
            }
          }
          continue;
        }
        if (d->IsExit()) continue;
        if (d->IsEnter()) {
          if (l.foreign == nullptr) l.foreign = d;
          continue;
        }
        add(d);
      }
    }
  }
  return r;
}

namespace {

// Output `o`'s source traced back through Identity ops.
Output ThroughIdentities(Output o) {
  while (o.node()->op() == "Identity") {
    const Edge* e = o.node()->input_edge(0);
    o = Output(e->src, e->src_output);
  }
  return o;
}

Output DataInput(Node* n, int i) {
  const Edge* e = n->input_edge(i);
  return Output(e->src, e->src_output);
}

// One variable of a loop being built: Enter, Merge (its back edge set by
// Close), Switch, the body's value and the Exit.
struct LoopVar {
  Output merge, body, exit;
};

// The skeleton of a loop in frame `frame` whose predicate is `pred`.
class LoopBuilder {
 public:
  LoopBuilder(Scope s, std::string frame, int pi)
      : s_(std::move(s)), frame_(std::move(frame)), pi_(pi) {}
  const std::string& frame() const { return frame_; }
  // Enter + Merge: returns the Merge (pass it to Switch once pred exists).
  Output Open(const Output& init) {
    Output e = client::internal::Enter(s_, init, frame_, false, pi_);
    Output m = Op(s_, "Merge").InList(InputList({e, e})).Out(0);
    Track(e);
    Track(m);
    return m;
  }
  // Switch + Identity on `pred`: the body's value; the Exit.
  LoopVar Split(const Output& merge, const Output& pred) {
    std::vector<Output> sw = Op(s_, "Switch").In(merge).In(pred).Outs();
    if (sw.size() != 2) return LoopVar{};
    LoopVar v{merge, Identity(s_, sw[1]), Output()};
    v.exit = Op(s_, "Exit").In(sw[0]).Out();
    Track(sw[0]);
    Track(v.body);
    return v;
  }
  // The back edge: NextIteration(next) into the Merge.
  void Close(const LoopVar& v, const Output& next) {
    Output ni = Op(s_, "NextIteration").In(next).Out();
    if (ni.node() == nullptr) return;
    client::internal::ReplaceInput(s_.graph(), v.merge.node(), 1, ni);
  }
  void Track(const Output& o) {
    if (o.node() != nullptr) ids_.insert(o.node()->id());
  }
  const absl::flat_hash_set<int>& ids() const { return ids_; }

 private:
  Scope s_;
  std::string frame_;
  int pi_;
  absl::flat_hash_set<int> ids_;
};

// When a forward value of the loop body exists: the conditionals' branches
// it is in, as (Switch node id, output) pairs, sorted. Empty: in every
// iteration. A value is in a branch when it depends on that Switch
// output; a Merge of a conditional is where both branches' values exist,
// so its condition is what its inputs' have in common. A loop nested in
// the body runs when its Enters' inputs exist (its back edges are not
// followed), and so do the nodes a nested loop's gradient added to the
// forward side (`forward_side`).
class BranchConditions {
 public:
  using Cond = std::vector<std::pair<int, int>>;
  BranchConditions(const Loops& loops, int loop, const absl::flat_hash_set<int>& forward_side)
      : loops_(loops), li_(loop), loop_(loops.loops[loop]), forward_side_(forward_side) {}

  Cond Of(const Output& o) {
    Cond c = NodeCond(o.node());
    if (IsCondSwitch(o.node())) Insert(c, {o.node()->id(), o.index()});
    return c;
  }

 private:
  bool InLoop(const Node* n) const {
    if (n->id() >= static_cast<int>(loops_.inside.size())) return forward_side_.contains(n->id());
    const int l = loops_.inside[n->id()];
    return l >= 0 && loops_.Within(l, li_);
  }
  bool Member(const std::vector<Node*>& v, const Node* n) const {
    return std::find(v.begin(), v.end(), n) != v.end();
  }
  // Nodes every iteration runs: outside the loop, its Enters and Merges.
  bool Base(const Node* n) const {
    if (!InLoop(n) || n->op() == "ControlTrigger") return true;  // never dead
    if (n->IsEnter())
      return n->id() < static_cast<int>(loops_.enter_of.size()) && loops_.enter_of[n->id()] == li_;
    return Member(loop_.merges, n);
  }
  // A conditional's Switch (a loop's Switch takes its LoopCond).
  bool IsCondSwitch(const Node* n) const {
    if (!n->IsSwitch() || !InLoop(n)) return false;
    const Edge* p = n->input_edge(1);
    return p != nullptr && !p->src->IsLoopCond();
  }
  // Inputs that count: a Merge's back edge (from NextIteration) does not.
  static bool Counts(const Node* t, const Edge* e) {
    return !(t->IsMerge() && (e->IsControlEdge() || e->src->IsNextIteration()));
  }
  static void Insert(Cond& c, std::pair<int, int> p) {
    auto it = std::lower_bound(c.begin(), c.end(), p);
    if (it == c.end() || *it != p) c.insert(it, p);
  }
  Cond EdgeCond(const Edge* e) {
    Cond c = memo_[e->src->id()];
    if (!e->IsControlEdge() && IsCondSwitch(e->src)) Insert(c, {e->src->id(), e->src_output});
    return c;
  }
  // Iterative post-order over inputs (bodies can be deep); a cycle left in
  // a malformed graph counts as unconditioned.
  Cond NodeCond(Node* n) {
    std::vector<Node*> stack{n};
    while (!stack.empty()) {
      Node* t = stack.back();
      if (memo_.contains(t->id())) {
        stack.pop_back();
        continue;
      }
      if (Base(t)) {
        memo_[t->id()] = {};
        stack.pop_back();
        continue;
      }
      if (expanded_.insert(t->id()).second) {
        for (const Edge* e : t->in_edges()) {
          if (Counts(t, e) && !memo_.contains(e->src->id()) && !expanded_.contains(e->src->id())) {
            stack.push_back(e->src);
          }
        }
        continue;
      }
      Cond c;
      bool first = true;
      for (const Edge* e : t->in_edges()) {
        if (!Counts(t, e) || !memo_.contains(e->src->id())) continue;
        Cond in = EdgeCond(e);
        if (t->IsMerge()) {
          if (first) {
            c = std::move(in);
          } else {
            Cond both;
            std::set_intersection(c.begin(), c.end(), in.begin(), in.end(),
                                  std::back_inserter(both));
            c = std::move(both);
          }
          first = false;
        } else {
          for (const auto& p : in) Insert(c, p);
        }
      }
      memo_[t->id()] = std::move(c);
      stack.pop_back();
    }
    return memo_[n->id()];
  }

  const Loops& loops_;
  const int li_;
  const Loop& loop_;
  const absl::flat_hash_set<int>& forward_side_;
  absl::flat_hash_map<int, Cond> memo_;
  absl::flat_hash_set<int> expanded_;
};

}  // namespace

absl::StatusOr<absl::flat_hash_map<int, Gradient>> BuildLoopGradient(
    const Scope& scope, const Loops& loops, const Loop& loop,
    const absl::flat_hash_map<int, Gradient>& exit_grads, const GradientOptions& options,
    const Nesting* nesting) {
  const std::string& frame = loop.frame;
  if (loop.foreign != nullptr) {
    return absl::UnimplementedError(absl::StrCat("gradients of the loop '", frame,
                                                 "': it holds an Enter of another frame ('",
                                                 loop.foreign->name(), "') that is no loop"));
  }
  Graph* g = scope.graph();
  const int li = static_cast<int>(&loop - loops.loops.data());
  const int pi = loop.parallel_iterations;
  const std::string base = frame.substr(frame.rfind('/') + 1);
  Scope gs = scope.NewSubScope(base + "_grad").WithNoControlDependencies();
  const Output pred(loop.loop_cond, 0);
  // In an enclosing loop's body, what this builds on the forward side runs
  // in that loop's forward frame: the enclosing levels must know it, and
  // its constants run when this loop runs (tied to an Enter's input).
  auto forward_since = [&](int first_id) {
    if (nesting == nullptr) return;
    for (int id = first_id; id < g->num_node_ids(); ++id) nesting->AddForward(id);
  };
  Scope fwd_consts = gs;
  const int fwd_begin = g->num_node_ids();
  if (nesting != nullptr) {
    fwd_consts = gs.WithControlDependencies(Identity(gs, DataInput(loop.enters[0], 0)));
  }

  // The forward iteration count, in the forward frame: pushes order
  // themselves on it.
  Output count, inc, fwd_pivot;
  {
    LoopBuilder f(gs.NewSubScope("forward_count"), frame, pi);
    Output m = f.Open(ScalarOf(fwd_consts, 0, DT_INT32));
    LoopVar v = f.Split(m, pred);
    if (!gs.ok()) return gs.status();
    fwd_pivot = v.body;
    inc = Add(gs.WithControlDependencies(v.body), v.body, 1);
    f.Close(v, inc);
    count = v.exit;
  }
  forward_since(fwd_begin);

  // The backprop loop: count down from the forward count.
  Scope bs = gs.NewSubScope("backprop");
  LoopBuilder b(bs, bs.name_prefix(), pi);
  Output cm = b.Open(count);
  Output bpred =
      Op(bs, "LoopCond")
          .In(Binary(bs, "Greater", cm, ScalarOf(bs.WithControlDependencies(cm), 0, DT_INT32)))
          .Out();
  b.Track(bpred);
  LoopVar cv = b.Split(cm, bpred);
  if (!bs.ok()) return bs.status();
  const Output bwd_pivot = cv.body;
  Output dec = Sub(bs.WithControlDependencies(cv.body), cv.body, 1);
  b.Track(dec);
  b.Close(cv, dec);

  // The summed gradients of variable v's Exits (null when none).
  auto exit_sum = [&](size_t v) {
    std::vector<Output> dy;
    for (Node* ex : loop.exits[v]) {
      auto it = exit_grads.find(ex->id());
      if (it != exit_grads.end()) dy.push_back(ToDense(gs, it->second));
    }
    return dy.empty() ? Output() : dy.size() == 1 ? dy[0] : AddN(gs, dy);
  };

  // The float loop variables: their gradients, starting from the Exits'.
  const size_t k = loop.enters.size();
  std::vector<int> var_x(k, -1);
  std::vector<LoopVar> var_grad(k);
  std::vector<Output> ys, grad_ys, xs;
  std::vector<Node*> x_enter;  // the Enter each x's gradient is for
  for (size_t i = 0; i < k; ++i) {
    const DataType t = BaseType(loop.enters[i]->output_type(0));
    if (!IsFloat(t)) continue;
    Output init = exit_sum(i);
    if (init.node() == nullptr) {
      Output final_value(loop.exits[i].empty() ? nullptr : loop.exits[i][0], 0);
      if (loop.exits[i].empty()) {
        const int first = g->num_node_ids();
        final_value = Op(gs, "Exit").In(Output(loop.switches[i], 0)).Out();
        forward_since(first);
      }
      init = ZerosLike(gs, final_value);
    }
    Output m = b.Open(init);
    var_grad[i] = b.Split(m, bpred);
    ys.push_back(DataInput(loop.nexts[i], 0));
    grad_ys.push_back(var_grad[i].body);
    var_x[i] = static_cast<int>(xs.size());
    xs.push_back(Output(loop.switches[i], 1));
    x_enter.push_back(loop.enters[i]);
  }
  // Resource variables and invariants: gradients summed over iterations.
  for (size_t i = 0; i < k; ++i) {
    if (BaseType(loop.enters[i]->output_type(0)) != DT_RESOURCE) continue;
    xs.push_back(Output(loop.switches[i], 1));
    x_enter.push_back(loop.enters[i]);
  }
  for (Node* c : loop.invariants) {
    const DataType t = BaseType(c->output_type(0));
    if (!IsFloat(t) && t != DT_RESOURCE) continue;
    xs.push_back(Output(c, 0));
    x_enter.push_back(c);
  }
  if (!gs.ok()) return gs.status();
  auto var_of = [&](const Node* e) {
    return static_cast<size_t>(std::find(loop.enters.begin(), loop.enters.end(), e) -
                               loop.enters.begin());
  };
  // A resource variable's handle is the one that entered only when the
  // body passes it through.
  auto check_passed_through = [&](Node* e) -> absl::Status {
    const size_t v = var_of(e);
    Output through = ThroughIdentities(DataInput(loop.nexts[v], 0));
    if (through.node() == loop.switches[v] && through.index() == 1) return absl::OkStatus();
    return absl::UnimplementedError(absl::StrCat(
        "gradients of the loop '", frame, "': its resource variable from '",
        DataInput(e, 0).node()->name(), "' is replaced by the body ('", through.node()->name(),
        "'); only handles passed through unchanged are supported"));
  };
  absl::flat_hash_map<int, Gradient> out;
  if (ys.empty()) {
    // No float variable carries a gradient back: a resource variable
    // passed through gets its Exits' gradients only.
    for (size_t i = 0; i < k; ++i) {
      if (BaseType(loop.enters[i]->output_type(0)) != DT_RESOURCE) continue;
      Output d = exit_sum(i);
      if (d.node() == nullptr) continue;
      GR_RETURN_IF_ERROR(check_passed_through(loop.enters[i]));
      out[loop.enters[i]->id()] = d;
    }
    if (!gs.ok()) return gs.status();
    return out;
  }

  // The body's gradient, built from the forward ops, then moved into the
  // backprop frame.
  const int begin = g->num_node_ids();
  Scope body = bs.NewSubScope("body");
  // Loops nested in the body put their forward side in this forward frame.
  absl::flat_hash_set<int> forward_side;
  const Nesting here{nesting, &forward_side};
  GR_ASSIGN_OR_RETURN(std::vector<Gradient> grads,
                      ComputeBodyGradients(body, ys, xs, grad_ys, options, here, frame));
  std::vector<Output> dense(xs.size());
  for (size_t j = 0; j < xs.size(); ++j) {
    if (!grads[j].is_null()) dense[j] = ToDense(body, grads[j]);
  }
  for (size_t i = 0; i < k; ++i) {
    if (var_x[i] >= 0 && dense[var_x[i]].node() == nullptr) {
      dense[var_x[i]] = ZerosLike(body, var_grad[i].body);
    }
  }
  if (!bs.ok()) return bs.status();
  const int end = g->num_node_ids();

  std::vector<Output> stacks;
  BranchConditions branches(loops, li, forward_side);
  client::internal::FrameCapture cap;
  cap.skip = forward_side;
  // A gate per set of branches: live in a backprop iteration exactly when
  // the mirrored forward iteration took them all (their predicates are
  // forward values, popped like the rest).
  absl::flat_hash_map<BranchConditions::Cond, Node*> gates;
  auto gate = [&](const BranchConditions::Cond& c) -> absl::StatusOr<Node*> {
    if (auto it = gates.find(c); it != gates.end()) return it->second;
    Output live = bwd_pivot;
    for (const auto& [switch_id, branch] : c) {
      Node* sw = g->FindNodeId(switch_id);
      GR_ASSIGN_OR_RETURN(Output p, client::internal::Resolve(cap, DataInput(sw, 1)));
      std::vector<Output> routed = Op(bs, "Switch").In(live).In(p).Outs();
      if (routed.size() != 2) {
        return bs.ok() ? absl::InternalError("a gate's Switch failed to build") : bs.status();
      }
      live = Identity(bs, routed[static_cast<size_t>(branch)]);
    }
    if (!bs.ok()) return bs.status();
    gates[c] = live.node();
    return live.node();
  };
  // An ordering edge from a push or pop goes through a ControlTrigger,
  // which is never dead: a push or pop whose value is in a branch not
  // taken (or that the branch analysis missed) must not kill the counter.
  auto order = [&](const Scope& s, const Output& from, const Output& to) {
    Operation t = Op(s.WithControlDependencies(from), "ControlTrigger").Build();
    if (t.node() != nullptr) g->AddControlEdge(t.node(), to.node());
  };
  cap.pivot = bwd_pivot;
  cap.inside = b.ids();
  cap.capture = [&](const Output& o) -> absl::StatusOr<Output> {
    Node* src = o.node();
    // A nested loop's forward-side node is a value of this forward frame.
    const bool forward = forward_side.contains(src->id());
    const int where = forward || src->id() >= static_cast<int>(loops.inside.size())
                          ? (forward ? li : -1)
                          : loops.inside[src->id()];
    if (where >= 0 && where != li && !loops.Within(li, where)) {
      return absl::UnimplementedError(absl::StrCat("gradients of the loop '", frame,
                                                   "': its body's gradient reads '", src->name(),
                                                   "' of another loop"));
    }
    // From outside this loop (an enclosing loop's frame included): a
    // constant of the backprop frame.
    if (where != li) return client::internal::Enter(bs, o, b.frame(), true, pi);
    if (IsConstantEnter(src)) {
      return client::internal::Enter(bs, DataInput(src, 0), b.frame(), true, pi);
    }
    // A forward value: pushed in every forward iteration, popped in the
    // mirroring backprop one.
    const DataType t = o.type();
    const BranchConditions::Cond in_branches = branches.Of(o);
    Node* live = nullptr;
    if (!in_branches.empty()) {
      GR_ASSIGN_OR_RETURN(live, gate(in_branches));
    }
    const int first = g->num_node_ids();
    Output st = Op(gs, "StackV2")
                    .In(ScalarOf(fwd_consts, -1, DT_INT32))
                    .Attr("elem_type", AType(t))
                    .Attr("stack_name", client::internal::AttrString(src->name()))
                    .Out();
    Output push = Op(gs.WithControlDependencies(fwd_pivot), "StackPushV2")
                      .In(client::internal::Enter(gs, st, frame, true, pi))
                      .In(o)
                      .Out();
    order(gs, push, inc);
    forward_since(first);
    Output pop = Op(bs.WithControlDependencies(bwd_pivot), "StackPopV2")
                     .In(client::internal::Enter(bs, st, b.frame(), true, pi))
                     .Attr("elem_type", AType(t))
                     .Out();
    if (!gs.ok()) return gs.status();
    if (!bs.ok()) return bs.status();
    if (live != nullptr) g->AddControlEdge(live, pop.node());
    order(bs, pop, dec);
    stacks.push_back(st);
    return pop;
  };
  GR_RETURN_IF_ERROR(client::internal::MoveIntoFrame(g, begin, end, cap));

  // Close the loop: the variables' gradients go round, the accumulators
  // add each iteration's share.
  std::vector<Output> result(xs.size());
  for (size_t i = 0; i < k; ++i) {
    if (var_x[i] < 0) continue;
    b.Close(var_grad[i], dense[var_x[i]]);
    result[var_x[i]] = var_grad[i].exit;
  }
  for (size_t j = 0; j < xs.size(); ++j) {
    Node* e = x_enter[j];
    if (result[j].node() != nullptr) continue;
    const bool resource_var = !IsConstantEnter(e);
    Output after = resource_var ? exit_sum(var_of(e)) : Output();
    if (dense[j].node() == nullptr && after.node() == nullptr) continue;
    if (resource_var) GR_RETURN_IF_ERROR(check_passed_through(e));
    if (dense[j].node() != nullptr) {
      const Output source = DataInput(e, 0);
      Output zeros = BaseType(source.type()) == DT_RESOURCE
                         ? ZerosLike(gs, ReadVariable(gs, source, dense[j].type()))
                         : ZerosLike(gs, source);
      Output m = b.Open(zeros);
      LoopVar acc = b.Split(m, bpred);
      b.Close(acc, Add(bs, acc.body, dense[j]));
      result[j] = acc.exit;
    }
    // A resource variable's gradient after the loop adds to the sum.
    if (after.node() != nullptr) {
      result[j] = result[j].node() == nullptr ? after : Add(gs, result[j], after);
    }
  }
  if (!gs.ok()) return gs.status();

  // The stacks close once the backprop loop is done; the gradients wait
  // for that.
  std::vector<Operation> closes;
  for (const Output& st : stacks) {
    closes.push_back(Op(gs.WithControlDependencies(cv.exit), "StackCloseV2").In(st).Build());
  }
  for (size_t j = 0; j < xs.size(); ++j) {
    if (result[j].node() == nullptr) continue;
    Output r = closes.empty() ? result[j] : Identity(gs.WithControlDependencies(closes), result[j]);
    out[x_enter[j]->id()] = r;
  }
  if (!gs.ok()) return gs.status();
  return out;
}

}  // namespace loop_grad
}  // namespace train
}  // namespace client
}  // namespace graphrun
