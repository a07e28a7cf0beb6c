#include "distributed/launcher_link.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/status.h"

namespace graphrun {
namespace distributed {
namespace {

using Clock = std::chrono::steady_clock;

// Longest line either side sends (a cluster of thousands of tasks).
constexpr size_t kMaxLineBytes = size_t{16} << 20;

int MsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Writes all of `data`; false when the peer is gone (no SIGPIPE).
bool SendAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Appends what `fd` has to `buffer` (one read). 0: end of stream or error.
ssize_t ReadSome(int fd, std::string& buffer) {
  char chunk[4096];
  ssize_t n;
  do {
    n = read(fd, chunk, sizeof(chunk));
  } while (n < 0 && errno == EINTR);
  if (n > 0) buffer.append(chunk, static_cast<size_t>(n));
  return n < 0 ? 0 : n;
}

}  // namespace

int TakeLauncherFd() {
  const char* v = std::getenv(kLauncherFdEnv);
  if (v == nullptr) return -1;
  int fd = -1;
  // Never a standard stream (2 wrote the port to stderr, waited on it, and
  // closed it: the task's error then went nowhere), and an open one.
  bool ok = absl::SimpleAtoi(v, &fd) && fd > 2 && fcntl(fd, F_GETFD) != -1;
  unsetenv(kLauncherFdEnv);
  return ok ? fd : -1;
}

absl::StatusOr<std::unique_ptr<GrpcServer>> StartServerForLauncher(ServerOptions options, int fd,
                                                                   int timeout_ms,
                                                                   ClusterSpec* cluster) {
  const std::string task = TaskName(options.job, options.task);
  options.port = 0;
  options.await_cluster = true;
  GR_ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> server, GrpcServer::Create(options));
  GR_RETURN_IF_ERROR(server->Start());
  auto lost = [&](const std::string& what) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("task ", task, ": ", what));
  };
  if (!SendAll(fd, absl::StrCat(server->bound_port(), "\n"))) {
    return lost("the launcher went away before it learned this task's port");
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string line;
  while (line.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, MsLeft(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      close(fd);
      return absl::DeadlineExceededError(
          absl::StrCat("task ", task, ": the launcher sent no cluster within ", timeout_ms, " ms"));
    }
    if (ReadSome(fd, line) == 0) return lost("the launcher went away before sending the cluster");
    if (line.size() > kMaxLineBytes) return lost("the launcher's cluster line is too long");
  }
  line.resize(line.find('\n'));
  absl::StatusOr<ClusterSpec> parsed = ClusterSpec::FromJson(line);
  if (!parsed.ok()) {
    close(fd);
    return parsed.status();
  }
  // A task of a sparse cluster keeps its view: the launcher's addresses
  // of the tasks it names.
  ClusterSpec spec = parsed->KnownTo(options.cluster);
  absl::StatusOr<std::string> address = spec.Address(options.job, options.task);
  if (!address.ok() || !absl::EndsWith(*address, absl::StrCat(":", server->bound_port()))) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("task ", task, ": the launcher's cluster ", line,
                                                   " does not name this task at port ",
                                                   server->bound_port()));
  }
  server->UpdateCluster(spec);
  // Step 5: serving now; the launcher hands the cluster out only after.
  SendAll(fd, "serving\n");
  close(fd);
  if (cluster != nullptr) *cluster = std::move(spec);
  return server;
}

absl::Status SpawnTask(const std::string& binary, const std::vector<std::string>& args,
                       const std::vector<std::string>& env, ChildProcess& c) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::UnavailableError(absl::StrCat("task ", c.task, ": socketpair failed"));
  }
  std::vector<std::string> all_env = env;
  all_env.push_back(absl::StrCat(kLauncherFdEnv, "=", kLauncherFd));
  absl::StatusOr<pid_t> pid = SpawnProcess(binary, args, all_env, c.log_file, pair[1]);
  close(pair[1]);
  if (!pid.ok()) {
    close(pair[0]);
    return pid.status();
  }
  c.pid = *pid;
  c.port = 0;
  c.launcher_fd = pair[0];
  return absl::OkStatus();
}

absl::Status CollectPorts(std::vector<ChildProcess*> children, int timeout_ms) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<std::string> buffers(children.size());
  while (true) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < children.size(); ++i) {
      if (children[i]->launcher_fd >= 0 && children[i]->port == 0) {
        fds.push_back({children[i]->launcher_fd, POLLIN, 0});
        which.push_back(i);
      }
    }
    if (fds.empty()) return absl::OkStatus();
    int r = poll(fds.data(), fds.size(), MsLeft(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      std::vector<std::string> silent;
      for (size_t i : which) silent.push_back(children[i]->task);
      return absl::DeadlineExceededError(absl::StrCat(
          "task ", absl::StrJoin(silent, ", "), " did not listen within ", timeout_ms, " ms"));
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      ChildProcess& c = *children[which[k]];
      std::string& buffer = buffers[which[k]];
      size_t nl;
      if (ReadSome(c.launcher_fd, buffer) == 0 || buffer.size() > 64) {
        // Closed without a port: the task exited (or broke the link).
        for (int i = 0; i < 50 && !Reap(c); ++i) usleep(20000);
        std::string last = c.log_file.empty() ? std::string() : LastLine(c.log_file);
        return absl::UnavailableError(absl::StrCat("task ", c.task, " exited before listening",
                                                   last.empty() ? "" : ": ", last));
      }
      if ((nl = buffer.find('\n')) == std::string::npos) continue;
      int port = 0;
      if (!absl::SimpleAtoi(buffer.substr(0, nl), &port) || port <= 0 || port > 65535) {
        return absl::InternalError(
            absl::StrCat("task ", c.task, " reported a bad port '", buffer.substr(0, nl), "'"));
      }
      c.port = port;
    }
  }
}

absl::Status CollectPorts(std::vector<ChildProcess>& children, int timeout_ms) {
  std::vector<ChildProcess*> all;
  for (ChildProcess& c : children) all.push_back(&c);
  return CollectPorts(std::move(all), timeout_ms);
}

absl::Status SendCluster(ChildProcess& c, const ClusterSpec& cluster) {
  std::vector<ChildProcess*> one = {&c};
  return SendCluster(one, cluster);
}

absl::Status SendCluster(std::vector<ChildProcess>& children, const ClusterSpec& cluster) {
  std::vector<ChildProcess*> all;
  for (ChildProcess& c : children) all.push_back(&c);
  return SendCluster(all, cluster);
}

absl::Status SendCluster(const std::vector<ChildProcess*>& children, const ClusterSpec& cluster) {
  absl::Status first;
  const std::string line = cluster.ToJson() + "\n";
  std::vector<ChildProcess*> waiting;
  for (ChildProcess* c : children) {
    if (c->launcher_fd < 0) continue;
    if (!SendAll(c->launcher_fd, line)) {
      CloseLink(*c);
      first.Update(absl::UnavailableError(
          absl::StrCat("task ", c->task, " went away before it received its cluster")));
      continue;
    }
    waiting.push_back(c);
  }
  // Step 5: each task says "serving" once it took the cluster, so that the
  // first call anyone makes to it is served. A task that exits instead
  // closes its end (its exit is the launcher's to notice).
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(kLauncherWaitMs);
  std::vector<std::string> buffers(waiting.size());
  while (true) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (waiting[i]->launcher_fd >= 0) {
        fds.push_back({waiting[i]->launcher_fd, POLLIN, 0});
        which.push_back(i);
      }
    }
    if (fds.empty()) break;
    int r = poll(fds.data(), fds.size(), MsLeft(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      for (size_t i : which) {
        first.Update(absl::DeadlineExceededError(absl::StrCat(
            "task ", waiting[i]->task, " did not start serving within ", kLauncherWaitMs, " ms")));
        CloseLink(*waiting[i]);
      }
      break;
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      ChildProcess& c = *waiting[which[k]];
      std::string& buffer = buffers[which[k]];
      if (ReadSome(c.launcher_fd, buffer) == 0 || buffer.find('\n') != std::string::npos ||
          buffer.size() > 64) {
        CloseLink(c);
      }
    }
  }
  return first;
}

void CloseLink(ChildProcess& c) {
  if (c.launcher_fd >= 0) close(c.launcher_fd);
  c.launcher_fd = -1;
}

ClusterSpec PlaceholderCluster(const std::map<std::string, int>& jobs, const std::string& host) {
  ClusterSpec spec;
  for (const auto& [job, n] : jobs) {
    for (int i = 0; i < n; ++i) spec.AddTask(job, absl::StrCat(host, ":0"));
  }
  return spec;
}

absl::StatusOr<LocalLaunch> LaunchLocalCluster(const std::string& binary,
                                               const std::map<std::string, int>& jobs,
                                               const TaskCommandFn& command, GrpcServer* own_server,
                                               const std::string& own_job, int own_index,
                                               const std::string& host) {
  constexpr int kStopTimeoutMs = 5000;
  const ClusterSpec placeholder = PlaceholderCluster(jobs, host);
  LocalLaunch launch;
  absl::Status status = [&]() -> absl::Status {
    for (const auto& [job, n] : jobs) {
      for (int i = 0; i < n; ++i) {
        if (own_server != nullptr && job == own_job && i == own_index) continue;
        TaskCommand cmd = command(job, i, placeholder);
        ChildProcess c;
        c.task = TaskName(job, i);
        c.log_file = cmd.log_file;
        launch.children.push_back(c);
        GR_RETURN_IF_ERROR(SpawnTask(binary, cmd.args, cmd.env, launch.children.back()));
      }
    }
    GR_RETURN_IF_ERROR(CollectPorts(launch.children, kLauncherWaitMs));
    size_t k = 0;
    for (const auto& [job, n] : jobs) {
      for (int i = 0; i < n; ++i) {
        const bool own = own_server != nullptr && job == own_job && i == own_index;
        const int port = own ? own_server->bound_port() : launch.children[k++].port;
        launch.spec.AddTask(job, absl::StrCat(host, ":", port));
      }
    }
    if (own_server != nullptr) own_server->UpdateCluster(launch.spec);
    return SendCluster(launch.children, launch.spec);
  }();
  if (!status.ok()) {
    StopProcesses(launch.children, kStopTimeoutMs);
    return status;
  }
  return launch;
}

}  // namespace distributed
}  // namespace graphrun
