#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
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
#include "distributed/launcher_link.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
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

using distributed::kLauncherWaitMs;
using distributed::StartServerForLauncher;
using distributed::TakeLauncherFd;
namespace {

void PrintPlacement(const ReplicaGraph& g, const TrainConfig& c, int num_ps, int num_workers,
                    const std::string& strategy, std::ostream& log) {
  auto def = g.root.ToGraphDef();
  if (!def.ok()) return;
  placement::ReportOptions o;
  o.strategy = strategy;
  o.num_ps_tasks = num_ps;
  o.num_worker_tasks = num_workers;
  o.batch_size = c.batch_size / num_workers;
  o.fetches = {g.train_op_name};
  auto report = placement::BuildPlacementReport(*def, o);
  if (!report.ok()) {
    log << "placement summary unavailable: " << report.status().message() << "\n";
    return;
  }
  log << "placement (" << strategy << "):\n";
  for (const placement::TaskReport& t : report->tasks) {
    if (!t.is_ps) continue;
    log << absl::StrFormat("  %s  %d bytes in %d variables, %d bytes/step sent\n", t.task, t.bytes,
                           t.variables.size(), t.send_bytes_per_step);
    for (const placement::VariableReport& v : t.variables) {
      log << "    " << v.name << " " << v.shape.DebugString() << " " << v.bytes << " bytes\n";
    }
  }
  log << absl::StrFormat("  imbalance (max/mean bytes over PS tasks): %.3f\n", report->imbalance);
}

// The model's forward graph alone (input, layers, loss; no optimizer and
// no devices): what `balanced` plans over, so that every model variable is
// splittable (an optimizer's Apply op ties a variable to its slots).
absl::StatusOr<tensorflow::GraphDef> ForwardGraph(const TrainConfig& c, int64_t batch) {
  Scope root = Scope::NewRootScope();
  root.SetGraphSeed(c.seed);
  GR_ASSIGN_OR_RETURN(IdxPair train, FindIdxPair(c, "train"));
  Input in =
      BuildInput(root.NewSubScope("input"), c, train.images, train.labels, batch, 0, 1, true);
  train::Layers layers(root, c.seed);
  BuildModel(c, layers, in.images, in.labels, /*training=*/true);
  GR_RETURN_IF_ERROR(root.status());
  return root.ToGraphDef();
}

struct VariablePlan {
  std::function<std::shared_ptr<placement::PsStrategy>()> strategy;
  // Variables built as axis-0 parts "<name>/part_k" of these row counts
  // (balanced's shards).
  std::map<std::string, std::vector<int64_t>> partitions;
};

// The PS strategy's options of `c`: synchronous or not, and the job's
// training tasks (--workers under a sparse TF_CONFIG; 0: the cluster's).
train::ParameterServerStrategyOptions PsOptions(const TrainConfig& c) {
  train::ParameterServerStrategyOptions so;
  so.sync_replicas = c.sync;
  so.num_replicas = c.cluster_replicas;
  return so;
}

// The per-node PS strategy for `name`. `balanced` (a whole-graph strategy)
// is planned once over the model's forward graph: the variables it splits
// are built partitioned (each part with its own optimizer slots, on the
// task the plan gives that shard), the others go where the plan puts them.
absl::StatusOr<VariablePlan> PlanVariables(const TrainConfig& c, int num_ps, int num_workers) {
  GR_RETURN_IF_ERROR(CheckTrainStrategy(c.strategy));
  auto& registry = placement::PsStrategyRegistry::Default();
  VariablePlan out;
  if (!registry.IsGraphStrategy(c.strategy)) {
    std::string name = c.strategy;
    GR_RETURN_IF_ERROR(registry.Create(name, num_ps).status());
    out.strategy = [name, num_ps]() -> std::shared_ptr<placement::PsStrategy> {
      return std::shared_ptr<placement::PsStrategy>(
          *placement::PsStrategyRegistry::Default().Create(name, num_ps));
    };
    return out;
  }
  const int64_t batch = std::max<int64_t>(1, c.batch_size / num_workers);
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef def, ForwardGraph(c, batch));
  placement::GraphStrategyContext ctx;
  ctx.num_tasks = num_ps;
  ctx.ps_ops = placement::DefaultPsOps();
  ctx.batch_size = batch;
  GR_ASSIGN_OR_RETURN(placement::BalancedPlan plan, placement::PlanBalanced(def, ctx));
  for (const placement::ShardPlan& sp : plan.shards) out.partitions[sp.variable] = sp.sizes;
  auto tasks = plan.tasks;
  out.strategy = [tasks, num_ps]() -> std::shared_ptr<placement::PsStrategy> {
    return placement::NewFixedMapStrategy(tasks, num_ps);
  };
  return out;
}

}  // namespace

absl::StatusOr<TrainResult> TrainLocal(const TrainConfig& c, std::ostream* log) {
  TrainResult result;
  result.mode = "local";
  train::OneDeviceStrategy strategy("", c.intra_op_threads, c.inter_op_threads);
  GR_ASSIGN_OR_RETURN(int64_t per_epoch, StepsPerEpoch(c, 1, c.batch_size));
  const int64_t last_step = LastStep(c, per_epoch);
  ClusterProgress progress(log, c.log_every, per_epoch, c.batch_size, last_step);
  std::atomic<bool> stop{false};
  std::vector<ReplicaRun> runs(1);
  runs[0].hook = std::make_shared<ProgressHook>(&progress, true, c.stop, &stop);
  client::TrainingLoopOptions lo = LoopOptions(c, last_step, c.batch_size, &stop);
  lo.hooks = {runs[0].hook};
  GR_RETURN_IF_ERROR(AddSummaryHook(c, true, &lo));
  ReplicaBuild b;
  b.rows = c.batch_size;
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  GR_ASSIGN_OR_RETURN(graphs.emplace_back(), BuildStrategyReplica(c, strategy, b, std::move(lo)));
  std::vector<std::unique_ptr<ClientSession>> sessions;
  sessions.push_back(
      std::make_unique<ClientSession>(graphs[0]->root, strategy.session_options("")));
  GR_RETURN_IF_ERROR(RunReplicas(graphs, sessions, runs, stop, &result));
  GR_RETURN_IF_ERROR(FinishChief(c, *graphs[0], *sessions[0], last_step, &result));
  return result;
}

// Between-graph replication: this process runs one replica per task of
// `tasks` (chief or worker tasks of `spec`), each with its session on
// targets[i], its own task's server.
absl::StatusOr<TrainResult> TrainReplicated(const TrainConfig& c,
                                            const distributed::ClusterSpec& spec,
                                            const std::vector<std::pair<std::string, int>>& tasks,
                                            const std::vector<std::string>& targets,
                                            std::ostream* log, RunControl* control) {
  const int num_ps = spec.num_tasks("ps");
  // The cluster's chief and workers; under a sparse cluster --workers, or
  // else 1 (each replica on its own).
  GR_ASSIGN_OR_RETURN(
      const train::ParameterServerStrategy first,
      train::ParameterServerStrategy::Create(spec, tasks[0].first, tasks[0].second, PsOptions(c)));
  const int num_replicas = first.num_replicas();
  GR_ASSIGN_OR_RETURN(VariablePlan plan, PlanVariables(c, num_ps, num_replicas));
  std::vector<train::ParameterServerStrategy> strategies;
  for (const auto& [type, index] : tasks) {
    train::ParameterServerStrategyOptions so = PsOptions(c);
    so.ps_strategy_object = plan.strategy();
    GR_ASSIGN_OR_RETURN(train::ParameterServerStrategy strategy,
                        train::ParameterServerStrategy::Create(spec, type, index, so));
    strategies.push_back(std::move(strategy));
  }
  GR_ASSIGN_OR_RETURN(int64_t batch, strategies[0].PerReplicaBatch(c.batch_size));
  GR_ASSIGN_OR_RETURN(int64_t per_epoch, StepsPerEpoch(c, num_replicas, batch));
  const int64_t last_step = LastStep(c, per_epoch);
  TrainResult result;
  result.num_ps = num_ps;
  // 0: not known (a sparse cluster without --workers).
  result.num_workers = spec.sparse() && c.cluster_replicas == 0 ? 0 : num_replicas;
  result.strategy_used = c.strategy;
  if (c.strategy == "balanced" && !plan.partitions.empty()) {
    std::vector<std::string> split;
    for (const auto& [name, rows] : plan.partitions) {
      split.push_back(absl::StrCat(name, " into ", rows.size()));
    }
    result.strategy_used = absl::StrCat("balanced, split ", absl::StrJoin(split, ", "));
  }
  // One batch of one replica per asynchronous update, of every replica
  // per synchronous one.
  const int64_t per_update = c.sync ? batch * num_replicas : batch;
  ClusterProgress progress(log, c.log_every, per_epoch, per_update, last_step);
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  std::vector<ReplicaRun> runs(strategies.size());
  int chief_at = -1;
  for (size_t i = 0; i < strategies.size(); ++i) {
    const train::ParameterServerStrategy& strategy = strategies[i];
    if (strategy.is_chief()) chief_at = static_cast<int>(i);
    runs[i].hook = std::make_shared<ProgressHook>(
        &progress, strategy.is_chief(), control != nullptr ? control->stop() : c.stop, &stop);
    runs[i].hook->steps_done = c.steps_done;
    client::TrainingLoopOptions lo = LoopOptions(c, last_step, batch, &stop);
    lo.hooks = {runs[i].hook};
    GR_RETURN_IF_ERROR(AddSummaryHook(c, strategy.is_chief(), &lo));
    ReplicaBuild b;
    b.rows = batch;
    b.shard = strategy.replica_index();
    b.num_shards = num_replicas;
    b.partitions = &plan.partitions;
    b.target = targets[i];
    GR_ASSIGN_OR_RETURN(graphs.emplace_back(), BuildStrategyReplica(c, strategy, b, std::move(lo)));
  }
  if (log != nullptr && chief_at >= 0) {
    PrintPlacement(*graphs[chief_at], c, num_ps, num_replicas, result.strategy_used, *log);
  }
  std::vector<std::unique_ptr<ClientSession>> sessions;
  for (size_t i = 0; i < graphs.size(); ++i) {
    // Each replica's session sees the PS tasks and its own task only, so
    // tasks of a cluster may start in any order.
    sessions.push_back(std::make_unique<ClientSession>(graphs[i]->root,
                                                       strategies[i].session_options(targets[i])));
  }
  if (chief_at > 0) {  // RunReplicas reads the chief at index 0
    std::swap(graphs[0], graphs[chief_at]);
    std::swap(sessions[0], sessions[chief_at]);
    std::swap(runs[0], runs[chief_at]);
  }
  if (control != nullptr) {
    control->SetRelease([&graphs, &sessions, &stop] {
      stop = true;
      for (size_t i = 0; i < graphs.size(); ++i) {
        if (graphs[i]->sync_hook != nullptr) {
          graphs[i]->sync_hook->OnError(*sessions[i], absl::CancelledError("a task died"));
        }
      }
    });
  }
  absl::Status ran = RunReplicas(graphs, sessions, runs, stop, &result);
  if (control != nullptr) {
    control->SetRelease(nullptr);
    GR_RETURN_IF_ERROR(control->status());
  }
  GR_RETURN_IF_ERROR(ran);
  if (chief_at >= 0) {
    GR_RETURN_IF_ERROR(FinishChief(c, *graphs[0], *sessions[0], last_step, &result));
  } else {
    GR_ASSIGN_OR_RETURN(result.global_step, graphs[0]->loop->ReadGlobalStep(*sessions[0]));
    result.restored_from_step.reset();
  }
  if (static_cast<int>(strategies.size()) < num_replicas || spec.sparse()) {
    // Other replicas run in other processes: the whole cluster's examples
    // follow from the global step.
    result.examples = (result.global_step - result.initial_global_step) * per_update;
    result.examples_per_sec = result.seconds > 0 ? result.examples / result.seconds : 0;
  }
  return result;
}

absl::StatusOr<TrainResult> TrainInProcessCluster(const TrainConfig& c, std::ostream* log) {
  distributed::LocalClusterOptions lo;
  lo.jobs = {{"ps", c.ps}, {"worker", c.workers}};
  lo.server.intra_op_threads = c.intra_op_threads > 0 ? c.intra_op_threads : 1;
  lo.server.inter_op_threads = c.inter_op_threads > 0 ? c.inter_op_threads : 2;
  lo.server.heartbeat_interval_ms = c.heartbeat_interval_ms;
  lo.server.heartbeat_misses = c.heartbeat_misses;
  // Loopback only, but other users of the machine reach it: a random token
  // per run (the sessions here reach their masters in process).
  lo.server.auth_token = NewRandomToken();
  GR_ASSIGN_OR_RETURN(auto cluster, distributed::LocalCluster::Start(lo));
  if (log != nullptr) {
    *log << "cluster (in-process gRPC servers): " << cluster->cluster_spec().ToJson() << "\n";
  }
  std::vector<std::pair<std::string, int>> tasks;
  std::vector<std::string> targets;
  for (int i = 0; i < c.workers; ++i) {
    tasks.push_back({"worker", i});
    targets.push_back(cluster->target("worker", i));
  }
  absl::StatusOr<TrainResult> r =
      TrainReplicated(c, cluster->cluster_spec(), tasks, targets, log, nullptr);
  cluster->StopAll();
  if (r.ok()) r->mode = "distributed";
  return r;
}

distributed::ServerOptions TaskServerOptions(const TrainConfig& c,
                                             const distributed::ClusterSpec& spec,
                                             const std::string& task_type, int task_index) {
  distributed::ServerOptions so;
  so.cluster = spec;
  so.job = task_type;
  so.task = task_index;
  so.intra_op_threads = c.intra_op_threads > 0 ? c.intra_op_threads : 1;
  so.inter_op_threads = c.inter_op_threads > 0 ? c.inter_op_threads : 2;
  if (c.distribution == "multi_worker_mirrored" && c.replica_device_type == "CPU") {
    so.num_cpus = std::max(1, c.replicas_per_worker);  // a CPU device per replica
  }
  so.bind_host = c.bind_host;
  so.insecure = c.insecure;
  so.allowed_dirs = TaskAllowedDirs(c);
  so.heartbeat_interval_ms = c.heartbeat_interval_ms;
  so.heartbeat_misses = c.heartbeat_misses;
  if (!c.tf_config.empty()) {
    // `graphrun train` checked the files when it parsed the flags; for a
    // library caller an unreadable file means no credentials (and a task
    // beyond loopback then refuses to start, saying so).
    so.auth_token = distributed::LoadAuthToken(c.auth_token_file).value_or("");
    so.tls = LoadTlsCredentials(c.tls_ca_file, c.tls_cert_file, c.tls_key_file)
                 .value_or(TlsCredentials());
    so.metrics_port = c.metrics_port;
  }
  return so;
}

absl::StatusOr<std::unique_ptr<distributed::GrpcServer>> StartTaskServer(
    const TrainConfig& c, const distributed::ClusterSpec& spec, const std::string& task_type,
    int task_index) {
  GR_ASSIGN_OR_RETURN(auto server, distributed::GrpcServer::Create(
                                       TaskServerOptions(c, spec, task_type, task_index)));
  GR_RETURN_IF_ERROR(server->Start());
  return server;
}

// Runs `task_type`:`task_index` of `spec` (chief or worker) in this
// process: its server (`server` if given, started), then its replica.
absl::StatusOr<TrainResult> TrainTask(const TrainConfig& c, const distributed::ClusterSpec& spec,
                                      const std::string& task_type, int task_index,
                                      std::ostream* log, RunControl* control,
                                      std::unique_ptr<distributed::GrpcServer> server) {
  if (c.distribution == "multi_worker_mirrored") {
    if (server == nullptr) {
      GR_ASSIGN_OR_RETURN(server, StartTaskServer(c, spec, task_type, task_index));
    }
    absl::StatusOr<TrainResult> r =
        TrainMultiWorker(c, spec, task_type, task_index, server.get(), log, control);
    server->Stop();
    return r;
  }
  // Checked before a server starts (a task that does not train, no PS).
  GR_RETURN_IF_ERROR(
      train::ParameterServerStrategy::Create(spec, task_type, task_index, PsOptions(c)).status());
  if (server == nullptr) {
    GR_ASSIGN_OR_RETURN(server, StartTaskServer(c, spec, task_type, task_index));
  }
  absl::StatusOr<TrainResult> r =
      TrainReplicated(c, spec, {{task_type, task_index}}, {server->target()}, log, control);
  server->Stop();
  return r;
}

namespace {

// A synchronous chief's first act after a loss: drops the synchronization
// state (token queue, accumulators, generation) on every PS task, retrying
// while one does not answer yet (a restarted PS coming up) for up to
// `timeout`. Its chief_init_op then makes that state anew, whatever the
// loss left behind (a closed queue, tokens no update released, partial
// sums of a step that never completed).
absl::Status ResetSyncState(const TrainConfig& c, const train::ParameterServerStrategy& strategy,
                            const std::string& target, absl::Duration timeout) {
  SessionOptions so = strategy.session_options(target);
  so.config.clear_device_filters();
  so.config.add_device_filters("/job:ps");
  GR_ASSIGN_OR_RETURN(std::unique_ptr<distributed::GrpcSession> session,
                      distributed::GrpcSession::Create(so));
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  while (true) {
    absl::Status s = session->Reset({train::kSyncReplicasContainer});
    if (s.ok() || !absl::IsUnavailable(s)) return s;
    if ((c.stop != nullptr && c.stop->load()) || std::chrono::steady_clock::now() > deadline) {
      return absl::Status(s.code(),
                          absl::StrCat("resetting the synchronous replicas' state: ", s.message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// Parameter-server training of one task of an orchestrated cluster, which
// outlives the loss of a task: a step that fails because a task died or
// restarted (Unavailable, Aborted) is reported on stderr at once, and the
// replica is built again with new sessions. Its chief then restores only
// the variables that were lost (the restarted PS's, from the latest
// checkpoint; TrainingLoop keeps the values the others hold) and its
// workers wait until they are, so the run goes on up to its step count.
// In synchronous training (--sync) the chief first drops the token queue
// and accumulators (ResetSyncState; at its first run too, for a restarted
// chief process) and makes them anew, and its workers wait for that new
// generation before they step. At most max_restarts
// recoveries in a row (without a training step between them).
absl::StatusOr<TrainResult> TrainRecovering(const TrainConfig& c, const distributed::TfConfig& cfg,
                                            distributed::GrpcServer* server, std::ostream* log) {
  const std::string task = absl::StrCat("/job:", cfg.task_type, "/task:", cfg.task_index);
  std::atomic<int64_t> steps{0};
  std::atomic<int64_t> generation{0};
  TrainConfig first = c, again = c;
  first.steps_done = again.steps_done = &steps;
  if (c.sync) first.sync_generation = again.sync_generation = &generation;
  again.keep_initialized_variables = true;
  GR_ASSIGN_OR_RETURN(train::ParameterServerStrategy strategy,
                      train::ParameterServerStrategy::Create(cfg.cluster, cfg.task_type,
                                                             cfg.task_index, PsOptions(c)));
  int recoveries = 0, in_a_row = 0;
  int64_t steps_at_loss = 0;
  std::set<std::string> restored;
  while (true) {
    // Every run of a synchronous chief, the first too: a restarted chief
    // process finds whatever its predecessor left (a closed queue, tokens).
    if (c.sync && strategy.is_chief()) {
      absl::Status reset =
          ResetSyncState(c, strategy, server->target(), client::TrainingLoopOptions().init_timeout);
      if (!reset.ok()) return reset;
    }
    absl::StatusOr<TrainResult> r =
        TrainReplicated(recoveries == 0 ? first : again, cfg.cluster,
                        {{cfg.task_type, cfg.task_index}}, {server->target()}, log, nullptr);
    if (r.ok()) {
      restored.insert(r->restored_devices.begin(), r->restored_devices.end());
      r->restored_devices.assign(restored.begin(), restored.end());
      r->restarts = recoveries;
      return r;
    }
    // A task lost while training (Unavailable, Aborted for a restarted
    // one). Not the first run's wait for a task that never came up (a
    // wrong address or credentials: waiting longer would not help), and,
    // once recovering, a worker's wait for the chief to restore counts too.
    const absl::Status& s = r.status();
    const bool lost_task =
        ((absl::IsUnavailable(s) || absl::IsAborted(s)) &&
         !(recoveries == 0 && absl::StartsWith(s.message(), client::kTaskNotUpMessage))) ||
        (recoveries > 0 && absl::IsDeadlineExceeded(s));
    if (!lost_task || (c.stop != nullptr && c.stop->load())) return r;
    // Losses separated by training steps are separate outages: the bound
    // is on recoveries in a row, without a step in between.
    if (steps.load() > steps_at_loss) in_a_row = 0;
    steps_at_loss = steps.load();
    if (in_a_row == c.max_restarts) {
      return absl::Status(s.code(),
                          absl::StrCat(s.message(), " (after ", in_a_row, " recoveries in a row)"));
    }
    ++recoveries;
    ++in_a_row;
    // A synchronous worker whose step a PS ended because this task went
    // silent (stopped, cut off: "its master, task T, is gone") lost
    // nothing the chief saw, so no new generation will come: it joins the
    // present one at once instead of waiting wait_timeout for another.
    if (c.sync && !strategy.is_chief() &&
        absl::StrContains(s.message(),
                          absl::StrCat("its master, task ", server->task_name(), ", is gone"))) {
      generation.store(0);
    }
    std::cerr << StatusToLine(s) << "\n"
              << "graphrun train: " << task
              << " goes on with new sessions once the cluster answers again (recovery " << in_a_row
              << " of at most " << c.max_restarts << " in a row)" << std::endl;
  }
}

}  // namespace

absl::StatusOr<TrainResult> TrainTfConfigTask(const TrainConfig& c, const std::string& tf_config,
                                              std::ostream* log) {
  GR_ASSIGN_OR_RETURN(distributed::TfConfig cfg, distributed::ParseTfConfig(tf_config));
  std::unique_ptr<distributed::GrpcServer> server;
  if (const int launcher = TakeLauncherFd(); launcher >= 0) {
    // Started by a local launcher: the cluster's ports come from it.
    GR_ASSIGN_OR_RETURN(
        server,
        StartServerForLauncher(TaskServerOptions(c, cfg.cluster, cfg.task_type, cfg.task_index),
                               launcher, kLauncherWaitMs, &cfg.cluster));
  }
  absl::StatusOr<TrainResult> r;
  if (c.distribution == "parameter_server" && c.max_restarts > 0) {
    // The task recovers in place (the embedded cluster's launcher, which
    // restarts its whole cluster instead, stops it first).
    GR_RETURN_IF_ERROR(train::ParameterServerStrategy::Create(cfg.cluster, cfg.task_type,
                                                              cfg.task_index, PsOptions(c))
                           .status());
    if (server == nullptr) {
      GR_ASSIGN_OR_RETURN(server, StartTaskServer(c, cfg.cluster, cfg.task_type, cfg.task_index));
    }
    r = TrainRecovering(c, cfg, server.get(), log);
    server->Stop();
  } else {
    r = TrainTask(c, cfg.cluster, cfg.task_type, cfg.task_index, log, nullptr, std::move(server));
  }
  if (r.ok()) r->mode = "tf_config";
  return r;
}

}  // namespace internal
}  // namespace trainer
}  // namespace client
}  // namespace graphrun
