#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/trainer/trainer_internal.h"
#include "distributed/cluster_spec.h"
#include "distributed/launcher_link.h"
#include "distributed/process_util.h"
#include "graph/status.h"
#include "util/json.h"
#include "util/temp_dir.h"

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

}  // namespace

std::vector<std::string> HostGpus() {
  std::vector<std::string> gpus;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    for (absl::string_view g : absl::StrSplit(visible, ',')) {
      g = absl::StripAsciiWhitespace(g);
      if (!g.empty()) gpus.emplace_back(g);
    }
    return gpus;
  }
  int n = 0;
  if (DIR* d = ::opendir("/dev")) {
    while (const dirent* e = ::readdir(d)) {
      absl::string_view name = e->d_name;
      int k = 0;
      if (absl::ConsumePrefix(&name, "nvidia") && !name.empty() && absl::SimpleAtoi(name, &k) &&
          std::all_of(name.begin(), name.end(), ::isdigit)) {
        ++n;
      }
    }
    ::closedir(d);
  }
  for (int i = 0; i < n; ++i) gpus.push_back(std::to_string(i));
  return gpus;
}

absl::StatusOr<std::vector<std::string>> SplitGpus(const std::vector<std::string>& gpus,
                                                   int workers, int per_worker) {
  const int n = static_cast<int>(gpus.size());
  if (workers < 1 || n < workers) return std::vector<std::string>{};
  const int per = per_worker > 0 ? per_worker : n / workers;
  if (static_cast<int64_t>(per) * workers > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_replicas=", per_worker, ": ", workers, " workers x ", per_worker,
                     " GPUs each, but this host has ", n, " (", absl::StrJoin(gpus, ","), ")"));
  }
  std::vector<std::string> split;
  for (int w = 0; w < workers; ++w) {
    split.push_back(absl::StrJoin(gpus.begin() + w * per, gpus.begin() + (w + 1) * per, ","));
  }
  return split;
}

// One process per task on loopback ports: `graphrun server` for each PS,
// `graphrun train` with TF_CONFIG for workers 1..M-1 (output in a log file
// each), and worker 0, the chief, in this process. A task that dies ends
// the run with an error naming it. multi_worker_mirrored workers on GPUs
// get GPUs of their own (SplitGpus), as TF_CONFIG users give each worker
// its CUDA_VISIBLE_DEVICES: NCCL takes one GPU per rank.
absl::StatusOr<TrainResult> TrainProcessCluster(const TrainConfig& config, std::ostream* log) {
  TrainConfig c = config;
  std::vector<std::string> gpu_split;
  if (c.distribution == "multi_worker_mirrored" && c.replica_device_type == "GPU" &&
      c.workers > 1) {
    const std::vector<std::string> gpus = HostGpus();
    GR_ASSIGN_OR_RETURN(gpu_split, SplitGpus(gpus, c.workers, c.replicas_per_worker));
    if (!gpu_split.empty()) {
      if (c.replicas_per_worker <= 0) {
        c.replicas_per_worker = static_cast<int>(gpus.size()) / c.workers;
      }
      // The chief is this process: its CUDA starts with its server.
      ::setenv("CUDA_VISIBLE_DEVICES", gpu_split[0].c_str(), 1);
    }
    if (log != nullptr) {
      *log << "multi_worker_mirrored: " << gpus.size() << " GPU(s) for " << c.workers << " workers";
      if (gpu_split.empty()) {
        *log << ": each worker sees every GPU (NCCL needs a GPU per worker; on one host "
                "--distribution=mirrored uses them all)";
      }
      for (int w = 0; w < static_cast<int>(gpu_split.size()); ++w) {
        *log << (w == 0 ? ": " : ", ") << "worker " << w
             << " CUDA_VISIBLE_DEVICES=" << gpu_split[w];
      }
      *log << "\n";
    }
  }

  constexpr int kStopTimeoutMs = 5000;
  constexpr int kWorkerExitTimeoutMs = 60000;
  GR_ASSIGN_OR_RETURN(std::string binary, GraphrunBinary(c));
  absl::StatusOr<std::string> made = MakeTempDir("graphrun_train_tasks_");
  if (!made.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("train: the task logs: ", made.status().message()));
  }
  const std::string log_dir = *made;
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
              std::vector<std::string> env = child_env;
              if (job == "worker" && index < static_cast<int>(gpu_split.size())) {
                env.push_back("CUDA_VISIBLE_DEVICES=" + gpu_split[index]);
              }
              return ChildCommand(c, log_dir, job, index, placeholder, env);
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
  if (!r.ok()) {
    // The tasks' logs stay for a failed run: say where.
    if (absl::StrContains(r.status().message(), log_dir)) return r;
    absl::Status s(r.status().code(),
                   absl::StrCat(r.status().message(), " (task logs in ", log_dir, ")"));
    r.status().ForEachPayload(
        [&s](absl::string_view url, const absl::Cord& payload) { s.SetPayload(url, payload); });
    return s;
  }
  std::error_code ec;
  std::filesystem::remove_all(log_dir, ec);
  r->mode = "distributed";
  return r;
}

}  // namespace internal
}  // namespace trainer
}  // namespace client
}  // namespace graphrun
