#include "distributed/rpc/secure_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "util/openssl_errors.h"

namespace graphrun {
namespace distributed {

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// One system call moves at most this much (2 GiB+ buffers are split).
constexpr size_t kMaxIo = size_t{1} << 30;

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// The thread's OpenSSL error queue as one line (and cleared).
// Waits for `events` on fd until deadline_ms (0: forever). OK when ready
// (or hung up: the next read says so).
absl::Status WaitFd(int fd, short events, int64_t deadline_ms) {
  while (true) {
    int timeout = -1;
    if (deadline_ms > 0) {
      int64_t left = deadline_ms - SteadyNowMs();
      if (left <= 0) return absl::DeadlineExceededError("data channel: handshake timed out");
      timeout = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, timeout);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Errno("poll");
    if (rc > 0) return absl::OkStatus();
  }
}

// The socket under a TLS stream, as a BIO of our own:
//  - it sends with MSG_NOSIGNAL (OpenSSL's socket BIO uses write(2), and a
//    peer that hung up would kill the process with SIGPIPE);
//  - it gathers records (16 KiB each) into one buffer of up to kSendBuffer
//    bytes and sends them together when full or flushed: one system call
//    and one wake-up of the receiver per ~1 MiB instead of per record.
struct SocketBio {
  static constexpr size_t kSendBuffer = size_t{1} << 20;
  int fd = -1;
  std::string out;
  size_t out_off = 0;
  // 1: everything sent; 0: the socket is full; -1: error (errno).
  int Drain() {
    while (out_off < out.size()) {
      ssize_t n = send(fd, out.data() + out_off, out.size() - out_off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
      out_off += static_cast<size_t>(n);
    }
    out.clear();
    out_off = 0;
    return 1;
  }
};

int BioWrite(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  auto* s = static_cast<SocketBio*>(BIO_get_data(b));
  if (s->out.size() - s->out_off + static_cast<size_t>(len) > SocketBio::kSendBuffer) {
    const int r = s->Drain();
    if (r < 0) return -1;
    if (r == 0) {
      BIO_set_retry_write(b);
      return -1;
    }
  }
  s->out.append(data, static_cast<size_t>(len));
  return len;
}

int BioRead(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  auto* s = static_cast<SocketBio*>(BIO_get_data(b));
  ssize_t n;
  do {
    n = recv(s->fd, data, static_cast<size_t>(len), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  return static_cast<int>(n);
}

long BioCtrl(BIO* b, int cmd, long, void*) {
  auto* s = static_cast<SocketBio*>(BIO_get_data(b));
  switch (cmd) {
    case BIO_CTRL_FLUSH: {
      BIO_clear_retry_flags(b);
      const int r = s->Drain();
      if (r == 0) BIO_set_retry_write(b);
      return r;
    }
    case BIO_CTRL_WPENDING:
      return static_cast<long>(s->out.size() - s->out_off);
    default:
      return 0;
  }
}

const BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "graphrun socket");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_create(m, [](BIO* b) {
      BIO_set_init(b, 1);
      return 1;
    });
    return m;
  }();
  return method;
}

// Reads go through a small buffer: a frame's header, key and small
// payload usually arrive together and are taken with one recv instead of
// one per field (system calls are dear on some VMs); a read of at least
// the buffer's size goes straight into its destination. One thread reads
// a stream at a time (a connection's reader), as before.
class PlainStream : public ByteStream {
 public:
  static constexpr size_t kReadBuffer = 32 << 10;

  explicit PlainStream(int fd) : fd_(fd), buffer_(new char[kReadBuffer]) {}

  absl::Status ReadFull(char* p, uint64_t n) override {
    const size_t buffered = std::min<uint64_t>(n, end_ - begin_);
    std::memcpy(p, buffer_.get() + begin_, buffered);
    begin_ += buffered;
    p += buffered;
    n -= buffered;
    while (n > 0) {
      if (read_deadline_ms_ > 0) {
        absl::Status w = WaitFd(fd_, POLLIN, read_deadline_ms_);
        if (!w.ok()) return w;
      }
      const bool direct = n >= kReadBuffer;
      ssize_t r = direct ? recv(fd_, p, std::min<uint64_t>(n, kMaxIo), 0)
                         : recv(fd_, buffer_.get(), kReadBuffer, 0);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r == 0) {
        return absl::UnavailableError("connection closed by the peer (task died or stopped?)");
      }
      if (r < 0) return Errno("recv");
      size_t got = static_cast<size_t>(r);
      if (!direct) {
        // Keep what goes beyond this read for the next.
        begin_ = std::min<uint64_t>(n, got);
        end_ = got;
        std::memcpy(p, buffer_.get(), begin_);
        got = begin_;
      }
      p += got;
      n -= got;
    }
    return absl::OkStatus();
  }

  absl::Status WriteAllV(iovec* iov, int n) override {
    while (n > 0) {
      // Cap one call at kMaxIo bytes.
      iovec capped[4];
      int m = 0;
      size_t budget = kMaxIo;
      for (int i = 0; i < n && m < 4 && budget > 0; ++i) {
        capped[m].iov_base = iov[i].iov_base;
        capped[m].iov_len = std::min(iov[i].iov_len, budget);
        budget -= capped[m].iov_len;
        ++m;
      }
      msghdr msg{};
      msg.msg_iov = capped;
      msg.msg_iovlen = m;
      ssize_t w = sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Errno("send");
      size_t left = static_cast<size_t>(w);
      while (n > 0 && left >= iov->iov_len) {
        left -= iov->iov_len;
        ++iov;
        --n;
      }
      if (n > 0) {
        iov->iov_base = static_cast<char*>(iov->iov_base) + left;
        iov->iov_len -= left;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> WaitReadable(int timeout_ms) override {
    if (begin_ < end_) return true;  // read already, not on the socket
    pollfd p{fd_, POLLIN, 0};
    int rc = poll(&p, 1, timeout_ms);
    if (rc < 0 && errno != EINTR) return Errno("poll");
    return rc > 0;
  }

  std::string Describe() const override { return "plaintext"; }

 private:
  const int fd_;
  std::unique_ptr<char[]> buffer_;
  size_t begin_ = 0, end_ = 0;  // the bytes of buffer_ not read yet
};

class TlsStream : public ByteStream {
 public:
  TlsStream(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) { bio_.fd = fd; }
  ~TlsStream() override { SSL_free(ssl_); }  // frees the BIO, before bio_
  SocketBio* socket_bio() { return &bio_; }

  absl::Status Handshake(bool server, int64_t deadline_ms) {
    while (true) {
      ERR_clear_error();
      int r = server ? SSL_accept(ssl_) : SSL_connect(ssl_);
      if (r == 1) return absl::OkStatus();
      int err = SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        absl::Status w = WaitFd(fd_, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms);
        if (!w.ok()) return w;
        continue;
      }
      long verify = SSL_get_verify_result(ssl_);
      std::string detail = OpenSslErrors();
      if (verify != X509_V_OK) {
        return absl::UnauthenticatedError(
            absl::StrCat("TLS handshake: the peer's certificate is refused: ",
                         X509_verify_cert_error_string(verify)));
      }
      if (err == SSL_ERROR_SSL) {
        return absl::UnauthenticatedError(absl::StrCat("TLS handshake failed: ", detail));
      }
      return absl::UnavailableError(
          absl::StrCat("TLS handshake: connection closed by the peer (", detail, ")"));
    }
  }

  absl::Status ReadFull(char* p, uint64_t n) override {
    while (n > 0) {
      int r, err = 0;
      {
        std::lock_guard<std::mutex> l(mu_);
        ERR_clear_error();
        r = SSL_read(ssl_, p, static_cast<int>(std::min<uint64_t>(n, kMaxIo)));
        if (r <= 0) err = SSL_get_error(ssl_, r);
      }
      if (r > 0) {
        p += r;
        n -= static_cast<uint64_t>(r);
        continue;
      }
      absl::Status s = AfterError(err, "read");
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status WriteAllV(iovec* iov, int n) override {
    for (int i = 0; i < n; ++i) {
      const char* p = static_cast<const char*>(iov[i].iov_base);
      size_t len = iov[i].iov_len;
      while (len > 0) {
        // Retried with the same arguments after WANT_*, as OpenSSL asks.
        const int chunk = static_cast<int>(std::min<size_t>(len, size_t{1} << 20));
        int r, err = 0;
        {
          std::lock_guard<std::mutex> l(mu_);
          ERR_clear_error();
          r = SSL_write(ssl_, p, chunk);
          if (r <= 0) err = SSL_get_error(ssl_, r);
        }
        if (r > 0) {
          p += r;
          len -= static_cast<size_t>(r);
          continue;
        }
        absl::Status s = AfterError(err, "write");
        if (!s.ok()) return s;
      }
    }
    // Send what the BIO gathered.
    while (true) {
      int r;
      {
        std::lock_guard<std::mutex> l(mu_);
        r = static_cast<int>(BIO_flush(SSL_get_wbio(ssl_)));
      }
      if (r == 1) return absl::OkStatus();
      if (r < 0) {
        if (errno == EPIPE || errno == ECONNRESET) {
          return absl::UnavailableError("connection closed by the peer (task died or stopped?)");
        }
        return Errno("TLS write");
      }
      absl::Status w = WaitFd(fd_, POLLOUT, 0);
      if (!w.ok()) return w;
    }
  }

  absl::StatusOr<bool> WaitReadable(int timeout_ms) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (SSL_has_pending(ssl_) == 1) return true;
    }
    pollfd p{fd_, POLLIN, 0};
    int rc = poll(&p, 1, timeout_ms);
    if (rc < 0 && errno != EINTR) return Errno("poll");
    return rc > 0;
  }

  std::string Describe() const override {
    return absl::StrCat(SSL_get_version(ssl_), " ",
                        SSL_CIPHER_get_name(SSL_get_current_cipher(ssl_)));
  }

 private:
  // After SSL_read/SSL_write returned err: waits (OK: retry) or fails.
  absl::Status AfterError(int err, const char* what) {
    switch (err) {
      case SSL_ERROR_WANT_READ:
        return WaitFd(fd_, POLLIN, read_deadline_ms_);
      case SSL_ERROR_WANT_WRITE:
        return WaitFd(fd_, POLLOUT, 0);
      case SSL_ERROR_ZERO_RETURN:
        return absl::UnavailableError("connection closed by the peer (task died or stopped?)");
      case SSL_ERROR_SYSCALL:
        if (errno == 0 || errno == EPIPE || errno == ECONNRESET) {
          return absl::UnavailableError("connection closed by the peer (task died or stopped?)");
        }
        return Errno(absl::StrCat("TLS ", what));
      default:
        return absl::UnavailableError(absl::StrCat("TLS ", what, ": ", OpenSslErrors()));
    }
  }

  const int fd_;
  SSL* const ssl_;
  SocketBio bio_;
  std::mutex mu_;  // every call into ssl_ (and bio_)
};

absl::Status LoadPemInto(SSL_CTX* ctx, const TlsCredentials& c) {
  auto bio = [](const std::string& pem) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  };
  // The CA: every certificate in the file is trusted.
  {
    auto b = bio(c.ca_pem);
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    int n = 0;
    while (X509* x = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, x);
      X509_free(x);
      ++n;
    }
    ERR_clear_error();
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the TLS CA file ", c.ca_file, " holds no certificate"));
    }
  }
  // This side's certificate (and any chain after it) and key.
  {
    auto b = bio(c.cert_pem);
    X509* x = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr);
    if (x == nullptr || SSL_CTX_use_certificate(ctx, x) != 1) {
      if (x != nullptr) X509_free(x);
      return absl::InvalidArgumentError(
          absl::StrCat("the TLS certificate file ", c.cert_file,
                       " does not hold a certificate: ", OpenSslErrors()));
    }
    X509_free(x);
    while (X509* extra = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr)) {
      SSL_CTX_add0_chain_cert(ctx, extra);
    }
    ERR_clear_error();
  }
  {
    auto b = bio(c.key_pem);
    EVP_PKEY* k = PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr);
    if (k == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the TLS key file ", c.key_file, " does not hold a private key: ", OpenSslErrors()));
    }
    const bool used = SSL_CTX_use_PrivateKey(ctx, k) == 1;
    EVP_PKEY_free(k);
    if (!used) {
      return absl::InvalidArgumentError(absl::StrCat("the TLS key ", c.key_file,
                                                     " does not belong to the certificate ",
                                                     c.cert_file, ": ", OpenSslErrors()));
    }
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("the TLS key ", c.key_file,
                                                   " does not belong to the certificate ",
                                                   c.cert_file, ": ", OpenSslErrors()));
  }
  return absl::OkStatus();
}

constexpr uint32_t kHelloMagic = 0x41445247;  // "GRDA"
constexpr uint32_t kHelloVersion = 1;
constexpr uint32_t kTokenRequired = 1;
constexpr size_t kNonce = 32;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint32_t flags;
  uint32_t reserved;
  unsigned char nonce[kNonce];
};
struct Proof {
  unsigned char nonce[kNonce];
  unsigned char mac[32];
};
struct Verdict {
  uint32_t code;
  uint32_t reserved;
  unsigned char mac[32];
};

void Mac(const std::string& token, const char* label, const unsigned char* ns,
         const unsigned char* nc, unsigned char out[32]) {
  std::string msg(label);
  msg.append(reinterpret_cast<const char*>(ns), kNonce);
  msg.append(reinterpret_cast<const char*>(nc), kNonce);
  unsigned int len = 32;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &len);
}

absl::Status Send(ByteStream* s, const void* p, size_t n) {
  iovec iov{const_cast<void*>(p), n};
  return s->WriteAllV(&iov, 1);
}

}  // namespace

absl::StatusOr<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsCredentials& creds,
                                                               bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return absl::InternalError(absl::StrCat("SSL_CTX_new: ", OpenSslErrors()));
  std::shared_ptr<TlsContext> c(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  // AES-128-GCM first: the fastest on CPUs with AES instructions.
  SSL_CTX_set_ciphersuites(ctx,
                           "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                           "TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Nothing arrives after the handshake but data: no session tickets.
  SSL_CTX_set_num_tickets(ctx, 0);
  // Read-ahead into a 128 KiB buffer: one recv for about eight records
  // instead of two per record (header, then body). On a VM whose system
  // calls are dear this doubled TLS's rate at 64 MiB (0.28-0.34x of
  // plaintext before, 0.54-0.67x after, alternating runs); 256 KiB ran at
  // 0.57-0.71x, 1 MiB at 0.44x (the records leave the cache before they
  // are decrypted), and the default (one record) no faster than none
  // (docs/security.md). Buffered records are not on the
  // socket: WaitReadable asks SSL_has_pending.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, size_t{1} << 17);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify(
      ctx, server ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER, nullptr);
  absl::Status s = LoadPemInto(ctx, creds);
  if (!s.ok()) return s;
  return c;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

std::unique_ptr<ByteStream> NewPlainStream(int fd) { return std::make_unique<PlainStream>(fd); }

absl::StatusOr<std::unique_ptr<ByteStream>> NewTlsStream(int fd, const TlsContext& ctx, bool server,
                                                         const std::string& peer_host,
                                                         int64_t timeout_ms) {
  SSL* ssl = SSL_new(ctx.get());
  if (ssl == nullptr) return absl::InternalError(absl::StrCat("SSL_new: ", OpenSslErrors()));
  auto stream = std::make_unique<TlsStream>(fd, ssl);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  BIO* bio = BIO_new(SocketBioMethod());
  if (bio == nullptr) return absl::InternalError(absl::StrCat("BIO_new: ", OpenSslErrors()));
  BIO_set_data(bio, stream->socket_bio());
  SSL_set_bio(ssl, bio, bio);
  if (!server) {
    // The server's certificate must name the host this task dialled.
    in6_addr a6;
    in_addr a4;
    const bool ip = inet_pton(AF_INET, peer_host.c_str(), &a4) == 1 ||
                    inet_pton(AF_INET6, peer_host.c_str(), &a6) == 1;
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, peer_host.c_str())
                : X509_VERIFY_PARAM_set1_host(param, peer_host.c_str(), 0);
    if (ok != 1) {
      return absl::InvalidArgumentError(absl::StrCat("TLS: cannot verify host '", peer_host, "'"));
    }
    if (!ip) SSL_set_tlsext_host_name(ssl, peer_host.c_str());
  }
  absl::Status s = stream->Handshake(server, SteadyNowMs() + timeout_ms);
  if (!s.ok()) return s;
  return std::unique_ptr<ByteStream>(std::move(stream));
}

absl::Status ServerTokenHandshake(ByteStream* s, const std::string& token, int64_t timeout_ms) {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kHelloVersion;
  h.flags = token.empty() ? 0 : kTokenRequired;
  RAND_bytes(h.nonce, kNonce);
  absl::Status st = Send(s, &h, sizeof(h));
  if (!st.ok() || token.empty()) return st;
  s->set_read_deadline_ms(SteadyNowMs() + timeout_ms);
  Proof p;
  st = s->ReadFull(reinterpret_cast<char*>(&p), sizeof(p));
  s->set_read_deadline_ms(0);
  if (!st.ok()) return st;
  unsigned char want[32];
  Mac(token, "graphrun client", h.nonce, p.nonce, want);
  Verdict v{};
  const bool ok = CRYPTO_memcmp(want, p.mac, sizeof(want)) == 0;
  if (ok) {
    Mac(token, "graphrun server", h.nonce, p.nonce, v.mac);
  } else {
    v.code = static_cast<uint32_t>(absl::StatusCode::kUnauthenticated);
  }
  st = Send(s, &v, sizeof(v));
  if (!ok) return absl::UnauthenticatedError("data channel: a client without the cluster token");
  return st;
}

absl::Status ClientTokenHandshake(ByteStream* s, const std::string& token, int64_t timeout_ms) {
  s->set_read_deadline_ms(SteadyNowMs() + timeout_ms);
  auto done = [&](absl::Status st) {
    s->set_read_deadline_ms(0);
    return st;
  };
  Hello h;
  absl::Status st = s->ReadFull(reinterpret_cast<char*>(&h), sizeof(h));
  if (!st.ok()) return done(st);
  if (h.magic != kHelloMagic || h.version != kHelloVersion) {
    return done(absl::UnavailableError("data channel: the peer does not speak this protocol"));
  }
  const bool required = (h.flags & kTokenRequired) != 0;
  if (required && token.empty()) {
    return done(absl::UnauthenticatedError(
        "data channel: the peer requires the cluster token and this task has none"));
  }
  if (!required && !token.empty()) {
    return done(absl::UnauthenticatedError(
        "data channel: the peer does not check the cluster token (not part of this cluster?)"));
  }
  if (!required) return done(absl::OkStatus());
  Proof p;
  RAND_bytes(p.nonce, kNonce);
  Mac(token, "graphrun client", h.nonce, p.nonce, p.mac);
  if (!(st = Send(s, &p, sizeof(p))).ok()) return done(st);
  Verdict v;
  if (!(st = s->ReadFull(reinterpret_cast<char*>(&v), sizeof(v))).ok()) {
    // A server that refuses may hang up before the verdict arrives.
    return done(st);
  }
  if (v.code != 0) {
    return done(absl::UnauthenticatedError("data channel: the peer refused this task's token"));
  }
  unsigned char want[32];
  Mac(token, "graphrun server", h.nonce, p.nonce, want);
  if (CRYPTO_memcmp(want, v.mac, sizeof(want)) != 0) {
    return done(absl::UnauthenticatedError(
        "data channel: the peer could not prove it holds the cluster token"));
  }
  return done(absl::OkStatus());
}

}  // namespace distributed
}  // namespace graphrun
