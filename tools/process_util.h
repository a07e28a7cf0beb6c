// Child processes for local clusters: free loopback ports, spawning a
// binary with extra environment variables and its output in a file,
// waiting until a task listens, and stopping (SIGTERM, then SIGKILL).
//
// SpawnProcess prepares argv and envp before fork() and only calls
// async-signal-safe functions in the child, so it may be called from a
// multithreaded process. Children get SIGTERM when this process dies
// (PR_SET_PDEATHSIG) and start with no signals blocked.
#ifndef GRAPHRUN_TOOLS_PROCESS_UTIL_H_
#define GRAPHRUN_TOOLS_PROCESS_UTIL_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace graphrun {
namespace tools {

// A loopback port that was free a moment ago (the child binds it next).
absl::StatusOr<int> PickFreePort();
// `n` distinct such ports (all held open while picking).
absl::StatusOr<std::vector<int>> PickFreePorts(int n);
// True when something accepts connections on 127.0.0.1:port.
bool AcceptsConnections(int port);

struct ChildProcess {
  pid_t pid = 0;     // 0: not running (never started, or reaped)
  std::string task;  // "/job:ps/task:0", for messages
  int port = 0;      // 0: none
  std::string log_file;
  int exit_status = 0;  // waitpid status once reaped
};

// Starts `binary` with `args` (argv[1..]), the current environment plus
// `env` ("NAME=value", replacing the same names), stdout and stderr to
// `log_file` (inherited when empty). Unavailable when fork fails.
absl::StatusOr<pid_t> SpawnProcess(const std::string& binary, const std::vector<std::string>& args,
                                   const std::vector<std::string>& env,
                                   const std::string& log_file);

// Waits (bounded) until every child with a port accepts connections.
// Unavailable naming the task when one exits first; DeadlineExceeded
// naming it when it does not listen in time.
absl::Status WaitUntilListening(std::vector<ChildProcess>& children, int timeout_ms);

// Reaps `c` if it exited (non-blocking); true if it is no longer running.
bool Reap(ChildProcess& c);

// SIGTERM to every running child, SIGKILL to those still running after
// `timeout_ms`; reaps them all.
void StopProcesses(std::vector<ChildProcess>& children, int timeout_ms);

// The last non-empty line of a file ("" if none), for error messages.
std::string LastLine(const std::string& path);

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_PROCESS_UTIL_H_
