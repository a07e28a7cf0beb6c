// A call gRPC fails without sending it (the channel's connection attempt
// failed) is sent once more, waiting for the channel to connect: a peer
// that starts listening a moment later answers it; a peer that never does
// is reported with the first error, about kConnectRetryMs later.
//
// The peer's port is held by a bound socket that does not listen, so
// connections to it are refused until the server binds the same port
// (SO_REUSEADDR on both, as gRPC sets it on its listeners): no other process
// can take the port in between.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "distributed/protos/worker_service.grpc.pb.h"
#include "distributed/rpc/grpc_server.h"
#include "distributed/rpc/grpc_util.h"
#include "distributed/rpc/grpc_worker_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sanitizers.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr char kTask[] = "/job:worker/replica:0/task:0";

// A loopback port bound (SO_REUSEADDR) but not listening.
class HeldPort {
 public:
  HeldPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return;
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~HeldPort() { close(fd_); }
  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::unique_ptr<GrpcServer> StartServer(const HeldPort& held) {
  ServerOptions so;
  so.cluster.AddTask("worker", held.address());
  so.job = "worker";
  so.task = 0;
  so.port = held.port();
  auto s = GrpcServer::Create(so);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  absl::Status st = (*s)->Start();
  EXPECT_TRUE(st.ok()) << st;
  return st.ok() ? std::move(*s) : nullptr;
}

// Starts the server on the held port after `delay`.
std::future<std::unique_ptr<GrpcServer>> StartLater(const HeldPort& held,
                                                    std::chrono::milliseconds delay) {
  return std::async(std::launch::async, [&held, delay] {
    std::this_thread::sleep_for(delay);
    return StartServer(held);
  });
}

absl::Status Wait(std::future<absl::Status>& f) {
  if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    return absl::DeadlineExceededError("call never completed");
  }
  return f.get();
}

TEST(ConnectRetryTest, GrpcFailsAPlainCallToAPortThatRefusesWithoutSendingIt) {
  // The premise NotSent relies on: gRPC's wording for such a failure.
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  auto stub = WorkerService::NewStub(NewChannel(held.address(), {}));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfterMs(10000));
  GetStatusRequest req;
  GetStatusResponse resp;
  grpc::Status s = stub->GetStatus(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(NotSent(s)) << s.error_message();
  EXPECT_FALSE(NotSent(grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed")));
  EXPECT_FALSE(NotSent(
      grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "failed to connect to all addresses")));
}

TEST(ConnectRetryTest, UnaryCallReachesAPeerThatStartsListeningLater) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  GrpcWorkerClient client(kTask, held.address(), NewChannel(held.address(), {}));
  auto server = StartLater(held, std::chrono::milliseconds(400));
  auto start = Clock::now();
  std::promise<absl::Status> p;
  auto f = p.get_future();
  GetStatusRequest req;
  GetStatusResponse resp;
  client.GetStatusAsync(req, &resp, [&p](const absl::Status& s) { p.set_value(s); });
  absl::Status s = Wait(f);
  EXPECT_TRUE(s.ok()) << s;
  // It waited for the server rather than finding it up.
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
  EXPECT_EQ(resp.task(), kTask);
  auto srv = server.get();
  ASSERT_NE(srv, nullptr);
  srv->Stop();
}

TEST(ConnectRetryTest, RecvTensorReachesAPeerThatStartsListeningLater) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  ChannelOptions co;
  co.data_channel = DataChannelMode::kOff;  // the gRPC stream
  GrpcWorkerClient client(kTask, held.address(), NewChannel(held.address(), co), co);
  auto server = StartLater(held, std::chrono::milliseconds(400));
  std::promise<absl::Status> p;
  auto f = p.get_future();
  RecvTensorRequest req;
  req.set_step_id(7);
  req.set_rendezvous_key("not;a;key");
  RecvTensorResult result;
  CallOptions opts;
  opts.set_timeout_ms(10000);
  client.RecvTensorAsync(&opts, req, &result, [&p](const absl::Status& s) { p.set_value(s); });
  absl::Status s = Wait(f);
  // The server answered: its refusal of the key, not a transport error.
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("not;a;key"));
  auto srv = server.get();
  ASSERT_NE(srv, nullptr);
  srv->Stop();
}

TEST(ConnectRetryTest, BlockingCallReachesAPeerThatStartsListeningLater) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  auto stub = WorkerService::NewStub(NewChannel(held.address(), {}));
  auto server = StartLater(held, std::chrono::milliseconds(400));
  GetStatusRequest req;
  GetStatusResponse resp;
  grpc::Status s = CallWithConnectRetry(DeadlineAfterMs(10000), [&](grpc::ClientContext* ctx) {
    return stub->GetStatus(ctx, req, &resp);
  });
  EXPECT_TRUE(s.ok()) << s.error_message();
  auto srv = server.get();
  ASSERT_NE(srv, nullptr);
  srv->Stop();
}

TEST(ConnectRetryTest, APeerThatNeverListensIsReportedWithTheFirstError) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  GrpcWorkerClient client(kTask, held.address(), NewChannel(held.address(), {}));
  auto start = Clock::now();
  std::promise<absl::Status> p;
  auto f = p.get_future();
  GetStatusRequest req;
  GetStatusResponse resp;
  client.GetStatusAsync(req, &resp, [&p](const absl::Status& s) { p.set_value(s); });
  absl::Status s = Wait(f);
  auto took = Clock::now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(kTask));
  EXPECT_THAT(std::string(s.message()), HasSubstr("failed to connect"));
  EXPECT_GE(took, std::chrono::milliseconds(kConnectRetryMs - 200));
  // Upper bounds only unsanitized (tests/sanitizers.h).
  if (!kSanitized) {
    EXPECT_LT(took, std::chrono::milliseconds(kConnectRetryMs + 3000));
  }

  // A deadline sooner than kConnectRetryMs bounds the retry.
  auto start2 = Clock::now();
  grpc::Status s2 = CallWithConnectRetry(DeadlineAfterMs(500), [&](grpc::ClientContext* ctx) {
    auto stub = WorkerService::NewStub(NewChannel(held.address(), {}));
    return stub->GetStatus(ctx, req, &resp);
  });
  EXPECT_EQ(s2.error_code(), grpc::StatusCode::UNAVAILABLE) << s2.error_message();
  if (!kSanitized) {
    EXPECT_LT(Clock::now() - start2, std::chrono::milliseconds(kConnectRetryMs));
  }
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
