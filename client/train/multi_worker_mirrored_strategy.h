// MultiWorkerMirroredStrategy: synchronous data parallelism across worker
// processes, as TensorFlow's tf.distribute.MultiWorkerMirroredStrategy,
// set up from the cluster and this task (TF_CONFIG: a `worker` job with an
// optional `chief`, no `ps`; an `evaluator` is not a replica).
//
//   auto s = MultiWorkerMirroredStrategy::Create(cluster, "worker", 1);
//   int64_t batch = *s->PerReplicaBatch(256);  // global / replicas
//   ... this worker's shard of the data (replica_index() of num_replicas())
//   auto step = s->BuildTrainStep(root, {images, labels}, model_fn, opt_fn, &global_step);
//   TrainingLoopOptions o;  o.is_chief = s->is_chief();
//   o.initializes_own_variables = true;       // every worker holds a copy
//   ClientSession session(root, s->session_options(server->target()));
//
// Every worker builds one replica on its own CPU device (or its GPU:0),
// with the same names, seeds and initial values as every other worker;
// its gradients are all-reduced (mean) with the others' by
// CollectiveReduceV2, through the task's RemoteCollectives, so every copy
// applies the same bytes. GPU replicas' collectives run through NCCL in
// GPU memory, one communicator for the group across the workers' processes
// (kernels/gpu/nccl_backend.h); other accelerators stage their data
// through host memory.
// Replicas: with a `chief` job the chief is replica 0 and worker i replica
// i + 1; without one, worker i is replica i and worker 0 is the chief. The
// chief writes checkpoints, summaries and exports; every worker restores
// the latest checkpoint itself.
#ifndef GRAPHRUN_CLIENT_TRAIN_MULTI_WORKER_MIRRORED_STRATEGY_H_
#define GRAPHRUN_CLIENT_TRAIN_MULTI_WORKER_MIRRORED_STRATEGY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/train/mirrored_strategy.h"
#include "distributed/cluster_spec.h"

namespace graphrun {
namespace client {
namespace train {

class MultiWorkerMirroredStrategy : public DistributionStrategy {
 public:
  // InvalidArgument naming what is wrong: a cluster with a ps job or no
  // worker job, a task type that does not train, a task not in the cluster.
  // `device_type`: the replica's device, device 0 of that type on its
  // task ("GPU", "TEST_ACCEL"; the session then has soft placement, so
  // ops without a kernel there run on the task's CPU).
  static absl::StatusOr<MultiWorkerMirroredStrategy> Create(
      const distributed::ClusterSpec& cluster, const std::string& task_type, int task_index,
      AllReduceOptions options = AllReduceOptions(), const std::string& device_type = "CPU");

  std::string name() const override { return "multi_worker_mirrored"; }
  int num_replicas() const override { return num_replicas_; }
  int replica_index() const override { return replica_index_; }
  bool is_chief() const override { return replica_index_ == 0; }
  // Every worker holds a copy of every variable and restores it itself.
  bool initializes_own_variables() const override { return true; }
  // "/job:worker/replica:0/task:1" and its replica's device (CPU:0 by
  // default).
  const std::string& task() const { return task_; }
  std::string device() const { return task_ + "/device:" + device_type_ + ":0"; }
  const std::string& device_type() const { return device_type_; }
  const AllReduceOptions& all_reduce_options() const { return options_; }

  // This worker's session on its own server (`target`), seeing only its
  // own task: collectives reach the peers, the session never does.
  SessionOptions session_options(const std::string& target) const override;
  Scope ReplicaScope(const Scope& root) const override { return root.WithDevice(device()); }
  // This worker's replica of the step (BuildAllReduceTrainStep with a
  // group of num_replicas()); `inputs` are this worker's batch of `rows`
  // rows. Its after_restore op is BuildSyncFromChief over the saved
  // variables and `global_step`.
  absl::StatusOr<TrainStep> BuildTrainStep(const Scope& root, const std::vector<Output>& inputs,
                                           int64_t rows, const ModelFn& model_fn,
                                           const OptimizerFn& optimizer_fn,
                                           const Variable* global_step) const override;
  // Every worker takes the chief's values of `variables` (the same list,
  // in the same order, on every worker): the chief broadcasts each with
  // CollectiveBcastSendV2, the others assign what CollectiveBcastRecvV2
  // gives, on the tasks' CPUs (group_key + 1 when the replicas are on
  // accelerators). Run it on every worker after initialization or a restore, so
  // a worker that restored nothing (another host's checkpoint directory)
  // still starts from the chief's state. InvalidArgument for a variable of
  // unknown shape.
  absl::StatusOr<Operation> BuildSyncFromChief(const Scope& root,
                                               const std::vector<Variable>& variables) const;

 private:
  int num_replicas_ = 1;
  int replica_index_ = 0;
  std::string task_;
  std::string device_type_ = "CPU";
  AllReduceOptions options_;
};

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_MULTI_WORKER_MIRRORED_STRATEGY_H_
