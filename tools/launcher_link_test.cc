// The launcher link (distributed/launcher_link.h) with real task processes:
// `graphrun server` tasks bind port 0, report it, answer Unavailable until
// their cluster arrives, then serve; tasks that die or stay silent are
// named within the deadline.
#include "distributed/launcher_link.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/rpc/grpc_worker_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sanitizers.h"
#include "util/notification.h"

namespace graphrun {
namespace tools {

using distributed::ChildProcess;
using distributed::CloseLink;
using distributed::CollectPorts;
using distributed::LastLine;
using distributed::Reap;
using distributed::SendCluster;
using distributed::SpawnTask;
using distributed::StopProcesses;
namespace {

using ::testing::HasSubstr;

std::string Graphrun() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/tools/graphrun";
}

std::string LogFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".log");
}

struct Children {
  std::vector<ChildProcess> all;
  ~Children() { StopProcesses(all, 5000); }
};

// GetStatus of `task` in `cluster`, over gRPC, bounded.
absl::Status GetStatus(const distributed::ClusterSpec& cluster, const std::string& task) {
  distributed::GrpcWorkerCache cache(cluster, distributed::ChannelOptions());
  absl::StatusOr<std::shared_ptr<distributed::WorkerInterface>> worker = cache.GetWorker(task);
  if (!worker.ok()) return worker.status();
  distributed::GetStatusRequest req;
  distributed::GetStatusResponse resp;
  Notification done;
  absl::Status status;
  (*worker)->GetStatusAsync(req, &resp, [&](const absl::Status& s) {
    status = s;
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    return absl::DeadlineExceededError("GetStatus did not answer in 30 s");
  }
  return status;
}

// Eight `graphrun server` tasks started at once each report a distinct
// port; a task answers Unavailable, naming itself, until it has its
// cluster, and serves after.
TEST(LauncherLinkTest, TasksReportDistinctPortsAndServeOnlyWithTheirCluster) {
  constexpr int kTasks = 8;
  distributed::ClusterSpec placeholder;
  for (int i = 0; i < kTasks; ++i) placeholder.AddTask("ps", "127.0.0.1:0");
  Children children;
  for (int i = 0; i < kTasks; ++i) {
    ChildProcess c;
    c.task = distributed::TaskName("ps", i);
    c.log_file = LogFile(absl::StrCat("ps_", i));
    ASSERT_TRUE(
        SpawnTask(Graphrun(),
                  {"server", "--cluster=" + placeholder.ToJson(), "--job=ps",
                   absl::StrCat("--task=", i), "--inter_op_threads=1", "--intra_op_threads=1"},
                  {}, c)
            .ok());
    EXPECT_EQ(c.port, 0);
    EXPECT_GE(c.launcher_fd, 0);
    children.all.push_back(c);
  }
  absl::Status collected = CollectPorts(children.all, 60000);
  ASSERT_TRUE(collected.ok()) << collected;
  distributed::ClusterSpec cluster;
  std::set<int> ports;
  for (const ChildProcess& c : children.all) {
    EXPECT_GT(c.port, 0) << c.task;
    ports.insert(c.port);
    cluster.AddTask("ps", absl::StrCat("127.0.0.1:", c.port));
  }
  EXPECT_EQ(ports.size(), static_cast<size_t>(kTasks));

  absl::Status early = GetStatus(cluster, distributed::TaskName("ps", 3));
  EXPECT_EQ(early.code(), absl::StatusCode::kUnavailable) << early;
  EXPECT_THAT(std::string(early.message()),
              HasSubstr("task /job:ps/replica:0/task:3 is starting: it has not received its "
                        "cluster yet"));

  ASSERT_TRUE(SendCluster(children.all, cluster).ok());
  for (const ChildProcess& c : children.all) EXPECT_EQ(c.launcher_fd, -1) << c.task;
  for (int i = 0; i < kTasks; ++i) {
    absl::Status s = GetStatus(cluster, distributed::TaskName("ps", i));
    EXPECT_TRUE(s.ok()) << "task " << i << ": " << s;
  }
}

// A task that exits before it reports (here: a usage error) is named with
// the last line of its log.
// Only a descriptor the launcher could have passed: not a standard stream
// (2 made a task write its port to stderr and then close it), not a closed
// one, not garbage.
TEST(LauncherLinkTest, TakeLauncherFdRefusesStandardStreamsAndClosedFds) {
  for (const char* v : {"0", "1", "2", "999", "-3", "x"}) {
    setenv(distributed::kLauncherFdEnv, v, 1);
    EXPECT_EQ(distributed::TakeLauncherFd(), -1) << v;
    EXPECT_EQ(std::getenv(distributed::kLauncherFdEnv), nullptr) << v;
  }
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  setenv(distributed::kLauncherFdEnv, std::to_string(p[0]).c_str(), 1);
  EXPECT_EQ(distributed::TakeLauncherFd(), p[0]);
  close(p[0]);
  close(p[1]);
}

TEST(LauncherLinkTest, TaskThatExitsFirstIsNamed) {
  Children children;
  ChildProcess c;
  c.task = "/job:ps/replica:0/task:0";
  c.log_file = LogFile("bad_flag");
  ASSERT_TRUE(SpawnTask(Graphrun(), {"server", "--no_such_flag=1"}, {}, c).ok());
  children.all.push_back(c);
  absl::Status s = CollectPorts(children.all, 60000);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("task /job:ps/replica:0/task:0 exited before listening: "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("no_such_flag"));
}

// A task that never reports is named when the deadline passes.
TEST(LauncherLinkTest, SilentTaskIsDeadlineExceededNamingIt) {
  Children children;
  ChildProcess c;
  c.task = "/job:worker/replica:0/task:1";
  ASSERT_TRUE(SpawnTask("/bin/sleep", {"30"}, {}, c).ok());
  children.all.push_back(c);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = CollectPorts(children.all, 300);
  if (!kSanitized) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("task /job:worker/replica:0/task:1 did not listen within 300 ms"));
}

// A task whose launcher goes away before sending the cluster stops with
// Unavailable instead of waiting.
TEST(LauncherLinkTest, TaskWhoseLauncherGoesAwayStops) {
  Children children;
  ChildProcess c;
  c.task = "/job:ps/replica:0/task:0";
  c.log_file = LogFile("orphan");
  ASSERT_TRUE(SpawnTask(Graphrun(),
                        {"server", R"(--cluster={"ps": ["127.0.0.1:0"]})", "--job=ps", "--task=0"},
                        {}, c)
                  .ok());
  children.all.push_back(c);
  ASSERT_TRUE(CollectPorts(children.all, 60000).ok());
  CloseLink(children.all[0]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!Reap(children.all[0]) && std::chrono::steady_clock::now() < deadline) {
    usleep(20000);
  }
  ASSERT_EQ(children.all[0].pid, 0) << "the task still runs";
  EXPECT_TRUE(WIFEXITED(children.all[0].exit_status) &&
              WEXITSTATUS(children.all[0].exit_status) == 1);
  EXPECT_THAT(LastLine(c.log_file),
              HasSubstr("Unavailable: task /job:ps/replica:0/task:0: the launcher went away "
                        "before sending the cluster"));
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
