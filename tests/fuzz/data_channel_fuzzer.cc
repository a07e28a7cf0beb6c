// libFuzzer target: the data channel's frames (distributed/rpc/data_channel.h)
// from a hostile peer, over real loopback sockets, both ways:
//   mode 0  a client's bytes to a DataChannelServer without a token:
//           request and cancel frames, keys, ids, sizes;
//   mode 1  the same to a server that requires the cluster token: the
//           token handshake (proofs, lengths) before any frame;
//   mode 2  a server's bytes to a DataConnection: the token hello, the
//           reply to the same-host probe, then, once the client has sent
//           its three RecvTensor requests (ids 1..3), response frames
//           (headers, dims, messages, payloads that lie);
//   mode 3  the same, but the probe gets a genuine reply (this process's
//           pid and a nonce), so the client reads payloads from "the
//           server's memory": responses may name any address.
// Every call must end with a Status (the client's within its 500 ms
// deadline), every connection must end, and memory must stay bounded: no
// crash, hang or sanitizer report. The server serves
// test::FakeRecvWorker ("t:f" float[2,3], "t:s" strings, "dead", "stale",
// "hang").
//
// Input: [1 byte: mode % 4][the peer's bytes]. In modes 2 and 3 the first
// 48 bytes are the token hello; in mode 2 the next 40 answer the probe;
// the rest is written after the requests arrive.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/rpc/data_channel.h"
#include "distributed/rpc/data_channel_testlib.h"
#include "google/protobuf/stubs/logging.h"
#include "graph/memory_budget.h"
#include "graph/tensor.h"

namespace graphrun {
namespace distributed {
namespace {

constexpr size_t kHelloBytes = 48;
constexpr size_t kProbeBytes = 32;       // the client's same-host probe request
constexpr size_t kProbeReplyBytes = 40;  // mode 2: a reply header from the input
constexpr int kBoundMs = 5000;           // any wait longer than this is a finding

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void Hang(const char* what) {
  std::fprintf(stderr, "data_channel_fuzzer: %s did not end within %d ms\n", what, kBoundMs);
  std::abort();
}

int ConnectTo(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void WriteAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return;  // the peer dropped us: fine
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Reads until EOF (true) or until `deadline_ms` passes (false); `want` > 0
// stops once that many bytes arrived.
bool ReadUntil(int fd, int64_t deadline_ms, size_t want = 0) {
  char buf[4096];
  size_t got = 0;
  while (true) {
    int64_t left = deadline_ms - NowMs();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    size_t n = want > 0 ? std::min(sizeof(buf), want - got) : sizeof(buf);
    ssize_t r = recv(fd, buf, n, 0);
    if (r <= 0) return true;
    got += static_cast<size_t>(r);
    if (want > 0 && got >= want) return true;
  }
}

struct Servers {
  test::FakeRecvWorker worker;
  std::unique_ptr<DataChannelServer> plain, token;
  int listen_fd = -1;  // mode 2's fake server
  int listen_port = 0;

  Servers() {
    worker.Add("f", Tensor(DT_FLOAT, TensorShape({2, 3})));
    Tensor s(DT_STRING, TensorShape({2}));
    s.flat<std::string>()[0] = "graph";
    s.flat<std::string>()[1] = "run";
    worker.Add("s", s);
    DataChannelOptions o;
    o.connect_timeout_ms = 500;
    plain = *DataChannelServer::Start(&worker, "127.0.0.1", o);
    o.auth_token = "fuzz-cluster-token";
    token = *DataChannelServer::Start(&worker, "127.0.0.1", o);
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listen_fd, 16);
    socklen_t len = sizeof(a);
    getsockname(listen_fd, reinterpret_cast<sockaddr*>(&a), &len);
    listen_port = ntohs(a.sin_port);
  }
};

// Modes 0 and 1: our bytes to the server, then everything it answers until
// it drops the connection (it must, once we stop sending).
void FuzzServer(int port, const uint8_t* data, size_t size) {
  int fd = ConnectTo(port);
  if (fd < 0) return;
  WriteAll(fd, data, size);
  shutdown(fd, SHUT_WR);
  if (!ReadUntil(fd, NowMs() + kBoundMs)) Hang("a server connection");
  close(fd);
}

// A genuine reply to the same-host probe (data_channel.cc's frames): this
// process's pid and a nonce the client can read here.
std::string GenuineProbeReply() {
  static const char nonce[16] = "graphrun-fuzz!!";
  struct {
    uint32_t magic = 0x50445247, flags = 8;
    uint64_t id = 0;
    int32_t code = 0, dtype = 0;
    uint32_t ndims = 0, message_bytes = 0;
    uint64_t payload_bytes = 32;
    int64_t pid;
    uint64_t address;
    char nonce[16];
  } r;
  static_assert(sizeof(r) == 72, "reply layout");
  r.pid = getpid();
  r.address = reinterpret_cast<uintptr_t>(nonce);
  std::memcpy(r.nonce, nonce, sizeof(nonce));
  return std::string(reinterpret_cast<const char*>(&r), sizeof(r));
}

// Modes 2 and 3: a DataConnection reads our hello, our probe reply and our
// responses.
void FuzzClient(Servers& s, const uint8_t* data, size_t size, bool same_host) {
  const size_t hello = std::min(size, kHelloBytes);
  const size_t reply = same_host ? 0 : std::min(size - hello, kProbeReplyBytes);
  std::thread peer([&] {
    pollfd p{s.listen_fd, POLLIN, 0};
    if (poll(&p, 1, kBoundMs) <= 0) return;  // Connect failed before connecting
    int fd = accept4(s.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    // Once the input's bytes run out, the client sees EOF at once rather
    // than waiting out its 50 ms for bytes that never come (that wait cost
    // most short inputs 50 ms; the timeout is data_channel_test's).
    WriteAll(fd, data, hello);
    if (hello == size && (!same_host || hello < kHelloBytes)) shutdown(fd, SHUT_WR);
    ReadUntil(fd, NowMs() + 100, kProbeBytes);
    if (same_host) {
      const std::string r = GenuineProbeReply();
      WriteAll(fd, reinterpret_cast<const uint8_t*>(r.data()), r.size());
    } else {
      WriteAll(fd, data + hello, reply);
    }
    if (hello + reply == size) shutdown(fd, SHUT_WR);
    // Three requests: 32-byte headers and keys "k0".."k2" (after the
    // 32-byte "same host" frame in mode 3). Answering early is also fine;
    // the client may have refused the hello and hung up.
    ReadUntil(fd, NowMs() + 100, 3 * (32 + 2) + (same_host ? 32 : 0));
    WriteAll(fd, data + hello + reply, size - hello - reply);
    shutdown(fd, SHUT_WR);
    if (!ReadUntil(fd, NowMs() + kBoundMs)) Hang("a client connection");
    close(fd);
  });
  DataChannelOptions o;
  o.connect_timeout_ms = 50;  // a short hello fails fast
  auto conn = DataConnection::Connect("127.0.0.1", s.listen_port, "task /job:fuzz/task:0", o);
  if (conn.ok()) {
    struct Call {
      CallOptions opts;
      RecvTensorRequest request;
      RecvTensorResult result;
    };
    Call calls[3];
    // Woken by the last callback (polling with a sleep cost a millisecond
    // of every input).
    std::mutex mu;
    std::condition_variable cv;
    int left = 3;
    for (int i = 0; i < 3; ++i) {
      calls[i].opts.set_timeout_ms(500);
      calls[i].request.set_rendezvous_key("k" + std::to_string(i));
      (*conn)->RecvTensorAsync(&calls[i].opts, calls[i].request, &calls[i].result,
                               [&](const absl::Status&) {
                                 std::lock_guard<std::mutex> l(mu);
                                 if (--left == 0) cv.notify_all();
                               });
    }
    {
      std::unique_lock<std::mutex> l(mu);
      if (!cv.wait_for(l, std::chrono::milliseconds(kBoundMs), [&] { return left == 0; })) {
        Hang("a RecvTensor call");
      }
    }
    // What arrived must be a whole tensor.
    for (const Call& c : calls) {
      if (c.result.tensor.IsInitialized() && DataTypeSize(c.result.tensor.dtype()) > 0) {
        volatile char sink = 0;
        const char* p = c.result.tensor.raw_data();
        for (int64_t b = 0; b < c.result.tensor.TotalBytes(); b += 4096) sink ^= p[b];
        (void)sink;
      }
    }
    (*conn)->Close();
    conn->reset();
  }
  peer.join();
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphrun;
  using namespace graphrun::distributed;
  static Servers* servers = [] {
    SetMemoryLimits(int64_t{1} << 30, int64_t{256} << 20);
    google::protobuf::SetLogHandler(nullptr);  // no line per malformed proto
    return new Servers();
  }();
  if (size < 1 || size > (1 << 16)) return 0;
  switch (data[0] % 4) {
    case 0:
      FuzzServer(servers->plain->port(), data + 1, size - 1);
      break;
    case 1:
      FuzzServer(servers->token->port(), data + 1, size - 1);
      break;
    case 2:
      FuzzClient(*servers, data + 1, size - 1, /*same_host=*/false);
      break;
    default:
      FuzzClient(*servers, data + 1, size - 1, /*same_host=*/true);
      break;
  }
  return 0;
}
