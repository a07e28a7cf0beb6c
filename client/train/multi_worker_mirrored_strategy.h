// MultiWorkerMirroredStrategy: synchronous data parallelism across worker
// processes, as TensorFlow's tf.distribute.MultiWorkerMirroredStrategy,
// set up from the cluster and this task (TF_CONFIG: a `worker` job with an
// optional `chief`, no `ps`; an `evaluator` is not a replica).
//
//   auto s = MultiWorkerMirroredStrategy::Create(cluster, "worker", 1);
//   // This worker's rows per step: its replicas' (global / replicas each).
//   int64_t rows = *s->PerReplicaBatch(256) * s->num_local_replicas();
//   ... this worker's shard of the data (worker_index() of num_workers())
//   auto step = s->BuildTrainStep(root, {images, labels}, rows, model_fn, opt_fn,
//                                 &global_step);
//   TrainingLoopOptions o;  o.is_chief = s->is_chief();
//   o.initializes_own_variables = true;       // every worker holds a copy
//   ClientSession session(root, s->session_options(server->target()));
//
// Every worker builds its replicas, one per local device (CPU:0 by
// default; GPU:0..K-1 with K replicas per worker, as TensorFlow's strategy
// takes every GPU of a worker), with the same names, seeds and initial
// values as every other worker; each worker's batch is split among its
// replicas, and every replica's gradients are all-reduced (mean) with all
// the others' (one group of workers x K members) by CollectiveReduceV2,
// through the task's RemoteCollectives, so every copy applies the same
// bytes. GPU replicas' collectives run through NCCL in
// GPU memory, one communicator for the group across the workers' processes
// (kernels/gpu/nccl_backend.h); other accelerators stage their data
// through host memory.
// Workers: with a `chief` job the chief is worker 0 and worker i worker
// i + 1; without one, worker i is worker i and worker 0 is the chief.
// Worker w's replicas are w*K .. w*K+K-1; the first's ops and variables
// keep their plain names, local replica k's live under "replica_k". The
// chief writes checkpoints, summaries and exports; every worker restores
// the latest checkpoint itself.
#ifndef GRAPHRUN_CLIENT_TRAIN_MULTI_WORKER_MIRRORED_STRATEGY_H_
#define GRAPHRUN_CLIENT_TRAIN_MULTI_WORKER_MIRRORED_STRATEGY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/train/mirrored_strategy.h"
#include "distributed/cluster_spec.h"

namespace graphrun {
namespace client {
namespace train {

class MultiWorkerMirroredStrategy : public DistributionStrategy {
 public:
  // InvalidArgument naming what is wrong: a cluster with a ps job or no
  // worker job, a task type that does not train, a task not in the cluster.
  // `device_type`: the replicas' devices, devices 0..local_replicas-1 of
  // that type on the task ("GPU", "TEST_ACCEL"; the session then has soft
  // placement, so ops without a kernel there run on the task's CPU; CPU
  // replicas beyond the first need a server with that many CPU devices).
  // InvalidArgument unless 1 <= local_replicas <= 256.
  static absl::StatusOr<MultiWorkerMirroredStrategy> Create(
      const distributed::ClusterSpec& cluster, const std::string& task_type, int task_index,
      AllReduceOptions options = AllReduceOptions(), const std::string& device_type = "CPU",
      int local_replicas = 1);

  std::string name() const override { return "multi_worker_mirrored"; }
  // Replicas of the job: workers x local replicas.
  int num_replicas() const override { return num_workers_ * local_replicas_; }
  int num_local_replicas() const override { return local_replicas_; }
  int replica_index() const override { return worker_index_ * local_replicas_; }
  // Training tasks (chief and workers), and this one's place among them
  // (what its data shard is).
  int num_workers() const { return num_workers_; }
  int worker_index() const { return worker_index_; }
  bool is_chief() const override { return worker_index_ == 0; }
  // Every worker holds a copy of every variable and restores it itself.
  bool initializes_own_variables() const override { return true; }
  // "/job:worker/replica:0/task:1" and its first replica's device (CPU:0 by
  // default); local replica k's.
  const std::string& task() const { return task_; }
  std::string device(int k = 0) const {
    return absl::StrCat(task_, "/device:", device_type_, ":", k);
  }
  const std::string& device_type() const { return device_type_; }
  const AllReduceOptions& all_reduce_options() const { return options_; }

  // This worker's session on its own server (`target`), seeing only its
  // own task: collectives reach the peers, the session never does.
  SessionOptions session_options(const std::string& target) const override;
  Scope ReplicaScope(const Scope& root) const override { return root.WithDevice(device()); }
  // This worker's replicas of the step (BuildAllReduceTrainStep with a
  // group of num_replicas()); `inputs` are this worker's batch of `rows`
  // rows (InvalidArgument unless its replicas share it evenly). Its
  // after_restore op is BuildSyncFromChief over the saved variables and
  // `global_step`, then the local copies take the first's values.
  absl::StatusOr<TrainStep> BuildTrainStep(const Scope& root, const std::vector<Output>& inputs,
                                           int64_t rows, const ModelFn& model_fn,
                                           const OptimizerFn& optimizer_fn,
                                           const Variable* global_step) const override;
  // Every worker takes the chief's values of `variables` (the same list,
  // in the same order, on every worker): the chief broadcasts each with
  // CollectiveBcastSendV2, the others assign what CollectiveBcastRecvV2
  // gives, on the tasks' CPUs (a group of one member per worker: the key
  // group_key + 1 unless the gradients' group is the tasks' CPU:0s). Run it on every worker after
  // initialization or a restore, so a worker that restored nothing (another host's checkpoint
  // directory) still starts from the chief's state. InvalidArgument for a variable of unknown
  // shape.
  absl::StatusOr<Operation> BuildSyncFromChief(const Scope& root,
                                               const std::vector<Variable>& variables) const;

 private:
  int num_workers_ = 1;
  int worker_index_ = 0;
  int local_replicas_ = 1;
  std::string task_;
  std::string device_type_ = "CPU";
  AllReduceOptions options_;
};

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_MULTI_WORKER_MIRRORED_STRATEGY_H_
