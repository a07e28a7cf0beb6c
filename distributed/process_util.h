// Child processes for local clusters: spawning a binary with extra
// environment variables and its output in a file, reaping, and stopping
// (SIGTERM, then SIGKILL). Tasks that serve report the port they bound
// through distributed/launcher_link.h; nothing picks ports ahead.
//
// SpawnProcess prepares argv and envp before fork() and only calls
// async-signal-safe functions in the child, so it may be called from a
// multithreaded process. Children get SIGTERM when this process dies
// (PR_SET_PDEATHSIG) and start with no signals blocked.
#ifndef GRAPHRUN_DISTRIBUTED_PROCESS_UTIL_H_
#define GRAPHRUN_DISTRIBUTED_PROCESS_UTIL_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace graphrun {
namespace distributed {

struct ChildProcess {
  pid_t pid = 0;     // 0: not running (never started, or reaped)
  std::string task;  // "/job:ps/task:0", for messages
  int port = 0;      // 0: none
  std::string log_file;
  int exit_status = 0;   // waitpid status once reaped
  int launcher_fd = -1;  // the launcher's end of the task's link (launcher_link.h)
};

// Starts `binary` with `args` (argv[1..]), the current environment plus
// `env` ("NAME=value", replacing the same names), stdout and stderr to
// `log_file` (inherited when empty). `child_fd` >= 0: the child gets that
// descriptor as descriptor 3 (kLauncherFd), its only one beyond stdio.
// Unavailable when fork fails.
absl::StatusOr<pid_t> SpawnProcess(const std::string& binary, const std::vector<std::string>& args,
                                   const std::vector<std::string>& env, const std::string& log_file,
                                   int child_fd = -1);

// Reaps `c` if it exited (non-blocking); true if it is no longer running.
bool Reap(ChildProcess& c);

// SIGTERM to every running child, SIGKILL to those still running after
// `timeout_ms`; reaps them all and closes their launcher links.
void StopProcesses(std::vector<ChildProcess>& children, int timeout_ms);

// The last non-empty line of a file ("" if none), for error messages.
std::string LastLine(const std::string& path);

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_PROCESS_UTIL_H_
