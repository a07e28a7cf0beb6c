// Peer liveness with real task processes: a PS task and a worker task
// (`graphrun server`), a client whose steps run on the worker's master and
// read a variable on the PS. When the PS stops answering (SIGSTOP) or dies
// (SIGKILL), the step in flight fails within 5 s with Unavailable naming
// the PS, and the worker reports it on stderr at once; heartbeats also
// see a stopped task come back. A PS that restarts is a new incarnation:
// the old session's steps are refused (Aborted, "the task may have
// restarted"), a new session works.
#include "distributed/health.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/launcher_link.h"
#include "distributed/local_cluster.h"
#include "distributed/process_util.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "tests/sanitizers.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr char kPs[] = "/job:ps/replica:0/task:0";

// Times are asserted only without sanitizers (CI runs this test under ASan
// too, where nothing is timed).
constexpr bool kTimed = !kSanitized;

std::string Graphrun() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/tools/graphrun";
}

std::string LogFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".log");
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// One PS task and one worker task, started through the launcher link.
struct TwoTasks {
  std::vector<ChildProcess> all;
  ClusterSpec cluster;
  ~TwoTasks() {
    for (ChildProcess& c : all) {
      if (c.pid > 0) kill(c.pid, SIGCONT);
    }
    StopProcesses(all, 5000);
  }
  absl::Status Start(const std::string& name) {
    ClusterSpec placeholder;
    placeholder.AddTask("ps", "127.0.0.1:0");
    placeholder.AddTask("worker", "127.0.0.1:0");
    for (const char* job : {"ps", "worker"}) {
      ChildProcess c;
      c.task = TaskName(job, 0);
      c.log_file = LogFile(absl::StrCat(name, "_", job));
      absl::Status s =
          SpawnTask(Graphrun(),
                    {"server", "--cluster=" + placeholder.ToJson(), absl::StrCat("--job=", job),
                     "--task=0", "--inter_op_threads=2", "--intra_op_threads=1"},
                    {}, c);
      if (!s.ok()) return s;
      all.push_back(c);
    }
    if (absl::Status s = CollectPorts(all, 60000); !s.ok()) return s;
    cluster.AddTask("ps", absl::StrCat("127.0.0.1:", all[0].port));
    cluster.AddTask("worker", absl::StrCat("127.0.0.1:", all[1].port));
    return SendCluster(all, cluster);
  }
  ChildProcess& ps() { return all[0]; }
  ChildProcess& worker() { return all[1]; }
};

// A variable on the PS, read and incremented by the worker every step.
absl::StatusOr<std::unique_ptr<Session>> PsSession(const TwoTasks& tasks) {
  tensorflow::GraphDef def;
  if (!google::protobuf::TextFormat::ParseFromString(R"(
node { name: "v" op: "VarHandleOp" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { } } }
  attr { key: "shared_name" value { s: "v" } } }
node { name: "zero" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 0 } } } }
node { name: "init" op: "AssignVariableOp" input: "v" input: "zero" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "one" op: "Const" device: "/job:worker/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }
node { name: "add" op: "AssignAddVariableOp" input: "v" input: "one" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "value" op: "ReadVariableOp" input: "v" input: "^add" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "read" op: "Mul" input: "value" input: "one" device: "/job:worker/task:0"
  attr { key: "T" value { type: DT_FLOAT } } })",
                                                     &def)) {
    return absl::InternalError("bad test graph");
  }
  RegisterGrpcSession();
  SessionOptions so;
  so.target = absl::StrCat("grpc://", *tasks.cluster.Address("worker", 0));
  absl::StatusOr<std::unique_ptr<Session>> s = NewSession(so);
  if (!s.ok()) return s.status();
  if (absl::Status c = (*s)->Create(def); !c.ok()) return c;
  if (auto r = (*s)->Run({}, {}, {"init"}); !r.ok()) return r.status();
  return s;
}

// Runs steps until one fails; the failing step's status and how long after
// `fault` it failed.
struct Failure {
  absl::Status status;
  double seconds_after_fault = -1;
};
Failure StepUntilFailure(Session* session, const std::function<void()>& fault) {
  Failure f;
  for (int i = 0; i < 20; ++i) {
    auto r = session->Run({}, {"read"}, {});
    if (!r.ok()) {
      f.status = r.status();
      return f;
    }
  }
  const auto t0 = Clock::now();
  fault();
  while (true) {
    auto r = session->Run({}, {"read"}, {});
    if (!r.ok()) {
      f.status = r.status();
      f.seconds_after_fault = std::chrono::duration<double>(Clock::now() - t0).count();
      return f;
    }
    if (Clock::now() - t0 > std::chrono::seconds(60)) {
      f.status = absl::DeadlineExceededError("steps kept succeeding for 60 s");
      return f;
    }
  }
}

TEST(HealthTest, StoppedPsFailsTheStepWithinFiveSecondsNamingIt) {
  TwoTasks tasks;
  ASSERT_TRUE(tasks.Start("sigstop").ok());
  auto session = PsSession(tasks);
  ASSERT_TRUE(session.ok()) << session.status();
  const pid_t ps = tasks.ps().pid;
  Failure f = StepUntilFailure(session->get(), [ps] { kill(ps, SIGSTOP); });
  EXPECT_EQ(f.status.code(), absl::StatusCode::kUnavailable) << f.status;
  EXPECT_THAT(std::string(f.status.message()),
              HasSubstr(absl::StrCat("task ", kPs,
                                     " is unreachable: 3 heartbeats in a row went "
                                     "unanswered (every 1000 ms")));
  EXPECT_GT(f.seconds_after_fault, 0);
  if (kTimed) {
    EXPECT_LT(f.seconds_after_fault, 5.0);
  }
  std::cout << "SIGSTOP of the PS: the step failed after " << f.seconds_after_fault << " s\n";
  // The worker said so on stderr, as one line.
  const std::string log = ReadAll(tasks.worker().log_file);
  EXPECT_THAT(log, HasSubstr(absl::StrCat("\nUnavailable: task ", kPs, " is unreachable: ")));
  // Back: the worker sees it answer again, and steps run again.
  kill(ps, SIGCONT);
  absl::Status again = absl::UnknownError("not run");
  for (int i = 0; i < 100 && !again.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    again = (*session)->Run({}, {"read"}, {}).status();
  }
  EXPECT_TRUE(again.ok()) << again;
}

TEST(HealthTest, KilledPsFailsTheStepWithinFiveSecondsNamingIt) {
  TwoTasks tasks;
  ASSERT_TRUE(tasks.Start("sigkill").ok());
  auto session = PsSession(tasks);
  ASSERT_TRUE(session.ok()) << session.status();
  const pid_t ps = tasks.ps().pid;
  Failure f = StepUntilFailure(session->get(), [ps] { kill(ps, SIGKILL); });
  EXPECT_EQ(f.status.code(), absl::StatusCode::kUnavailable) << f.status;
  EXPECT_THAT(std::string(f.status.message()), HasSubstr(kPs));
  EXPECT_GT(f.seconds_after_fault, 0);
  if (kTimed) {
    EXPECT_LT(f.seconds_after_fault, 5.0);
  }
  std::cout << "SIGKILL of the PS: the step failed after " << f.seconds_after_fault << " s\n";
}

// A PS that restarts (killed, started again on its port): it is a new
// incarnation, and the old session's next step is refused naming the
// restart instead of running against the new, empty task; a new session
// works.
TEST(HealthTest, RestartedPsIsANewIncarnationAndOldSessionsAreRefused) {
  TwoTasks tasks;
  ASSERT_TRUE(tasks.Start("restart").ok());
  auto session = PsSession(tasks);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {"read"}, {}).ok());
  kill(tasks.ps().pid, SIGKILL);
  int status = 0;
  waitpid(tasks.ps().pid, &status, 0);
  tasks.ps().pid = 0;
  // The same task again, on the same port (the cluster names it).
  ChildProcess again;
  again.task = kPs;
  again.log_file = LogFile("restart_ps_again");
  auto pid = SpawnProcess(Graphrun(),
                          {"server", "--cluster=" + tasks.cluster.ToJson(), "--job=ps", "--task=0",
                           "--inter_op_threads=2", "--intra_op_threads=1"},
                          {}, again.log_file);
  ASSERT_TRUE(pid.ok()) << pid.status();
  again.pid = *pid;
  tasks.all.push_back(again);
  // Until the new process listens the step fails as unreachable; after, it
  // must fail because the task restarted.
  absl::Status step = absl::UnknownError("not run");
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    step = (*session)->Run({}, {"read"}, {}).status();
    if (!absl::IsUnavailable(step)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(step.ok());
  EXPECT_FALSE(absl::IsUnavailable(step)) << step;
  EXPECT_THAT(std::string(step.message()), HasSubstr("restarted")) << step;
  EXPECT_THAT(std::string(step.message()), HasSubstr(kPs)) << step;
  std::cout << "the old session's step after the PS restarted: " << step << "\n";
  // A new session initializes the new incarnation's variable and runs.
  auto fresh = PsSession(tasks);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  auto r = (*fresh)->Run({}, {"read"}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<float>(), 1.f);
}

// The monitor itself, in process: a watch fires once for a task that stops
// answering, not for one that answers, and a cancelled watch never fires.
TEST(HealthTest, WatchFiresOnceForADeadTaskOnly) {
  LocalClusterOptions lo;
  lo.jobs = {{"worker", 2}};
  auto cluster = LocalCluster::Start(lo);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  GrpcWorkerCache cache((*cluster)->cluster_spec(), ChannelOptions());
  std::ostringstream report;
  HealthOptions ho;
  ho.interval_ms = 100;
  ho.self_task = "/job:worker/replica:0/task:0";
  HealthMonitor monitor(ho, &cache, &report);
  const std::string peer = "/job:worker/replica:0/task:1";
  std::atomic<int> fired{0};
  absl::Status why;
  std::mutex mu;
  HealthMonitor::Watch watch = monitor.WatchTasks({ho.self_task, peer}, [&](const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu);
    why = s;
    ++fired;
  });
  std::atomic<int> cancelled_fired{0};
  HealthMonitor::Watch cancelled =
      monitor.WatchTasks({peer}, [&](const absl::Status&) { ++cancelled_fired; });
  cancelled.Cancel();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(fired.load(), 0);  // it answers
  (*cluster)->server("worker", 1)->Stop();
  const auto t0 = Clock::now();
  while (fired.load() == 0 && Clock::now() - t0 < std::chrono::seconds(kTimed ? 5 : 30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(fired.load(), 1);
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(why.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(why.message()),
                HasSubstr(absl::StrCat("task ", peer, " is unreachable: 3 heartbeats")));
  }
  EXPECT_EQ(monitor.TaskStatus(peer).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(monitor.TaskStatus(ho.self_task).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(fired.load(), 1);
  EXPECT_EQ(cancelled_fired.load(), 0);
  EXPECT_THAT(report.str(), HasSubstr(absl::StrCat("Unavailable: task ", peer, " is unreachable")));
  // A new watch on a task already dead fires at once.
  std::atomic<int> late{0};
  HealthMonitor::Watch w2 = monitor.WatchTasks({peer}, [&](const absl::Status&) { ++late; });
  EXPECT_EQ(late.load(), 1);
  // A watch of a task that just called (a master's RunGraph) is news that
  // it is back: alive at once, said once, and the watch does not fire
  // (until three more heartbeats go unanswered: 300 ms here).
  std::atomic<int> after{0};
  HealthMonitor::Watch w3 = monitor.WatchTasks(
      {peer}, [&](const absl::Status&) { ++after; }, /*heard_from=*/true);
  EXPECT_TRUE(monitor.TaskStatus(peer).ok());
  EXPECT_THAT(report.str(),
              HasSubstr(absl::StrCat("graphrun: task ", peer, " is back (it called this task)")));
  EXPECT_EQ(after.load(), 0);
  w3.Cancel();
  // This task itself is never watched: nothing to say, nothing fired.
  HealthMonitor::Watch self = monitor.WatchTasks(
      {ho.self_task}, [&](const absl::Status&) { ++after; }, /*heard_from=*/true);
  EXPECT_EQ(after.load(), 0);
  monitor.Stop();
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
