// Private to client/train/: gradients through while loops (TensorFlow 1's
// Enter/Merge/Switch/LoopCond/NextIteration/Exit frames, as WhileLoop
// builds them and as functional While ops lower to).
//
// ComputeGradients treats a loop as one node from its Exits to its Enters:
// once the gradients of all the Exits it needs are summed, BuildLoopGradient
// builds the backprop loop, TensorFlow 1's way:
//  - a counter added to the forward frame counts the iterations;
//  - a backprop loop in a frame of its own runs that many iterations. Its
//    variables are the count and the gradients of the float loop variables
//    (starting from the Exits' gradients, zeros where none), plus one
//    accumulator per loop invariant (a constant Enter, or a resource handle
//    passed through unchanged) that sums the invariant's gradient over the
//    iterations;
//  - its body is the gradient of the forward body, from the NextIteration
//    inputs back to the body inputs. Each forward value that gradient reads
//    is pushed onto a stack in every forward iteration and popped in the
//    backprop iteration that mirrors it. Pushes are ordered by the counter
//    (iteration j + 1 pushes after iteration j) and pops by the backprop
//    count, so parallel iterations keep the order. The stacks are closed
//    when the backprop loop ends.
// A step that only runs the forward loop runs none of this (the counter and
// pushes feed only the backprop loop).
//
// Conditionals in the body (Switch/Merge, nested or not): a forward value
// in a branch exists only in the iterations that take it, so its push is
// dead in the others; its pop is gated by a chain of Switches of the
// backprop pivot on the branches' predicates (themselves popped), so it
// runs only in the mirroring backprop iterations. The ordering edges of
// pushes and pops go through ControlTriggers (never dead).
//
// Loops nested in the body (any depth): inside the body's gradient a
// nested loop is one node again, and its gradient is built the same way,
// with a Nesting: its forward side (counter, stacks, pushes) runs in the
// enclosing loop's forward frame, once per enclosing iteration, so the
// enclosing loop pushes what the nested backprop reads of it (the count,
// each stack's handle) and pops it in the mirroring backprop iteration,
// where the nested backprop loop then runs. Its constants are tied to the
// nested loop's first input, so they run exactly when the nested loop does.
//
// Unimplemented, naming the node: an Enter of a frame that is no
// recognisable loop, a resource loop variable the body replaces, an x or
// y inside a loop body.
#ifndef GRAPHRUN_CLIENT_TRAIN_GRAD_WHILE_H_
#define GRAPHRUN_CLIENT_TRAIN_GRAD_WHILE_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "client/scope.h"
#include "client/train/gradients.h"
#include "graph/graph.h"

namespace graphrun {
namespace client {
namespace train {
namespace loop_grad {

// One loop frame of a graph.
struct Loop {
  std::string frame;
  int parallel_iterations = 10;
  Node* loop_cond = nullptr;
  // Per loop variable.
  std::vector<Node*> enters, merges, switches, nexts;
  std::vector<std::vector<Node*>> exits;
  // Constant Enters of the frame.
  std::vector<Node*> invariants;
  // The loop whose frame holds this one (an index into Loops::loops), or -1.
  int parent = -1;
  // An Enter of a frame that is not a recognisable loop, inside this one
  // (null when none).
  Node* foreign = nullptr;
};

// Every recognisable loop of a graph and, by node id, where nodes belong.
struct Loops {
  std::vector<Loop> loops;
  std::vector<int> exit_of;   // node id -> loop whose Exit it is, or -1
  std::vector<int> enter_of;  // node id -> loop whose Enter (variable or invariant) it is
  std::vector<int> inside;    // node id -> innermost loop whose frame holds its output, or -1
  std::vector<int> exit_var;  // node id of an Exit -> its loop variable
  // True when loop `inner` is `outer` or nested in it, at any depth.
  bool Within(int inner, int outer) const {
    for (int l = inner; l >= 0; l = loops[l].parent) {
      if (l == outer) return true;
    }
    return false;
  }
};
Loops FindLoops(const Graph& graph);

// Where a loop's gradient is being built when that loop is nested in
// another whose body is being differentiated (null at the top level).
// Nodes a nested loop's gradient builds on the forward side (its
// iteration counter, its stacks and pushes: they run in the enclosing
// forward frame) are recorded in `forward_side` of every enclosing level,
// so that those levels leave them in the forward frame and push what
// their backprop reads of them.
struct Nesting {
  const Nesting* parent = nullptr;
  absl::flat_hash_set<int>* forward_side = nullptr;
  void AddForward(int id) const {
    for (const Nesting* n = this; n != nullptr; n = n->parent) n->forward_side->insert(id);
  }
};

// The gradients of the Enters' inputs of `loop`, by Enter node id (null
// where none), given the summed gradient of each Exit (by Exit node id;
// missing means none).
absl::StatusOr<absl::flat_hash_map<int, Gradient>> BuildLoopGradient(
    const Scope& scope, const Loops& loops, const Loop& loop,
    const absl::flat_hash_map<int, Gradient>& exit_grads, const GradientOptions& options,
    const Nesting* nesting);

// What the gradient traversal running on this thread differentiates (null
// outside one): its options and, in a loop body, the body's frame and
// Nesting. A gradient function that differentiates a subgraph of its own
// (a call frame's recomputed body, grad_call.cc) goes on in the same mode.
struct Traversal {
  const Graph* graph = nullptr;  // the graph being differentiated
  const GradientOptions* options = nullptr;
  const std::string* body_frame = nullptr;  // null: a whole graph
  const Nesting* nesting = nullptr;
};
const Traversal* CurrentTraversal();
// Makes `t` the current traversal of this thread while it lives.
class ActiveTraversal {
 public:
  explicit ActiveTraversal(const Traversal* t);
  ~ActiveTraversal();
  ActiveTraversal(const ActiveTraversal&) = delete;
  ActiveTraversal& operator=(const ActiveTraversal&) = delete;

 private:
  const Traversal* previous_;
};

// ComputeGradients for the body of the loop of frame `frame` (gradients.cc):
// the reverse traversal stops at the xs; loops nested in the body are
// single nodes there too, their gradients built with `nesting`.
absl::StatusOr<std::vector<Gradient>> ComputeBodyGradients(
    const Scope& scope, const std::vector<Output>& ys, const std::vector<Output>& xs,
    const std::vector<Output>& grad_ys, const GradientOptions& options, const Nesting& nesting,
    const std::string& frame);

}  // namespace loop_grad
}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_GRAD_WHILE_H_
