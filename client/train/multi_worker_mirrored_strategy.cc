#include "client/train/multi_worker_mirrored_strategy.h"

#include "absl/strings/str_cat.h"
#include "client/train/parameter_server_strategy.h"

namespace graphrun {
namespace client {
namespace train {

absl::StatusOr<MultiWorkerMirroredStrategy> MultiWorkerMirroredStrategy::Create(
    const distributed::ClusterSpec& cluster, const std::string& task_type, int task_index,
    AllReduceOptions options) {
  if (cluster.num_tasks("ps") > 0) {
    return absl::InvalidArgumentError(
        "MultiWorkerMirroredStrategy: the cluster has a ps job; all-reduce training has no "
        "parameter servers (use parameter-server training for it)");
  }
  if (task_type != "chief" && task_type != "worker") {
    return absl::InvalidArgumentError(absl::StrCat("MultiWorkerMirroredStrategy: task type '",
                                                   task_type,
                                                   "' does not train (chief or worker)"));
  }
  if (task_index < 0 || task_index >= cluster.num_tasks(task_type)) {
    return absl::InvalidArgumentError(absl::StrCat("MultiWorkerMirroredStrategy: task ", task_type,
                                                   ":", task_index, " is not in the cluster ",
                                                   cluster.ToJson()));
  }
  if (options.pack_bytes < 0) {
    return absl::InvalidArgumentError(
        "MultiWorkerMirroredStrategy: allreduce pack_bytes must be >= 0");
  }
  MultiWorkerMirroredStrategy s;
  const bool has_chief = cluster.num_tasks("chief") > 0;
  s.num_replicas_ = cluster.num_tasks("worker") + (has_chief ? 1 : 0);
  s.replica_index_ = task_type == "chief" ? 0 : task_index + (has_chief ? 1 : 0);
  s.task_ = distributed::TaskName(task_type, task_index);
  s.options_ = std::move(options);
  return s;
}

SessionOptions MultiWorkerMirroredStrategy::session_options(const std::string& target) const {
  return ReplicaSessionOptions(target, task_);
}

absl::StatusOr<int64_t> MultiWorkerMirroredStrategy::PerReplicaBatch(int64_t global_batch) const {
  if (global_batch < num_replicas_ || global_batch % num_replicas_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat("multi_worker_mirrored: the global batch ",
                                                   global_batch, " does not divide evenly among ",
                                                   num_replicas_, " workers"));
  }
  return global_batch / num_replicas_;
}

absl::StatusOr<MirroredTrainStep> MultiWorkerMirroredStrategy::BuildTrainStep(
    const Scope& root, const std::vector<Output>& inputs, const ModelFn& model_fn,
    const OptimizerFn& optimizer_fn, const Variable* global_step) const {
  LocalReplicas local;
  local.scopes = {ReplicaScope(root)};
  local.devices = {device()};
  local.inputs = {inputs};
  return BuildAllReduceTrainStep(root, local, num_replicas_, options_, model_fn, optimizer_fn,
                                 global_step);
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
