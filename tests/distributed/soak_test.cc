// Soak: 8 concurrent clients run mixed read and update steps against one
// set of PS tasks (two `graphrun server` processes), each through its own
// session on the PS task 0 master. No step may fail or hang, the updates
// must all land (the counters' final values are exact), and the PS
// processes' resident memory must stay flat (within 5%) after warm-up.
// SOAK_STEPS (per client, default 400) makes the long run: the closing
// note's figures come from SOAK_STEPS=5000. Prints throughput per phase and
// the RSS curve.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "distributed/launcher_link.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "tests/sanitizers.h"

namespace graphrun {
namespace distributed {
namespace {

// Resident memory is asserted only without sanitizers: ASan's quarantine
// holds freed memory by design (CI runs this test under ASan too).
constexpr bool kMemoryMeasured = !kSanitized;

constexpr int kClients = 8;
constexpr int kVars = 8;         // per PS task
constexpr int kElements = 4096;  // floats per variable (16 KiB)

std::string Graphrun() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/tools/graphrun";
}

std::string LogFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".log");
}

int64_t RssKiB(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

// Variables v<t>_<i> on /job:ps/task:t, each with an init, an update (+1
// everywhere) and a read (its sum); the graph every client uses.
tensorflow::GraphDef SoakGraph() {
  std::string text;
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < kVars; ++i) {
      const std::string v = absl::StrCat("v", t, "_", i);
      const std::string dev = absl::StrCat("/job:ps/task:", t);
      absl::StrAppend(&text, absl::StrFormat(R"(
node { name: "%s" op: "VarHandleOp" device: "%s"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: %d } } } }
  attr { key: "shared_name" value { s: "%s" } } }
node { name: "%s/zero" op: "Const" device: "%s" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: %d } }
    float_val: 0 } } } }
node { name: "%s/init" op: "AssignVariableOp" input: "%s" input: "%s/zero" device: "%s"
  attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "%s/one" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: %d } }
    float_val: 1 } } } }
node { name: "%s/update" op: "AssignAddVariableOp" input: "%s" input: "%s/one" device: "%s"
  attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "%s/value" op: "ReadVariableOp" input: "%s" device: "%s"
  attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "%s/axis" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 } } } }
node { name: "%s/read" op: "Sum" input: "%s/value" input: "%s/axis" device: "/job:ps/task:0"
  attr { key: "T" value { type: DT_FLOAT } } attr { key: "Tidx" value { type: DT_INT32 } }
  attr { key: "keep_dims" value { b: false } } }
)",
                                             v, dev, kElements, v, v, dev, kElements, v, v, v, dev,
                                             v, kElements, v, v, v, dev, v, v, dev, v, v, v, v));
    }
  }
  tensorflow::GraphDef def;
  if (!google::protobuf::TextFormat::ParseFromString(text, &def)) std::abort();
  return def;
}

TEST(SoakTest, EightClientsMixedStepsNoErrorsFlatMemory) {
  const char* env = std::getenv("SOAK_STEPS");
  const int steps = env != nullptr ? std::atoi(env) : 400;
  ASSERT_GT(steps, 10);
  // Two PS tasks, started through the launcher link.
  std::vector<ChildProcess> ps;
  ClusterSpec placeholder;
  for (int t = 0; t < 2; ++t) placeholder.AddTask("ps", "127.0.0.1:0");
  for (int t = 0; t < 2; ++t) {
    ChildProcess c;
    c.task = TaskName("ps", t);
    c.log_file = LogFile(absl::StrCat("soak_ps", t));
    ASSERT_TRUE(
        SpawnTask(Graphrun(),
                  {"server", "--cluster=" + placeholder.ToJson(), "--job=ps",
                   absl::StrCat("--task=", t), "--inter_op_threads=2", "--intra_op_threads=1"},
                  {}, c)
            .ok());
    ps.push_back(c);
  }
  struct Stop {
    std::vector<ChildProcess>* ps;
    ~Stop() { StopProcesses(*ps, 5000); }
  } stop{&ps};
  ASSERT_TRUE(CollectPorts(ps, 60000).ok());
  ClusterSpec cluster;
  for (const ChildProcess& c : ps) cluster.AddTask("ps", absl::StrCat("127.0.0.1:", c.port));
  ASSERT_TRUE(SendCluster(ps, cluster).ok());

  RegisterGrpcSession();
  SessionOptions so;
  so.target = absl::StrCat("grpc://", *cluster.Address("ps", 0));
  const tensorflow::GraphDef def = SoakGraph();
  std::vector<std::unique_ptr<Session>> sessions;
  for (int c = 0; c < kClients; ++c) {
    auto s = NewSession(so);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Create(def).ok());
    sessions.push_back(std::move(*s));
  }
  std::vector<std::string> inits;
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < kVars; ++i) inits.push_back(absl::StrCat("v", t, "_", i, "/init"));
  }
  ASSERT_TRUE(sessions[0]->Run({}, {}, inits).ok());

  // A menu of step kinds, as a training job has a few (a client picks one
  // at random per step): read k variables' sums, or update k variables,
  // for groups that span both PS tasks.
  struct Kind {
    std::vector<std::string> fetches, targets;
    std::vector<int> updated;
  };
  std::vector<Kind> menu;
  for (int g = 0; g < 2 * kVars; g += 2) {
    Kind read, update;
    for (int var : {g, (g + 3) % (2 * kVars), (g + kVars + 1) % (2 * kVars)}) {
      const std::string name = absl::StrCat("v", var / kVars, "_", var % kVars);
      read.fetches.push_back(name + "/read");
      update.targets.push_back(name + "/update");
      update.updated.push_back(var);
    }
    menu.push_back(read);
    menu.push_back(update);
  }
  std::vector<std::vector<int64_t>> updates(kClients, std::vector<int64_t>(2 * kVars, 0));
  std::atomic<int64_t> done{0}, errors{0};
  std::vector<std::string> first_error(kClients);
  auto client = [&](int c) {
    std::mt19937 rng(100 + c);
    for (int s = 0; s < steps; ++s) {
      const Kind& k = menu[rng() % menu.size()];
      auto r = sessions[c]->Run({}, k.fetches, k.targets);
      if (!r.ok()) {
        if (errors.fetch_add(1) == 0) first_error[c] = r.status().ToString();
        return;
      }
      for (int var : k.updated) ++updates[c][var];
      ++done;
    }
  };
  // Warm-up: the first fifth, then RSS; the rest, RSS every fifth.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) threads.emplace_back(client, c);
  const int64_t total = int64_t{kClients} * steps;
  std::vector<std::pair<double, int64_t>> curve;  // (seconds, PS RSS KiB)
  int64_t warm_rss = -1;
  int64_t last_done = 0;
  auto last_t = t0;
  for (int fifth = 1; fifth <= 5; ++fifth) {
    const int64_t target = total * fifth / 5;
    while (done.load() < target && errors.load() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (errors.load() > 0) break;
    const auto now = std::chrono::steady_clock::now();
    const int64_t rss = RssKiB(ps[0].pid) + RssKiB(ps[1].pid);
    const double secs = std::chrono::duration<double>(now - t0).count();
    const double rate =
        (done.load() - last_done) / std::chrono::duration<double>(now - last_t).count();
    std::cout << absl::StrFormat("soak: %5.1f s  %6d steps  %7.0f steps/s  PS RSS %d KiB\n", secs,
                                 done.load(), rate, rss);
    curve.push_back({secs, rss});
    if (fifth == 1) warm_rss = rss;
    last_done = done.load();
    last_t = now;
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) {
    EXPECT_TRUE(first_error[c].empty()) << "client " << c << ": " << first_error[c];
  }
  ASSERT_EQ(errors.load(), 0);
  EXPECT_EQ(done.load(), total);
  // Every update landed exactly once: each element of v counts them.
  for (int var = 0; var < 2 * kVars; ++var) {
    int64_t expected = 0;
    for (int c = 0; c < kClients; ++c) expected += updates[c][var];
    const std::string name = absl::StrCat("v", var / kVars, "_", var % kVars, "/read");
    auto r = sessions[0]->Run({}, {name}, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].scalar<float>(), static_cast<float>(expected * kElements)) << name;
  }
  ASSERT_EQ(curve.size(), 5u);
  const int64_t end_rss = curve.back().second;
  std::cout << absl::StrFormat("soak: RSS after warm-up %d KiB, at the end %d KiB (%+.1f%%)\n",
                               warm_rss, end_rss, 100.0 * (end_rss - warm_rss) / warm_rss);
  if (kMemoryMeasured) {
    EXPECT_LE(end_rss, warm_rss * 105 / 100) << "PS memory grew more than 5% after warm-up";
  } else {
    std::cout << "soak: RSS not asserted under a sanitizer (its quarantine keeps freed memory)\n";
  }
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
