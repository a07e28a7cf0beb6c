#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/trainer/trainer_internal.h"
#include "distributed/cluster_spec.h"
#include "distributed/launcher_link.h"
#include "distributed/process_util.h"
#include "graph/status.h"
#include "util/json.h"

namespace graphrun {
namespace client {
namespace trainer {
namespace internal {

using distributed::ChildProcess;
using distributed::LastLine;
using distributed::LaunchLocalCluster;
using distributed::LocalLaunch;
using distributed::PlaceholderCluster;
using distributed::Reap;
using distributed::StopProcesses;
using distributed::TaskCommand;
namespace {

// The flags that make a `graphrun train` child train as `c` does.
std::vector<std::string> TrainFlags(const TrainConfig& c) {
  std::vector<std::string> f = {
      "train",
      "--model=" + c.model,
      "--data=" + c.data_dir,
      absl::StrCat("--batch_size=", c.batch_size),
      "--optimizer=" + c.optimizer,
      "--checkpoint_dir=" + c.checkpoint_dir,
      absl::StrCat("--seed=", c.seed),
      absl::StrCat("--intra_op_threads=", c.intra_op_threads),
      absl::StrCat("--inter_op_threads=", c.inter_op_threads),
      absl::StrCat("--heartbeat_interval_ms=", c.heartbeat_interval_ms),
      absl::StrCat("--heartbeat_misses=", c.heartbeat_misses),
      "--format=json",
  };
  if (c.steps >= 0) f.push_back(absl::StrCat("--steps=", c.steps));
  if (c.epochs >= 0) f.push_back(absl::StrCat("--epochs=", c.epochs));
  if (c.learning_rate > 0) f.push_back("--learning_rate=" + FormatDoubleShortest(c.learning_rate));
  if (c.sync) f.push_back("--sync");
  if (c.distribution == "parameter_server") f.push_back("--strategy=" + c.strategy);
  if (c.distribution != "parameter_server") {
    f.push_back("--distribution=" + c.distribution);
    f.push_back(absl::StrCat("--allreduce_pack_bytes=", c.allreduce_pack_bytes));
    f.push_back("--auto_shard_policy=" + c.auto_shard_policy);
    f.push_back("--replica_device_type=" + c.replica_device_type);
    if (c.distribution == "multi_worker_mirrored" && c.replicas_per_worker > 0) {
      f.push_back(absl::StrCat("--num_replicas=", c.replicas_per_worker));
    }
  }
  return f;
}

// The graphrun binary that children run.
absl::StatusOr<std::string> GraphrunBinary(const TrainConfig& c) {
  if (!c.binary.empty()) return c.binary;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || self.filename() != "graphrun") {
    return absl::FailedPreconditionError(
        "train: this process is not the graphrun binary; set TrainConfig::binary to start one "
        "process per task, or train in process");
  }
  return self.string();
}

// How a child starts: `graphrun server` for a PS, `graphrun train` with
// TF_CONFIG for a worker (the cluster with port 0 everywhere; the real one
// comes through the launcher link), output in `log_dir`.
TaskCommand ChildCommand(const TrainConfig& c, const std::string& log_dir, const std::string& job,
                         int index, const distributed::ClusterSpec& placeholder,
                         const std::vector<std::string>& env) {
  const std::string spec_json = placeholder.ToJson();
  const std::string log_file = absl::StrCat(log_dir, "/", job, "_", index, ".log");
  if (job == "ps") {
    const int intra = c.intra_op_threads > 0 ? c.intra_op_threads : 1;
    const int inter = c.inter_op_threads > 0 ? c.inter_op_threads : 2;
    return TaskCommand{
        {"server", "--cluster=" + spec_json, "--job=ps", absl::StrCat("--task=", index),
         absl::StrCat("--intra_op_threads=", intra), absl::StrCat("--inter_op_threads=", inter),
         absl::StrCat("--heartbeat_interval_ms=", c.heartbeat_interval_ms),
         absl::StrCat("--heartbeat_misses=", c.heartbeat_misses),
         "--allowed_dirs=" + absl::StrJoin(trainer::TaskAllowedDirs(c), ",")},
        env,
        log_file};
  }
  std::string tf_config = absl::StrCat(R"({"cluster": )", spec_json,
                                       R"(, "task": {"type": "worker", "index": )", index, "}}");
  std::vector<std::string> worker_env = env;
  worker_env.push_back("TF_CONFIG=" + tf_config);
  return TaskCommand{TrainFlags(c), worker_env, log_file};
}

// A task lost to the run rather than failed by it: any PS exit, or a
// worker killed by a signal. A worker that exits with an error (bad data,
// a failing kernel) would fail again after a restart.
bool Lost(const ChildProcess& child) {
  return absl::StartsWith(child.task, "/job:ps/") || WIFSIGNALED(child.exit_status);
}

// One process per task on loopback ports: `graphrun server` for each PS,
// `graphrun train` with TF_CONFIG for workers 1..M-1 (output in a log file
// each), and worker 0, the chief, in this process. A task that dies ends
// the run with an error naming it.
}  // namespace

absl::StatusOr<TrainResult> TrainProcessCluster(const TrainConfig& c, std::ostream* log) {
  constexpr int kStopTimeoutMs = 5000;
  constexpr int kWorkerExitTimeoutMs = 60000;
  GR_ASSIGN_OR_RETURN(std::string binary, GraphrunBinary(c));
  std::string log_dir = "/tmp/graphrun_train_tasks_XXXXXX";
  if (mkdtemp(log_dir.data()) == nullptr) {
    return absl::FailedPreconditionError("train: cannot create a directory for the task logs");
  }
  // Every task binds a free port of its own and reports it; the cluster
  // goes out once all are known (distributed/launcher_link.h). Worker 0, the
  // chief, is this process.
  std::map<std::string, int> jobs = {{"worker", c.workers}};
  if (c.ps > 0) jobs["ps"] = c.ps;
  distributed::ServerOptions chief_options =
      TaskServerOptions(c, PlaceholderCluster(jobs), "worker", 0);
  // The tasks share a random token (or the user's), handed over in the
  // environment where `ps` does not show it, and never TLS: they talk over
  // loopback only. TLS variables of this environment are cleared for them.
  GR_ASSIGN_OR_RETURN(std::string token, distributed::LoadAuthToken(c.auth_token_file));
  if (token.empty()) token = NewRandomToken();
  chief_options.auth_token = token;
  chief_options.tls = TlsCredentials();
  const std::vector<std::string> child_env = {"GRAPHRUN_AUTH_TOKEN=" + token, "GRAPHRUN_TLS_CA=",
                                              "GRAPHRUN_TLS_CERT=", "GRAPHRUN_TLS_KEY="};
  chief_options.port = 0;
  chief_options.await_cluster = true;
  std::unique_ptr<distributed::GrpcServer> chief_server;
  distributed::ClusterSpec spec;
  std::vector<ChildProcess> children;
  absl::Status started = [&]() -> absl::Status {
    GR_ASSIGN_OR_RETURN(chief_server, distributed::GrpcServer::Create(chief_options));
    GR_RETURN_IF_ERROR(chief_server->Start());
    GR_ASSIGN_OR_RETURN(
        LocalLaunch launch,
        LaunchLocalCluster(
            binary, jobs,
            [&](const std::string& job, int index, const distributed::ClusterSpec& placeholder) {
              return ChildCommand(c, log_dir, job, index, placeholder, child_env);
            },
            chief_server.get(), "worker", 0));
    spec = launch.spec;
    children = std::move(launch.children);
    return absl::OkStatus();
  }();
  if (!started.ok()) {
    if (chief_server != nullptr) chief_server->Stop();
    return absl::Status(started.code(),
                        absl::StrCat("train: starting the cluster: ", started.message(),
                                     " (logs in ", log_dir, ")"));
  }
  if (log != nullptr) {
    *log << "cluster (one process per task; logs in " << log_dir << "): " << spec.ToJson() << "\n";
  }

  // Watch the children while the chief trains.
  RunControl control;
  std::atomic<bool> chief_done{false};
  std::string died;  // guarded by children_mu
  std::mutex children_mu;
  // Reaps the children that exited: one that failed (any PS exit, a
  // worker's error or signal) ends the run, naming it; a lost one is
  // remembered for a restart.
  auto scan = [&] {
    std::lock_guard<std::mutex> l(children_mu);
    for (ChildProcess& child : children) {
      if (child.pid <= 0 || !Reap(child)) continue;
      const bool ps = absl::StartsWith(child.task, "/job:ps/");
      if (ps || !WIFEXITED(child.exit_status) || WEXITSTATUS(child.exit_status) != 0) {
        if (died.empty() && Lost(child)) died = child.task;
        std::string last = LastLine(child.log_file);
        control.Abort(absl::UnavailableError(
            absl::StrCat("train: task ", child.task, " exited (status ", child.exit_status, ")",
                         last.empty() ? "" : ": ", last, " (log: ", child.log_file, ")")));
      }
    }
  };
  std::thread monitor([&] {
    while (!chief_done.load()) {
      scan();
      if (c.stop != nullptr && c.stop->load()) control.Abort(absl::CancelledError("stopped"));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  absl::StatusOr<TrainResult> r =
      TrainTask(c, spec, "worker", 0, log, &control, std::move(chief_server));
  chief_done = true;
  monitor.join();
  // The chief's step may fail (a peer's connection closed) before the
  // monitor's next look: a task that died is named within a second.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!r.ok() && died.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    scan();
  }
  if (!r.ok() && died.empty()) {
    // A task that is still running but stopped answering (stopped, hung,
    // cut off): the heartbeats named it. It is lost to the run: killed,
    // and the cluster restarted like for a task that died.
    std::lock_guard<std::mutex> l(children_mu);
    for (ChildProcess& child : children) {
      if (child.pid <= 0) continue;
      if (absl::StrContains(r.status().message(),
                            absl::StrCat("task ", child.task, " is unreachable"))) {
        kill(child.pid, SIGKILL);
        died = child.task;
        break;
      }
    }
  }
  if (!r.ok() && !died.empty()) {
    absl::Status why = r.status();
    why.SetPayload(kTaskDiedPayload, absl::Cord(died));
    r = why;
  }
  // Workers stop by themselves at the last global step; a failed run
  // stops them.
  if (r.ok()) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kWorkerExitTimeoutMs);
    for (ChildProcess& child : children) {
      if (absl::StartsWith(child.task, "/job:ps/")) continue;
      while (!Reap(child) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (child.pid > 0) {
        r = absl::DeadlineExceededError(
            absl::StrCat("train: task ", child.task,
                         " did not finish after the chief (log: ", child.log_file, ")"));
        break;
      }
      if (!WIFEXITED(child.exit_status) || WEXITSTATUS(child.exit_status) != 0) {
        r = absl::UnavailableError(absl::StrCat("train: task ", child.task,
                                                " failed: ", LastLine(child.log_file),
                                                " (log: ", child.log_file, ")"));
        break;
      }
    }
  }
  StopProcesses(children, kStopTimeoutMs);
  if (!r.ok()) return r;
  std::error_code ec;
  std::filesystem::remove_all(log_dir, ec);
  r->mode = "distributed";
  return r;
}

}  // namespace internal
}  // namespace trainer
}  // namespace client
}  // namespace graphrun
