// Gradients through a conditional built of Switch and Merge (TensorFlow 1's
// tf.cond, as the client API builds it with ops::Switch / ops::Merge):
//  - Switch(data, pred) -> (output_false, output_true): only the taken
//    branch's gradient arrives at run time (the other branch's gradient ops
//    are dead), so the gradient of `data` is a Merge of the two. A branch
//    that does not use its output gets zeros routed by the same pred, so the
//    Merge always has its live input. `pred` gets none.
//  - Merge(inputs) -> (output, value_index): the output's gradient goes to
//    the input that was taken, value_index: input i gets
//    Switch(dy, value_index == i)'s true output, dead for the others, which
//    keeps the gradients of the branch not taken from running.
//  - _SwitchN(data, index) -> N outputs (what Case and StatelessCase lower
//    to): as Switch, with N branches. The gradient of `data` is an N-input
//    Merge of the outputs' gradients; a branch without one gets zeros routed
//    by the same index (which also covers an index out of range: both
//    _SwitchN take the last output). `index` gets none.
// Tensors from outside a branch must enter it through a Switch (tf.cond's
// rule): an op of a branch that also reads an outside tensor directly would
// send a dead gradient to it. Whole loops are differentiated elsewhere
// (grad_while.cc); Enter, Exit and NextIteration have no gradient function.
#include "client/train/grad_internal.h"
#include "client/train/gradients.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using namespace internal;  // NOLINT: the op helpers

using Outs = absl::StatusOr<std::vector<Output>>;

Outs SwitchGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  const bool has_false = dy.size() > 0 && dy[0].node() != nullptr;
  const bool has_true = dy.size() > 1 && dy[1].node() != nullptr;
  if (!has_false && !has_true) return std::vector<Output>{Output(), Output()};
  std::vector<Output> branches = {has_false ? dy[0] : Output(), has_true ? dy[1] : Output()};
  if (!has_false || !has_true) {
    // Zeros of the data, live exactly when the branch without a gradient
    // is taken.
    std::vector<Output> zeros =
        Op(s, "Switch").In(ZerosLike(s, InputOf(op, 0))).In(InputOf(op, 1)).Outs();
    if (zeros.size() != 2) return absl::InternalError("Switch of zeros failed to build");
    branches[has_false ? 1 : 0] = zeros[has_false ? 1 : 0];
  }
  std::vector<Output> merged = Op(s, "Merge").InList(InputList({branches[0], branches[1]})).Outs();
  if (merged.empty()) return absl::InternalError("Merge of the branch gradients failed to build");
  return std::vector<Output>{merged[0], Output()};
}

Outs SwitchNGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  const int n = op.num_outputs();
  std::vector<Output> branches(static_cast<size_t>(n));
  bool any = false, all = true;
  for (int i = 0; i < n; ++i) {
    const bool has = static_cast<size_t>(i) < dy.size() && dy[i].node() != nullptr;
    if (has) branches[static_cast<size_t>(i)] = dy[i];
    any = any || has;
    all = all && has;
  }
  if (!any) return std::vector<Output>{Output(), Output()};
  if (!all) {
    std::vector<Output> zeros = Op(s, "_SwitchN")
                                    .In(ZerosLike(s, InputOf(op, 0)))
                                    .In(InputOf(op, 1))
                                    .Attr("num_outs", AInt(n))
                                    .Outs();
    if (zeros.size() != static_cast<size_t>(n)) {
      return absl::InternalError("_SwitchN of zeros failed to build");
    }
    for (int i = 0; i < n; ++i) {
      if (branches[static_cast<size_t>(i)].node() == nullptr) {
        branches[static_cast<size_t>(i)] = zeros[static_cast<size_t>(i)];
      }
    }
  }
  std::vector<Output> merged = Op(s, "Merge").InList(InputList(branches)).Outs();
  if (merged.empty()) return absl::InternalError("Merge of the branch gradients failed to build");
  return std::vector<Output>{merged[0], Output()};
}

Outs MergeGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  const int n = op.node()->num_inputs();
  std::vector<Output> out(static_cast<size_t>(n));
  if (dy.empty() || dy[0].node() == nullptr) return out;
  const Output taken = OutputOf(op, 1);  // value_index
  for (int i = 0; i < n; ++i) {
    Output is_i = Binary(s, "Equal", taken, ScalarOf(s, i, DT_INT32));
    std::vector<Output> routed = Op(s, "Switch").In(dy[0]).In(is_i).Outs();
    if (routed.size() != 2) return absl::InternalError("Switch of the gradient failed to build");
    out[static_cast<size_t>(i)] = routed[1];
  }
  return out;
}

}  // namespace

void RegisterControlFlowGradients(GradientRegistry& r) {
  r.AddDense("Switch", SwitchGrad);
  r.AddDense("_SwitchN", SwitchNGrad);
  r.AddDense("Merge", MergeGrad);
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
