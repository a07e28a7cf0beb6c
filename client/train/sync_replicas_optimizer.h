// SyncReplicasOptimizer: TensorFlow 1.x's tf.train.SyncReplicasOptimizer,
// synchronous between-graph replication over parameter servers.
//
// Every worker builds the same graph (same node names, so the PS-side
// state is shared by name) around a wrapped optimizer:
//
//   worker train op   gradients -> one accumulator per variable
//                     (colocated with the variable, shared name
//                     "<var>/grad_accum"), stamped with the worker's
//                     local step; then a dequeue from the token queue
//                     "sync_token_q" (colocated with global_step) that
//                     blocks until the chief has applied the step; the
//                     token (the new global step) becomes the local step.
//                     A dense gradient goes to a
//                     ResourceConditionalAccumulator; a sparse one
//                     (IndexedSlices, from an embedding gather) to a
//                     SparseConditionalAccumulator as indices, values and
//                     dense shape, so only the gathered rows cross the
//                     network, never a table-sized tensor.
//   chief sync op     take replicas_to_aggregate gradients from every
//                     accumulator (the average: dense, the sum over the
//                     count; sparse, the union of the indices, sorted, with
//                     each row's sum over the number of gradients that had
//                     that index, as TensorFlow), apply them once with the
//                     wrapped optimizer (sparse ones as IndexedSlices, so
//                     GradientDescent, Momentum and Adagrad update only
//                     those rows; global_step += 1), then enqueue
//                     total_num_replicas tokens. Every apply waits for every
//                     take, so a worker that sees a new value of one variable
//                     finds every accumulator advanced.
//
// A gradient stamped with a local step older than the accumulator's
// global step is stale and dropped (backup workers: aggregate fewer
// replicas than there are). The local step ("sync_rep_local_step") lives
// on the worker, colocated with a NoOp built in the caller's device scope,
// and is not a global variable: it is neither initialized by the chief nor
// saved.
//
// The token queue, the accumulators and a generation variable (which
// chief_init_op sets to a number of its own, so that workers can tell the
// chief made the state anew) live in the resource container
// kSyncReplicasContainer of their tasks: a chief that recovers from a lost
// parameter server drops that container (Reset), so its next
// chief_init_op starts from an empty queue and empty accumulators whatever
// survived the loss (tokens, partial sums, a closed queue).
//
// Running it (client/loop/sync_replicas_hook.h does this for a
// TrainingLoop): after the variables are initialized or restored the chief
// runs chief_init_op() (accumulators take the current global step; initial
// tokens when replicas_to_aggregate > total_num_replicas), every worker
// runs local_step_init_op(), and the chief runs chief_sync_op() in a loop
// on a session of its own ("the chief queue runner"). close_token_queue()
// releases workers blocked on a token (their step fails) when training
// ends in an error.
//
// Same thread-safety as Scope.
#ifndef GRAPHRUN_CLIENT_TRAIN_SYNC_REPLICAS_OPTIMIZER_H_
#define GRAPHRUN_CLIENT_TRAIN_SYNC_REPLICAS_OPTIMIZER_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "client/operation.h"
#include "client/scope.h"
#include "client/train/optimizers.h"
#include "client/variables.h"

namespace graphrun {
namespace client {
namespace train {

// The resource container of the synchronization state.
inline constexpr char kSyncReplicasContainer[] = "sync_replicas";

struct SyncReplicasOptions {
  // Gradients averaged into one update.
  int replicas_to_aggregate = 1;
  // Workers taking part; tokens released per update. -1: replicas_to_aggregate.
  int total_num_replicas = -1;
};

class SyncReplicasOptimizer {
 public:
  // `optimizer` applies the averaged gradients; not owned, must outlive
  // this object.
  SyncReplicasOptimizer(Optimizer* optimizer, SyncReplicasOptions options);

  absl::StatusOr<std::vector<GradAndVar>> ComputeGradients(const Scope& scope, const Output& loss,
                                                           const std::vector<Variable>& var_list) {
    return optimizer_->ComputeGradients(scope, loss, var_list);
  }
  // Builds the worker train op (returned) and the chief's ops. REQUIRES:
  // `global_step` (InvalidArgument otherwise); called once per object.
  // InvalidArgument when replicas_to_aggregate < 1 or total_num_replicas
  // < 1, or no variable has a gradient.
  absl::StatusOr<Operation> ApplyGradients(const Scope& scope,
                                           const std::vector<GradAndVar>& grads_and_vars,
                                           const Variable* global_step);
  absl::StatusOr<Operation> Minimize(const Scope& scope, const Output& loss,
                                     const std::vector<Variable>& var_list,
                                     const Variable* global_step);

  // Null until ApplyGradients succeeded.
  Operation chief_init_op() const { return chief_init_; }
  Operation local_step_init_op() const { return local_step_init_; }
  Operation chief_sync_op() const { return chief_sync_; }
  Operation close_token_queue() const { return close_queue_; }
  // The generation of the synchronization state (int64; reading it fails
  // until chief_init_op ran), and whether chief_init_op ran (bool).
  Output generation() const { return generation_; }
  Output generation_ready() const { return generation_ready_; }
  // The wrapped optimizer's variables (slots, beta powers): what a Saver
  // must save besides the model's.
  std::vector<Variable> variables() const { return optimizer_->variables(); }
  const SyncReplicasOptions& options() const { return options_; }

 private:
  Optimizer* optimizer_;
  SyncReplicasOptions options_;
  std::unique_ptr<Variable> local_step_;
  Operation chief_init_, local_step_init_, chief_sync_, close_queue_;
  Output generation_, generation_ready_;
  bool applied_ = false;
};

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_SYNC_REPLICAS_OPTIMIZER_H_
