#include "client/train/parameter_server_strategy.h"

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/data/dataset_util.h"
#include "placement/ps_strategy.h"
#include "placement/replica_device_setter.h"

namespace graphrun {
namespace client {
namespace train {

absl::StatusOr<ParameterServerStrategy> ParameterServerStrategy::Create(
    const distributed::ClusterSpec& cluster, const std::string& task_type, int task_index,
    const ParameterServerStrategyOptions& options) {
  ParameterServerStrategy s;
  s.num_ps_ = cluster.num_tasks("ps");
  if (s.num_ps_ == 0) {
    return absl::InvalidArgumentError("ParameterServerStrategy: the cluster has no ps job");
  }
  if (task_type != "chief" && task_type != "worker") {
    return absl::InvalidArgumentError(absl::StrCat(
        "ParameterServerStrategy: task type '", task_type, "' does not train (chief or worker)"));
  }
  GR_ASSIGN_OR_RETURN(std::string address, cluster.Address(task_type, task_index));
  const bool has_chief = cluster.num_tasks("chief") > 0;
  s.replica_index_ = task_type == "chief" ? 0 : task_index + (has_chief ? 1 : 0);
  s.num_replicas_ = cluster.num_tasks("worker") + (has_chief ? 1 : 0);
  if (options.num_replicas > 0) {
    if (s.replica_index_ >= options.num_replicas) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ParameterServerStrategy: task ", task_type, ":", task_index, " is replica ",
          s.replica_index_, ", beyond the job's ", options.num_replicas, " training tasks"));
    }
    s.num_replicas_ = options.num_replicas;
  } else if (cluster.sparse()) {
    if (options.sync_replicas) {
      return absl::InvalidArgumentError(
          "ParameterServerStrategy: synchronous replicas need their number, which a sparse "
          "cluster does not say (set num_replicas: `graphrun train --workers=N`)");
    }
    s.num_replicas_ = 1;  // each replica on its own
  }
  s.is_chief_ = task_type == "chief" || (!has_chief && task_index == 0);
  s.worker_device_ = absl::StrCat("/job:", task_type, "/task:", task_index);
  s.target_ = absl::StrCat("grpc://", address);

  s.sync_ = options.sync_replicas;
  placement::ReplicaDeviceSetterOptions rds;
  rds.ps_tasks = s.num_ps_;
  rds.worker_device = s.worker_device_;
  if (options.ps_strategy_object != nullptr) {
    rds.ps_strategy = options.ps_strategy_object;
  } else {
    auto& registry = placement::PsStrategyRegistry::Default();
    if (!registry.Contains(options.ps_strategy) || registry.IsGraphStrategy(options.ps_strategy)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ParameterServerStrategy: '", options.ps_strategy,
                       "' is not a per-node PS strategy (round_robin, greedy_bytes, …)"));
    }
    GR_ASSIGN_OR_RETURN(rds.ps_strategy, registry.Create(options.ps_strategy, s.num_ps_));
  }
  GR_ASSIGN_OR_RETURN(s.device_fn_, placement::ReplicaDeviceSetter(rds));
  return s;
}

absl::StatusOr<ParameterServerStrategy> ParameterServerStrategy::FromTfConfig(
    absl::string_view tf_config, const ParameterServerStrategyOptions& options) {
  GR_ASSIGN_OR_RETURN(distributed::TfConfig cfg, distributed::ParseTfConfig(tf_config));
  return Create(cfg.cluster, cfg.task_type, cfg.task_index, options);
}

SessionOptions ReplicaSessionOptions(const std::string& target, const std::string& worker_device) {
  SessionOptions o;
  o.target = target;
  o.config.add_device_filters("/job:ps");
  o.config.add_device_filters(worker_device);
  return o;
}

absl::StatusOr<TrainStep> ParameterServerStrategy::BuildTrainStep(
    const Scope& root, const std::vector<Output>& inputs, int64_t rows, const ModelFn& model_fn,
    const OptimizerFn& optimizer_fn, const Variable* global_step) const {
  if (rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter_server: a batch of ", rows, " rows per replica"));
  }
  SyncReplicasOptions so;
  so.replicas_to_aggregate = num_replicas_;
  so.total_num_replicas = num_replicas_;
  return BuildSingleReplicaStep(ReplicaScope(root), inputs, model_fn, optimizer_fn, global_step,
                                sync_ ? &so : nullptr);
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
