#include "distributed/rpc/data_channel.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "graph/memory_budget.h"
#include "graph/proto/tensor.pb.h"
#include "graph/status.h"
#include "util/metrics.h"

namespace graphrun {
namespace distributed {
namespace {

constexpr uint32_t kRequestMagic = 0x51445247;   // "GRDQ"
constexpr uint32_t kResponseMagic = 0x50445247;  // "GRDP"
constexpr uint32_t kRecv = 1;
constexpr uint32_t kCancel = 2;
constexpr uint32_t kDeadPayload = 1;
constexpr uint32_t kProtoPayload = 2;
constexpr uint32_t kMaxDims = 64;
constexpr uint32_t kMaxMessageBytes = 1 << 20;

struct RequestHeader {
  uint32_t magic;
  uint32_t type;
  uint64_t id;
  int64_t step_id;
  uint64_t key_bytes;
};
static_assert(sizeof(RequestHeader) == 32, "packed request header");

struct ResponseHeader {
  uint32_t magic;
  uint32_t flags;
  uint64_t id;
  int32_t code;
  int32_t dtype;
  uint32_t ndims;
  uint32_t message_bytes;
  uint64_t payload_bytes;
};
static_assert(sizeof(ResponseHeader) == 40, "packed response header");

int64_t NowMs() { return SteadyNowMs(); }

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

// A fresh, zero-copy destination for `bytes` of payload. Large buffers
// come straight from mmap, 2 MiB-aligned and marked for transparent huge
// pages: receiving into them then takes a page fault per 2 MiB instead of
// per 4 KiB, which on loopback is a large share of the cost.
absl::StatusOr<Tensor> AllocateReceiveTensor(DataType dtype, const TensorShape& shape,
                                             uint64_t bytes) {
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  if (bytes < kHuge) return Tensor::Allocate(dtype, shape, "a received tensor: ");
  // Counted in the process's memory budget like any tensor.
  const int64_t counted = static_cast<int64_t>(bytes);
  GR_RETURN_IF_ERROR(
      memory_internal::Reserve(counted, /*checked=*/true,
                               absl::StrCat("a received ", DataTypeString(dtype),
                                            " tensor of shape ", shape.DebugString())));
  const uint64_t len = (bytes + kHuge - 1) / kHuge * kHuge;
  void* raw =
      mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    memory_internal::Release(counted);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes for a received tensor"));
  }
  // Keep the 2 MiB-aligned part.
  char* base = static_cast<char*>(raw);
  char* aligned =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + kHuge - 1) / kHuge * kHuge);
  if (aligned > base) munmap(base, aligned - base);
  char* end = base + len + kHuge;
  if (end > aligned + len) munmap(aligned + len, end - (aligned + len));
  madvise(aligned, len, MADV_HUGEPAGE);
  auto buffer =
      std::make_shared<TensorBuffer>(aligned, static_cast<size_t>(bytes), [aligned, len, counted] {
        munmap(aligned, len);
        memory_internal::Release(counted);
      });
  return Tensor(dtype, shape, std::move(buffer), aligned);
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

}  // namespace

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
      if (h.type != kRecv) break;
      auto call = std::make_shared<Call>();
      call->id = h.id;
      call->request.set_step_id(h.step_id);
      call->request.set_rendezvous_key(std::move(key));
      {
        std::lock_guard<std::mutex> l(mu_);
        inflight_[h.id] = call;
      }
      server_->num_requests_.fetch_add(1);
      auto self = shared_from_this();
      server_->worker_->RecvTensorAsync(
          &call->opts, call->request, &call->result,
          [self, call](const absl::Status& s) { self->Finish(*call, s); });
    }
    // The client went away (or Stop): nobody waits for the in-flight calls.
    std::vector<std::shared_ptr<Call>> calls;
    {
      std::lock_guard<std::mutex> l(mu_);
      reader_done_ = true;
      for (auto& [id, c] : inflight_) calls.push_back(c);
    }
    for (auto& c : calls) c->opts.StartCancel();
    // Dropped at once (a client that broke the protocol learns it now, not
    // when the accept loop reaps the connection); cancelled calls' answers
    // find the socket shut.
    shutdown(fd_, SHUT_RDWR);
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
    if (r.bytes > 0) {
      Metrics::Get().Increment("graphrun_sent_bytes_total", {{"path", "data_channel"}},
                               static_cast<double>(r.bytes));
    }
    r.head.append(reinterpret_cast<const char*>(&h), sizeof(h));
    for (uint32_t i = 0; i < h.ndims; ++i) {
      int64_t d = t.dim_size(static_cast<int>(i));
      r.head.append(reinterpret_cast<const char*>(&d), sizeof(d));
    }
    r.head.append(message);
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
  std::map<uint64_t, std::shared_ptr<Call>> inflight_;
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
  for (auto& c : conns) c->StopAndJoin();
  close(listen_fd_);
  close(wake_fd_[0]);
  close(wake_fd_[1]);
}

// ---------------------------------------------------------------------------
// Client side.

absl::StatusOr<std::shared_ptr<DataConnection>> DataConnection::Connect(
    const std::string& host, int port, std::string who, const DataChannelOptions& options) {
  auto res = Resolve(host, port, /*passive=*/false);
  if (!res.ok())
    return AnnotatePeerStatus(res.status().code(), std::string(res.status().message()), who);
  absl::Status last = absl::UnavailableError("no address");
  int fd = -1;
  for (addrinfo* a = *res; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      last = Errno("socket");
      continue;
    }
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, static_cast<int>(options.connect_timeout_ms));
      if (rc == 0) {
        errno = ETIMEDOUT;
        rc = -1;
      } else if (rc > 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err == 0 ? 0 : -1;
      }
    }
    if (rc == 0) break;
    last = Errno(absl::StrCat("data channel: connect to ", host, ":", port));
    close(fd);
    fd = -1;
  }
  freeaddrinfo(*res);
  if (fd < 0) return AnnotatePeerStatus(last.code(), std::string(last.message()), who);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  SetNoDelay(fd);
  auto fail = [&](const absl::Status& st) {
    close(fd);
    return AnnotatePeerStatus(st.code(), absl::StrCat("data channel: ", st.message()), who);
  };
  std::unique_ptr<ByteStream> stream;
  if (options.tls.enabled()) {
    auto ctx = TlsContext::Create(options.tls, /*server=*/false);
    if (!ctx.ok()) return fail(ctx.status());
    auto t = NewTlsStream(fd, **ctx, /*server=*/false, host, options.connect_timeout_ms);
    if (!t.ok()) return fail(t.status());
    stream = *std::move(t);
  } else {
    stream = NewPlainStream(fd);
  }
  absl::Status hs =
      ClientTokenHandshake(stream.get(), options.auth_token, options.connect_timeout_ms);
  if (!hs.ok()) return fail(hs);
  std::shared_ptr<DataConnection> c(
      new DataConnection(fd, std::move(stream), std::move(who), options));
  c->reader_ = std::thread([p = c.get()] { p->ReadLoop(); });
  return c;
}

DataConnection::~DataConnection() {
  Close();
  close(fd_);
}

void DataConnection::Close() {
  broken_ = true;
  shutdown(fd_, SHUT_RDWR);
  if (reader_.joinable()) {
    if (reader_.get_id() == std::this_thread::get_id()) {
      reader_.detach();  // dropped from one of our own callbacks
    } else {
      reader_.join();
    }
  }
}

absl::Status DataConnection::WriteRequest(uint32_t type, uint64_t id, int64_t step_id,
                                          const std::string& key) {
  RequestHeader h{kRequestMagic, type, id, step_id, key.size()};
  iovec iov[2];
  iov[0].iov_base = &h;
  iov[0].iov_len = sizeof(h);
  iov[1].iov_base = const_cast<char*>(key.data());
  iov[1].iov_len = key.size();
  std::lock_guard<std::mutex> l(write_mu_);
  return stream_->WriteAllV(iov, key.empty() ? 1 : 2);
}

void DataConnection::RecvTensorAsync(CallOptions* opts, const RecvTensorRequest& request,
                                     RecvTensorResult* result, StatusCallback done) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (broken_) {
      // Fall through below with no entry.
      id = 0;
    } else {
      id = next_id_++;
      Pending& p = pending_[id];
      p.opts = opts;
      p.result = result;
      p.done = std::move(done);
      if (opts != nullptr && opts->timeout_ms() > 0) {
        p.deadline_ms = NowMs() + opts->timeout_ms();
        any_deadline_ = true;
      }
    }
  }
  if (id == 0) {
    done(absl::UnavailableError(absl::StrCat(who_, ": data channel is closed")));
    return;
  }
  // Until `armed`, only this thread completes the entry: others just mark
  // it, so `opts` is never touched after its call completed.
  if (opts != nullptr)
    opts->SetCancelCallback([this, id] {
      Cancel(id, absl::CancelledError(absl::StrCat(who_, ": RecvTensor cancelled")));
    });
  absl::Status early;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pending_.find(id);
    if (!it->second.early_status.ok()) {
      early = it->second.early_status;
      done = std::move(it->second.done);
      pending_.erase(it);
    } else {
      it->second.armed = true;
    }
  }
  if (!early.ok()) {
    if (opts != nullptr) opts->ClearCancelCallback();
    done(early);
    return;
  }
  absl::Status s = WriteRequest(kRecv, id, request.step_id(), request.rendezvous_key());
  if (!s.ok()) {
    shutdown(fd_, SHUT_RDWR);  // the reader fails every pending call
  }
}

void DataConnection::Cancel(uint64_t id, absl::Status status) {
  Pending p;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    if (!it->second.armed) {
      if (it->second.early_status.ok()) it->second.early_status = status;
      return;
    }
    p = std::move(it->second);
    pending_.erase(it);
  }
  // Tell the server to stop waiting; its answer will be drained.
  if (!broken_) WriteRequest(kCancel, id, 0, "").IgnoreError();
  // Runs inside opts->StartCancel(): clearing is allowed (recursive lock).
  if (p.opts != nullptr) p.opts->ClearCancelCallback();
  p.done(status);
}

void DataConnection::FailAll(const absl::Status& status) {
  std::vector<Pending> failed;
  {
    std::lock_guard<std::mutex> l(mu_);
    broken_ = true;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (!it->second.armed) {
        if (it->second.early_status.ok()) it->second.early_status = status;
        ++it;
        continue;
      }
      failed.push_back(std::move(it->second));
      it = pending_.erase(it);
    }
  }
  for (auto& p : failed) {
    if (p.opts != nullptr) p.opts->ClearCancelCallback();
    p.done(status);
  }
}

void DataConnection::ReadLoop() {
  absl::Status s;
  while (true) {
    // Wait for a response at most 100 ms at a time, so deadlines of calls
    // that started while this thread was waiting are enforced too.
    auto readable = stream_->WaitReadable(100);
    if (!readable.ok()) {
      s = readable.status();
      break;
    }
    if (!*readable) {
      std::vector<uint64_t> expired;
      const int64_t now = NowMs();
      {
        std::lock_guard<std::mutex> l(mu_);
        if (!any_deadline_) continue;
        for (auto& [id, e] : pending_) {
          if (e.armed && e.deadline_ms > 0 && now >= e.deadline_ms) expired.push_back(id);
        }
      }
      for (uint64_t id : expired) {
        Cancel(id,
               absl::DeadlineExceededError(absl::StrCat(who_, ": RecvTensor deadline exceeded")));
      }
      continue;
    }
    s = ReadOne();
    if (!s.ok()) break;
  }
  FailAll(AnnotatePeerStatus(absl::StatusCode::kUnavailable,
                             absl::StrCat("data channel: ", s.message()), who_));
}

absl::Status DataConnection::ReadOne() {
  ResponseHeader h;
  absl::Status s = stream_->ReadFull(reinterpret_cast<char*>(&h), sizeof(h));
  if (!s.ok()) return s;
  if (h.magic != kResponseMagic || h.ndims > kMaxDims || h.message_bytes > kMaxMessageBytes) {
    return absl::DataLossError("malformed response header");
  }
  std::vector<int64_t> dims(h.ndims);
  std::string message(h.message_bytes, '\0');
  if (!(s = stream_->ReadFull(reinterpret_cast<char*>(dims.data()), dims.size() * 8)).ok())
    return s;
  if (!(s = stream_->ReadFull(message.data(), message.size())).ok()) return s;
  bool wanted;
  {
    std::lock_guard<std::mutex> l(mu_);
    wanted = pending_.count(h.id) > 0;
  }
  absl::Status status;
  RecvTensorResult got;
  if (h.code != 0) {
    status = AnnotatePeerStatus(static_cast<absl::StatusCode>(h.code), message, who_);
  } else if (h.flags & kDeadPayload) {
    got.is_dead = true;
  } else if (h.payload_bytes > static_cast<uint64_t>(options_.max_tensor_bytes)) {
    status = AnnotatePeerStatus(
        absl::StatusCode::kResourceExhausted,
        absl::StrCat("RecvTensor of ", h.payload_bytes, " bytes exceeds the data channel limit of ",
                     options_.max_tensor_bytes, " bytes (max_recv_tensor_bytes)"),
        who_);
  } else if (h.flags & kProtoPayload) {
    // Grown as the bytes arrive: a header that lies about its size costs
    // only what the peer really sends.
    std::string buf;
    for (uint64_t left = h.payload_bytes; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, uint64_t{1} << 20));
      const size_t at = buf.size();
      buf.resize(at + n);
      if (!(s = stream_->ReadFull(buf.data() + at, n)).ok()) return s;
      left -= n;
    }
    h.payload_bytes = 0;
    tensorflow::TensorProto p;
    if (!p.ParseFromString(buf)) {
      status = absl::DataLossError(absl::StrCat(who_, ": bad tensor in RecvTensor response"));
    } else if (auto t = Tensor::FromProto(p); t.ok()) {
      got.tensor = std::move(*t);
    } else {
      status = AnnotatePeerStatus(t.status().code(), std::string(t.status().message()), who_);
    }
  } else {
    DataType dtype = static_cast<DataType>(h.dtype);
    uint64_t bytes = DataTypeSupported(dtype) ? static_cast<uint64_t>(DataTypeSize(dtype)) : 0;
    bool ok = bytes > 0;
    for (int64_t d : dims) {
      if (!ok) break;
      if (d < 0 || (d > 0 && bytes > std::numeric_limits<uint64_t>::max() / d))
        ok = false;
      else
        bytes *= static_cast<uint64_t>(d);
    }
    if (!ok || bytes != h.payload_bytes) {
      status = absl::DataLossError(absl::StrCat(who_, ": RecvTensor header (dtype ", h.dtype,
                                                ") does not match its ", h.payload_bytes,
                                                " payload bytes"));
    } else if (wanted) {
      auto t = AllocateReceiveTensor(dtype, TensorShape(absl::Span<const int64_t>(dims)), bytes);
      if (t.ok()) {
        got.tensor = std::move(*t);
        if (!(s = stream_->ReadFull(got.tensor.raw_data(), bytes)).ok()) return s;
        h.payload_bytes = 0;
      } else {
        status = AnnotatePeerStatus(t.status().code(), std::string(t.status().message()), who_);
      }
    }
  }
  if (h.payload_bytes > 0 && !(s = Drain(stream_.get(), h.payload_bytes)).ok()) return s;
  Pending p;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pending_.find(h.id);
    if (it == pending_.end() || !it->second.armed) return absl::OkStatus();  // cancelled
    p = std::move(it->second);
    pending_.erase(it);
  }
  if (p.opts != nullptr) p.opts->ClearCancelCallback();
  if (status.ok()) *p.result = std::move(got);
  p.done(status);
  return absl::OkStatus();
}

}  // namespace distributed
}  // namespace graphrun
