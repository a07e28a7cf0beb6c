// The data channel against a FakeRecvWorker: bit-exact tensors, dead
// tensors, the serving side's errors, cancellation, size limits, and a
// peer process killed mid-call (Unavailable naming it, promptly) — each in
// plaintext, with a cluster token, under mutual TLS, and both. Then the
// refusals: wrong or missing tokens, clients without the CA's certificate,
// servers whose certificate does not name the host dialled; the server
// keeps serving the cluster's own clients after each.
#include "distributed/rpc/data_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "distributed/rpc/data_channel_internal.h"
#include "distributed/rpc/data_channel_testlib.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/framework/rendezvous.h"
#include "tests/sanitizers.h"
#include "util/tls_certs.h"

namespace graphrun {
namespace distributed {
namespace {

using data_channel_internal::kRecv;
using data_channel_internal::kRequestMagic;
using data_channel_internal::RequestHeader;
using test::RandomBytes;
using ::testing::HasSubstr;
constexpr char kWho[] = "task /job:ps/replica:0/task:0 (127.0.0.1:1)";

// Calls RecvTensor for `key` and waits (bounded) for the answer.
absl::Status Recv(DataConnection& c, const std::string& key, RecvTensorResult* result,
                  CallOptions* opts = nullptr) {
  RecvTensorRequest req;
  req.set_step_id(7);
  req.set_rendezvous_key(key);
  return CallAndWait(
      [&](StatusCallback done) { c.RecvTensorAsync(opts, req, result, std::move(done)); });
}

// Certificates made once per test binary: a cluster CA with hosts
// 127.0.0.1 and "elsewhere", and a second, unrelated CA.
struct Certs {
  std::string dir = ::testing::TempDir() + "/data_channel_certs";
  std::string other = ::testing::TempDir() + "/data_channel_other_ca";
  Certs() {
    absl::Status s = MakeClusterCertificates(dir, {"127.0.0.1", "elsewhere"}, 1);
    if (s.ok()) s = MakeClusterCertificates(other, {"127.0.0.1"}, 1);
    if (!s.ok()) std::abort();
  }
  TlsCredentials Load(const std::string& d, const std::string& host) const {
    return LoadTlsCredentials(d + "/ca.crt", d + "/" + host + ".crt", d + "/" + host + ".key")
        .value();
  }
};
const Certs& TestCerts() {
  static const Certs* const certs = new Certs();
  return *certs;
}

enum class Security { kPlain, kToken, kTls, kTlsAndToken };

DataChannelOptions SecureOptions(Security sec) {
  DataChannelOptions o;
  if (sec == Security::kToken || sec == Security::kTlsAndToken) o.auth_token = "s3cret token";
  if (sec == Security::kTls || sec == Security::kTlsAndToken) {
    o.tls = TestCerts().Load(TestCerts().dir, "127.0.0.1");
  }
  return o;
}

// Each case runs with same-host reads on (payloads of 64 KiB and more are
// read from the server's memory; the server and client share this
// process) and off (every byte over the socket).
class DataChannelTest : public ::testing::TestWithParam<std::tuple<Security, bool>> {
 protected:
  void SetUp() override {
    worker_.Add("small", RandomBytes(1024, 1));
    worker_.Add("big", RandomBytes(int64_t{64} << 20, 2));
    worker_.Add(
        "f32", Tensor::FromVector<float>({1.5f, -2.0f, 3.25f, 0.f, 7.f, 8.f}, TensorShape({2, 3})));
    auto s = DataChannelServer::Start(&worker_, "127.0.0.1", Options());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    auto c = DataConnection::Connect("127.0.0.1", server_->port(), kWho, Options());
    ASSERT_TRUE(c.ok()) << c.status();
    conn_ = *c;
  }
  DataChannelOptions Options() const {
    DataChannelOptions o = SecureOptions(std::get<0>(GetParam()));
    o.same_host_reads = same_host();
    return o;
  }
  bool same_host() const { return std::get<1>(GetParam()); }
  // The server lets go of what the client read (the release is async).
  bool AllReleased() const {
    for (int i = 0; i < 500 && server_->num_held() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return server_->num_held() == 0;
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

TEST_P(DataChannelTest, SmallAndLargeTensorsAreBitExact) {
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
  // Only the 64 MiB tensor is big enough to be read from the server.
  EXPECT_EQ(conn_->same_host(), same_host());
  EXPECT_EQ(conn_->num_same_host_reads(), same_host() ? 1 : 0);
  EXPECT_EQ(server_->num_same_host_reads(), same_host() ? 1 : 0);
  EXPECT_TRUE(AllReleased());
}

// RecvTensorResult::destination: bytes that fit go straight into the
// caller's buffer (here the middle of a larger one); others do not touch it.
TEST_P(DataChannelTest, ADestinationThatFitsReceivesTheBytes) {
  for (const char* name : {"small", "big"}) {
    const int64_t n = name == std::string("small") ? 1024 : int64_t{64} << 20;
    Tensor whole(DT_UINT8, TensorShape({n + 8192}));
    std::memset(whole.raw_data(), 0, whole.TotalBytes());
    RecvTensorResult r;
    r.destination = whole.Slice(4096, 4096 + n);
    ASSERT_TRUE(Recv(*conn_, absl::StrCat("t:", name), &r).ok()) << name;
    EXPECT_EQ(r.tensor.raw_data(), whole.raw_data() + 4096) << name;
    EXPECT_TRUE(SameBytes(r.tensor, RandomBytes(n, name == std::string("small") ? 1 : 2)));
    EXPECT_EQ(whole.raw_data()[4095], 0);
    EXPECT_EQ(whole.raw_data()[4096 + n], 0);
  }
  // A destination of another size or dtype is left alone.
  for (Tensor dest :
       {Tensor(DT_UINT8, TensorShape({1000})), Tensor(DT_INT32, TensorShape({256}))}) {
    std::memset(dest.raw_data(), 0, dest.TotalBytes());
    RecvTensorResult r;
    r.destination = dest;
    ASSERT_TRUE(Recv(*conn_, "t:small", &r).ok());
    EXPECT_NE(r.tensor.raw_data(), dest.raw_data());
    EXPECT_EQ(r.tensor.TotalBytes(), 1024);
    EXPECT_EQ(dest.raw_data()[0], 0);
  }
  EXPECT_TRUE(AllReleased());
}

TEST_P(DataChannelTest, ConcurrentCallsShareTheConnection) {
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
  EXPECT_EQ(conn_->num_same_host_reads(), same_host() ? kCalls / 8 : 0);
  l.unlock();
  EXPECT_TRUE(AllReleased());
}

TEST_P(DataChannelTest, DeadTensorAndServingErrorsTravelAsOnGrpc) {
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

TEST_P(DataChannelTest, CancelEndsTheCallAndTheServersWait) {
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

TEST_P(DataChannelTest, TimeoutIsDeadlineExceeded) {
  CallOptions opts;
  opts.set_timeout_ms(200);
  RecvTensorResult r;
  auto start = std::chrono::steady_clock::now();
  absl::Status s = Recv(*conn_, "hang", &r, &opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(kWho));
  if (!kSanitized) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  }
}

TEST_P(DataChannelTest, OversizedTensorIsResourceExhaustedAndDrained) {
  DataChannelOptions o = Options();
  o.max_tensor_bytes = 4096;
  auto c = DataConnection::Connect("127.0.0.1", server_->port(), kWho, o);
  ASSERT_TRUE(c.ok());
  RecvTensorResult r;
  absl::Status s = Recv(**c, "t:big", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_recv_tensor_bytes"));
  ASSERT_TRUE(Recv(**c, "t:small", &r).ok());
  EXPECT_EQ(r.tensor.TotalBytes(), 1024);
  EXPECT_EQ((*c)->num_same_host_reads(), 0);
  EXPECT_TRUE(AllReleased());  // refused unread, released all the same
}

// Pushes (WorkerInterface::PushTensorAsync over the channel): each reaches
// the server's worker whole, one refused by the worker is counted and the
// connection goes on; strings are refused by the sender.
TEST_P(DataChannelTest, PushedTensorsReachTheWorkerBitExact) {
  const Tensor f32 =
      Tensor::FromVector<float>({1.5f, -2.0f, 3.25f, 0.f, 7.f, 8.f}, TensorShape({2, 3}));
  const Tensor big = RandomBytes(int64_t{1} << 20, 3);
  const Tensor empty(DT_INT32, TensorShape({0, 4}));
  ASSERT_TRUE(conn_->PushTensor("p:f32", f32).ok());
  ASSERT_TRUE(conn_->PushTensor("refuse:this", f32).ok());  // one-way: the sender never learns
  ASSERT_TRUE(conn_->PushTensor("p:big", big).ok());
  ASSERT_TRUE(conn_->PushTensor("p:empty", empty).ok());
  for (const auto& [key, want] : std::vector<std::pair<std::string, Tensor>>{
           {"p:f32", f32}, {"p:big", big}, {"p:empty", empty}}) {
    std::optional<Tensor> got = worker_.Pushed(key);
    ASSERT_TRUE(got.has_value()) << key;
    EXPECT_TRUE(SameBytes(*got, want)) << key;
    EXPECT_EQ(got->shape().DebugString(), want.shape().DebugString()) << key;
    EXPECT_FALSE(got->SharesBufferWith(want)) << key;
  }
  EXPECT_EQ(server_->num_pushes(), 4);
  EXPECT_EQ(server_->num_pushes_refused(), 1);
  EXPECT_FALSE(worker_.Pushed("refuse:this", 0).has_value());
  // The connection still serves.
  RecvTensorResult r;
  ASSERT_TRUE(Recv(*conn_, "t:small", &r).ok());
  EXPECT_EQ(r.tensor.TotalBytes(), 1024);

  Tensor strings(DT_STRING, TensorShape({1}));
  absl::Status s = conn_->PushTensor("p:s", strings);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("p:s"));
}

// A push over the server's max_tensor_bytes breaks the protocol: the
// server drops the connection, and the client's calls are Unavailable.
TEST_P(DataChannelTest, OversizedPushDropsTheConnection) {
  DataChannelOptions small = Options();
  small.max_tensor_bytes = 4096;
  auto server = DataChannelServer::Start(&worker_, "127.0.0.1", small);
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = DataConnection::Connect("127.0.0.1", (*server)->port(), kWho, Options());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->PushTensor("p:ok", RandomBytes(4096, 4)).ok());
  ASSERT_TRUE(worker_.Pushed("p:ok").has_value());
  (*c)->PushTensor("p:huge", RandomBytes(int64_t{1} << 20, 5)).IgnoreError();
  RecvTensorResult r;
  absl::Status s = Recv(**c, "t:small", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(kWho));
  EXPECT_FALSE(worker_.Pushed("p:huge", 0).has_value());
  EXPECT_EQ((*server)->num_pushes(), 1);
}

TEST_P(DataChannelTest, ServerStopIsUnavailableNamingThePeer) {
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
TEST_P(DataChannelTest, ConnectRefusedIsUnavailableNamingThePeer) {
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

INSTANTIATE_TEST_SUITE_P(Security, DataChannelTest,
                         ::testing::Combine(::testing::Values(Security::kPlain, Security::kToken,
                                                              Security::kTls,
                                                              Security::kTlsAndToken),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<Security, bool>>& info) {
                           std::string name;
                           switch (std::get<0>(info.param)) {
                             case Security::kPlain:
                               name = "Plain";
                               break;
                             case Security::kToken:
                               name = "Token";
                               break;
                             case Security::kTls:
                               name = "Tls";
                               break;
                             default:
                               name = "TlsAndToken";
                           }
                           return name + (std::get<1>(info.param) ? "SameHost" : "Socket");
                         });

// The serving side of the refusal tests: one server, the cluster's own
// client checked before and after every stranger.
class DataChannelRefusalTest : public ::testing::Test {
 protected:
  void StartServer(const DataChannelOptions& o) {
    worker_.Add("small", RandomBytes(1024, 1));
    auto s = DataChannelServer::Start(&worker_, "127.0.0.1", o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  // Connects with `o` and, when that works, fetches one tensor.
  absl::Status Try(const DataChannelOptions& o) {
    auto c = DataConnection::Connect("127.0.0.1", server_->port(), kWho, o);
    if (!c.ok()) return c.status();
    RecvTensorResult r;
    absl::Status s = Recv(**c, "t:small", &r);
    if (s.ok() && r.tensor.TotalBytes() != 1024) return absl::InternalError("wrong tensor");
    return s;
  }
  // A bare loopback socket to the server (a stranger's), or -1.
  int ConnectRaw() const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(server_->port());
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  test::FakeRecvWorker worker_;
  std::unique_ptr<DataChannelServer> server_;
};

// A request reusing the id of one still in flight breaks the protocol:
// the server drops the connection, which cancels the first call; the
// second never starts (overwriting the first left it waiting forever, the
// connection with it: a fuzzer's find).
TEST_F(DataChannelRefusalTest, AnIdStillInFlightDropsTheConnectionAndCancelsTheFirst) {
  StartServer(DataChannelOptions());
  const int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  std::string frames;
  for (int i = 0; i < 2; ++i) {
    RequestHeader h{kRequestMagic, kRecv, /*id=*/7, /*step_id=*/1, /*key_bytes=*/4};
    frames.append(reinterpret_cast<const char*>(&h), sizeof(h));
    frames.append("hang");
  }
  ASSERT_EQ(send(fd, frames.data(), frames.size(), 0), static_cast<ssize_t>(frames.size()));
  // The server hangs up (EOF; at most the first call's Cancelled answer
  // comes before it), though this side still has its write half open.
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[512];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
  }
  EXPECT_EQ(n, 0) << "no EOF within 10 s";
  close(fd);
  for (int i = 0; i < 250 && worker_.num_cancelled() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(worker_.num_cancelled(), 1);  // the first; the second never started
  DataChannelOptions o;
  EXPECT_TRUE(Try(o).ok());
}

TEST_F(DataChannelRefusalTest, TokenMismatchIsUnauthenticatedBothWays) {
  DataChannelOptions good = SecureOptions(Security::kToken);
  StartServer(good);
  ASSERT_TRUE(Try(good).ok());

  DataChannelOptions wrong = good;
  wrong.auth_token = "not the token";
  absl::Status s = Try(wrong);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("refused this task's token"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(kWho));

  s = Try(DataChannelOptions());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("requires the cluster token"));
  // Both were dropped by the server: the wrong token after its verdict, the
  // tokenless client when it hung up mid-handshake. The server counts each
  // on its connection's thread, perhaps after the client returned: wait
  // (bounded).
  for (int i = 0; i < 250 && server_->num_refused() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(server_->num_refused(), 2);

  // A stranger that connects and sends nothing is dropped after the
  // handshake deadline, without holding up anyone else.
  const int fd = ConnectRaw();
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(Try(good).ok());
  close(fd);

  EXPECT_TRUE(Try(good).ok());
  EXPECT_EQ(worker_.num_cancelled(), 0);
}

TEST_F(DataChannelRefusalTest, ClientWithoutTokenRefusesAServerThatChecksNone) {
  StartServer(DataChannelOptions());
  absl::Status s = Try(SecureOptions(Security::kToken));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not check the cluster token"));
}

TEST_F(DataChannelRefusalTest, TlsRefusesStrangersAndKeepsServing) {
  const Certs& certs = TestCerts();
  DataChannelOptions good = SecureOptions(Security::kTls);
  StartServer(good);
  ASSERT_TRUE(Try(good).ok());

  // Plaintext: the TLS server drops it; the client sees no hello.
  absl::Status s = Try(DataChannelOptions());
  EXPECT_FALSE(s.ok());
  // A certificate of another CA: the server refuses it in the handshake.
  DataChannelOptions stranger;
  stranger.tls = certs.Load(certs.other, "127.0.0.1");
  s = Try(stranger);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.code() == absl::StatusCode::kUnauthenticated ||
              s.code() == absl::StatusCode::kUnavailable)
      << s;
  EXPECT_TRUE(Try(good).ok());
  // Wait (bounded) for the server's side of both handshakes to finish.
  for (int i = 0; i < 100 && server_->num_refused() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(server_->num_refused(), 2);
}

TEST_F(DataChannelRefusalTest, ClientChecksTheServersCertificate) {
  const Certs& certs = TestCerts();
  // The server presents a certificate of the cluster CA, but for another
  // host than the one dialled.
  DataChannelOptions server_opts;
  server_opts.tls = certs.Load(certs.dir, "elsewhere");
  StartServer(server_opts);
  absl::Status s = Try(SecureOptions(Security::kTls));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("certificate is refused"));
  // A server whose certificate comes from another CA.
  server_.reset();
  DataChannelOptions other;
  other.tls = certs.Load(certs.other, "127.0.0.1");
  StartServer(other);
  s = Try(SecureOptions(Security::kTls));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
}

TEST(SecureStreamTest, BadTlsFilesAreInvalidArgumentNamingTheFile) {
  const Certs& certs = TestCerts();
  TlsCredentials mixed = certs.Load(certs.dir, "127.0.0.1");
  TlsCredentials other = certs.Load(certs.other, "127.0.0.1");
  mixed.key_pem = other.key_pem;  // a key that is not the certificate's
  mixed.key_file = certs.other + "/127.0.0.1.key";
  auto ctx = TlsContext::Create(mixed, /*server=*/true);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ctx.status().message()), HasSubstr("does not belong to the certificate"));
  auto missing = LoadTlsCredentials(certs.dir + "/ca.crt", certs.dir + "/127.0.0.1.crt", "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  auto absent =
      LoadTlsCredentials(certs.dir + "/ca.crt", certs.dir + "/nope.crt", certs.dir + "/x.key");
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(absent.status().message()), HasSubstr("nope.crt"));
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
  if (!kSanitized) {
    EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(2));
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(kWho));
}

// A forked server process: its tensors (4 MiB random "t:big", seed 3),
// with same-host reads offered or not. Killed with SIGKILL at the end.
class PeerProcess {
 public:
  explicit PeerProcess(bool same_host_reads) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(pipefd[0]);
      test::FakeRecvWorker worker;
      worker.Add("big", RandomBytes(int64_t{4} << 20, 3));
      DataChannelOptions o;
      o.same_host_reads = same_host_reads;
      auto s = DataChannelServer::Start(&worker, "127.0.0.1", o);
      int port = s.ok() ? (*s)->port() : 0;
      if (write(pipefd[1], &port, sizeof(port)) != sizeof(port)) _exit(1);
      sleep(60);  // killed long before
      _exit(0);
    }
    close(pipefd[1]);
    if (read(pipefd[0], &port_, sizeof(port_)) != static_cast<ssize_t>(sizeof(port_))) port_ = 0;
    close(pipefd[0]);
  }
  ~PeerProcess() { Kill(); }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = 0;
  int port_ = 0;
};

TEST(SameHostReadsTest, ATensorOfAnotherProcessIsReadFromItsMemory) {
  PeerProcess peer(/*same_host_reads=*/true);
  ASSERT_GT(peer.port(), 0);
  auto c = DataConnection::Connect("127.0.0.1", peer.port(), kWho, DataChannelOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->same_host());
  const Tensor want = RandomBytes(int64_t{4} << 20, 3);
  for (int i = 0; i < 3; ++i) {
    RecvTensorResult r;
    ASSERT_TRUE(Recv(**c, "t:big", &r).ok());
    EXPECT_TRUE(SameBytes(r.tensor, want));
  }
  EXPECT_EQ((*c)->num_same_host_reads(), 3);
  // The peer dies: the next read is Unavailable naming it, not stale bytes.
  peer.Kill();
  RecvTensorResult r;
  absl::Status s = Recv(**c, "t:big", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(kWho));
  EXPECT_FALSE(r.tensor.IsInitialized());
}

TEST(SameHostReadsTest, OffOnEitherSideKeepsEveryByteOnTheSocket) {
  const Tensor want = RandomBytes(int64_t{4} << 20, 3);
  for (bool server_on : {false, true}) {
    PeerProcess peer(server_on);
    ASSERT_GT(peer.port(), 0);
    DataChannelOptions o;
    o.same_host_reads = !server_on;
    auto c = DataConnection::Connect("127.0.0.1", peer.port(), kWho, o);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_FALSE((*c)->same_host()) << server_on;
    RecvTensorResult r;
    ASSERT_TRUE(Recv(**c, "t:big", &r).ok());
    EXPECT_TRUE(SameBytes(r.tensor, want));
    EXPECT_EQ((*c)->num_same_host_reads(), 0);
  }
  // The environment turns them off for every channel of the process.
  setenv("GRAPHRUN_SAME_HOST_READS", "0", 1);
  EXPECT_FALSE(DataChannelOptions().same_host_reads);
  setenv("GRAPHRUN_SAME_HOST_READS", "1", 1);
  EXPECT_TRUE(DataChannelOptions().same_host_reads);
  unsetenv("GRAPHRUN_SAME_HOST_READS");
  EXPECT_TRUE(DataChannelOptions().same_host_reads);
}

// How graphrun_sent_bytes_total names the peer a tensor goes to.
TEST(SentPeerLabelTest, TheDestinationTaskOrCollective) {
  EXPECT_EQ(SentPeerLabel(Rendezvous::CreateKey("/job:ps/replica:0/task:0/device:CPU:0", 7,
                                                "/job:worker/replica:0/task:3/device:CPU:0", "w:0",
                                                FrameAndIter{})),
            "/job:worker/replica:0/task:3");
  EXPECT_EQ(SentPeerLabel("collective;buf;7;1;1;ring0;1"), "collective");
  EXPECT_EQ(SentPeerLabel("not a key"), "unknown");
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
