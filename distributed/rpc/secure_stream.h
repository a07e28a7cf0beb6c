// The data channel's byte streams (distributed/rpc/data_channel.h): plain
// TCP, or TLS over it (OpenSSL, mutual: both ends present certificates of
// the cluster CA), and the cluster-token handshake that runs first on
// every connection.
//
// Token handshake (HMAC-SHA256 challenge-response; the token never
// crosses the wire):
//   server -> client  "GRDA", version, flags (bit 0: token required),
//                     32-byte nonce Ns
//   client -> server  32-byte nonce Nc, HMAC(token, "graphrun client" Ns Nc)
//   server -> client  code (0, or 16 = Unauthenticated),
//                     HMAC(token, "graphrun server" Ns Nc) (zeros if refused)
// Both sides prove the token: a client does not talk to a server that
// cannot. Without a token only the hello travels. Under TLS the handshake
// runs inside it.
//
// A TLS stream is full duplex: one thread may read while another writes
// (calls into the SSL object are serialized; waits happen outside the
// lock on a non-blocking socket).
#ifndef GRAPHRUN_DISTRIBUTED_RPC_SECURE_STREAM_H_
#define GRAPHRUN_DISTRIBUTED_RPC_SECURE_STREAM_H_

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "util/tls_credentials.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace graphrun {
namespace distributed {

// An SSL_CTX for one side. Thread-safe; shared by that side's streams.
class TlsContext {
 public:
  // Server: presents its certificate, requires and verifies the client's.
  // Client: presents its certificate, verifies the server's against the CA
  // and the host it connects to (NewTlsStream). InvalidArgument naming the
  // file when the PEM does not parse or the key does not match.
  static absl::StatusOr<std::shared_ptr<TlsContext>> Create(const TlsCredentials& creds,
                                                            bool server);
  ~TlsContext();
  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* const ctx_;
};

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Reads exactly n bytes. Unavailable when the peer closed or the socket
  // was shut down; DeadlineExceeded past the read deadline.
  virtual absl::Status ReadFull(char* p, uint64_t n) = 0;
  // Writes every iovec completely (iov is modified).
  virtual absl::Status WriteAllV(iovec* iov, int n) = 0;
  // True when a read would find data within timeout_ms, false after it.
  virtual absl::StatusOr<bool> WaitReadable(int timeout_ms) = 0;
  // Reads fail with DeadlineExceeded once this steady-clock ms passes
  // (0: no deadline). Used while handshaking.
  void set_read_deadline_ms(int64_t ms) { read_deadline_ms_ = ms; }
  // "TLSv1.3 TLS_AES_128_GCM_SHA256", or "plaintext".
  virtual std::string Describe() const = 0;

 protected:
  int64_t read_deadline_ms_ = 0;
};

// The socket stays owned by the caller (the stream never closes it), and
// shutdown(2) on it wakes any thread waiting in the stream.
std::unique_ptr<ByteStream> NewPlainStream(int fd);
// Makes the socket non-blocking and runs the TLS handshake within
// timeout_ms. A client checks that the server's certificate names
// `peer_host` (IP or DNS subjectAltName). Unauthenticated when a
// certificate is refused (naming why), Unavailable when the peer hangs up.
absl::StatusOr<std::unique_ptr<ByteStream>> NewTlsStream(int fd, const TlsContext& ctx, bool server,
                                                         const std::string& peer_host,
                                                         int64_t timeout_ms);

// The token handshake above, bounded by timeout_ms. Unauthenticated when
// the tokens differ or only one side has one.
absl::Status ServerTokenHandshake(ByteStream* s, const std::string& token, int64_t timeout_ms);
absl::Status ClientTokenHandshake(ByteStream* s, const std::string& token, int64_t timeout_ms);

int64_t SteadyNowMs();

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_SECURE_STREAM_H_
