// The data channel against a FakeRecvWorker: bit-exact tensors, dead
// tensors, the serving side's errors, cancellation, size limits, and a
// peer process killed mid-call (Unavailable naming it, promptly).
#include "distributed/rpc/data_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

#include "distributed/rpc/data_channel_testlib.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;
constexpr char kWho[] = "task /job:ps/replica:0/task:0 (127.0.0.1:1)";

Tensor RandomBytes(int64_t n, uint32_t seed) {
  Tensor t(DT_UINT8, TensorShape({n}));
  std::mt19937 gen(seed);
  auto* p = reinterpret_cast<uint32_t*>(t.raw_data());
  for (int64_t i = 0; i < n / 4; ++i) p[i] = gen();
  for (int64_t i = n / 4 * 4; i < n; ++i) t.raw_data()[i] = static_cast<char>(gen());
  return t;
}

// Calls RecvTensor for `key` and waits (bounded) for the answer.
absl::Status Recv(DataConnection& c, const std::string& key, RecvTensorResult* result,
                  CallOptions* opts = nullptr) {
  RecvTensorRequest req;
  req.set_step_id(7);
  req.set_rendezvous_key(key);
  return CallAndWait(
      [&](StatusCallback done) { c.RecvTensorAsync(opts, req, result, std::move(done)); });
}

class DataChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    worker_.Add("small", RandomBytes(1024, 1));
    worker_.Add("big", RandomBytes(int64_t{64} << 20, 2));
    worker_.Add(
        "f32", Tensor::FromVector<float>({1.5f, -2.0f, 3.25f, 0.f, 7.f, 8.f}, TensorShape({2, 3})));
    auto s = DataChannelServer::Start(&worker_, "127.0.0.1", DataChannelOptions());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    auto c = DataConnection::Connect("127.0.0.1", server_->port(), kWho, DataChannelOptions());
    ASSERT_TRUE(c.ok()) << c.status();
    conn_ = *c;
  }

  test::FakeRecvWorker worker_;
  std::unique_ptr<DataChannelServer> server_;
  std::shared_ptr<DataConnection> conn_;
};

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape().dim_sizes() == b.shape().dim_sizes() &&
         a.TotalBytes() == b.TotalBytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

TEST_F(DataChannelTest, SmallAndLargeTensorsAreBitExact) {
  for (const char* name : {"small", "big", "f32", "small"}) {
    RecvTensorResult r;
    ASSERT_TRUE(Recv(*conn_, absl::StrCat("t:", name), &r).ok()) << name;
    Tensor want;
    RecvTensorResult direct;
    RecvTensorRequest req;
    req.set_rendezvous_key(absl::StrCat("t:", name));
    worker_.RecvTensorAsync(nullptr, req, &direct, [](const absl::Status&) {});
    EXPECT_FALSE(r.is_dead);
    EXPECT_TRUE(SameBytes(r.tensor, direct.tensor)) << name;
    EXPECT_FALSE(r.tensor.SharesBufferWith(direct.tensor));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.tensor.raw_data()) % TensorBuffer::kAlignment, 0u);
  }
  EXPECT_EQ(server_->num_requests(), 4);
}

TEST_F(DataChannelTest, ConcurrentCallsShareTheConnection) {
  constexpr int kCalls = 64;
  std::vector<RecvTensorResult> results(kCalls);
  std::vector<absl::Status> statuses(kCalls);
  std::mutex mu;
  std::condition_variable cv;
  int left = kCalls;
  RecvTensorRequest req;
  for (int i = 0; i < kCalls; ++i) {
    req.set_rendezvous_key(i % 8 == 0 ? "t:big" : "t:small");
    conn_->RecvTensorAsync(nullptr, req, &results[i], [&, i](const absl::Status& s) {
      std::lock_guard<std::mutex> l(mu);
      statuses[i] = s;
      if (--left == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] { return left == 0; }));
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i];
    EXPECT_EQ(results[i].tensor.TotalBytes(), i % 8 == 0 ? int64_t{64} << 20 : 1024);
  }
}

TEST_F(DataChannelTest, DeadTensorAndServingErrorsTravelAsOnGrpc) {
  RecvTensorResult r;
  ASSERT_TRUE(Recv(*conn_, "dead", &r).ok());
  EXPECT_TRUE(r.is_dead);
  absl::Status s = Recv(*conn_, "stale", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("task /job:ps/replica:0/task:0 was restarted"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(kWho));
  s = Recv(*conn_, "t:nothing", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // The connection is still good.
  EXPECT_TRUE(Recv(*conn_, "t:small", &r).ok());
}

TEST_F(DataChannelTest, CancelEndsTheCallAndTheServersWait) {
  CallOptions opts;
  RecvTensorResult r;
  RecvTensorRequest req;
  req.set_rendezvous_key("hang");
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;
  conn_->RecvTensorAsync(&opts, req, &r, [&](const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu);
    status = s;
    done = true;
    cv.notify_all();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  opts.StartCancel();
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(5), [&] { return done; }));
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (worker_.num_cancelled() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(worker_.num_cancelled(), 1);
  EXPECT_TRUE(Recv(*conn_, "t:small", &r).ok());
}

TEST_F(DataChannelTest, TimeoutIsDeadlineExceeded) {
  CallOptions opts;
  opts.set_timeout_ms(200);
  RecvTensorResult r;
  auto start = std::chrono::steady_clock::now();
  absl::Status s = Recv(*conn_, "hang", &r, &opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(kWho));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST_F(DataChannelTest, OversizedTensorIsResourceExhaustedAndDrained) {
  DataChannelOptions o;
  o.max_tensor_bytes = 4096;
  auto c = DataConnection::Connect("127.0.0.1", server_->port(), kWho, o);
  ASSERT_TRUE(c.ok());
  RecvTensorResult r;
  absl::Status s = Recv(**c, "t:big", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_recv_tensor_bytes"));
  ASSERT_TRUE(Recv(**c, "t:small", &r).ok());
  EXPECT_EQ(r.tensor.TotalBytes(), 1024);
}

TEST_F(DataChannelTest, ServerStopIsUnavailableNamingThePeer) {
  RecvTensorResult r;
  RecvTensorRequest req;
  req.set_rendezvous_key("hang");
  CallOptions opts;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;
  conn_->RecvTensorAsync(&opts, req, &r, [&](const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu);
    status = s;
    done = true;
    cv.notify_all();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server_->Stop();
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(5), [&] { return done; }));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(kWho));
  EXPECT_TRUE(conn_->broken());
  l.unlock();
  EXPECT_EQ(Recv(*conn_, "t:small", &r).code(), absl::StatusCode::kUnavailable);
}

// A port held bound but not listening refuses connections, and no other
// process can take it meanwhile (a stopped server's port could be reused).
TEST_F(DataChannelTest, ConnectRefusedIsUnavailableNamingThePeer) {
  int held = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(held, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(getsockname(held, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  auto c = DataConnection::Connect("127.0.0.1", port, kWho, DataChannelOptions());
  close(held);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(kWho));
}

// A real peer process, killed with SIGKILL while the call waits.
TEST(DataChannelKillTest, KilledPeerIsUnavailableWithinDeadline) {
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    test::FakeRecvWorker worker;
    auto s = DataChannelServer::Start(&worker, "127.0.0.1", DataChannelOptions());
    int port = s.ok() ? (*s)->port() : 0;
    if (write(pipefd[1], &port, sizeof(port)) != sizeof(port)) _exit(1);
    sleep(30);  // killed long before
    _exit(0);
  }
  close(pipefd[1]);
  int port = 0;
  ASSERT_EQ(read(pipefd[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  close(pipefd[0]);
  ASSERT_GT(port, 0);
  auto c = DataConnection::Connect("127.0.0.1", port, kWho, DataChannelOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  RecvTensorResult r;
  RecvTensorRequest req;
  req.set_rendezvous_key("hang");
  CallOptions opts;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;
  (*c)->RecvTensorAsync(&opts, req, &r, [&](const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu);
    status = s;
    done = true;
    cv.notify_all();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto killed = std::chrono::steady_clock::now();
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(5), [&] { return done; }));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(2));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(kWho));
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
