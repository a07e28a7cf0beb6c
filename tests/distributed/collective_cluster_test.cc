// All-reduce across the tasks of real (in-process) gRPC clusters: every
// worker's session runs CollectiveReduceV2 on its own device; the members
// resolve their group at the leader (worker 0) and exchange pieces over
// the data channel. Results are the exact mean, bit-identical on every
// worker, for recursive doubling and for the segmented ring; bad members
// and a stopped peer are clear errors naming the device or task.
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "tests/sanitizers.h"
#include "util/notification.h"
#include "util/tls_certs.h"
#include "util/tls_credentials.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;

// An int32 scalar Const node on `dev`.
std::string IntConst(const std::string& dev, const std::string& name, int v) {
  return absl::StrCat(R"(node { name: ")", name, R"(" op: "Const" device: ")", dev,
                      R"(" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: )",
                      v, " } } } }\n");
}

// Worker `k`'s graph: x (fed) -> CollectiveReduceV2 on its device.
std::string Graph(int k, int group_size, const std::string& hint, int instance = 1,
                  const std::string& dtype = "DT_FLOAT", double timeout_seconds = 60) {
  const std::string dev = absl::StrCat("/job:worker/replica:0/task:", k, "/device:CPU:0");
  return absl::StrCat(R"(node { name: "x" op: "Placeholder" device: ")", dev,
                      R"(" attr { key: "dtype" value { type: )", dtype, " } } }\n",
                      IntConst(dev, "size", group_size), IntConst(dev, "key", 7),
                      IntConst(dev, "instance", instance),
                      R"(node { name: "r" op: "CollectiveReduceV2" device: ")", dev,
                      R"(" input: "x" input: "size" input: "key" input: "instance"
         attr { key: "T" value { type: )",
                      dtype, R"( } }
         attr { key: "merge_op" value { s: "Add" } } attr { key: "final_op" value { s: "Div" } }
         attr { key: "communication_hint" value { s: ")",
                      hint, R"(" } }
         attr { key: "timeout_seconds" value { f: )",
                      timeout_seconds, " } } }");
}

Tensor Random(int64_t n, uint32_t seed) {
  Tensor t(DT_FLOAT, TensorShape({n}));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-100.f, 100.f);
  for (int64_t i = 0; i < n; ++i) t.base<float>()[i] = d(gen);
  return t;
}

class CollectiveClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { RegisterGrpcSession(); }

  void StartCluster(int workers, std::function<void(ServerOptions&)> configure = nullptr) {
    LocalClusterOptions o;
    o.jobs = {{"worker", workers}};
    o.server.intra_op_threads = 1;
    o.server.inter_op_threads = 2;
    if (configure) configure(o.server);
    auto c = LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
  }

  std::unique_ptr<Session> Connect(int k, const std::string& graph) {
    SessionOptions so;
    so.target = cluster_->target("worker", k);
    so.tls = client_tls_;
    auto s = NewSession(so);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return nullptr;
    absl::Status created = (*s)->Create(test::ParseGraph(graph));
    EXPECT_TRUE(created.ok()) << created;
    return std::move(*s);
  }

  // Runs one step on every worker at once, worker k feeding inputs[k].
  std::vector<absl::StatusOr<Tensor>> RunAll(std::vector<std::unique_ptr<Session>>& sessions,
                                             const std::vector<Tensor>& inputs) {
    std::vector<absl::StatusOr<Tensor>> out(sessions.size(), absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (size_t k = 0; k < sessions.size(); ++k) {
      threads.emplace_back([&, k] {
        auto r = sessions[k]->Run({{"x", inputs[k]}}, {"r"}, {});
        out[k] = r.ok() ? absl::StatusOr<Tensor>((*r)[0]) : absl::StatusOr<Tensor>(r.status());
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  // Two workers' sessions (into `both`) after one good all-reduce of `n`
  // floats (the group resolved, connections up); then worker 0 alone
  // starts a step that waits in the all-reduce, its result into `r0`.
  // Returns that step's thread, after giving it 300 ms to start waiting.
  std::thread WorkerZeroWaitsAlone(std::vector<std::unique_ptr<Session>>* both, int64_t n,
                                   absl::StatusOr<std::vector<Tensor>>* r0) {
    both->push_back(Connect(0, Graph(0, 2, "auto")));
    both->push_back(Connect(1, Graph(1, 2, "auto")));
    auto first = RunAll(*both, {Random(n, 1), Random(n, 2)});
    EXPECT_TRUE(first[0].ok() && first[1].ok()) << first[0].status() << " " << first[1].status();
    std::thread t0([both, n, r0] { *r0 = (*both)[0]->Run({{"x", Random(n, 3)}}, {"r"}, {}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return t0;
  }

  std::unique_ptr<LocalCluster> cluster_;
  TlsCredentials client_tls_;  // for Connect; none by default
};

// Workers x algorithms x sizes: the mean, the same bytes on every worker,
// over two steps (the second run of the instance meets the second).
TEST_F(CollectiveClusterTest, AllReduceIsTheMeanAndBitIdenticalOnEveryWorker) {
  struct Case {
    int workers;
    std::string hint;
    int64_t elements;
  };
  const Case cases[] = {{2, "auto", 256},
                        {4, "auto", 1000},
                        {3, "auto", 5000},
                        {2, "ring", 256},
                        {4, "recursive_doubling", 77},
                        {2, "auto", 1 << 20},
                        {3, "ring", (3 << 20) + 7}};
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.workers, " workers, ", c.hint, ", ", c.elements, " floats"));
    StartCluster(c.workers);
    std::vector<std::unique_ptr<Session>> sessions;
    for (int k = 0; k < c.workers; ++k) sessions.push_back(Connect(k, Graph(k, c.workers, c.hint)));
    for (int step = 0; step < 2; ++step) {
      std::vector<Tensor> inputs;
      for (int k = 0; k < c.workers; ++k) inputs.push_back(Random(c.elements, 100 * step + k));
      auto out = RunAll(sessions, inputs);
      for (int k = 0; k < c.workers; ++k) {
        ASSERT_TRUE(out[k].ok()) << "worker " << k << ": " << out[k].status();
        ASSERT_EQ(out[k]->NumElements(), c.elements);
        EXPECT_EQ(std::memcmp(out[k]->raw_data(), out[0]->raw_data(), c.elements * 4), 0)
            << "worker " << k << " differs from worker 0";
      }
      for (int64_t i = 0; i < c.elements; i += 997) {
        double sum = 0;
        for (int k = 0; k < c.workers; ++k) sum += inputs[k].base<float>()[i];
        EXPECT_NEAR(out[0]->base<float>()[i], sum / c.workers, 1e-4) << "element " << i;
      }
    }
    sessions.clear();
    cluster_->StopAll();
  }
}

// Recursive doubling pushes its pieces: over the data channel, over gRPC
// when the data channel is off, or (collective_push off) by request and
// answer. Every way gives the same bit-identical mean.
TEST_F(CollectiveClusterTest, DoublingPushesOverEitherTransportOrPulls) {
  struct Case {
    const char* name;
    DataChannelMode data_channel;
    bool push;
  };
  for (const Case& c : {Case{"data channel", DataChannelMode::kPreferred, true},
                        Case{"gRPC", DataChannelMode::kOff, true},
                        Case{"pull", DataChannelMode::kPreferred, false}}) {
    SCOPED_TRACE(c.name);
    StartCluster(4, [&](ServerOptions& o) {
      o.data_channel = c.data_channel;
      o.collective_push = c.push;
    });
    std::vector<std::unique_ptr<Session>> sessions;
    for (int k = 0; k < 4; ++k) sessions.push_back(Connect(k, Graph(k, 4, "auto")));
    std::vector<Tensor> inputs;
    for (int k = 0; k < 4; ++k) inputs.push_back(Random(300, 40 + k));
    auto out = RunAll(sessions, inputs);
    for (int k = 0; k < 4; ++k) {
      ASSERT_TRUE(out[k].ok()) << "worker " << k << ": " << out[k].status();
      EXPECT_EQ(std::memcmp(out[k]->raw_data(), out[0]->raw_data(), 300 * 4), 0) << k;
      // Two rounds of doubling: one piece to each of two partners.
      EXPECT_EQ(cluster_->server("worker", k)->collectives()->num_pushed(), c.push ? 2 : 0) << k;
    }
    for (int64_t i = 0; i < 300; ++i) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += inputs[k].base<float>()[i];
      ASSERT_NEAR(out[0]->base<float>()[i], sum / 4, 1e-4) << "element " << i;
    }
    sessions.clear();
    cluster_->StopAll();
  }
}

// A member that pulls while the others push would wait forever for pieces
// nobody sends: the members agree on the transport first, and the one
// that differs is InvalidArgument naming its device.
TEST_F(CollectiveClusterTest, APullingMemberAmongPushersIsInvalidArgument) {
  StartCluster(2);
  cluster_->server("worker", 1)->collectives()->set_push(false);
  std::vector<std::unique_ptr<Session>> sessions;
  sessions.push_back(Connect(0, Graph(0, 2, "auto")));
  sessions.push_back(Connect(1, Graph(1, 2, "auto")));
  auto out = RunAll(sessions, {Random(8, 1), Random(8, 2)});
  for (int k = 0; k < 2; ++k) {
    ASSERT_FALSE(out[k].ok()) << "worker " << k;
    EXPECT_EQ(out[k].status().code(), absl::StatusCode::kInvalidArgument) << out[k].status();
    EXPECT_THAT(std::string(out[k].status().message()),
                HasSubstr("device /job:worker/replica:0/task:1/device:CPU:0 has float[8]"))
        << out[k].status();
    EXPECT_THAT(std::string(out[k].status().message()), HasSubstr(" pull"));
  }
  sessions.clear();
  cluster_->StopAll();
}

// A member whose collectives stop while it lives (its run timed out)
// tells its peers: worker 0, waiting on another instance with a minute to
// go, fails within seconds with worker 1's status, naming worker 1.
TEST_F(CollectiveClusterTest, AFailedMemberTellsItsWaitingPeers) {
  StartCluster(2);
  auto s0 = Connect(0, Graph(0, 2, "auto", /*instance=*/2));
  auto s1 = Connect(1, Graph(1, 2, "auto", /*instance=*/1, "DT_FLOAT", /*timeout_seconds=*/0.5));
  absl::StatusOr<std::vector<Tensor>> r0 = absl::UnknownError("not run");
  std::thread t0([&] { r0 = s0->Run({{"x", Random(8, 1)}}, {"r"}, {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  auto r1 = s1->Run({{"x", Random(8, 2)}}, {"r"}, {});
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kDeadlineExceeded) << r1.status();
  t0.join();
  if (!kSanitized) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
  ASSERT_FALSE(r0.ok());
  EXPECT_EQ(r0.status().code(), absl::StatusCode::kDeadlineExceeded) << r0.status();
  EXPECT_THAT(std::string(r0.status().message()),
              HasSubstr("task /job:worker/replica:0/task:1: collectives stopped after a failure"));
  cluster_->StopAll();
}

// A pushed piece the receiver cannot keep (here: one that could not be
// allocated) was written as OK for its sender: the receiver aborts, fails
// its waiting run, and tells the sender, whose next run fails at once.
TEST_F(CollectiveClusterTest, ARefusedPieceAbortsTheReceiverAndTellsItsPeers) {
  StartCluster(2);
  std::vector<std::unique_ptr<Session>> both;
  absl::StatusOr<std::vector<Tensor>> r0 = absl::UnknownError("not run");
  std::thread t0 = WorkerZeroWaitsAlone(&both, 8, &r0);
  absl::Status refused =
      cluster_->server("worker", 0)->collectives()->Deliver("collective;buf;7;1;1;rd0;1", Tensor());
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  t0.join();
  ASSERT_FALSE(r0.ok());
  EXPECT_EQ(r0.status().code(), absl::StatusCode::kResourceExhausted) << r0.status();
  // Worker 1 heard of it: its next run fails at once, with worker 0's status.
  const auto start = std::chrono::steady_clock::now();
  auto r1 = both[1]->Run({{"x", Random(8, 4)}}, {"r"}, {});
  ASSERT_FALSE(r1.ok());
  if (!kSanitized) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kResourceExhausted) << r1.status();
  EXPECT_THAT(std::string(r1.status().message()), HasSubstr("could not be allocated"));
  both.clear();
  cluster_->StopAll();
}

// One fetcher per piece: a second fetch of a piece still awaited is
// AlreadyExists at once, and the first stays within reach of its cancel
// (overwriting it left that call unanswered for good, and the first's
// cancel then failed the second).
TEST_F(CollectiveClusterTest, ASecondFetchOfAnAwaitedPieceIsAlreadyExists) {
  StartCluster(2);
  RemoteCollectives* rc = cluster_->server("worker", 0)->collectives();
  const std::string key = "collective;buf;7;1;1;ring0;1";
  struct Fetch {
    CallOptions opts;
    RecvTensorResult out;
    Notification done;
    absl::Status status;
  };
  auto serve = [&](Fetch* f) {
    rc->Serve(key, &f->opts, &f->out, [f](const absl::Status& s) {
      f->status = s;
      f->done.Notify();
    });
  };
  Fetch first, second, third;
  serve(&first);
  EXPECT_FALSE(first.done.HasBeenNotified());
  serve(&second);
  ASSERT_TRUE(second.done.HasBeenNotified());
  EXPECT_EQ(second.status.code(), absl::StatusCode::kAlreadyExists) << second.status;
  EXPECT_THAT(std::string(second.status.message()), HasSubstr(key));
  first.opts.StartCancel();
  ASSERT_TRUE(first.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(first.status.code(), absl::StatusCode::kCancelled) << first.status;
  // The piece is free to fetch again.
  serve(&third);
  EXPECT_FALSE(third.done.HasBeenNotified());
  third.opts.StartCancel();
  ASSERT_TRUE(third.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(third.status.code(), absl::StatusCode::kCancelled) << third.status;
  cluster_->StopAll();
}

// The leader's group joins and instance waits end when their calls are
// cancelled (a member whose step gave up), before or while they wait; a
// cancelled member stays in its group, so its next join is answered.
TEST_F(CollectiveClusterTest, LeaderWaitsEndWhenTheirCallsAreCancelled) {
  StartCluster(2);
  RemoteCollectives* rc = cluster_->server("worker", 0)->collectives();
  const std::string dev0 = "/job:worker/replica:0/task:0/device:CPU:0";
  const std::string dev1 = "/job:worker/replica:0/task:1/device:CPU:0";
  struct Wait {
    CallOptions opts;
    RecvTensorResult out;
    Notification done;
    absl::Status status;
  };
  auto serve = [&](const std::string& key, Wait* w) {
    rc->Serve(key, &w->opts, &w->out, [w](const absl::Status& s) {
      w->status = s;
      w->done.Notify();
    });
  };
  auto text = [](const Wait& w) {
    return std::string(w.out.tensor.raw_data(), w.out.tensor.TotalBytes());
  };
  Wait join0, join1, rejoin0, inst, early;
  serve("collective;join;5;2;" + dev0, &join0);
  EXPECT_FALSE(join0.done.HasBeenNotified());
  join0.opts.StartCancel();
  ASSERT_TRUE(join0.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(join0.status.code(), absl::StatusCode::kCancelled) << join0.status;
  serve("collective;join;5;2;" + dev1, &join1);
  ASSERT_TRUE(join1.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(join1.status.ok()) << join1.status;
  EXPECT_EQ(text(join1), dev0 + "\n" + dev1);
  serve("collective;join;5;2;" + dev0, &rejoin0);
  ASSERT_TRUE(rejoin0.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(rejoin0.status.ok()) << rejoin0.status;
  EXPECT_EQ(text(rejoin0), dev0 + "\n" + dev1);
  // An instance of the formed group that one member asked for.
  const std::string inst_key = "collective;inst;5;3;0;2;" + dev0 + ";a;0;;float[4]";
  serve(inst_key, &inst);
  EXPECT_FALSE(inst.done.HasBeenNotified());
  inst.opts.StartCancel();
  ASSERT_TRUE(inst.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(inst.status.code(), absl::StatusCode::kCancelled) << inst.status;
  // Cancelled before it asked: refused at once, never waiting.
  early.opts.StartCancel();
  serve(inst_key, &early);
  ASSERT_TRUE(early.done.HasBeenNotified());
  EXPECT_EQ(early.status.code(), absl::StatusCode::kCancelled) << early.status;
  cluster_->StopAll();
}

// Under mutual TLS the collectives' pieces cross the data channel's TLS
// streams (same-host reads off, as between hosts): ring and recursive
// doubling give the mean, the same bytes on both workers.
TEST_F(CollectiveClusterTest, AllReduceOverMutualTls) {
  const std::string dir = ::testing::TempDir() + "/collective_tls_certs";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(MakeClusterCertificates(dir, {"127.0.0.1"}, 1).ok());
  auto tls = LoadTlsCredentials(dir + "/ca.crt", dir + "/127.0.0.1.crt", dir + "/127.0.0.1.key");
  ASSERT_TRUE(tls.ok()) << tls.status();
  setenv("GRAPHRUN_SAME_HOST_READS", "0", 1);
  StartCluster(2, [&](ServerOptions& o) { o.tls = *tls; });
  unsetenv("GRAPHRUN_SAME_HOST_READS");
  client_tls_ = *tls;
  int instance = 0;
  for (const char* hint : {"ring", "recursive_doubling"}) {
    SCOPED_TRACE(hint);
    ++instance;
    std::vector<std::unique_ptr<Session>> sessions;
    for (int k = 0; k < 2; ++k) sessions.push_back(Connect(k, Graph(k, 2, hint, instance)));
    ASSERT_TRUE(sessions[0] && sessions[1]);
    const int64_t n = 100000;  // 400 KB: over the data channel's socket
    std::vector<Tensor> inputs = {Random(n, 71), Random(n, 72)};
    auto out = RunAll(sessions, inputs);
    for (int k = 0; k < 2; ++k) ASSERT_TRUE(out[k].ok()) << k << ": " << out[k].status();
    EXPECT_EQ(std::memcmp(out[0]->raw_data(), out[1]->raw_data(), n * 4), 0);
    for (int64_t i = 0; i < n; i += 997) {
      ASSERT_NEAR(out[0]->base<float>()[i],
                  (inputs[0].base<float>()[i] + inputs[1].base<float>()[i]) / 2, 1e-3)
          << i;
    }
  }
  client_tls_ = TlsCredentials();
  cluster_->StopAll();
}

// The leader keeps at most kMaxLeaderGroups groups of kMaxGroupSize
// devices and kMaxLeaderInstances instances waiting for members: a member
// naming new ones without end is refused, and what it already has works.
TEST_F(CollectiveClusterTest, LeaderTablesAreBounded) {
  StartCluster(2);
  RemoteCollectives* rc = cluster_->server("worker", 0)->collectives();
  const std::string dev0 = "/job:worker/replica:0/task:0/device:CPU:0";
  const std::string dev1 = "/job:worker/replica:0/task:1/device:CPU:0";
  std::deque<CallOptions> opts;
  std::deque<RecvTensorResult> outs;
  std::atomic<int> answered{0};
  std::mutex mu;
  absl::Status last;  // the latest answer (guarded by mu)
  auto serve = [&](const std::string& key) {
    opts.emplace_back();
    outs.emplace_back();
    rc->Serve(key, &opts.back(), &outs.back(), [&](const absl::Status& s) {
      std::lock_guard<std::mutex> l(mu);
      last = s;
      answered.fetch_add(1);
    });
  };
  serve(absl::StrCat("collective;join;1;", RemoteCollectives::kMaxGroupSize + 1, ";", dev0));
  ASSERT_EQ(answered.load(), 1);
  EXPECT_EQ(last.code(), absl::StatusCode::kInvalidArgument) << last;
  EXPECT_THAT(std::string(last.message()), HasSubstr("group_size 65537 is over the limit"));

  // Groups 0..N-1 of two devices, each waiting for its second member.
  const int groups = static_cast<int>(RemoteCollectives::kMaxLeaderGroups);
  for (int g = 0; g < groups; ++g) serve(absl::StrCat("collective;join;", g, ";2;", dev0));
  EXPECT_EQ(answered.load(), 1);
  serve(absl::StrCat("collective;join;", groups, ";2;", dev0));
  ASSERT_EQ(answered.load(), 2);
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted) << last;
  EXPECT_THAT(std::string(last.message()), HasSubstr("holds 65536 groups"));
  // A group the leader has still forms.
  serve("collective;join;7;2;" + dev1);
  ASSERT_EQ(answered.load(), 4);  // both members of group 7
  EXPECT_TRUE(last.ok()) << last;

  // Instances of group 7, each waiting for dev1.
  const int instances = static_cast<int>(RemoteCollectives::kMaxLeaderInstances);
  for (int i = 0; i < instances; ++i) {
    serve(absl::StrCat("collective;inst;7;", i, ";0;2;", dev0, ";a;0;;float[4]"));
  }
  EXPECT_EQ(answered.load(), 4);
  serve(absl::StrCat("collective;inst;7;", instances, ";0;2;", dev0, ";a;0;;float[4]"));
  ASSERT_EQ(answered.load(), 5);
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted) << last;
  EXPECT_THAT(std::string(last.message()), HasSubstr("holds 65536 instances waiting"));
  // One the leader has still resolves.
  serve("collective;inst;7;3;0;2;" + dev1 + ";a;0;;float[4]");
  ASSERT_EQ(answered.load(), 7);
  EXPECT_TRUE(last.ok()) << last;
  EXPECT_EQ(std::string(outs.back().tensor.raw_data(), outs.back().tensor.TotalBytes()), "ok");
  // Pieces pushed ahead of their runs: empty ones count too. The one past
  // the limit is refused, which aborts the task's collectives (answering
  // every waiter above).
  const int pieces = static_cast<int>(RemoteCollectives::kMaxInboxPieces);
  for (int k = 0; k < pieces; ++k) {
    absl::Status d = rc->Deliver(absl::StrCat("collective;buf;9;1;1;rd", k, ";1"),
                                 Tensor(DT_FLOAT, TensorShape({0})));
    ASSERT_TRUE(d.ok()) << k << ": " << d;
  }
  absl::Status over =
      rc->Deliver("collective;buf;9;1;1;late;1", Tensor(DT_FLOAT, TensorShape({0})));
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_THAT(std::string(over.message()), HasSubstr("65536 collective pieces pushed ahead"));
  EXPECT_EQ(answered.load(), 7 + (groups - 1) + (instances - 1));
  cluster_->StopAll();
}

// Worker k's graph for gather / broadcast (sender: worker 0).
std::string GatherGraph(int k, int group_size) {
  const std::string dev = absl::StrCat("/job:worker/replica:0/task:", k, "/device:CPU:0");
  return absl::StrCat(
      R"(node { name: "x" op: "Placeholder" device: ")", dev,
      R"(" attr { key: "dtype" value { type: DT_FLOAT } } }
         node { name: "shape" op: "Const" device: ")",
      dev,
      R"(" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }
                  int_val: 2 int_val: 3 } } } })",
      "\n", IntConst(dev, "size", group_size), IntConst(dev, "key", 9), IntConst(dev, "gi", 1),
      IntConst(dev, "bi", 2), R"(node { name: "g" op: "CollectiveGatherV2" device: ")", dev,
      R"(" input: "x" input: "size" input: "key" input: "gi"
         attr { key: "T" value { type: DT_FLOAT } } attr { key: "timeout_seconds" value { f: 60 } } }
      )",
      k == 0 ? absl::StrCat(R"(node { name: "b" op: "CollectiveBcastSendV2" device: ")", dev,
                            R"(" input: "x" input: "size" input: "key" input: "bi"
                   attr { key: "T" value { type: DT_FLOAT } } })")
             : absl::StrCat(R"(node { name: "b" op: "CollectiveBcastRecvV2" device: ")", dev,
                            R"(" input: "size" input: "key" input: "bi" input: "shape"
                   attr { key: "T" value { type: DT_FLOAT } } })"));
}

// Across 3 tasks: gather concatenates the pieces (of different row counts)
// in rank order; broadcast delivers worker 0's tensor to the others.
TEST_F(CollectiveClusterTest, GatherAndBroadcastAcrossTasks) {
  StartCluster(3);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int k = 0; k < 3; ++k) sessions.push_back(Connect(k, GatherGraph(k, 3)));
  // Worker k > 0 feeds k + 1 rows of 3, row i all 10 k + i; worker 0 two
  // rows 1..6.
  std::vector<absl::StatusOr<std::vector<Tensor>>> out(3, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k) {
    threads.emplace_back([&, k] {
      Tensor x(DT_FLOAT, TensorShape({k + 1, 3}));
      for (int64_t i = 0; i < x.NumElements(); ++i) x.base<float>()[i] = 10 * k + i / 3;
      if (k == 0) x = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
      out[k] = sessions[k]->Run({{"x", x}}, {"g", "b"}, {});
    });
  }
  for (auto& t : threads) t.join();
  // Worker 0 feeds 2 rows (1..6): rows 0 + 2 + 3 = 7 in all.
  const std::vector<float> gathered = {1,  2,  3,  4,  5,  6,  10, 10, 10, 11, 11,
                                       11, 20, 20, 20, 21, 21, 21, 22, 22, 22};
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(out[k].ok()) << "worker " << k << ": " << out[k].status();
    const Tensor& g = (*out[k])[0];
    EXPECT_EQ(g.shape(), TensorShape({7, 3})) << "worker " << k;
    EXPECT_EQ(std::vector<float>(g.base<float>(), g.base<float>() + g.NumElements()), gathered)
        << "worker " << k;
    const Tensor& b = (*out[k])[1];
    EXPECT_EQ(b.shape(), TensorShape({2, 3}));
    EXPECT_EQ(std::vector<float>(b.base<float>(), b.base<float>() + 6),
              (std::vector<float>{1, 2, 3, 4, 5, 6}))
        << "worker " << k;
  }
  sessions.clear();
  cluster_->StopAll();
}

// A member that says another group size gets InvalidArgument naming its
// device (from the leader).
TEST_F(CollectiveClusterTest, WrongGroupSizeIsInvalidArgumentNamingTheDevice) {
  StartCluster(2);
  auto s0 = Connect(0, Graph(0, 2, "auto"));
  auto s1 = Connect(1, Graph(1, 3, "auto"));
  std::thread t0([&] { (void)s0->Run({{"x", Random(8, 1)}}, {"r"}, {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r1 = s1->Run({{"x", Random(8, 2)}}, {"r"}, {});
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kInvalidArgument) << r1.status();
  EXPECT_THAT(std::string(r1.status().message()),
              HasSubstr("group 7 has group_size 2 (set by its first member) but device "
                        "/job:worker/replica:0/task:1/device:CPU:0 says 3"));
  cluster_->StopAll();  // ends worker 0's wait
  t0.join();
}

// Members that disagree on the size (which would pick different
// algorithms) fail with InvalidArgument naming the device, with no
// timeout set: they agree at the leader before exchanging anything.
TEST_F(CollectiveClusterTest, MembersOfDifferentSizesAreInvalidArgument) {
  StartCluster(2);
  std::vector<std::unique_ptr<Session>> sessions;
  sessions.push_back(Connect(0, Graph(0, 2, "auto")));
  sessions.push_back(Connect(1, Graph(1, 2, "auto")));
  auto out = RunAll(sessions, {Random(8, 1), Random(100000, 2)});
  for (int k = 0; k < 2; ++k) {
    ASSERT_FALSE(out[k].ok()) << "worker " << k;
    EXPECT_EQ(out[k].status().code(), absl::StatusCode::kInvalidArgument) << out[k].status();
    EXPECT_THAT(std::string(out[k].status().message()),
                HasSubstr("device /job:worker/replica:0/task:1/device:CPU:0 has float[100000]"))
        << out[k].status();
  }
  sessions.clear();
  cluster_->StopAll();
}

// Worker 1 stops while worker 0 waits in the all-reduce: worker 0's step
// fails promptly with Unavailable naming worker 1.
TEST_F(CollectiveClusterTest, StoppedPeerFailsTheCollectiveNamingIt) {
  StartCluster(2);
  std::vector<std::unique_ptr<Session>> both;
  absl::StatusOr<std::vector<Tensor>> r0 = absl::UnknownError("not run");
  std::thread t0 = WorkerZeroWaitsAlone(&both, 64, &r0);
  const auto stopped = std::chrono::steady_clock::now();
  cluster_->StopTask("worker", 1);
  t0.join();
  const auto took = std::chrono::steady_clock::now() - stopped;
  ASSERT_FALSE(r0.ok());
  EXPECT_EQ(r0.status().code(), absl::StatusCode::kUnavailable) << r0.status();
  EXPECT_THAT(std::string(r0.status().message()), HasSubstr("/job:worker/replica:0/task:1"));
  if (!kSanitized) {
    EXPECT_LT(took, std::chrono::seconds(5));
  }
  both.clear();
  cluster_->StopAll();
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
