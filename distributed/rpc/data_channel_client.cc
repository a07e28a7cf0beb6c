#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "distributed/rpc/data_channel.h"
#include "distributed/rpc/data_channel_internal.h"
#include "graph/memory_budget.h"
#include "graph/proto/tensor.pb.h"
#include "graph/status.h"
#include "util/metrics.h"

namespace graphrun {
namespace distributed {

using namespace data_channel_internal;  // NOLINT: this file is its implementation

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
  if (options.same_host_reads) {
    absl::Status st = c->NegotiateSameHost();
    if (!st.ok()) {
      return AnnotatePeerStatus(st.code(), absl::StrCat("data channel: ", st.message()), c->who_);
    }  // ~DataConnection closes fd
  }
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

absl::Status DataConnection::NegotiateSameHost() {
  GR_RETURN_IF_ERROR(WriteRequest(kHello, 0, 0, ""));
  stream_->set_read_deadline_ms(NowMs() + options_.connect_timeout_ms);
  ResponseHeader h;
  HelloPayload p{};
  absl::Status s = stream_->ReadFull(reinterpret_cast<char*>(&h), sizeof(h));
  if (s.ok() && (h.magic != kResponseMagic || h.flags != kHelloReply || h.ndims != 0 ||
                 h.message_bytes != 0 || (h.payload_bytes != 0 && h.payload_bytes != sizeof(p)))) {
    s = absl::DataLossError("malformed reply to the same-host probe");
  }
  if (s.ok() && h.payload_bytes == sizeof(p)) {
    s = stream_->ReadFull(reinterpret_cast<char*>(&p), sizeof(p));
  }
  stream_->set_read_deadline_ms(0);
  GR_RETURN_IF_ERROR(s);
  if (h.payload_bytes == 0 || p.pid <= 0 || p.pid > std::numeric_limits<int>::max()) {
    return absl::OkStatus();  // the server keeps its payloads on the socket
  }
  // Reading the nonce where the server says it is proves that its memory
  // is this machine's and readable by this process.
  std::array<char, 16> seen{};
  if (!ReadProcessMemory(static_cast<int>(p.pid), seen.data(), p.nonce_address, seen.size()).ok() ||
      seen != p.nonce) {
    return absl::OkStatus();
  }
  GR_RETURN_IF_ERROR(WriteRequest(kSameHost, 0, 0, ""));
  peer_pid_ = static_cast<int>(p.pid);
  return absl::OkStatus();
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

absl::Status DataConnection::PushTensor(const std::string& key, const Tensor& tensor) {
  if (DataTypeSize(tensor.dtype()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("PushTensor of '", key,
                                                   "': ", DataTypeString(tensor.dtype()),
                                                   " is not a fixed-size type"));
  }
  if (broken_) return absl::UnavailableError(absl::StrCat(who_, ": data channel is closed"));
  RequestHeader h{kRequestMagic, kPush, 0, 0, key.size()};
  std::string desc;
  PushHeader p{static_cast<int32_t>(tensor.dtype()), static_cast<uint32_t>(tensor.dims()),
               static_cast<uint64_t>(tensor.TotalBytes())};
  desc.append(reinterpret_cast<const char*>(&p), sizeof(p));
  for (int i = 0; i < tensor.dims(); ++i) {
    const int64_t d = tensor.dim_size(i);
    desc.append(reinterpret_cast<const char*>(&d), sizeof(d));
  }
  iovec iov[4];
  iov[0] = {&h, sizeof(h)};
  iov[1] = {const_cast<char*>(key.data()), key.size()};
  iov[2] = {desc.data(), desc.size()};
  iov[3] = {const_cast<char*>(tensor.raw_data()), p.payload_bytes};
  absl::Status s;
  {
    std::lock_guard<std::mutex> l(write_mu_);
    s = stream_->WriteAllV(iov, p.payload_bytes > 0 ? 4 : 3);
  }
  if (!s.ok()) {
    shutdown(fd_, SHUT_RDWR);  // the reader fails every pending call
    return AnnotatePeerStatus(absl::StatusCode::kUnavailable,
                              absl::StrCat("pushing a tensor: ", s.message()), who_);
  }
  return absl::OkStatus();
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

void DataConnection::WatchBreak(std::shared_ptr<const std::atomic<bool>> cancelled,
                                std::function<void(const absl::Status&)> on_break) {
  absl::Status broken;
  std::vector<BreakWatch> dropped;  // destroyed outside mu_
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!broken_) {
      auto keep = std::partition(break_watchers_.begin(), break_watchers_.end(),
                                 [](const BreakWatch& w) { return !w.cancelled->load(); });
      dropped.assign(std::make_move_iterator(keep), std::make_move_iterator(break_watchers_.end()));
      break_watchers_.erase(keep, break_watchers_.end());
      break_watchers_.push_back({std::move(cancelled), std::move(on_break)});
      return;
    }
    broken = broken_status_.ok()
                 ? absl::UnavailableError(absl::StrCat(who_, ": data channel is closed"))
                 : broken_status_;
  }
  if (!cancelled->load()) on_break(broken);
}

void DataConnection::FailAll(const absl::Status& status) {
  std::vector<Pending> failed;
  std::vector<BreakWatch> watchers;
  {
    std::lock_guard<std::mutex> l(mu_);
    broken_ = true;
    if (broken_status_.ok()) broken_status_ = status;
    watchers.swap(break_watchers_);
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
  for (auto& w : watchers) {
    if (!w.cancelled->load()) w.on_break(status);
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

absl::Status DataConnection::TooLarge(uint64_t bytes) const {
  return AnnotatePeerStatus(
      absl::StatusCode::kResourceExhausted,
      absl::StrCat("RecvTensor of ", bytes, " bytes exceeds the data channel limit of ",
                   options_.max_tensor_bytes, " bytes (max_recv_tensor_bytes)"),
      who_);
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
  Tensor destination;  // the caller's, shared: alive even if the call ends meanwhile
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pending_.find(h.id);
    wanted = it != pending_.end();
    if (wanted) destination = it->second.result->destination;
  }
  // Where a fixed-size payload goes: the caller's destination when it
  // fits exactly, else a fresh tensor.
  auto allocate = [&](DataType dtype, uint64_t bytes) -> absl::StatusOr<Tensor> {
    const TensorShape shape{absl::Span<const int64_t>(dims)};
    if (destination.IsInitialized() && destination.dtype() == dtype &&
        static_cast<uint64_t>(destination.TotalBytes()) == bytes) {
      return destination.Reshaped(shape);
    }
    return Tensor::Allocate(dtype, shape, "a received tensor: ");
  };
  absl::Status status;
  RecvTensorResult got;
  if (h.code != 0) {
    status = AnnotatePeerStatus(static_cast<absl::StatusCode>(h.code), message, who_);
  } else if (h.flags & kDeadPayload) {
    got.is_dead = true;
  } else if (h.payload_bytes > static_cast<uint64_t>(options_.max_tensor_bytes) &&
             !(h.flags & kRemotePayload)) {
    status = TooLarge(h.payload_bytes);
  } else if (h.flags & kRemotePayload) {
    // Same-host read: the payload stays in the server until released.
    uint64_t address = 0;
    if (peer_pid_ == 0) return absl::DataLossError("a same-host payload on a socket-only channel");
    if (!(s = stream_->ReadFull(reinterpret_cast<char*>(&address), sizeof(address))).ok()) {
      return s;
    }
    const uint64_t payload = h.payload_bytes;
    h.payload_bytes = 0;  // nothing more on the socket
    DataType dtype = static_cast<DataType>(h.dtype);
    absl::StatusOr<uint64_t> bytes = PayloadBytes(dtype, dims);
    if (!bytes.ok() || *bytes != payload) {
      status =
          absl::DataLossError(absl::StrCat(who_, ": RecvTensor header (dtype ", h.dtype,
                                           ") does not match its ", payload, " payload bytes"));
    } else if (payload > static_cast<uint64_t>(options_.max_tensor_bytes)) {
      status = TooLarge(payload);
    } else if (wanted) {
      auto t = allocate(dtype, payload);
      if (!t.ok()) {
        status = AnnotatePeerStatus(t.status().code(), std::string(t.status().message()), who_);
      } else if ((s = ReadProcessMemory(peer_pid_, t->raw_data(), address, payload)).ok()) {
        got.tensor = std::move(*t);
      }
    }
    // Released in every case, read or not: the server holds it until then.
    absl::Status released = WriteRequest(kRelease, h.id, 0, "");
    if (!s.ok()) return s;
    GR_RETURN_IF_ERROR(released);
    if (got.tensor.IsInitialized()) {
      // Closed meanwhile: the server may have let go of the bytes mid-read.
      if (broken_) return absl::UnavailableError("data channel closed");
      num_same_host_reads_.fetch_add(1);
    }
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
    absl::StatusOr<uint64_t> size = PayloadBytes(dtype, dims);
    const uint64_t bytes = size.ok() ? *size : 0;
    if (!size.ok() || bytes != h.payload_bytes) {
      status = absl::DataLossError(absl::StrCat(who_, ": RecvTensor header (dtype ", h.dtype,
                                                ") does not match its ", h.payload_bytes,
                                                " payload bytes"));
    } else if (wanted) {
      auto t = allocate(dtype, bytes);
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
