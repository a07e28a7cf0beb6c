// The all-reduce trainers of `graphrun train`: mirrored (in-graph
// replicas in this process) and multi-worker mirrored (this worker's
// replica of a job of worker processes).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/client_session.h"
#include "client/loop/saver.h"
#include "client/loop/summary_writer.h"
#include "client/loop/sync_replicas_hook.h"
#include "client/loop/training_loop.h"
#include "client/ops.h"
#include "client/train/layers.h"
#include "client/train/mirrored_strategy.h"
#include "client/train/models.h"
#include "client/train/multi_worker_mirrored_strategy.h"
#include "client/train/optimizers.h"
#include "client/train/parameter_server_strategy.h"
#include "client/train/sync_replicas_optimizer.h"
#include "client/trainer/pieces.h"
#include "client/trainer/trainer_internal.h"
#include "distributed/local_cluster.h"
#include "graph/status.h"
#include "kernels/data/dataset_util.h"
#include "placement/balanced_strategy.h"
#include "placement/placement_report.h"
#include "placement/ps_strategy.h"
#include "placement/replica_device_setter.h"
#include "util/json.h"

namespace graphrun {
namespace client {
namespace trainer {
namespace internal {

namespace {

// Training under an all-reduce strategy (mirrored or multi-worker): this
// process's replicas, one step per global batch, the chief finishing.
// `server`: this task's (multi-worker), whose collectives a dying peer
// aborts; null for one process.
absl::StatusOr<TrainResult> TrainAllReduce(const TrainConfig& c,
                                           const train::DistributionStrategy& strategy,
                                           const ReplicaBuild& b, int64_t per_epoch,
                                           std::ostream* log, RunControl* control,
                                           distributed::GrpcServer* server) {
  const int64_t last_step = LastStep(c, per_epoch);
  TrainResult result;
  result.num_ps = 0;
  result.num_workers = strategy.num_replicas() / strategy.num_local_replicas();
  result.num_replicas = strategy.num_replicas();
  ClusterProgress progress(log, c.log_every, per_epoch, c.batch_size, last_step);
  std::atomic<bool> stop{false};
  std::vector<ReplicaRun> runs(1);
  runs[0].hook = std::make_shared<ProgressHook>(
      &progress, strategy.is_chief(), control != nullptr ? control->stop() : c.stop, &stop);
  client::TrainingLoopOptions lo = LoopOptions(c, last_step, b.rows, &stop);
  lo.hooks = {runs[0].hook};
  GR_RETURN_IF_ERROR(AddSummaryHook(c, strategy.is_chief(), &lo));
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  GR_ASSIGN_OR_RETURN(graphs.emplace_back(), BuildStrategyReplica(c, strategy, b, std::move(lo)));
  const train::AllReducePlan plan = graphs[0]->step.plan;
  if (log != nullptr && strategy.is_chief()) *log << plan.Summary() << "\n";
  std::vector<std::unique_ptr<ClientSession>> sessions;
  sessions.push_back(
      std::make_unique<ClientSession>(graphs[0]->root, strategy.session_options(b.target)));
  if (control != nullptr && server != nullptr) {
    // A task of the job died (the launcher saw it): a step blocked in an
    // all-reduce, or in joining the group, fails at once.
    // (The run then ends with the control's status, which names the task.)
    control->SetRelease([&stop, server] {
      stop = true;
      server->collectives()->AbortAll(
          absl::UnavailableError("train: a task of the job died; this worker stops"));
    });
  }
  absl::Status ran = RunReplicas(graphs, sessions, runs, stop, &result);
  if (control != nullptr) {
    control->SetRelease(nullptr);
    GR_RETURN_IF_ERROR(control->status());
  }
  GR_RETURN_IF_ERROR(ran);
  if (strategy.is_chief()) {
    GR_RETURN_IF_ERROR(FinishChief(c, *graphs[0], *sessions[0], last_step, &result));
  } else {
    GR_ASSIGN_OR_RETURN(result.global_step, graphs[0]->loop->ReadGlobalStep(*sessions[0]));
    result.restored_from_step.reset();
    result.checkpoint.clear();
  }
  // Every replica processed its batch per step: the whole job's examples.
  result.examples = (result.global_step - result.initial_global_step) * c.batch_size;
  result.examples_per_sec = result.seconds > 0 ? result.examples / result.seconds : 0;
  result.allreduce = plan;
  return result;
}

}  // namespace

absl::StatusOr<TrainResult> TrainMirrored(const TrainConfig& c, std::ostream* log) {
  train::AllReduceOptions ao;
  ao.pack_bytes = c.allreduce_pack_bytes;
  GR_ASSIGN_OR_RETURN(train::MirroredStrategy strategy,
                      train::MirroredStrategy::Create(c.num_replicas, ao, c.replica_device_type));
  strategy.set_session_threads(c.intra_op_threads, c.inter_op_threads);
  GR_RETURN_IF_ERROR(strategy.PerReplicaBatch(c.batch_size).status());
  // One input pipeline of global batches, split among the replicas: the
  // same examples in the same order as one replica would train on.
  GR_ASSIGN_OR_RETURN(int64_t per_epoch, StepsPerEpoch(c, 1, c.batch_size));
  ReplicaBuild b;
  b.rows = c.batch_size;
  absl::StatusOr<TrainResult> r = TrainAllReduce(c, strategy, b, per_epoch, log, nullptr, nullptr);
  if (r.ok()) r->mode = "local";
  return r;
}

namespace {

// The data shard this replica reads, per tf.data's auto-shard policy; the
// line saying which policy applied and why goes to `why`.
struct ShardChoice {
  int index = 0, count = 1;
  std::string why;
};

absl::StatusOr<ShardChoice> ChooseShard(const TrainConfig& c, int replica, int replicas) {
  ShardChoice s;
  const std::string& p = c.auto_shard_policy;
  if (p == "off") {
    s.why = absl::StrCat(
        "auto-shard: OFF: every worker reads the whole training set (shuffled "
        "by its own seed)");
    s.index = replica;  // the shuffle seed offset
    s.count = 1;
    return s;
  }
  if (p == "file" && replicas == 1) {
    s.why = "auto-shard: FILE: the one worker reads the one training file";
    return s;
  }
  if (p == "file") {  // ParseTrainFlags says so before any task starts
    return absl::InvalidArgumentError(absl::StrCat(
        "--auto_shard_policy=file: the training set is 1 file (", c.data_dir,
        "/train-images-idx3-ubyte[.gz]) for ", replicas,
        " workers; sharding by file needs at least one file per worker (use data or auto)"));
  }
  s.index = replica;
  s.count = replicas;
  const std::string which = absl::StrCat("worker ", replica, " reads the examples i with i mod ",
                                         replicas, " = ", replica);
  s.why = p == "data" ? absl::StrCat("auto-shard: DATA: ", which)
                      : absl::StrCat("auto-shard: AUTO chose DATA (1 training file for ", replicas,
                                     " workers: FILE needs a file per worker); ", which);
  return s;
}

// Replicas per worker: --num_replicas, or by default one per device of
// the replicas' type on this task (as TensorFlow's strategy takes every
// GPU of a worker), one where it has none (soft placement then runs the
// replica on the CPU) and one on the CPU. More replicas than devices is
// InvalidArgument naming the task: soft placement would put two replicas
// on one device, and the group would never fill.
absl::StatusOr<int> LocalReplicas(const TrainConfig& c, const std::string& task,
                                  distributed::GrpcServer* server) {
  if (c.replica_device_type == "CPU" || server == nullptr) {
    return std::max(c.replicas_per_worker, 1);  // the server has that many CPUs
  }
  int n = 0;
  for (const auto& d : server->device_mgr()->devices()) {
    if (d->device_type() == c.replica_device_type) ++n;
  }
  if (c.replicas_per_worker > 1 && c.replicas_per_worker > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num_replicas=", c.replicas_per_worker, ": task ", task, " has ", n, " ",
        c.replica_device_type, " device(s); multi_worker_mirrored puts one replica on each"));
  }
  if (c.replicas_per_worker > 0) return c.replicas_per_worker;
  return std::max(n, 1);
}

}  // namespace

absl::StatusOr<TrainResult> TrainMultiWorker(const TrainConfig& c,
                                             const distributed::ClusterSpec& spec,
                                             const std::string& task_type, int task_index,
                                             distributed::GrpcServer* server, std::ostream* log,
                                             RunControl* control) {
  train::AllReduceOptions ao;
  ao.pack_bytes = c.allreduce_pack_bytes;
  GR_ASSIGN_OR_RETURN(int local,
                      LocalReplicas(c, distributed::TaskName(task_type, task_index), server));
  GR_ASSIGN_OR_RETURN(train::MultiWorkerMirroredStrategy strategy,
                      train::MultiWorkerMirroredStrategy::Create(spec, task_type, task_index, ao,
                                                                 c.replica_device_type, local));
  // Every worker says what it builds: workers whose device counts differ
  // build groups of different sizes, which the collectives then refuse.
  if (log != nullptr) {
    *log << "multi_worker_mirrored: " << strategy.task() << " builds " << local << " "
         << c.replica_device_type << " replica" << (local == 1 ? "" : "s") << " of "
         << strategy.num_replicas() << " (" << strategy.num_workers() << " workers)\n";
  }
  // This worker's batch: its replicas' together.
  GR_ASSIGN_OR_RETURN(int64_t per_replica, strategy.PerReplicaBatch(c.batch_size));
  const int64_t batch = per_replica * strategy.num_local_replicas();
  GR_ASSIGN_OR_RETURN(ShardChoice shard,
                      ChooseShard(c, strategy.worker_index(), strategy.num_workers()));
  // Every replica takes one batch of its shard per step, in lockstep: an
  // epoch is the smallest shard's full batches.
  GR_ASSIGN_OR_RETURN(IdxPair train, FindIdxPair(c, "train"));
  GR_ASSIGN_OR_RETURN(int64_t records, CountRecords(train.labels));
  const int64_t per_epoch = std::max<int64_t>(1, records / shard.count / batch);
  if (log != nullptr && strategy.is_chief()) *log << shard.why << "\n";
  ReplicaBuild b;
  b.rows = batch;
  b.shard = shard.index;
  b.num_shards = shard.count;
  b.target = server->target();
  return TrainAllReduce(c, strategy, b, per_epoch, log, control, server);
}

}  // namespace internal
}  // namespace trainer
}  // namespace client
}  // namespace graphrun
