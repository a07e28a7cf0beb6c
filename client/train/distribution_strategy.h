// DistributionStrategy: one interface for the ways graphrun trains a
// model on more than one device or task, as tf.distribute.Strategy is in
// TensorFlow. A strategy
//
//   * builds the replicas this process runs (its devices, name scopes and
//     input slices) from one model function;
//   * splits the global batch (PerReplicaBatch: InvalidArgument when it
//     does not divide);
//   * aggregates the gradients (asynchronous or SyncReplicasOptimizer
//     updates on parameter servers; an all-reduce mean among mirrored
//     replicas or workers);
//   * says who saves (is_chief: checkpoints, summaries, exports) and who
//     initializes or restores variables (every process holding copies, or
//     the chief alone with variables on parameter servers).
//
// The implementations: OneDeviceStrategy (below: one replica in this
// process), ParameterServerStrategy (parameter_server_strategy.h),
// MirroredStrategy (mirrored_strategy.h) and MultiWorkerMirroredStrategy
// (multi_worker_mirrored_strategy.h). A training program is the same for
// all of them:
//
//   std::unique_ptr<DistributionStrategy> s = ...;
//   int64_t batch = *s->PerReplicaBatch(global_batch) * s->num_local_replicas();
//   ... an input pipeline of `batch` rows: this process's shard,
//       s->replica_index() / s->num_local_replicas() of
//       s->num_replicas() / s->num_local_replicas() ...
//   TrainStep step = *s->BuildTrainStep(root, {images, labels}, batch, model_fn, opt_fn, &gs);
//   TrainingLoopOptions o;  o.is_chief = s->is_chief();
//   o.initializes_own_variables = s->initializes_own_variables();
//   ... run step.after_restore after initialization or a restore ...
//   ClientSession session(root, s->session_options(target));
#ifndef GRAPHRUN_CLIENT_TRAIN_DISTRIBUTION_STRATEGY_H_
#define GRAPHRUN_CLIENT_TRAIN_DISTRIBUTION_STRATEGY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/operation.h"
#include "client/scope.h"
#include "client/train/optimizers.h"
#include "client/train/sync_replicas_optimizer.h"
#include "client/variables.h"
#include "runtime/session.h"

namespace graphrun {
namespace client {
namespace train {

// What one step's all-reduce does, for logs and results.
struct AllReducePlan {
  int tensors = 0;
  int packs = 0;
  int64_t bytes = 0;  // per replica per step
  int replicas = 0;
  // The algorithm that runs: "shared memory" (in one process), "ring",
  // "recursive doubling", both joined by " and ", or a hint as given.
  std::string algorithm;
  std::vector<int64_t> pack_bytes;  // per pack (0: not fully defined)
  // "all-reduce: 6 gradients in 1 pack (0.9 MiB) over 2 replicas, auto"
  std::string Summary() const;
};

// What one replica's model function builds.
struct ReplicaModel {
  Output loss;                        // scalar, the mean over the replica's slice
  std::vector<Output> metrics;        // float scalars, averaged over replicas
  std::vector<Variable> trainable;    // same order on every replica
  std::vector<Variable> variables;    // every variable of the replica (mirrored)
  std::vector<Operation> update_ops;  // run before the update (batch-norm averages)
};
// Builds replica `k`'s model in `scope` (its device and name scope) on
// `inputs`, its slices of the batch.
using ModelFn = std::function<absl::StatusOr<ReplicaModel>(const Scope& scope, int k,
                                                           const std::vector<Output>& inputs)>;
using OptimizerFn = std::function<std::unique_ptr<Optimizer>()>;

// One training step, as a strategy built it for this process.
struct TrainStep {
  Operation train_op;  // every local replica's update, then global_step += 1
  Output loss;         // mean over the local replicas
  std::vector<Output> metrics;
  // Run on every process that initializes its own variables, after
  // initialization and after a restore, so that every copy starts from
  // the same values (mirrored: copies := replica 0's; multi-worker: every
  // worker := the chief's). Null when there is nothing to do.
  Operation after_restore;
  std::vector<Variable> saved;  // what checkpoints hold (the primaries and optimizer state)
  std::vector<ReplicaModel> replicas;
  std::vector<std::unique_ptr<Optimizer>> optimizers;
  // Parameter servers with synchronous replicas: the wrapper whose
  // queues the training loop's SyncReplicasHook drives.
  std::unique_ptr<SyncReplicasOptimizer> sync;
  AllReducePlan plan;  // all-reduce strategies (plan.replicas == 0: none)
};

class DistributionStrategy {
 public:
  virtual ~DistributionStrategy() = default;

  // "one_device", "parameter_server", "mirrored", "multi_worker_mirrored".
  virtual std::string name() const = 0;
  // Replicas in the whole job (the global batch is split among them).
  virtual int num_replicas() const = 0;
  // Of which this process builds these, numbered replica_index() on.
  virtual int num_local_replicas() const { return 1; }
  virtual int replica_index() const = 0;
  // Writes checkpoints, summaries and exports.
  virtual bool is_chief() const = 0;
  // Every process initializes (or restores) the variables it holds,
  // instead of waiting for the chief to do it for all.
  virtual bool initializes_own_variables() const = 0;
  // Where this process's first replica runs (its device function or
  // device): the input pipeline and global_step go there too.
  virtual Scope ReplicaScope(const Scope& root) const = 0;
  // This process's step's session; `target` is this task's server
  // ("grpc://host:port"), "" for a strategy of one process.
  virtual SessionOptions session_options(const std::string& target) const = 0;

  // The global batch per replica; InvalidArgument naming both numbers when
  // it does not divide evenly.
  absl::StatusOr<int64_t> PerReplicaBatch(int64_t global_batch) const;

  // The step: `inputs` (tensors whose dimension 0 is this process's batch
  // of `rows` rows: PerReplicaBatch * num_local_replicas) split among the
  // local replicas, `model_fn` per replica, the gradients aggregated, the
  // optimizer(s) applying them, `global_step` (may be null) incremented
  // once. InvalidArgument for a batch that does not divide, replicas whose
  // variables differ, a variable without a gradient.
  virtual absl::StatusOr<TrainStep> BuildTrainStep(const Scope& root,
                                                   const std::vector<Output>& inputs, int64_t rows,
                                                   const ModelFn& model_fn,
                                                   const OptimizerFn& optimizer_fn,
                                                   const Variable* global_step) const = 0;
};

// How one replica's step is built when a process has one replica and no
// copies to keep equal (OneDeviceStrategy, ParameterServerStrategy):
// model_fn(scope, 0, inputs), its update ops before the update, and the
// optimizer applying the gradients; with `sync`, through a
// SyncReplicasOptimizer with those options.
absl::StatusOr<TrainStep> BuildSingleReplicaStep(
    const Scope& scope, const std::vector<Output>& inputs, const ModelFn& model_fn,
    const OptimizerFn& optimizer_fn, const Variable* global_step, const SyncReplicasOptions* sync);

// One replica on one device of this process (TensorFlow's
// OneDeviceStrategy; the default when nothing is distributed).
class OneDeviceStrategy : public DistributionStrategy {
 public:
  // `device` "" : wherever the placer puts it. Threads 0: the defaults.
  explicit OneDeviceStrategy(std::string device = "", int intra_op_threads = 0,
                             int inter_op_threads = 0)
      : device_(std::move(device)), intra_(intra_op_threads), inter_(inter_op_threads) {}

  std::string name() const override { return "one_device"; }
  int num_replicas() const override { return 1; }
  int replica_index() const override { return 0; }
  bool is_chief() const override { return true; }
  bool initializes_own_variables() const override { return true; }
  Scope ReplicaScope(const Scope& root) const override {
    return device_.empty() ? root : root.WithDevice(device_);
  }
  SessionOptions session_options(const std::string& target) const override;
  absl::StatusOr<TrainStep> BuildTrainStep(const Scope& root, const std::vector<Output>& inputs,
                                           int64_t rows, const ModelFn& model_fn,
                                           const OptimizerFn& optimizer_fn,
                                           const Variable* global_step) const override;

 private:
  std::string device_;
  int intra_, inter_;
};

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_DISTRIBUTION_STRATEGY_H_
