// Test helpers that run the built `graphrun` binary (a test's `data`):
// its runfiles, a temporary path, and one run's exit code, stdout and
// stderr.
#ifndef GRAPHRUN_TOOLS_CLI_TESTLIB_H_
#define GRAPHRUN_TOOLS_CLI_TESTLIB_H_

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/file_util.h"

extern char** environ;

namespace graphrun {
namespace tools {

inline std::string Runfile(const std::string& rel) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/" + rel;
}
inline std::string Example(const std::string& name) { return Runfile("examples/" + name); }
inline std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline Result Graphrun(const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string out_path = TempPath("stdout_" + std::to_string(counter));
  const std::string err_path = TempPath("stderr_" + std::to_string(counter++));
  std::vector<std::string> argv_s = {Runfile("tools/graphrun")};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid;
  Result r;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << " failed: " << rc;
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFileToString(out_path).value_or("<no stdout>");
  r.err = ReadFileToString(err_path).value_or("<no stderr>");
  return r;
}

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_CLI_TESTLIB_H_
