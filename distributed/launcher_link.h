// The link between a local launcher (`graphrun cluster`, the cluster that
// `graphrun train` starts, tests) and the task processes it starts. It
// removes the race of picking free ports ahead: a port picked free and
// closed could be taken by another process before the task bound it.
//
//   1. The launcher makes a socketpair per task. The task gets its end as
//      file descriptor kLauncherFd and GRAPHRUN_LAUNCHER_FD in its
//      environment (as systemd's LISTEN_FDS); its cluster's addresses may
//      carry port 0.
//   2. The task binds port 0 (the kernel picks a free one, nobody can hold
//      it in between), answers every call Unavailable for now, and writes
//      "PORT\n".
//   3. The launcher reads every task's port (bounded; a task that exits
//      first is named) and builds the ClusterSpec.
//   4. The launcher writes the spec's JSON line to every task; each takes
//      it as its cluster and starts serving.
//   5. Each task writes "serving\n" and closes its end; the launcher
//      returns from SendCluster once every task did (or exited), so the
//      first call anyone makes is served, not refused as too early.
#ifndef GRAPHRUN_DISTRIBUTED_LAUNCHER_LINK_H_
#define GRAPHRUN_DISTRIBUTED_LAUNCHER_LINK_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/cluster_spec.h"
#include "distributed/process_util.h"
#include "distributed/rpc/grpc_server.h"

namespace graphrun {
namespace distributed {

inline constexpr int kLauncherFd = 3;
inline constexpr char kLauncherFdEnv[] = "GRAPHRUN_LAUNCHER_FD";
// How long a task waits for its cluster, and a launcher for the ports (a
// cluster of tasks starting at once under a sanitizer takes seconds).
inline constexpr int kLauncherWaitMs = 120000;

// --- In the task ---

// The launcher's descriptor when a launcher started this process, else -1
// (also for a standard stream or a descriptor that is not open). Clears
// the environment variable, so this process' own children do not see it.
int TakeLauncherFd();

// Starts a server of `options` on port 0 for the launcher on `fd`: reports
// its port, waits (up to `timeout_ms`) for the cluster and then serves
// with it. Unavailable when the launcher goes away first; InvalidArgument
// when the cluster it sends lacks this task or names another port for it.
// `cluster` (optional) gets the cluster.
absl::StatusOr<std::unique_ptr<GrpcServer>> StartServerForLauncher(ServerOptions options, int fd,
                                                                   int timeout_ms,
                                                                   ClusterSpec* cluster = nullptr);

// --- In the launcher ---

// SpawnProcess for a task that speaks the link: `c.launcher_fd` gets the
// launcher's end of the pair; `c.port` is reset to 0 until reported.
absl::Status SpawnTask(const std::string& binary, const std::vector<std::string>& args,
                       const std::vector<std::string>& env, ChildProcess& c);

// Reads every task's reported port into `c.port` (tasks without a link
// are skipped). Unavailable naming the task (and the last line of its log)
// when one exits or closes its end first; DeadlineExceeded naming the
// tasks still silent after `timeout_ms`.
absl::Status CollectPorts(std::vector<ChildProcess*> children, int timeout_ms);
absl::Status CollectPorts(std::vector<ChildProcess>& children, int timeout_ms);

// Sends `cluster` (its JSON line) to `c`, waits (bounded) until it serves
// and closes the link. Unavailable naming the task when it is gone.
absl::Status SendCluster(ChildProcess& c, const ClusterSpec& cluster);
// To every child with a link; the first failure is returned.
absl::Status SendCluster(std::vector<ChildProcess>& children, const ClusterSpec& cluster);
absl::Status SendCluster(const std::vector<ChildProcess*>& children, const ClusterSpec& cluster);

// Closes the launcher's end of `c`'s link, if open.
void CloseLink(ChildProcess& c);

// --- A whole local cluster, the one launcher ---

// `jobs` (name -> task count) at `host` with port 0 everywhere: what tasks
// get before their ports are known.
ClusterSpec PlaceholderCluster(const std::map<std::string, int>& jobs,
                               const std::string& host = "127.0.0.1");

// How one task process starts: its arguments (after the binary), extra
// environment ("NAME=value") and log file ("" = inherit stdout/stderr).
struct TaskCommand {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::string log_file;
};
using TaskCommandFn =
    std::function<TaskCommand(const std::string& job, int index, const ClusterSpec& placeholder)>;

struct LocalLaunch {
  ClusterSpec spec;                    // the real addresses
  std::vector<ChildProcess> children;  // job order, then index order
};

// Starts one `binary` process per task of `jobs` at `host` (loopback unless
// told otherwise; the tasks' commands say where they bind), linked to
// this launcher, except the task `own_job`:`own_index` (own_job "": none),
// which is `own_server`: a server of this process, started with port 0 and
// await_cluster. Collects every port, then hands every task (and
// own_server) the cluster. On error, the tasks started are stopped and the
// error names the task.
absl::StatusOr<LocalLaunch> LaunchLocalCluster(const std::string& binary,
                                               const std::map<std::string, int>& jobs,
                                               const TaskCommandFn& command,
                                               GrpcServer* own_server = nullptr,
                                               const std::string& own_job = "", int own_index = 0,
                                               const std::string& host = "127.0.0.1");

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_LAUNCHER_LINK_H_
