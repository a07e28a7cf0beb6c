// ParameterServerStrategy: between-graph replication set up from the
// cluster and this task, as TensorFlow 1.x users do it with TF_CONFIG,
// tf.train.replica_device_setter and MonitoredTrainingSession(is_chief).
// The model code is the single-machine code, built in the strategy's scope:
//
//   auto strategy = ParameterServerStrategy::FromTfConfig(getenv("TF_CONFIG"));
//   Scope s = strategy->ReplicaScope(root);  // variables on PS tasks, ops here
//   Layers layers(s);  ...                // unchanged model code
//   int64_t batch = *strategy->PerReplicaBatchSize(256);   // global / replicas
//   ... ShardDataset(num_replicas(), replica_index()) for the input ...
//   TrainingLoopOptions o;  o.is_chief = strategy->is_chief();
//   ClientSession session(root, strategy->session_options());
//
// Replicas: with a `chief` job, the chief is replica 0 and worker i is
// replica i + 1; without one, worker i is replica i and worker 0 is the
// chief (it initializes, restores and saves; the others wait). Updates are
// asynchronous; wrap the optimizer in SyncReplicasOptimizer for
// synchronous replicas (num_replicas() gradients per update).
//
// A sparse cluster (TF_CONFIG "sparseCluster", as TFJob writes it with
// enableDynamicWorker) names only the PS tasks and this one, so the number
// of replicas is not known: options.num_replicas says it, or else every
// replica trains on its own (num_replicas() 1: the whole global batch per
// replica, the input not sharded; asynchronous only).
#ifndef GRAPHRUN_CLIENT_TRAIN_PARAMETER_SERVER_STRATEGY_H_
#define GRAPHRUN_CLIENT_TRAIN_PARAMETER_SERVER_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/scope.h"
#include "client/train/distribution_strategy.h"
#include "distributed/cluster_spec.h"
#include "placement/device_function.h"
#include "placement/ps_strategy.h"
#include "runtime/session.h"

namespace graphrun {
namespace client {
namespace train {

// Options of a between-graph replica's session on `target`
// ("grpc://host:port", its task's server) that sees only the PS tasks and
// `worker_device` (device_filters, as TensorFlow sets them): it never
// waits for, or fails with, the chief or the other workers.
SessionOptions ReplicaSessionOptions(const std::string& target, const std::string& worker_device);

struct ParameterServerStrategyOptions {
  // How variables are spread over the PS tasks: a per-node strategy of
  // placement::PsStrategyRegistry ("round_robin", "greedy_bytes", …).
  std::string ps_strategy = "round_robin";
  // Or a strategy object (a plan made over the whole graph, as `balanced`
  // makes), used instead of the name when set.
  std::shared_ptr<placement::PsStrategy> ps_strategy_object;
  // Synchronous replicas: every update averages one batch of each replica
  // (SyncReplicasOptimizer); false: each replica updates on its own.
  bool sync_replicas = false;
  // The job's training tasks (chief and workers); 0: those of the cluster.
  // Needed for a sparse cluster's sharded input and synchronous replicas.
  int num_replicas = 0;
};

class ParameterServerStrategy : public DistributionStrategy {
 public:
  // This task is `task_type`:`task_index` ("chief" or "worker") of
  // `cluster`, which must have a `ps` job. InvalidArgument naming what is
  // wrong (no ps job, a task that does not train, a task not in the
  // cluster, an unknown ps_strategy).
  static absl::StatusOr<ParameterServerStrategy> Create(
      const distributed::ClusterSpec& cluster, const std::string& task_type, int task_index,
      const ParameterServerStrategyOptions& options = {});
  // The same from TF_CONFIG's JSON ({"cluster": …, "task": {"type", "index"}}).
  static absl::StatusOr<ParameterServerStrategy> FromTfConfig(
      absl::string_view tf_config, const ParameterServerStrategyOptions& options = {});

  std::string name() const override { return "parameter_server"; }
  int num_ps_tasks() const { return num_ps_; }
  int num_replicas() const override { return num_replicas_; }
  int replica_index() const override { return replica_index_; }
  bool is_chief() const override { return is_chief_; }
  // The chief initializes and restores the variables on the PS tasks; the
  // other replicas wait for them.
  bool initializes_own_variables() const override { return false; }
  bool sync_replicas() const { return sync_; }
  // "/job:worker/task:1": where this replica's ops run.
  const std::string& worker_device() const { return worker_device_; }
  // ReplicaSessionOptions for this task's own server and this task.
  SessionOptions session_options() const { return ReplicaSessionOptions(target_, worker_device_); }
  // The same on `target` ("": this task's address in the cluster).
  SessionOptions session_options(const std::string& target) const override {
    return ReplicaSessionOptions(target.empty() ? target_ : target, worker_device_);
  }

  // `root` with the replica device function: variables (and the other
  // ps ops) on the PS tasks, every other op on worker_device().
  client::Scope ReplicaScope(const client::Scope& root) const override {
    return root.WithDeviceFunction(device_fn_);
  }

  // The global batch split evenly over the replicas (512 over 8 = 64);
  // InvalidArgument when it does not divide.
  absl::StatusOr<int64_t> PerReplicaBatchSize(int64_t global_batch_size) const {
    return PerReplicaBatch(global_batch_size);
  }

  // This replica's step (BuildSingleReplicaStep in ReplicaScope): the
  // gradients of its batch of `rows` rows applied to the variables on the
  // PS tasks, asynchronously, or through a SyncReplicasOptimizer
  // aggregating num_replicas() of them (step.sync).
  absl::StatusOr<TrainStep> BuildTrainStep(const Scope& root, const std::vector<Output>& inputs,
                                           int64_t rows, const ModelFn& model_fn,
                                           const OptimizerFn& optimizer_fn,
                                           const Variable* global_step) const override;

 private:
  ParameterServerStrategy() = default;

  int num_ps_ = 0;
  int num_replicas_ = 1;
  int replica_index_ = 0;
  bool is_chief_ = false;
  bool sync_ = false;
  std::string worker_device_;
  std::string target_;
  placement::DeviceFunction device_fn_;
};

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_PARAMETER_SERVER_STRATEGY_H_
