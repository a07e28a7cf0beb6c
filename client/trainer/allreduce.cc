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
#include "kernels/dataset_util.h"
#include "placement/balanced_strategy.h"
#include "placement/placement_report.h"
#include "placement/ps_strategy.h"
#include "placement/replica_device_setter.h"
#include "util/json.h"

namespace graphrun {
namespace client {
namespace trainer {
namespace internal {

absl::StatusOr<TrainResult> TrainMirrored(const TrainConfig& c, std::ostream* log) {
  train::AllReduceOptions ao;
  ao.pack_bytes = c.allreduce_pack_bytes;
  GR_ASSIGN_OR_RETURN(train::MirroredStrategy strategy,
                      train::MirroredStrategy::Create(c.num_replicas, ao));
  GR_RETURN_IF_ERROR(strategy.PerReplicaBatch(c.batch_size).status());
  // One input pipeline of global batches, split among the replicas: the
  // same examples in the same order as one replica would train on.
  GR_ASSIGN_OR_RETURN(int64_t per_epoch, StepsPerEpoch(c, 1, c.batch_size));
  const int64_t last_step = LastStep(c, per_epoch);
  TrainResult result;
  result.mode = "local";
  result.num_ps = 0;
  result.num_workers = strategy.num_replicas();
  ClusterProgress progress(log, c.log_every, per_epoch, c.batch_size, last_step);
  std::atomic<bool> stop{false};
  std::vector<ReplicaRun> runs(1);
  runs[0].hook = std::make_shared<ProgressHook>(&progress, true, c.stop, &stop);

  auto g = std::make_unique<ReplicaGraph>();
  g->root.SetGraphSeed(c.seed);
  Scope s0 = g->root.WithDevice(strategy.devices()[0]);
  GR_ASSIGN_OR_RETURN(std::string train_images, FindIdx(c, "train-images-idx3-ubyte"));
  GR_ASSIGN_OR_RETURN(std::string train_labels, FindIdx(c, "train-labels-idx1-ubyte"));
  g->global_step = std::make_unique<Variable>(train::CreateGlobalStep(s0));
  Input in = BuildInput(s0.NewSubScope("input"), c, train_images, train_labels, c.batch_size, 0, 1,
                        /*shuffle=*/true);
  std::vector<std::unique_ptr<train::Layers>> layers;
  train::ModelFn model_fn = ReplicaModelFn(c, &layers);
  GR_ASSIGN_OR_RETURN(train::MirroredTrainStep step,
                      strategy.BuildTrainStep(
                          g->root, {in.images, in.labels}, c.batch_size, model_fn,
                          [&c] { return MakeOptimizer(c); }, g->global_step.get()));
  GR_RETURN_IF_ERROR(BuildEvalTower(c, s0, *layers[0], g.get()));
  client::TrainingGraph& t = g->training;
  t.train_op = step.train_op;
  t.global_step = g->global_step.get();
  t.metrics = {step.loss, step.metrics[0]};
  t.metric_names = {"loss", "accuracy"};
  t.iterator_init = in.make_iterator;
  t.variables = step.saved;
  t.variables.push_back(*g->global_step);
  t.init_op = client::GlobalVariablesInitializer(g->root);
  GR_RETURN_IF_ERROR(g->root.status());
  client::TrainingLoopOptions lo = LoopOptions(c, last_step, c.batch_size, &stop);
  lo.hooks = {std::make_shared<MirrorSyncHook>(step.mirror_sync), runs[0].hook};
  GR_RETURN_IF_ERROR(AddSummaryHook(c, true, &lo));
  GR_ASSIGN_OR_RETURN(g->loop, client::TrainingLoop::Create(g->root, t, std::move(lo)));
  if (log != nullptr) *log << step.plan.Summary() << "\n";
  std::vector<std::unique_ptr<ClientSession>> sessions;
  sessions.push_back(std::make_unique<ClientSession>(
      g->root, strategy.session_options(c.intra_op_threads, c.inter_op_threads)));
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  graphs.push_back(std::move(g));
  GR_RETURN_IF_ERROR(RunReplicas(graphs, sessions, runs, stop, &result));
  GR_RETURN_IF_ERROR(FinishChief(c, *graphs[0], *sessions[0], last_step, &result));
  result.allreduce = step.plan;
  return result;
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
  if (p == "file") {
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

}  // namespace

absl::StatusOr<TrainResult> TrainMultiWorker(const TrainConfig& c,
                                             const distributed::ClusterSpec& spec,
                                             const std::string& task_type, int task_index,
                                             distributed::GrpcServer* server, std::ostream* log,
                                             RunControl* control) {
  const std::string target = server->target();
  train::AllReduceOptions ao;
  ao.pack_bytes = c.allreduce_pack_bytes;
  GR_ASSIGN_OR_RETURN(train::MultiWorkerMirroredStrategy strategy,
                      train::MultiWorkerMirroredStrategy::Create(spec, task_type, task_index, ao));
  GR_ASSIGN_OR_RETURN(int64_t batch, strategy.PerReplicaBatch(c.batch_size));
  GR_ASSIGN_OR_RETURN(ShardChoice shard,
                      ChooseShard(c, strategy.replica_index(), strategy.num_replicas()));
  // Every replica takes one batch of its shard per step, in lockstep: an
  // epoch is the smallest shard's full batches.
  GR_ASSIGN_OR_RETURN(std::string train_labels, FindIdx(c, "train-labels-idx1-ubyte"));
  GR_ASSIGN_OR_RETURN(int64_t records, CountRecords(train_labels));
  const int64_t per_epoch = std::max<int64_t>(1, records / shard.count / batch);
  const int64_t last_step = LastStep(c, per_epoch);
  TrainResult result;
  result.num_ps = 0;
  result.num_workers = strategy.num_replicas();
  if (log != nullptr && strategy.is_chief()) *log << shard.why << "\n";
  ClusterProgress progress(log, c.log_every, per_epoch, c.batch_size, last_step);
  std::atomic<bool> stop{false};
  std::vector<ReplicaRun> runs(1);
  runs[0].hook = std::make_shared<ProgressHook>(
      &progress, strategy.is_chief(), control != nullptr ? control->stop() : c.stop, &stop);

  auto g = std::make_unique<ReplicaGraph>();
  g->root.SetGraphSeed(c.seed);
  Scope s = strategy.ReplicaScope(g->root);
  GR_ASSIGN_OR_RETURN(std::string train_images, FindIdx(c, "train-images-idx3-ubyte"));
  g->global_step = std::make_unique<Variable>(train::CreateGlobalStep(s));
  Input in = BuildInput(s.NewSubScope("input"), c, train_images, train_labels, batch, shard.index,
                        shard.count, /*shuffle=*/true);
  std::vector<std::unique_ptr<train::Layers>> layers;
  train::ModelFn model_fn = ReplicaModelFn(c, &layers);
  GR_ASSIGN_OR_RETURN(train::MirroredTrainStep step,
                      strategy.BuildTrainStep(
                          g->root, {in.images, in.labels}, model_fn,
                          [&c] { return MakeOptimizer(c); }, g->global_step.get()));
  if (strategy.is_chief()) GR_RETURN_IF_ERROR(BuildEvalTower(c, s, *layers[0], g.get()));
  client::TrainingGraph& t = g->training;
  t.train_op = step.train_op;
  t.global_step = g->global_step.get();
  t.metrics = {step.loss, step.metrics[0]};
  t.metric_names = {"loss", "accuracy"};
  t.iterator_init = in.make_iterator;
  t.variables = step.saved;
  t.variables.push_back(*g->global_step);
  t.init_op = client::GlobalVariablesInitializer(g->root);
  GR_RETURN_IF_ERROR(g->root.status());
  // Every worker starts from the chief's values, whatever it restored.
  std::vector<Variable> synced = t.variables;
  GR_ASSIGN_OR_RETURN(Operation sync, strategy.BuildSyncFromChief(g->root, synced));
  client::TrainingLoopOptions lo = LoopOptions(c, last_step, batch, &stop);
  lo.is_chief = strategy.is_chief();
  lo.initializes_own_variables = true;
  lo.hooks = {std::make_shared<MirrorSyncHook>(sync), runs[0].hook};
  GR_RETURN_IF_ERROR(AddSummaryHook(c, strategy.is_chief(), &lo));
  GR_ASSIGN_OR_RETURN(g->loop, client::TrainingLoop::Create(g->root, t, std::move(lo)));
  if (log != nullptr && strategy.is_chief()) {
    *log << step.plan.Summary() << "\n";
  }
  std::vector<std::unique_ptr<ClientSession>> sessions;
  sessions.push_back(std::make_unique<ClientSession>(g->root, strategy.session_options(target)));
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  graphs.push_back(std::move(g));
  if (control != nullptr) {
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
  // Every replica processed one batch per step: the whole job's examples.
  result.examples = (result.global_step - result.initial_global_step) * c.batch_size;
  result.examples_per_sec = result.seconds > 0 ? result.examples / result.seconds : 0;
  result.allreduce = step.plan;
  return result;
}

}  // namespace internal
}  // namespace trainer
}  // namespace client
}  // namespace graphrun
