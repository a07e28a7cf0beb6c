// Helpers of the `graphrun train` process tests (tf_config_test.cc,
// tf_config_chaos_test.cc): the data, temporary directories, the graphrun
// binary, child processes started as a cluster's launcher, and the JSON
// result line.
#ifndef GRAPHRUN_TESTS_TRAIN_TF_CONFIG_TESTLIB_H_
#define GRAPHRUN_TESTS_TRAIN_TF_CONFIG_TESTLIB_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/loop/saver.h"
#include "distributed/cluster_spec.h"
#include "distributed/launcher_link.h"
#include "distributed/process_util.h"
#include "graph/status.h"
#include "gtest/gtest.h"
#include "tests/sanitizers.h"
#include "util/json.h"

namespace graphrun {
namespace tools {
namespace tf_config_testing {

using distributed::ChildProcess;
using distributed::CollectPorts;
using distributed::Reap;
using distributed::SendCluster;
using distributed::SpawnProcess;
using distributed::SpawnTask;
using distributed::StopProcesses;

inline constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

inline bool HaveData() {
  return std::filesystem::exists(std::string(kData) + "/t10k-labels-idx1-ubyte.gz");
}

inline std::string TempDir(const std::string& name) {
  std::string base = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/" + name + "_XXXXXX";
  return mkdtemp(dir.data());
}

inline std::string Graphrun() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/tools/graphrun";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The children of one test; every one still running is stopped (SIGTERM,
// then SIGKILL) when the test ends, passed or not.
struct Children {
  std::vector<ChildProcess> all;
  ~Children() { StopProcesses(all, 5000); }

  // Starts `graphrun args...` with `env`, output to <dir>/<name>.log,
  // linked to this test as its launcher (distributed/launcher_link.h): it binds
  // a free port and waits for its cluster. Returns its position in `all`.
  // `linked` false: a plain child (no server, no link).
  size_t Start(const std::string& task, const std::vector<std::string>& args,
               const std::vector<std::string>& env, const std::string& dir, bool linked = true) {
    ChildProcess c;
    c.task = task;
    c.log_file =
        dir + "/" + task.substr(task.rfind('/') + 1) + "_" + std::to_string(all.size()) + ".log";
    absl::Status spawned;
    if (linked) {
      spawned = SpawnTask(Graphrun(), args, env, c);
    } else {
      absl::StatusOr<pid_t> pid = SpawnProcess(Graphrun(), args, env, c.log_file);
      spawned = pid.status();
      c.pid = pid.ok() ? *pid : 0;
    }
    EXPECT_TRUE(spawned.ok()) << spawned;
    all.push_back(c);
    return all.size() - 1;
  }
};

// A cluster of one ps, one chief and one worker whose tasks were started
// with ports 0 by Children::Start (at `ps`, `chief`, `worker` of
// `children.all`): collects the ports they bound; the cluster of them.
absl::StatusOr<distributed::ClusterSpec> CollectCluster(Children& children, size_t ps, size_t chief,
                                                        size_t worker) {
  GR_RETURN_IF_ERROR(
      CollectPorts({&children.all[ps], &children.all[chief], &children.all[worker]}, 60000));
  distributed::ClusterSpec spec;
  spec.AddTask("chief", absl::StrCat("127.0.0.1:", children.all[chief].port));
  spec.AddTask("worker", absl::StrCat("127.0.0.1:", children.all[worker].port));
  spec.AddTask("ps", absl::StrCat("127.0.0.1:", children.all[ps].port));
  return spec;
}

// Waits until `c` exits or `deadline` passes; true when it exited (its
// waitpid status in c.exit_status).
inline bool WaitForExit(ChildProcess& c, std::chrono::steady_clock::time_point deadline) {
  while (!Reap(c)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

inline bool ExitedOk(const ChildProcess& c) {
  return WIFEXITED(c.exit_status) && WEXITSTATUS(c.exit_status) == 0;
}

// The result line `graphrun train` prints ({"test_accuracy": ...}), parsed.
inline absl::StatusOr<JsonValue> ResultJson(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  std::string found;
  while (std::getline(in, line)) {
    if (line.rfind("{\"test_accuracy\"", 0) == 0) found = line;
  }
  if (found.empty()) return absl::NotFoundError("no result line");
  return ParseJson(found);
}

inline double Num(const JsonValue& json, const std::string& key) {
  const JsonValue* v = json.Find(key);
  EXPECT_TRUE(v != nullptr && v->is_number()) << key << " in " << json.Serialize();
  return v != nullptr && v->is_number() ? std::stod(v->number_text()) : -1;
}

inline std::string Str(const JsonValue& json, const std::string& key) {
  const JsonValue* v = json.Find(key);
  EXPECT_TRUE(v != nullptr && v->is_string()) << key << " in " << json.Serialize();
  return v != nullptr && v->is_string() ? v->string_value() : "";
}

}  // namespace tf_config_testing
}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TESTS_TRAIN_TF_CONFIG_TESTLIB_H_
