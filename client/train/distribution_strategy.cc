#include "client/train/distribution_strategy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/status.h"

namespace graphrun {
namespace client {
namespace train {

std::string AllReducePlan::Summary() const {
  return absl::StrFormat("all-reduce: %d gradient%s in %d pack%s (%.1f MiB) over %d replicas, %s",
                         tensors, tensors == 1 ? "" : "s", packs, packs == 1 ? "" : "s",
                         bytes / 1048576.0, replicas, algorithm);
}

absl::StatusOr<int64_t> DistributionStrategy::PerReplicaBatch(int64_t global_batch) const {
  const int n = num_replicas();
  if (n < 1 || global_batch < n || global_batch % n != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": the global batch ", global_batch,
                                                   " does not divide evenly among ", n,
                                                   " replicas"));
  }
  return global_batch / n;
}

absl::StatusOr<TrainStep> BuildSingleReplicaStep(
    const Scope& scope, const std::vector<Output>& inputs, const ModelFn& model_fn,
    const OptimizerFn& optimizer_fn, const Variable* global_step, const SyncReplicasOptions* sync) {
  TrainStep step;
  GR_ASSIGN_OR_RETURN(ReplicaModel m, model_fn(scope, 0, inputs));
  std::unique_ptr<Optimizer> opt = optimizer_fn();
  // TensorFlow's "with control_dependencies(UPDATE_OPS)": batch-norm
  // averages move with every update.
  Scope s = m.update_ops.empty() ? scope : scope.WithControlDependencies(m.update_ops);
  if (sync != nullptr) {
    step.sync = std::make_unique<SyncReplicasOptimizer>(opt.get(), *sync);
    GR_ASSIGN_OR_RETURN(step.train_op, step.sync->Minimize(s, m.loss, m.trainable, global_step));
  } else {
    GR_ASSIGN_OR_RETURN(step.train_op, opt->Minimize(s, m.loss, m.trainable, global_step));
  }
  step.loss = m.loss;
  step.metrics = m.metrics;
  step.saved = m.variables;
  for (const Variable& v : opt->variables()) step.saved.push_back(v);
  step.replicas.push_back(std::move(m));
  step.optimizers.push_back(std::move(opt));
  GR_RETURN_IF_ERROR(scope.status());
  return step;
}

SessionOptions OneDeviceStrategy::session_options(const std::string& target) const {
  SessionOptions o;
  o.target = target;
  o.config.set_intra_op_parallelism_threads(intra_);
  o.config.set_inter_op_parallelism_threads(inter_);
  return o;
}

absl::StatusOr<TrainStep> OneDeviceStrategy::BuildTrainStep(const Scope& root,
                                                            const std::vector<Output>& inputs,
                                                            int64_t rows, const ModelFn& model_fn,
                                                            const OptimizerFn& optimizer_fn,
                                                            const Variable* global_step) const {
  GR_RETURN_IF_ERROR(PerReplicaBatch(rows).status());
  return BuildSingleReplicaStep(ReplicaScope(root), inputs, model_fn, optimizer_fn, global_step,
                                nullptr);
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
