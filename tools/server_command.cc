#include "tools/server_command.h"

#include <signal.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "distributed/cluster_spec.h"
#include "distributed/launcher_link.h"
#include "distributed/rpc/grpc_server.h"
#include "graph/status.h"
#include "tools/credential_flags.h"
#include "tools/flags.h"

namespace graphrun {
namespace tools {

using distributed::kLauncherWaitMs;
using distributed::StartServerForLauncher;
using distributed::TakeLauncherFd;
namespace {

const FlagSet& ServerFlagSet() {
  static const FlagSet* const kFlags = [] {
    auto* f = new FlagSet();
    f->String("cluster", "JSON|@FILE",
              "ClusterSpec {\"ps\": [\"host:port\"], ...} (else TF_CONFIG)")
        .String("job", "NAME", "this task's job (else TF_CONFIG task.type)")
        .String("task", "N", "this task's index (else TF_CONFIG task.index)")
        .String("bind", "HOST",
                "address to listen on (default: the task's cluster host if it is this "
                "machine's, else 0.0.0.0)")
        .Bool("insecure", "serve beyond loopback without credentials")
        .String("allowed_dirs", "DIR,...",
                "the only directories graphs may read or write files in (checkpoints, "
                "datasets); without it, graphs touch no file")
        .String("port", "N", "port to listen on (default: the task's port in the cluster)")
        .String("metrics_port", "P",
                "serve Prometheus metrics at http://HOST:P/metrics (0: any free port, logged)")
        .String("cpus", "N", "CPU devices of this task (default 1)")
        .String("intra_op_threads", "N", "threads inside one kernel (0: cores)")
        .String("inter_op_threads", "N", "threads running independent nodes (0: cores)")
        .String("max_message_mb", "N", "largest gRPC message in MiB (default 1024)")
        .String("max_sessions", "N", "sessions open at once (default 1000)")
        .String("max_concurrent_steps", "N", "steps running at once (default 1000)")
        .String("max_graph_nodes", "N",
                "nodes of one graph, inlined function calls included (default 1048576)")
        .String("max_function_depth", "N",
                "function calls nested in one another in a graph (default 64)")
        .String("max_plans_per_session", "N",
                "step signatures a session keeps planned (default 256; least recently used go)")
        .String("heartbeat_interval_ms", "N",
                "heartbeats to the peers in use every N ms (default 1000; 0: none)")
        .String("heartbeat_misses", "N", "a peer is dead after N unanswered (default 3)");
    AddCredentialFlags(*f);
    return f;
  }();
  return *kFlags;
}

absl::StatusOr<distributed::ServerOptions> ParseServerArgs(absl::Span<const std::string> args) {
  GR_ASSIGN_OR_RETURN(ParsedFlags flags, ServerFlagSet().Parse(args));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server: unexpected argument '", flags.positional()[0], "'"));
  }
  distributed::ServerOptions o;
  if (flags.Has("cluster")) {
    GR_ASSIGN_OR_RETURN(o.cluster, distributed::ClusterSpec::FromFlag(flags.GetString("cluster")));
    if (!flags.Has("job")) return absl::InvalidArgumentError("server: --cluster needs --job");
    o.job = flags.GetString("job");
    GR_ASSIGN_OR_RETURN(int64_t task, flags.GetInt("task", 0, 0, 1 << 20));
    o.task = static_cast<int>(task);
  } else if (const char* tf_config = std::getenv("TF_CONFIG")) {
    GR_ASSIGN_OR_RETURN(distributed::TfConfig cfg, distributed::ParseTfConfig(tf_config));
    o.cluster = cfg.cluster;
    o.job = flags.Has("job") ? flags.GetString("job") : cfg.task_type;
    GR_ASSIGN_OR_RETURN(int64_t task, flags.GetInt("task", cfg.task_index, 0, 1 << 20));
    o.task = static_cast<int>(task);
  } else {
    return absl::InvalidArgumentError("server: give --cluster (or set TF_CONFIG)");
  }
  if (o.cluster.num_tasks(o.job) <= o.task) {
    std::string cluster = o.cluster.ToJson();
    if (cluster.size() > 500) {  // a cluster of millions of tasks: the start
      cluster = absl::StrCat(cluster.substr(0, 500), "... (", cluster.size(), " bytes)");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("server: task ", o.job, ":", o.task, " is not in the cluster ", cluster));
  }
  o.bind_host = flags.GetString("bind", "");
  o.insecure = flags.GetBool("insecure");
  o.allowed_dirs = std::vector<std::string>(
      absl::StrSplit(flags.GetString("allowed_dirs"), ',', absl::SkipEmpty()));
  GR_ASSIGN_OR_RETURN(Credentials creds, LoadCredentials(GetCredentialArgs(flags)));
  o.auth_token = std::move(creds.auth_token);
  o.tls = std::move(creds.tls);
  GR_ASSIGN_OR_RETURN(int64_t metrics_port, flags.GetInt("metrics_port", -1, -1, 65535));
  o.metrics_port = static_cast<int>(metrics_port);
  GR_ASSIGN_OR_RETURN(int64_t port, flags.GetInt("port", -1, -1, 65535));
  o.port = static_cast<int>(port);
  GR_ASSIGN_OR_RETURN(int64_t cpus, flags.GetInt("cpus", 1, 1, 1024));
  o.num_cpus = static_cast<int>(cpus);
  GR_ASSIGN_OR_RETURN(int64_t intra, flags.GetInt("intra_op_threads", 0, 0, 4096));
  GR_ASSIGN_OR_RETURN(int64_t inter, flags.GetInt("inter_op_threads", 0, 0, 4096));
  o.intra_op_threads = static_cast<int>(intra);
  o.inter_op_threads = static_cast<int>(inter);
  GR_ASSIGN_OR_RETURN(int64_t mb, flags.GetInt("max_message_mb", 1024, 1, 2047));
  o.max_message_bytes = mb << 20;
  GR_ASSIGN_OR_RETURN(o.limits.max_sessions,
                      flags.GetInt("max_sessions", o.limits.max_sessions, 1, int64_t{1} << 30));
  GR_ASSIGN_OR_RETURN(
      o.limits.max_concurrent_steps,
      flags.GetInt("max_concurrent_steps", o.limits.max_concurrent_steps, 1, int64_t{1} << 30));
  GR_ASSIGN_OR_RETURN(
      o.limits.max_graph_nodes,
      flags.GetInt("max_graph_nodes", o.limits.max_graph_nodes, 1, int64_t{1} << 40));
  GR_ASSIGN_OR_RETURN(
      o.limits.max_function_depth,
      flags.GetInt("max_function_depth", o.limits.max_function_depth, 1, int64_t{1} << 20));
  GR_ASSIGN_OR_RETURN(
      o.limits.max_plans_per_session,
      flags.GetInt("max_plans_per_session", o.limits.max_plans_per_session, 1, int64_t{1} << 20));
  GR_ASSIGN_OR_RETURN(o.heartbeat_interval_ms,
                      flags.GetInt("heartbeat_interval_ms", o.heartbeat_interval_ms, 0, 3600000));
  GR_ASSIGN_OR_RETURN(int64_t misses, flags.GetInt("heartbeat_misses", 3, 1, 1000));
  o.heartbeat_misses = static_cast<int>(misses);
  return o;
}

}  // namespace

std::string ServerUsage() {
  return absl::StrCat(
      "usage: graphrun server --cluster=JSON|@FILE --job=NAME --task=N [flags]\n"
      "       TF_CONFIG='{\"cluster\": {...}, \"task\": {\"type\": \"ps\", \"index\": 0}}' "
      "graphrun server\n\n"
      "Runs one task of a cluster (master and worker services on one gRPC port)\n"
      "until SIGTERM or SIGINT.\n\nflags:\n",
      ServerFlagSet().Usage());
}

int ServerCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  auto options = ParseServerArgs(args);
  if (!options.ok()) {
    err << StatusToLine(options.status()) << "\n";
    return kExitUsage;
  }
  // Block the stop signals before any server thread exists (threads
  // inherit the mask), then wait for them synchronously.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  absl::StatusOr<std::unique_ptr<distributed::GrpcServer>> server;
  if (const int launcher = TakeLauncherFd(); launcher >= 0) {
    // Started by a local launcher: port 0, reported; the cluster comes back.
    server = StartServerForLauncher(*options, launcher, kLauncherWaitMs);
    if (!server.ok()) {
      err << StatusToLine(server.status()) << "\n";
      return kExitFailure;
    }
  } else {
    server = distributed::GrpcServer::Create(*options);
    if (!server.ok()) {
      err << StatusToLine(server.status()) << "\n";
      return kExitUsage;
    }
    absl::Status started = (*server)->Start();
    if (!started.ok()) {
      err << StatusToLine(started) << "\n";
      return kExitFailure;
    }
  }
  // An IPv6 host in brackets, as in a URL.
  const std::string& bound = (*server)->bind_host();
  const std::string host = bound.find(':') != std::string::npos ? "[" + bound + "]" : bound;
  // Each line in one write: the tasks of `graphrun cluster` share its
  // stderr, and a line written piece by piece interleaves with another
  // task's.
  err << absl::StrCat("graphrun server: task ", (*server)->task_name(), " listening on ", host, ":",
                      (*server)->bound_port(), "\n")
      << std::flush;
  if ((*server)->metrics_port() > 0) {
    err << absl::StrCat("graphrun server: metrics at http://", host, ":", (*server)->metrics_port(),
                        "/metrics\n")
        << std::flush;
  }
  int sig = 0;
  sigwait(&stop, &sig);
  err << absl::StrCat("graphrun server: task ", (*server)->task_name(), " stopping on signal ", sig,
                      "\n")
      << std::flush;
  (*server)->Stop();
  return kExitOk;
}

}  // namespace tools
}  // namespace graphrun
