#include "distributed/process_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/status.h"

extern char** environ;

namespace graphrun {
namespace distributed {

absl::StatusOr<pid_t> SpawnProcess(const std::string& binary, const std::vector<std::string>& args,
                                   const std::vector<std::string>& env, const std::string& log_file,
                                   int child_fd) {
  // Everything the child needs, built before fork().
  std::vector<std::string> argv_s = {binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string var(*e);
    bool replaced = false;
    for (const std::string& x : env) {
      if (absl::StartsWith(var, x.substr(0, x.find('=') + 1))) replaced = true;
    }
    if (!replaced) env_s.push_back(std::move(var));
  }
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> argv, envp;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  int log_fd = -1;
  if (!log_file.empty()) {
    log_fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create ", log_file));
    }
  }
  sigset_t none;
  sigemptyset(&none);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (log_fd >= 0) {
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
    }
    if (child_fd == 3) {
      fcntl(3, F_SETFD, 0);  // keep it across exec
    } else if (child_fd >= 0) {
      dup2(child_fd, 3);  // the copy does not close on exec
    }
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  if (log_fd >= 0) close(log_fd);
  if (pid < 0) return absl::UnavailableError(absl::StrCat("fork failed starting ", binary));
  return pid;
}

bool Reap(ChildProcess& c) {
  if (c.pid <= 0) return true;
  int st = 0;
  pid_t r = waitpid(c.pid, &st, WNOHANG);
  if (r == c.pid || r < 0) {
    c.exit_status = st;
    c.pid = 0;
    return true;
  }
  return false;
}

void StopProcesses(std::vector<ChildProcess>& children, int timeout_ms) {
  for (ChildProcess& c : children) {
    if (c.pid > 0) kill(c.pid, SIGTERM);
    if (c.launcher_fd >= 0) {
      close(c.launcher_fd);
      c.launcher_fd = -1;
    }
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (ChildProcess& c : children) {
    while (!Reap(c)) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(c.pid, SIGKILL);
        int st = 0;
        waitpid(c.pid, &st, 0);
        c.exit_status = st;
        c.pid = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

std::string LastLine(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace distributed
}  // namespace graphrun
