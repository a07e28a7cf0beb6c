#include "distributed/rpc/data_channel.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "distributed/cluster_spec.h"
#include "distributed/rpc/data_channel_internal.h"
#include "graph/memory_budget.h"
#include "graph/proto/tensor.pb.h"
#include "graph/status.h"
#include "kernels/framework/rendezvous.h"
#include "util/metrics.h"

namespace graphrun {
namespace distributed {
namespace data_channel_internal {

// The bytes of a fixed-size `dtype` tensor of `dims`; an error for other
// types, negative dims and overflow.
absl::StatusOr<uint64_t> PayloadBytes(DataType dtype, const std::vector<int64_t>& dims) {
  uint64_t bytes = DataTypeSupported(dtype) ? static_cast<uint64_t>(DataTypeSize(dtype)) : 0;
  if (bytes == 0) return absl::InvalidArgumentError("not a fixed-size type");
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && bytes > std::numeric_limits<uint64_t>::max() / d)) {
      return absl::InvalidArgumentError("bad dims");
    }
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
}

// Copies `bytes` at `remote` in process `pid` into `dst` (cross-memory
// attach), in <= 1 GiB calls, resuming after partial reads.
absl::Status ReadProcessMemory(int pid, char* dst, uint64_t remote, uint64_t bytes) {
  while (bytes > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, uint64_t{1} << 30));
    iovec local{dst, n};
    iovec peer{reinterpret_cast<void*>(remote), n};
    ssize_t got = process_vm_readv(pid, &local, 1, &peer, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return absl::UnavailableError(absl::StrCat(
          "cannot read the payload from the peer's memory (process ", pid,
          "): ", errno == ESRCH ? "the process is gone" : std::strerror(got < 0 ? errno : EIO)));
    }
    dst += got;
    remote += static_cast<uint64_t>(got);
    bytes -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::Status Drain(ByteStream* stream, uint64_t n) {
  std::vector<char> scratch(std::min<uint64_t>(n, 1 << 20));
  while (n > 0) {
    uint64_t k = std::min<uint64_t>(n, scratch.size());
    absl::Status s = stream->ReadFull(scratch.data(), k);
    if (!s.ok()) return s;
    n -= k;
  }
  return absl::OkStatus();
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

absl::StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host, ":", port, ": ", gai_strerror(rc)));
  }
  return res;
}

}  // namespace data_channel_internal

using namespace data_channel_internal;  // NOLINT: this file is its implementation

bool DataChannelOptions::SameHostReadsDefault() {
  const char* v = std::getenv("GRAPHRUN_SAME_HOST_READS");
  if (v == nullptr) return true;
  const std::string s = v;
  return !(s == "0" || s == "false" || s == "off" || s == "no");
}

std::string SentPeerLabel(const std::string& rendezvous_key) {
  if (rendezvous_key.rfind("collective;", 0) == 0) return "collective";
  absl::StatusOr<Rendezvous::ParsedKey> k = Rendezvous::ParseKey(rendezvous_key);
  if (!k.ok()) return "unknown";
  const std::string task = TaskOfDevice(k->dst_device);
  return task.empty() || task == k->dst_device ? "unknown" : task;
}

absl::Status AnnotatePeerStatus(absl::StatusCode code, const std::string& message,
                                const std::string& who) {
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  std::string msg = message;
  if (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded ||
      code == absl::StatusCode::kResourceExhausted || code == absl::StatusCode::kUnknown ||
      msg.find(who) == std::string::npos) {
    msg = absl::StrCat(who, ": ", msg);
  }
  return absl::Status(code, msg);
}

// ---------------------------------------------------------------------------
// Server side.

// One accepted connection. The reader and writer threads use `this`; they
// are joined by Stop() (or by the accept loop's reaping) before the
// connection can be destroyed. In-flight calls hold a shared_ptr so a late
// completion can still write (or find the socket closed).
class DataChannelServer::Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(int fd, DataChannelServer* server) : fd_(fd), server_(server) {}
  ~Conn() { close(fd_); }

  void Start() {
    reader_ = std::thread([this] { ReadLoop(); });
    writer_ = std::thread([this] { WriteLoop(); });
  }
  bool reader_done() {
    std::lock_guard<std::mutex> l(mu_);
    return reader_done_;
  }
  // Wakes both threads and joins them.
  void StopAndJoin() {
    shutdown(fd_, SHUT_RDWR);
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_writer_ = true;
      cv_.notify_all();
    }
    if (reader_.joinable()) reader_.join();
    if (writer_.joinable()) writer_.join();
  }

 private:
  struct Call {
    uint64_t id = 0;
    RecvTensorRequest request;
    CallOptions opts;
    RecvTensorResult result;
  };
  struct Response {
    std::string head;   // header, dims, message
    Tensor tensor;      // keeps a raw payload alive
    std::string proto;  // or a serialized payload
    const char* data = nullptr;
    uint64_t bytes = 0;
  };

  void ReadLoop() {
    const DataChannelOptions& o = server_->options_;
    if (!Handshake()) {
      shutdown(fd_, SHUT_RDWR);  // drop the stranger now, not when reaped
      std::lock_guard<std::mutex> l(mu_);
      reader_done_ = true;
      return;
    }
    while (true) {
      RequestHeader h;
      if (!stream_->ReadFull(reinterpret_cast<char*>(&h), sizeof(h)).ok()) break;
      if (h.magic != kRequestMagic || h.key_bytes > static_cast<uint64_t>(o.max_key_bytes)) {
        break;  // not our protocol: drop the connection
      }
      std::string key(h.key_bytes, '\0');
      if (!stream_->ReadFull(key.data(), h.key_bytes).ok()) break;
      if (h.type == kCancel) {
        std::shared_ptr<Call> c;
        {
          std::lock_guard<std::mutex> l(mu_);
          auto it = inflight_.find(h.id);
          if (it != inflight_.end()) c = it->second;
        }
        if (c) c->opts.StartCancel();
        continue;
      }
      if (h.type == kHello) {
        Hello();
        continue;
      }
      if (h.type == kSameHost) {
        if (o.same_host_reads && hello_sent_) same_host_ = true;
        continue;
      }
      if (h.type == kRelease) {
        Release(h.id);
        continue;
      }
      if (h.type == kPush) {
        if (!Push(std::move(key))) break;
        continue;
      }
      if (h.type != kRecv) break;
      auto call = std::make_shared<Call>();
      call->id = h.id;
      call->request.set_step_id(h.step_id);
      call->request.set_rendezvous_key(std::move(key));
      bool reused = false;
      {
        std::lock_guard<std::mutex> l(mu_);
        reused = held_.count(h.id) > 0 || !inflight_.emplace(h.id, call).second;
      }
      // An id still in flight or held for a same-host read breaks the
      // protocol (a client numbers its calls afresh): overwriting it would
      // leave the first call beyond every cancel, waiting forever with this
      // connection held, or free a payload whose address is published.
      if (reused) break;
      server_->num_requests_.fetch_add(1);
      auto self = shared_from_this();
      server_->worker_->RecvTensorAsync(
          &call->opts, call->request, &call->result,
          [self, call](const absl::Status& s) { self->Finish(*call, s); });
    }
    // The client went away (or Stop): nobody waits for the in-flight calls,
    // nor reads what it held for the client.
    std::vector<std::shared_ptr<Call>> calls;
    std::map<uint64_t, Tensor> held;
    {
      std::lock_guard<std::mutex> l(mu_);
      reader_done_ = true;
      for (auto& [id, c] : inflight_) calls.push_back(c);
      held.swap(held_);
      server_->num_held_.fetch_sub(static_cast<int64_t>(held.size()));
    }
    for (auto& c : calls) c->opts.StartCancel();
    // Dropped at once (a client that broke the protocol learns it now, not
    // when the accept loop reaps the connection); cancelled calls' answers
    // find the socket shut.
    shutdown(fd_, SHUT_RDWR);
  }

  // A pushed tensor (after its key): read whole, then handed to the
  // worker on this thread. False for a frame that breaks the protocol (the
  // connection is dropped); a tensor the worker refuses is counted.
  bool Push(std::string key) {
    const DataChannelOptions& o = server_->options_;
    PushHeader p;
    if (!stream_->ReadFull(reinterpret_cast<char*>(&p), sizeof(p)).ok() || p.ndims > kMaxDims) {
      return false;
    }
    std::vector<int64_t> dims(p.ndims);
    if (!stream_->ReadFull(reinterpret_cast<char*>(dims.data()), dims.size() * 8).ok()) {
      return false;
    }
    const DataType dtype = static_cast<DataType>(p.dtype);
    absl::StatusOr<uint64_t> bytes = PayloadBytes(dtype, dims);
    if (!bytes.ok() || *bytes != p.payload_bytes ||
        p.payload_bytes > static_cast<uint64_t>(o.max_tensor_bytes)) {
      return false;
    }
    auto t =
        Tensor::Allocate(dtype, TensorShape(absl::Span<const int64_t>(dims)), "a pushed tensor: ");
    if (!t.ok()) {
      // Told so (an uninitialized tensor): the worker must not wait for it.
      if (!Drain(stream_.get(), p.payload_bytes).ok()) return false;
      server_->num_pushes_refused_.fetch_add(1);
      server_->worker_->PushTensorAsync(key, Tensor(), [](const absl::Status&) {});
      return true;
    }
    if (!stream_->ReadFull(t->raw_data(), p.payload_bytes).ok()) return false;
    server_->num_pushes_.fetch_add(1);
    server_->worker_->PushTensorAsync(key, *t, [this](const absl::Status& s) {
      if (!s.ok()) server_->num_pushes_refused_.fetch_add(1);
    });
    return true;
  }

  // TLS (when the server has credentials), then the token handshake; a
  // peer that fails either is counted and dropped.
  bool Handshake() {
    const DataChannelOptions& o = server_->options_;
    if (server_->tls_ != nullptr) {
      auto t = NewTlsStream(fd_, *server_->tls_, /*server=*/true, "", o.connect_timeout_ms);
      if (!t.ok()) {
        server_->num_refused_.fetch_add(1);
        return false;
      }
      stream_ = *std::move(t);
    } else {
      stream_ = NewPlainStream(fd_);
    }
    if (!ServerTokenHandshake(stream_.get(), o.auth_token, o.connect_timeout_ms).ok()) {
      server_->num_refused_.fetch_add(1);
      return false;
    }
    return true;
  }

  // Same-host reads: the pid and the nonce's address (or, when they are
  // off here, an empty reply).
  void Hello() {
    ResponseHeader h{};
    h.magic = kResponseMagic;
    h.flags = kHelloReply;
    HelloPayload p{};
    Response r;
    // Without randomness (no getrandom) the reads are not offered.
    if (server_->options_.same_host_reads && !hello_sent_ &&
        getrandom(nonce_.data(), nonce_.size(), 0) == static_cast<ssize_t>(nonce_.size())) {
      p.pid = getpid();
      p.nonce_address = reinterpret_cast<uintptr_t>(nonce_.data());
      p.nonce = nonce_;
      h.payload_bytes = sizeof(p);
      r.data = reinterpret_cast<const char*>(&p);
      r.bytes = sizeof(p);
      hello_sent_ = true;
    }
    r.head.append(reinterpret_cast<const char*>(&h), sizeof(h));
    Write(r);
  }

  void Release(uint64_t id) {
    Tensor t;  // freed outside the lock
    std::lock_guard<std::mutex> l(mu_);
    auto it = held_.find(id);
    if (it == held_.end()) return;
    t = std::move(it->second);
    held_.erase(it);
    server_->num_held_.fetch_sub(1);
    if (held_.empty()) cv_.notify_all();
  }

 public:
  // Waits until the client has read every payload held for it, at most
  // until `deadline_ms`; what is still held then is leaked on purpose, so
  // a late read never sees freed memory.
  void WaitReleased(int64_t deadline_ms) {
    std::unique_lock<std::mutex> l(mu_);
    while (!held_.empty() && !reader_done_ && NowMs() < deadline_ms) {
      cv_.wait_for(l, std::chrono::milliseconds(20));
    }
    if (held_.empty() || reader_done_) return;
    static std::mutex leaked_mu;
    static auto* const leaked = new std::vector<Tensor>();  // reachable: not a leak to LSan
    std::lock_guard<std::mutex> ll(leaked_mu);
    for (auto& [id, t] : held_) leaked->push_back(std::move(t));
    server_->num_held_.fetch_sub(static_cast<int64_t>(held_.size()));
    held_.clear();
  }

 private:
  void Finish(Call& call, const absl::Status& s) {
    {
      std::lock_guard<std::mutex> l(mu_);
      inflight_.erase(call.id);
    }
    Response r;
    ResponseHeader h{};
    h.magic = kResponseMagic;
    h.id = call.id;
    std::string message;
    const Tensor& t = call.result.tensor;
    if (!s.ok()) {
      h.code = static_cast<int32_t>(s.code());
      message = std::string(s.message().substr(0, kMaxMessageBytes));
    } else if (call.result.is_dead || !t.IsInitialized()) {
      h.flags = kDeadPayload;
    } else {
      h.dtype = static_cast<int32_t>(t.dtype());
      h.ndims = static_cast<uint32_t>(t.dims());
      if (DataTypeSize(t.dtype()) == 0) {
        // Strings and resources: a TensorProto.
        tensorflow::TensorProto p;
        t.AsProtoTensorContent(&p);
        r.proto = p.SerializeAsString();
        h.flags = kProtoPayload;
        r.data = r.proto.data();
        r.bytes = r.proto.size();
      } else {
        r.tensor = t;
        r.data = t.raw_data();
        r.bytes = static_cast<uint64_t>(t.TotalBytes());
      }
    }
    h.message_bytes = static_cast<uint32_t>(message.size());
    h.payload_bytes = r.bytes;
    uint64_t address = 0;
    if (same_host_ && h.flags == 0 && r.tensor.IsInitialized() &&
        r.bytes >= static_cast<uint64_t>(server_->options_.same_host_min_bytes)) {
      // The client reads the bytes itself; the tensor is held until then.
      h.flags = kRemotePayload;
      address = reinterpret_cast<uintptr_t>(r.data);
      {
        std::lock_guard<std::mutex> l(mu_);
        if (reader_done_) return;  // the client left: nobody would release it
        held_[call.id] = std::move(r.tensor);
        server_->num_held_.fetch_add(1);
      }
      server_->num_same_host_reads_.fetch_add(1);
      r.data = nullptr;
      r.bytes = 0;
    }
    if (h.payload_bytes > 0) {  // same-host reads count as sent too
      Metrics::Get().Increment(
          "graphrun_sent_bytes_total",
          {{"peer", SentPeerLabel(call.request.rendezvous_key())}, {"path", "data_channel"}},
          static_cast<double>(h.payload_bytes));
    }
    r.head.append(reinterpret_cast<const char*>(&h), sizeof(h));
    for (uint32_t i = 0; i < h.ndims; ++i) {
      int64_t d = t.dim_size(static_cast<int>(i));
      r.head.append(reinterpret_cast<const char*>(&d), sizeof(d));
    }
    r.head.append(message);
    if (h.flags == kRemotePayload) {
      r.head.append(reinterpret_cast<const char*>(&address), sizeof(address));
    }
    if (r.bytes <= static_cast<uint64_t>(inline_bytes_)) {
      Write(r);
      return;
    }
    std::lock_guard<std::mutex> l(mu_);
    if (stop_writer_) return;  // server stopped: nobody to write to
    queue_.push_back(std::move(r));
    cv_.notify_all();
  }

  void Write(Response& r) {
    iovec iov[2];
    iov[0].iov_base = r.head.data();
    iov[0].iov_len = r.head.size();
    iov[1].iov_base = const_cast<char*>(r.data);
    iov[1].iov_len = r.bytes;
    std::lock_guard<std::mutex> l(write_mu_);
    if (!stream_->WriteAllV(iov, r.bytes > 0 ? 2 : 1).ok()) {
      shutdown(fd_, SHUT_RDWR);  // the reader sees it and cleans up
    }
  }

  void WriteLoop() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [&] { return stop_writer_ || !queue_.empty(); });
      if (stop_writer_) return;
      Response r = std::move(queue_.front());
      queue_.pop_front();
      l.unlock();
      Write(r);
      l.lock();
    }
  }

  const int fd_;
  // Set by the reader before it accepts the first request; written only
  // for requests, so never used before.
  std::unique_ptr<ByteStream> stream_;
  DataChannelServer* const server_;
  const int64_t inline_bytes_ = server_->options_.inline_write_bytes;
  std::thread reader_, writer_;
  std::mutex write_mu_;  // one response on the socket at a time
  std::mutex mu_;
  std::condition_variable cv_;
  bool reader_done_ = false;
  bool stop_writer_ = false;
  // Same-host reads (reader thread only, but same_host_ is read by Finish).
  bool hello_sent_ = false;
  std::atomic<bool> same_host_{false};
  std::array<char, 16> nonce_{};
  std::map<uint64_t, std::shared_ptr<Call>> inflight_;
  std::map<uint64_t, Tensor> held_;  // payloads the client is reading
  std::deque<Response> queue_;
};

absl::StatusOr<std::unique_ptr<DataChannelServer>> DataChannelServer::Start(
    WorkerInterface* worker, const std::string& bind_host, const DataChannelOptions& options) {
  std::unique_ptr<DataChannelServer> s(new DataChannelServer(worker, options));
  if (options.tls.enabled()) {
    auto ctx = TlsContext::Create(options.tls, /*server=*/true);
    if (!ctx.ok()) return ctx.status();
    s->tls_ = *std::move(ctx);
  }
  auto res = Resolve(bind_host, 0, /*passive=*/true);
  if (!res.ok()) return res.status();
  int fd = socket((*res)->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (*res)->ai_addr, (*res)->ai_addrlen) != 0 || listen(fd, 128) != 0) {
    absl::Status st = Errno(absl::StrCat("data channel: cannot listen on ", bind_host));
    freeaddrinfo(*res);
    if (fd >= 0) close(fd);
    return st;
  }
  freeaddrinfo(*res);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  s->listen_fd_ = fd;
  if (pipe2(s->wake_fd_, O_CLOEXEC) != 0) {
    close(fd);
    s->listen_fd_ = -1;
    return Errno("data channel: pipe");
  }
  s->accept_thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

DataChannelServer::~DataChannelServer() { Stop(); }

void DataChannelServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_[0], POLLIN, 0}};
    int rc = poll(fds, 2, 1000);
    if (rc < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    // Reap connections whose client left.
    std::vector<std::shared_ptr<Conn>> done;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto it = conns_.begin(); it != conns_.end();) {
        if ((*it)->reader_done()) {
          done.push_back(std::move(*it));
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& c : done) c->StopAndJoin();
    if (rc <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    SetNoDelay(c);
    auto conn = std::make_shared<Conn>(c, this);
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return;  // ~Conn closes c
    conn->Start();
    conns_.push_back(std::move(conn));
  }
}

void DataChannelServer::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_ || listen_fd_ < 0) return;
    stopped_ = true;
  }
  char b = 0;
  if (write(wake_fd_[1], &b, 1) < 0) {
    // The accept loop also wakes once a second; nothing else to do.
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  std::vector<std::shared_ptr<Conn>> conns;
  {
    std::lock_guard<std::mutex> l(mu_);
    conns.swap(conns_);
  }
  // Clients may still be reading payloads from this process's memory.
  const int64_t deadline = NowMs() + kReleaseWaitMs;
  for (auto& c : conns) c->WaitReleased(deadline);
  for (auto& c : conns) c->StopAndJoin();
  close(listen_fd_);
  close(wake_fd_[0]);
  close(wake_fd_[1]);
}

}  // namespace distributed
}  // namespace graphrun
