// The trainer's parts (client/trainer/trainer.h), shared by its files:
// parameter_server.cc builds and runs the parameter-server and local
// replicas (local, in-process cluster, one task of a cluster),
// allreduce.cc the mirrored and multi-worker ones, evaluator.cc the
// evaluator (all on pieces.h), processes.cc starts one process per task,
// export.cc writes the inference graph, trainer.cc picks the mode.
#ifndef GRAPHRUN_CLIENT_TRAINER_TRAINER_INTERNAL_H_
#define GRAPHRUN_CLIENT_TRAINER_TRAINER_INTERNAL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/train/layers.h"
#include "client/train/models.h"
#include "client/trainer/trainer.h"
#include "distributed/cluster_spec.h"
#include "distributed/rpc/grpc_server.h"

namespace graphrun {
namespace client {
namespace trainer {
namespace internal {

// Lets another thread end a TrainReplicated early (a task of the cluster
// died): sets the stop flag the loops watch and releases replicas blocked
// in a synchronous step. Thread-safe.
class RunControl {
 public:
  void Abort(const absl::Status& why) {
    std::lock_guard<std::mutex> l(mu_);
    if (status_.ok()) status_ = why;
    stop_ = true;
    if (release_) release_();
  }
  // `release` runs on Abort (at once if already aborted); null clears it,
  // after which it is not running and will not run.
  void SetRelease(std::function<void()> release) {
    std::lock_guard<std::mutex> l(mu_);
    release_ = std::move(release);
    if (stop_ && release_) release_();
  }
  const std::atomic<bool>* stop() const { return &stop_; }
  absl::Status status() const {
    std::lock_guard<std::mutex> l(mu_);
    return status_;
  }

 private:
  mutable std::mutex mu_;
  std::atomic<bool> stop_{false};
  absl::Status status_;
  std::function<void()> release_;
};

// The zoo model `c.model` on `images` (as the training input pipeline
// makes them: float, scaled to [0, 1], [N, 784] or NHWC [N, 28, 28, 1]).
client::train::Model BuildModel(const TrainConfig& c, client::train::Layers& layers,
                                const client::Output& images, const client::Output& labels,
                                bool training);

// --distribution=mirrored: --num_replicas in-graph replicas on the CPU
// devices of one DirectSession, gradients all-reduced.
absl::StatusOr<TrainResult> TrainMirrored(const TrainConfig& c, std::ostream* log);

// trainer::RunEvaluator (trainer.h), in evaluator.cc.
absl::Status RunEvaluator(const TrainConfig& c, std::ostream& out, std::ostream* log);

// --distribution=multi_worker_mirrored: this task's replica (a chief or
// worker of `spec`, served by `server`), its gradients all-reduced with
// the other workers'. `control` may be null.
absl::StatusOr<TrainResult> TrainMultiWorker(const TrainConfig& c,
                                             const distributed::ClusterSpec& spec,
                                             const std::string& task_type, int task_index,
                                             distributed::GrpcServer* server, std::ostream* log,
                                             RunControl* control);

// --local: one replica in a DirectSession.
absl::StatusOr<TrainResult> TrainLocal(const TrainConfig& c, std::ostream* log);

// Between-graph replication (ParameterServerStrategy): this process runs
// one replica per task of `tasks` (chief or worker tasks of `spec`), each
// with its session on targets[i], its own task's server. `control` may be
// null.
absl::StatusOr<TrainResult> TrainReplicated(const TrainConfig& c,
                                            const distributed::ClusterSpec& spec,
                                            const std::vector<std::pair<std::string, int>>& tasks,
                                            const std::vector<std::string>& targets,
                                            std::ostream* log, RunControl* control);

// --in_process: every task a gRPC server in this process.
absl::StatusOr<TrainResult> TrainInProcessCluster(const TrainConfig& c, std::ostream* log);

// The server options of one task of `spec`.
distributed::ServerOptions TaskServerOptions(const TrainConfig& c,
                                             const distributed::ClusterSpec& spec,
                                             const std::string& task_type, int task_index);

// The server of one task, started.
absl::StatusOr<std::unique_ptr<distributed::GrpcServer>> StartTaskServer(
    const TrainConfig& c, const distributed::ClusterSpec& spec, const std::string& task_type,
    int task_index);

// Runs `task_type`:`task_index` of `spec` (chief or worker) in this
// process: its server (`server` if given, started), then its replica.
absl::StatusOr<TrainResult> TrainTask(const TrainConfig& c, const distributed::ClusterSpec& spec,
                                      const std::string& task_type, int task_index,
                                      std::ostream* log, RunControl* control,
                                      std::unique_ptr<distributed::GrpcServer> server = nullptr);

// TF_CONFIG set: this process is that task.
absl::StatusOr<TrainResult> TrainTfConfigTask(const TrainConfig& c, const std::string& tf_config,
                                              std::ostream* log);

// Default: one process per task (processes.cc). When the run failed
// because a task was lost (a PS process exited, a worker was killed by a
// signal), the error carries kTaskDiedPayload (the task's name).
absl::StatusOr<TrainResult> TrainProcessCluster(const TrainConfig& c, std::ostream* log);

// The GPUs this host gives its processes, as CUDA_VISIBLE_DEVICES names
// them: its entries when it is set ("" = none), else "0".."N-1" for the
// N /dev/nvidiaN device files (counted without starting CUDA).
std::vector<std::string> HostGpus();
// How the embedded cluster's `workers` multi_worker_mirrored workers share
// `gpus`: worker w gets the w-th run of `per_worker` of them (0: as many as
// divide evenly), as a CUDA_VISIBLE_DEVICES value each. Empty when they
// cannot have one each (fewer GPUs than workers: they all see every GPU);
// InvalidArgument when `per_worker` GPUs each do not fit.
absl::StatusOr<std::vector<std::string>> SplitGpus(const std::vector<std::string>& gpus,
                                                   int workers, int per_worker);
inline constexpr char kTaskDiedPayload[] = "graphrun/train/task_died";

}  // namespace internal
}  // namespace trainer
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAINER_TRAINER_INTERNAL_H_
