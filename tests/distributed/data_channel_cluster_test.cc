// RecvTensor over the data channel in real (in-process) clusters: tensors
// fed on the master (worker:1) and relayed through ps:0 and worker:0 back
// to it arrive bit-exact over the channel, a
// peer that offers no channel is reached over gRPC, and a peer stopped
// mid-step ends the step with Unavailable naming it, promptly.
#include <chrono>
#include <future>

#include "distributed/local_cluster.h"
#include "distributed/rpc/data_channel_testlib.h"
#include "distributed/rpc/grpc_session.h"
#include "distributed/rpc/grpc_worker_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/session.h"
#include "tests/distributed/test_graphs.h"
#include "tests/sanitizers.h"

namespace graphrun {
namespace distributed {
namespace {

using distributed::test::RandomBytes;
using ::testing::HasSubstr;

constexpr char kPs0[] = "/job:ps/task:0";
constexpr char kWk0[] = "/job:worker/task:0";

// ps:0 + worker:0 + worker:1 on free loopback ports, each with its own
// data channel mode.
class Cluster {
 public:
  absl::Status Start(DataChannelMode ps, DataChannelMode workers) {
    ClusterSpec placeholder;
    placeholder.AddTask("ps", "127.0.0.1:0");
    placeholder.AddTask("worker", "127.0.0.1:0");
    placeholder.AddTask("worker", "127.0.0.1:0");
    const std::pair<std::string, int> tasks[] = {{"ps", 0}, {"worker", 0}, {"worker", 1}};
    for (const auto& [job, task] : tasks) {
      ServerOptions o;
      o.cluster = placeholder;
      o.job = job;
      o.task = task;
      o.port = 0;
      o.intra_op_threads = 1;
      o.inter_op_threads = 2;
      o.data_channel = job == "ps" ? ps : workers;
      auto s = GrpcServer::Create(o);
      if (!s.ok()) return s.status();
      absl::Status st = (*s)->Start();
      if (!st.ok()) return st;
      spec_.AddTask(job, absl::StrCat("127.0.0.1:", (*s)->bound_port()));
      servers_[{job, task}] = std::move(*s);
    }
    for (auto& [k, s] : servers_) s->UpdateCluster(spec_);
    return absl::OkStatus();
  }
  GrpcServer* server(const std::string& job, int task) { return servers_[{job, task}].get(); }
  void Stop(const std::string& job, int task) { servers_.erase({job, task}); }
  std::unique_ptr<Session> Connect(const std::string& job, int task) {
    SessionOptions so;
    so.target = server(job, task)->target();
    auto s = NewSession(so);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

 private:
  ClusterSpec spec_;
  std::map<std::pair<std::string, int>, std::unique_ptr<GrpcServer>> servers_;
};

class DataChannelClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { RegisterGrpcSession(); }
};

TEST_F(DataChannelClusterTest, RelayOverTheChannelIsBitExact) {
  Cluster c;
  ASSERT_TRUE(c.Start(DataChannelMode::kRequired, DataChannelMode::kRequired).ok());
  EXPECT_GT(c.server("ps", 0)->data_port(), 0);
  auto s = c.Connect("worker", 1);
  ASSERT_TRUE(s->Create(graphrun::test::RelayGraph("", kPs0, kWk0, "DT_UINT8")).ok());
  for (int64_t n : {int64_t{1} << 10, int64_t{64} << 20, int64_t{1} << 10}) {
    Tensor x = RandomBytes(n, static_cast<uint32_t>(n));
    auto r = s->Run({{"x", x}}, {"b"});
    ASSERT_TRUE(r.ok()) << n << ": " << r.status();
    EXPECT_TRUE(graphrun::test::BitEqual((*r)[0], x)) << n;
  }
  // The feed lives on the master: ps:0 pulled from worker:1, worker:0
  // from ps:0, worker:1 from worker:0 — only on the channel.
  for (auto [job, task] : {std::pair<const char*, int>{"ps", 0}, {"worker", 0}, {"worker", 1}}) {
    auto counts = c.server(job, task)->recv_tensor_counts();
    EXPECT_EQ(counts.data_channel, 3) << job << task;
    EXPECT_EQ(counts.grpc, 0) << job << task;
  }
}

TEST_F(DataChannelClusterTest, PeerWithoutChannelIsReachedOverGrpc) {
  Cluster c;
  ASSERT_TRUE(c.Start(DataChannelMode::kOff, DataChannelMode::kPreferred).ok());
  EXPECT_EQ(c.server("ps", 0)->data_port(), 0);
  auto s = c.Connect("worker", 1);
  ASSERT_TRUE(s->Create(graphrun::test::RelayGraph("", kPs0, kWk0, "DT_UINT8")).ok());
  for (int i = 0; i < 2; ++i) {
    Tensor x = RandomBytes(int64_t{3} << 20, 9 + i);
    auto r = s->Run({{"x", x}}, {"b"});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(graphrun::test::BitEqual((*r)[0], x));
  }
  auto from_ps = c.server("worker", 0)->recv_tensor_counts();
  EXPECT_EQ(from_ps.data_channel, 0);
  EXPECT_EQ(from_ps.grpc, 2);
  auto from_wk0 = c.server("worker", 1)->recv_tensor_counts();
  EXPECT_EQ(from_wk0.data_channel, 2);
  EXPECT_EQ(from_wk0.grpc, 0);
}

TEST_F(DataChannelClusterTest, StaleIncarnationIsRejectedOnTheChannel) {
  // What a peer that planned against a previous incarnation of ps:0 asks
  // for: a key whose incarnation is not the device's.
  Cluster c;
  ASSERT_TRUE(c.Start(DataChannelMode::kRequired, DataChannelMode::kRequired).ok());
  const std::string address = absl::StrCat("127.0.0.1:", c.server("ps", 0)->bound_port());
  ChannelOptions o;
  o.data_channel = DataChannelMode::kRequired;
  GrpcWorkerClient client("/job:ps/replica:0/task:0", address, NewChannel(address, o), o);
  RecvTensorRequest req;
  req.set_step_id(1234);
  req.set_rendezvous_key(
      "/job:ps/replica:0/task:0/device:CPU:0;0000000000000001;"
      "/job:worker/replica:0/task:0/device:CPU:0;edge;0:0");
  RecvTensorResult result;
  absl::Status st = CallAndWait(
      [&](StatusCallback done) { client.RecvTensorAsync(nullptr, req, &result, done); });
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("task /job:ps/replica:0/task:0"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("restarted"));
  EXPECT_EQ(client.recv_tensor_counts().data_channel, 1);
}

TEST_F(DataChannelClusterTest, PeerStoppedMidStepIsUnavailableNamingIt) {
  Cluster c;
  ASSERT_TRUE(c.Start(DataChannelMode::kRequired, DataChannelMode::kRequired).ok());
  auto s = c.Connect("worker", 1);
  tensorflow::GraphDef g = graphrun::test::InfiniteLoopGraph(kPs0);
  auto* out = g.add_node();
  out->set_name("out");
  out->set_op("Identity");
  out->add_input("w/Exit");
  out->set_device(kWk0);
  (*out->mutable_attr())["T"].set_type(tensorflow::DT_INT32);
  ASSERT_TRUE(s->Create(g).ok());
  auto run = std::async(std::launch::async, [&] { return s->Run({}, {"out"}).status(); });
  // worker:0 is now waiting on the channel for ps:0's never-coming tensor.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (c.server("worker", 0)->recv_tensor_counts().data_channel == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(c.server("worker", 0)->recv_tensor_counts().data_channel, 1);
  auto stopped = std::chrono::steady_clock::now();
  c.Stop("ps", 0);
  ASSERT_EQ(run.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  if (!kSanitized) {
    EXPECT_LT(std::chrono::steady_clock::now() - stopped, std::chrono::seconds(5));
  }
  absl::Status st = run.get();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("/job:ps/replica:0/task:0"));
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
