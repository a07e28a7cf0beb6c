// Data channel: RecvTensor over a raw TCP stream, negotiated over gRPC.
//
// gRPC stays the control plane. A server also listens on a second TCP port
// (DataChannelServer) and reports it in GetStatus's trailing metadata
// (kDataPortMetadataKey); a GrpcWorkerClient that wants a peer's tensors
// opens one persistent DataConnection to it and multiplexes every
// RecvTensor over it. Without the port (an old server, a port that refuses)
// the client falls back to the gRPC stream.
//
// Wire format (host byte order: peers share the architecture; the magic
// numbers reject anything else):
//   request   RequestHeader, then key_bytes of rendezvous key
//   cancel    RequestHeader with type kCancel, key_bytes = 0
//   push      RequestHeader with type kPush and the key, then PushHeader,
//             ndims int64 dims and the tensor's raw buffer: a tensor for
//             the server's WorkerInterface::PushTensorAsync, unanswered
//   response  ResponseHeader, ndims int64 dims, message_bytes of status
//             message, then payload_bytes: the tensor's raw buffer (fixed-
//             size types), a serialized TensorProto (kProtoPayload: strings,
//             resources), or nothing (dead tensors, errors).
// Responses carry the request id and may come in any order. The sender
// writes the payload with sendmsg straight from the tensor buffer; the
// receiver allocates the 64-byte-aligned Tensor from the header and reads
// into it: one copy in the kernel each way, none in user space. Transfers
// are split into <= 1 GiB system calls, so tensors over 2 GiB work.
//
// Errors behave as on the gRPC path: the serving Worker's status (Aborted
// for a stale incarnation, ...) travels as code + message and is prefixed
// with the peer ("task /job:ps/replica:0/task:0 (127.0.0.1:PORT)") exactly
// as FromGrpcStatus does; a connection that breaks (peer died) fails every
// call on it with Unavailable naming the peer, at once.
//
// Same-host reads. Peers on one machine skip the socket for large payloads:
// right after the handshake the client asks (kHello) for the server's pid
// and the address of a random nonce in the server's memory, reads the
// nonce there with process_vm_readv (Linux cross-memory attach) and, when
// it matches, turns the reads on (kSameHost). From then on a fixed-size
// payload of at least same_host_min_bytes is answered with its address
// instead of its bytes: the client copies it straight from the server's
// tensor into its own (one copy, done by the receiver alone, no socket
// buffers), then tells the server to let go of it (kRelease). The server
// holds the tensor until then, and a stopping server waits (up to 2 s) for
// its clients' reads. A peer on another host, in another pid namespace,
// without the permission to read (ptrace rules), or with the reads turned
// off fails the probe and gets every byte over the socket as before; so
// does every string, dead or error response. The reads start only after
// the TLS and token handshakes, so a stranger never gets there.
//
// No gRPC here: plain POSIX sockets, so tests can fork a peer and kill it.
#ifndef GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_H_
#define GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "distributed/rpc/secure_stream.h"
#include "distributed/worker_interface.h"
#include "util/tls_credentials.h"

namespace graphrun {
namespace distributed {

// Trailing-metadata key of GetStatus carrying the decimal data port.
inline constexpr char kDataPortMetadataKey[] = "graphrun-data-port";

struct DataChannelOptions {
  // Largest tensor a receiver accepts; a larger one is ResourceExhausted
  // (its bytes are drained, the connection stays usable).
  int64_t max_tensor_bytes = int64_t{8} << 30;
  // Largest rendezvous key a server accepts (larger: protocol error, the
  // connection is closed).
  int64_t max_key_bytes = int64_t{64} << 10;
  // Bound on connecting to a peer's data port (and on each handshake).
  int64_t connect_timeout_ms = 5000;
  // The cluster token: both ends prove it (secure_stream.h) before any
  // request ("": none; then a peer with one is refused).
  std::string auth_token;
  // With TLS material, every connection is mutual TLS: the server requires
  // a client certificate of the CA, the client checks that the server's
  // certificate names the host it dialled.
  TlsCredentials tls;
  // Responses with a payload up to this size are written inline by the
  // thread that completes the RecvTensor (usually the sender's executor
  // thread: lowest latency); larger ones by the connection's writer thread.
  int64_t inline_write_bytes = int64_t{256} << 10;
  // Same-host reads (above): offered by a server, tried by a client. Off
  // on either side: every payload goes over the socket.
  bool same_host_reads = SameHostReadsDefault();
  // Smaller payloads go over the socket anyway (one message is cheaper).
  int64_t same_host_min_bytes = int64_t{64} << 10;

  // True unless the environment says GRAPHRUN_SAME_HOST_READS=0 (or
  // false/off/no): how benchmarks and users compare the transports.
  static bool SameHostReadsDefault();
};

// The peer a tensor served under `rendezvous_key` goes to, as the
// graphrun_sent_bytes_total series labels it: the task of the key's
// destination device ("/job:worker/replica:0/task:1"), "collective" for
// collective pieces (whose key names no task), "unknown" otherwise.
std::string SentPeerLabel(const std::string& rendezvous_key);

// Prefixes `message` with `who` the way FromGrpcStatus does: always for
// transport codes (Unavailable, DeadlineExceeded, ResourceExhausted,
// Unknown), otherwise only when `message` does not already name it.
absl::Status AnnotatePeerStatus(absl::StatusCode code, const std::string& message,
                                const std::string& who);

// Serves RecvTensor of one WorkerInterface on a TCP port: an accept thread,
// and per connection a reader thread (requests, cancels) and a writer
// thread (large responses). Thread-safe.
class DataChannelServer {
 public:
  // Listens on `bind_host`:0 (any free port). `worker` must outlive the
  // server. Unavailable naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<DataChannelServer>> Start(
      WorkerInterface* worker, const std::string& bind_host, const DataChannelOptions& options);
  ~DataChannelServer();  // Stop()

  int port() const { return port_; }
  // Stops accepting, cancels in-flight calls, closes every connection and
  // joins the threads. Idempotent.
  void Stop();
  // RecvTensor requests received so far.
  int64_t num_requests() const { return num_requests_.load(); }
  // Tensors pushed to the worker so far, and those it refused.
  int64_t num_pushes() const { return num_pushes_.load(); }
  int64_t num_pushes_refused() const { return num_pushes_refused_.load(); }
  // Connections dropped because the peer failed the TLS or token handshake.
  int64_t num_refused() const { return num_refused_.load(); }
  // Payloads served as same-host reads, and those a client still reads.
  int64_t num_same_host_reads() const { return num_same_host_reads_.load(); }
  int64_t num_held() const { return num_held_.load(); }

 private:
  class Conn;
  DataChannelServer(WorkerInterface* worker, DataChannelOptions options)
      : worker_(worker), options_(options) {}
  void AcceptLoop();

  WorkerInterface* const worker_;
  const DataChannelOptions options_;
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};  // pipe: Stop() wakes the accept thread
  int port_ = 0;
  std::thread accept_thread_;
  std::atomic<int64_t> num_requests_{0};
  std::atomic<int64_t> num_pushes_{0};
  std::atomic<int64_t> num_pushes_refused_{0};
  std::atomic<int64_t> num_refused_{0};
  std::atomic<int64_t> num_same_host_reads_{0};
  std::atomic<int64_t> num_held_{0};
  std::shared_ptr<TlsContext> tls_;  // null: plaintext
  std::mutex mu_;
  bool stopped_ = false;
  std::vector<std::shared_ptr<Conn>> conns_;
};

// One client connection to a peer's DataChannelServer, shared by every
// RecvTensor to that peer. A reader thread completes the calls (their
// `done` runs on it: keep callbacks short) and wakes every 100 ms to
// enforce call deadlines. Must not be destroyed from one of its own
// callbacks. Thread-safe.
class DataConnection {
 public:
  // `who` names the peer in errors. Unavailable naming it when the port
  // cannot be reached within options.connect_timeout_ms.
  static absl::StatusOr<std::shared_ptr<DataConnection>> Connect(const std::string& host, int port,
                                                                 std::string who,
                                                                 const DataChannelOptions& options);
  ~DataConnection();  // Close()

  // WorkerInterface::RecvTensorAsync over the channel. `opts` (may be
  // null) cancels the call (done gets Cancelled at once) and bounds it by
  // its timeout (DeadlineExceeded).
  void RecvTensorAsync(CallOptions* opts, const RecvTensorRequest& request,
                       RecvTensorResult* result, StatusCallback done);
  // Writes `tensor` (a fixed-size type) to the server's worker under
  // `key` (WorkerInterface::PushTensorAsync), on this thread. One-way: OK
  // once written. Unavailable naming the peer when the connection broke.
  absl::Status PushTensor(const std::string& key, const Tensor& tensor);
  // Calls `on_break` once when the connection breaks (at once if it is
  // broken), with the Unavailable that fails its calls, unless `*cancelled`
  // is true by then (such watches are dropped as new ones come). Runs on
  // the reader thread. Cancelling never touches the connection, so it is
  // safe from any thread, even after the connection is gone.
  void WatchBreak(std::shared_ptr<const std::atomic<bool>> cancelled,
                  std::function<void(const absl::Status&)> on_break);
  // True once the connection failed; every later call fails at once.
  bool broken() const { return broken_.load(); }
  // Whether the server's payloads are read from its memory (same host).
  bool same_host() const { return peer_pid_ > 0; }
  // Payloads read from the server's memory so far.
  int64_t num_same_host_reads() const { return num_same_host_reads_.load(); }
  // Fails pending calls with Unavailable and closes the socket.
  void Close();

 private:
  struct Pending {
    CallOptions* opts = nullptr;
    RecvTensorResult* result = nullptr;
    StatusCallback done;
    int64_t deadline_ms = 0;  // steady clock; 0 = none
    // False while RecvTensorAsync still installs the cancel callback; until
    // then others only record `early_status` and that thread completes.
    bool armed = false;
    absl::Status early_status;
  };
  DataConnection(int fd, std::unique_ptr<ByteStream> stream, std::string who,
                 DataChannelOptions options)
      : fd_(fd), stream_(std::move(stream)), who_(std::move(who)), options_(options) {}
  void ReadLoop();
  absl::Status ReadOne();
  absl::Status TooLarge(uint64_t bytes) const;  // ResourceExhausted naming the limit
  void Cancel(uint64_t id, absl::Status status);
  void FailAll(const absl::Status& status);
  absl::Status WriteRequest(uint32_t type, uint64_t id, int64_t step_id, const std::string& key);
  // Asks for same-host reads and probes them; peer_pid_ once they work.
  absl::Status NegotiateSameHost();

  const int fd_;
  const std::unique_ptr<ByteStream> stream_;
  const std::string who_;
  const DataChannelOptions options_;
  std::thread reader_;
  std::atomic<bool> broken_{false};
  int peer_pid_ = 0;  // same-host reads: the server's pid; 0 = off
  std::atomic<int64_t> num_same_host_reads_{0};
  std::mutex write_mu_;
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> pending_;
  bool any_deadline_ = false;
  absl::Status broken_status_;  // FailAll's
  struct BreakWatch {
    std::shared_ptr<const std::atomic<bool>> cancelled;
    std::function<void(const absl::Status&)> on_break;
  };
  std::vector<BreakWatch> break_watchers_;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_H_
