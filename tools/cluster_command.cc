#include "tools/cluster_command.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "distributed/cluster_spec.h"
#include "distributed/launcher_link.h"
#include "distributed/local_cluster.h"
#include "distributed/process_util.h"
#include "graph/status.h"
#include "tools/flags.h"
#include "util/auth_token.h"
#include "util/temp_dir.h"
#include "util/tls_credentials.h"

namespace graphrun {
namespace tools {

using distributed::ChildProcess;
using distributed::LaunchLocalCluster;
using distributed::Reap;
using distributed::StopProcesses;
using distributed::TaskCommand;
namespace {

constexpr int kStopTimeoutMs = 5000;

const FlagSet& ClusterFlagSet() {
  static const FlagSet* const kFlags = [] {
    auto* f = new FlagSet();
    f->String("ps", "N", "parameter-server tasks (default 1)")
        .String("workers", "N", "worker tasks (default 1)")
        .String("chief", "N", "chief tasks (default 0)")
        .Bool("in_process", "run every task in this process instead of one process each")
        .String("cpus", "N", "CPU devices per task (default 1)")
        .String("intra_op_threads", "N", "threads inside one kernel, per task (default 1)")
        .String("inter_op_threads", "N", "threads running independent nodes, per task (default 2)")
        .String("token_file", "FILE",
                "write the cluster's random token here (a new file, mode 0600; default: a "
                "private directory under /tmp, printed on stderr)")
        .String("auth_token_file", "FILE",
                "use this token instead of a random one (else GRAPHRUN_AUTH_TOKEN, if set)")
        .String("tls_ca", "FILE", "mutual TLS between the tasks and with clients: the cluster CA")
        .String("tls_cert", "FILE", "the tasks' certificate (it must name 127.0.0.1)")
        .String("tls_key", "FILE", "its key")
        .String("bind", "HOST",
                "address the tasks listen on (default 127.0.0.1); the printed cluster names "
                "HOST, or 127.0.0.1 for the wildcard 0.0.0.0 or ::")
        .String("metrics_port", "P",
                "Prometheus metrics of the k-th task (in the printed order) at "
                "http://HOST:P+k/metrics; 0: each at any free port, which it logs")
        .String("allowed_dirs", "DIR,...",
                "the only directories graphs may read or write files in (default: none)");
    return f;
  }();
  return *kFlags;
}

}  // namespace

std::string ClusterUsage() {
  return absl::StrCat(
      "usage: graphrun cluster --ps=N --workers=M [flags]\n\n"
      "Starts a local cluster on loopback ports (--bind: another address of this\n"
      "machine, or all of them), prints its ClusterSpec as one JSON\n"
      "line when every task is up, and runs until SIGINT/SIGTERM. The tasks share a\n"
      "random token (written to --token_file, or to a private file named on stderr)\n"
      "that clients give with --auth_token_file.\n\nflags:\n",
      ClusterFlagSet().Usage());
}

int ClusterCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err) {
  auto usage_error = [&err](const absl::Status& s) {
    err << StatusToLine(s) << "\n";
    return kExitUsage;
  };
  auto flags = ClusterFlagSet().Parse(args);
  if (!flags.ok()) return usage_error(flags.status());
  if (!flags->positional().empty()) {
    return usage_error(absl::InvalidArgumentError(
        absl::StrCat("cluster: unexpected argument '", flags->positional()[0], "'")));
  }
  auto ps = flags->GetInt("ps", 1, 0, 256);
  auto workers = flags->GetInt("workers", 1, 0, 256);
  auto chief = flags->GetInt("chief", 0, 0, 1);
  auto cpus = flags->GetInt("cpus", 1, 1, 1024);
  auto intra = flags->GetInt("intra_op_threads", 1, 0, 4096);
  auto inter = flags->GetInt("inter_op_threads", 2, 0, 4096);
  for (const auto* v : {&ps, &workers, &chief, &cpus, &intra, &inter}) {
    if (!v->ok()) return usage_error(v->status());
  }
  if (*ps + *workers + *chief == 0) {
    return usage_error(absl::InvalidArgumentError("cluster: no tasks (--ps, --workers, --chief)"));
  }
  // Where the tasks listen, and the host the cluster names for them.
  const std::string bind = flags->GetString("bind");
  const bool wildcard = bind == "0.0.0.0" || bind == "::";
  if (!wildcard && bind.find(':') != std::string::npos) {
    return usage_error(absl::InvalidArgumentError(absl::StrCat(
        "cluster: --bind='", bind, "': give an IPv4 address or a host name, or 0.0.0.0 or ::")));
  }
  if (flags->Has("bind") && bind.empty()) {
    return usage_error(absl::InvalidArgumentError("cluster: --bind needs a host"));
  }
  const std::string host = bind.empty() || wildcard ? "127.0.0.1" : bind;
  const int num_tasks = static_cast<int>(*ps + *workers + *chief);
  auto metrics_port = flags->GetInt("metrics_port", -1, 0, 65535);
  if (!metrics_port.ok()) return usage_error(metrics_port.status());
  if (*metrics_port > 0 && *metrics_port + num_tasks - 1 > 65535) {
    return usage_error(absl::InvalidArgumentError(
        absl::StrCat("cluster: --metrics_port=", *metrics_port, " leaves no port for the last of ",
                     num_tasks, " tasks (P+k must stay <= 65535)")));
  }
  // Loopback only, but every user of the machine reaches loopback: the
  // tasks share a token, random per run unless given, handed to them in the
  // environment (never on a command line, where `ps` would show it) and
  // written for clients to a file only this user can read.
  std::string token;
  std::string token_file = flags->GetString("token_file");
  std::string token_dir;
  // The token the caller gives: --auth_token_file, else GRAPHRUN_AUTH_TOKEN
  // (as every command takes it); else a random one.
  auto given = LoadAuthToken(flags->GetString("auth_token_file"));
  if (!given.ok()) return usage_error(given.status());
  const bool from_env = !flags->Has("auth_token_file") && !given->empty();
  if (from_env && flags->Has("token_file")) {
    return usage_error(absl::InvalidArgumentError(
        "cluster: --token_file writes a random token, but GRAPHRUN_AUTH_TOKEN gives one"));
  }
  if (flags->Has("auth_token_file") || from_env) {
    token = *given;
    token_file = flags->GetString("auth_token_file");
  } else {
    token = NewRandomToken();
    if (token_file.empty()) {
      absl::StatusOr<std::string> made = MakeTempDir("graphrun_cluster_");
      if (!made.ok()) {
        err << "Internal: cluster: the token's directory: " << made.status().message() << "\n";
        return kExitFailure;
      }
      token_dir = *made;
      token_file = token_dir + "/token";
    }
    absl::Status w = WriteTokenFile(token_file, token);
    if (!w.ok()) {
      err << StatusToLine(w) << "\n";
      return kExitFailure;
    }
  }
  // TLS on top of the token when given (the certificate names 127.0.0.1:
  // local clusters listen on loopback).
  auto tls = LoadTlsCredentials(flags->GetString("tls_ca"), flags->GetString("tls_cert"),
                                flags->GetString("tls_key"));
  if (!tls.ok()) return usage_error(tls.status());
  // Removes a token file this run made.
  auto cleanup = [&] {
    if (flags->Has("auth_token_file") || from_env) return;
    unlink(token_file.c_str());
    if (!token_dir.empty()) rmdir(token_dir.c_str());
  };
  if (from_env) {
    err << "graphrun cluster: the cluster token is GRAPHRUN_AUTH_TOKEN's (clients: graphrun run "
           "--target=grpc://HOST:PORT with the same GRAPHRUN_AUTH_TOKEN)"
        << std::endl;
  } else {
    // (Lines in one write each: the tasks share this stderr.)
    err << absl::StrCat("graphrun cluster: the cluster token is in ", token_file,
                        " (clients: graphrun run --target=grpc://HOST:PORT --auth_token_file=",
                        token_file, ")\n")
        << std::flush;
  }
  std::map<std::string, int> jobs;
  if (*chief > 0) jobs["chief"] = static_cast<int>(*chief);
  if (*ps > 0) jobs["ps"] = static_cast<int>(*ps);
  if (*workers > 0) jobs["worker"] = static_cast<int>(*workers);

  sigset_t waitset;
  sigemptyset(&waitset);
  sigaddset(&waitset, SIGINT);
  sigaddset(&waitset, SIGTERM);
  sigaddset(&waitset, SIGCHLD);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &waitset, &old);

  if (flags->GetBool("in_process")) {
    distributed::LocalClusterOptions o;
    o.jobs = jobs;
    o.server.num_cpus = static_cast<int>(*cpus);
    o.server.intra_op_threads = static_cast<int>(*intra);
    o.server.inter_op_threads = static_cast<int>(*inter);
    o.server.auth_token = token;
    o.server.tls = *tls;
    o.server.allowed_dirs = std::vector<std::string>(
        absl::StrSplit(flags->GetString("allowed_dirs"), ',', absl::SkipEmpty()));
    o.server.bind_host = bind;
    o.host = host;
    o.metrics_port_base = static_cast<int>(*metrics_port);
    auto cluster = distributed::LocalCluster::Start(o);
    if (!cluster.ok()) {
      err << StatusToLine(cluster.status()) << "\n";
      cleanup();
      return kExitFailure;
    }
    out << (*cluster)->cluster_spec().ToJson() << std::endl;
    for (const auto& [job, n] : jobs) {
      for (int i = 0; i < n; ++i) {
        const distributed::GrpcServer* s = (*cluster)->server(job, i);
        if (s != nullptr && s->metrics_port() > 0) {
          err << absl::StrCat("graphrun cluster: metrics of ", s->task_name(), " at http://", host,
                              ":", s->metrics_port(), "/metrics\n")
              << std::flush;
        }
      }
    }
    int sig = 0;
    do {
      sigwait(&waitset, &sig);
    } while (sig == SIGCHLD);
    (*cluster)->StopAll();
    cleanup();
    return kExitOk;
  }

  // Each task binds a free port and reports it; then every task gets the
  // cluster (distributed/launcher_link.h). Tasks are started in the printed
  // order (job, then index): the k-th gets metrics port P+k.
  int task_number = 0;
  auto launch = LaunchLocalCluster(
      "/proc/self/exe", jobs,
      [&](const std::string& job, int i, const distributed::ClusterSpec& placeholder) {
        TaskCommand cmd{{"server", "--cluster=" + placeholder.ToJson(), "--job=" + job,
                         absl::StrCat("--task=", i), absl::StrCat("--cpus=", *cpus),
                         absl::StrCat("--intra_op_threads=", *intra),
                         absl::StrCat("--inter_op_threads=", *inter),
                         "--allowed_dirs=" + flags->GetString("allowed_dirs")},
                        {"GRAPHRUN_AUTH_TOKEN=" + token,
                         "GRAPHRUN_TLS_CA=", "GRAPHRUN_TLS_CERT=", "GRAPHRUN_TLS_KEY="},
                        ""};
        if (!bind.empty()) cmd.args.push_back("--bind=" + bind);
        if (*metrics_port >= 0) {
          cmd.args.push_back(absl::StrCat("--metrics_port=",
                                          *metrics_port == 0 ? 0 : *metrics_port + task_number));
        }
        ++task_number;
        if (tls->enabled()) {
          cmd.args.push_back("--tls_ca=" + tls->ca_file);
          cmd.args.push_back("--tls_cert=" + tls->cert_file);
          cmd.args.push_back("--tls_key=" + tls->key_file);
        }
        return cmd;
      },
      nullptr, "", 0, host);
  if (!launch.ok()) {
    err << StatusToLine(AnnotateStatus(launch.status(), "cluster: ")) << "\n";
    cleanup();
    return kExitFailure;
  }
  distributed::ClusterSpec spec = launch->spec;
  std::vector<ChildProcess> children = std::move(launch->children);
  const std::string spec_json = spec.ToJson();
  out << spec_json << std::endl;
  if (*metrics_port > 0) {
    int k = 0;
    for (const auto& [job, n] : jobs) {
      for (int i = 0; i < n; ++i, ++k) {
        err << absl::StrCat("graphrun cluster: metrics of /job:", job, "/replica:0/task:", i,
                            " at http://", host, ":", *metrics_port + k, "/metrics\n")
            << std::flush;
      }
    }
  }
  int exit_code = kExitOk;
  while (true) {
    int sig = 0;
    sigwait(&waitset, &sig);
    if (sig != SIGCHLD) break;
    bool died = false;
    for (ChildProcess& c : children) {
      if (c.pid > 0 && Reap(c)) {
        err << absl::StrCat("Unavailable: cluster: task ", c.task, " exited (status ",
                            c.exit_status, ")\n")
            << std::flush;
        died = true;
      }
    }
    if (died) {
      exit_code = kExitFailure;
      break;
    }
  }
  StopProcesses(children, kStopTimeoutMs);
  cleanup();
  return exit_code;
}

}  // namespace tools
}  // namespace graphrun
