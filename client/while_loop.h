// WhileLoop: builds `while (cond(vars)) vars = body(vars)` into a Scope's
// graph the way TensorFlow 1's tf.while_loop does, out of Enter, Merge,
// LoopCond, Switch, NextIteration and Exit in one execution frame, so the
// executor runs up to `parallel_iterations` iterations at once.
//
//   auto r = WhileLoop(s, {i0, acc0},
//       [](const Scope& s, const std::vector<Output>& v) -> absl::StatusOr<Output> {
//         return ops::Less(s, v[0], 10);
//       },
//       [&](const Scope& s, const std::vector<Output>& v)
//           -> absl::StatusOr<std::vector<Output>> {
//         return std::vector<Output>{ops::Add(s, v[0], 1), ops::Mul(s, v[1], w)};
//       });
//
// The cond and body build ordinary ops on the values they are given. A
// tensor from outside the loop that they use (`w` above, a variable's
// value) enters the frame once, through a constant Enter, as tf.while_loop
// captures it; an op without inputs (a Const) runs in every iteration.
// A control dependency of a cond or body op on an op outside the loop, and
// the scope's own control dependencies, gate the loop's entry (the Enters
// wait for them). An op whose inputs all come from outside runs once per
// iteration, like any other op of the body.
//
// Gradients flow through such loops, and through the loops that functional
// While ops lower to (client/train/gradients.h).
//
// Errors (on the returned status, and recorded on the scope): a cond that
// is not a bool scalar, a body that returns the wrong number of values or a
// value of another dtype than its loop variable, a null input.
#ifndef GRAPHRUN_CLIENT_WHILE_LOOP_H_
#define GRAPHRUN_CLIENT_WHILE_LOOP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "client/operation.h"
#include "client/scope.h"

namespace graphrun {
namespace client {

using WhileCondFn =
    std::function<absl::StatusOr<Output>(const Scope& scope, const std::vector<Output>& vars)>;
using WhileBodyFn = std::function<absl::StatusOr<std::vector<Output>>(
    const Scope& scope, const std::vector<Output>& vars)>;

struct WhileLoopOptions {
  // The ops' name scope and the frame's name; "while" (made unique) when
  // empty.
  std::string name;
  // Iterations the executor may run at once (TensorFlow's default).
  int parallel_iterations = 10;
};

// The loop variables' final values (the Exit outputs), in input order.
absl::StatusOr<std::vector<Output>> WhileLoop(const Scope& scope, const std::vector<Output>& inputs,
                                              const WhileCondFn& cond, const WhileBodyFn& body,
                                              const WhileLoopOptions& options = {});

namespace internal {

// Moving freshly built ops into a loop frame (the loop builder's captures,
// and a loop gradient's backprop body). The nodes with ids in [begin, end)
// are the new ones; `inside` holds the ids of older nodes already in the
// frame. For each new node:
//  - a data input from a node neither new nor inside is replaced by
//    `capture(that output)`, called once per distinct output;
//  - a control input from such a node is removed and reported in
//    `outside_control` (the caller decides where the ordering goes);
//  - a node fed by captures only, or by nothing, gets a control edge from
//    `pivot`, so it runs in exactly the frame's iterations.
struct FrameCapture {
  Output pivot;
  absl::flat_hash_set<int> inside;
  std::function<absl::StatusOr<Output>(const Output& outside)> capture;
  std::vector<Node*> outside_control;
  absl::flat_hash_map<std::pair<int, int>, Output> captured;  // cache
  absl::flat_hash_set<int> capture_ids;                       // their nodes
  // New nodes to leave where they are (neither moved nor inside): a nested
  // loop gradient's forward side.
  absl::flat_hash_set<int> skip;
};
absl::Status MoveIntoFrame(Graph* graph, int begin, int end, FrameCapture& f);
// `o` itself when it is in the frame, else its capture (made once and
// then counted as inside).
absl::StatusOr<Output> Resolve(FrameCapture& f, const Output& o);

// Replaces data input `dst_input` of `dst` by `src` (same dtype).
void ReplaceInput(Graph* graph, Node* dst, int dst_input, const Output& src);

// An Enter of `x` into `frame` (RefEnter for a ref-typed x).
Output Enter(const Scope& scope, const Output& x, const std::string& frame, bool is_constant,
             int parallel_iterations);

}  // namespace internal
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_WHILE_LOOP_H_
