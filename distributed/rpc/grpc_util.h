// Status conversion and channel settings shared by the gRPC adapters. The
// only place (with the rest of distributed/rpc/) that sees gRPC types.
#ifndef GRAPHRUN_DISTRIBUTED_RPC_GRPC_UTIL_H_
#define GRAPHRUN_DISTRIBUTED_RPC_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "distributed/rpc/data_channel.h"
#include "util/auth_token.h"
#include "util/tls_credentials.h"

namespace graphrun {
namespace distributed {

// gRPC and Abseil share code numbers.
inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// `who` ("task /job:ps/replica:0/task:0 (127.0.0.1:1234)") prefixes
// transport errors, which otherwise say nothing of the peer.
// The data channel annotates its errors the same way (AnnotatePeerStatus).
inline absl::Status FromGrpcStatus(const grpc::Status& s, const std::string& who) {
  if (s.ok()) return absl::OkStatus();
  return AnnotatePeerStatus(static_cast<absl::StatusCode>(s.error_code()), s.error_message(), who);
}

inline std::chrono::system_clock::time_point DeadlineAfterMs(int64_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// A call gRPC failed without sending it: the channel's connection attempt
// had failed ("failed to connect to all addresses"), so the call fails at
// once while the channel waits out its reconnect backoff. Sending such a
// call again is safe whatever the method. Under load a first connection to
// a live peer can fail this way (seen once on loopback, errno ENOENT from
// the transport), which failed a whole step.
bool NotSent(const grpc::Status& s);

// How long the one retry of a call that was not sent waits for the channel
// to connect (wait_for_ready), within the call's own deadline. A peer that
// is really gone is reported this much later, with the first error.
inline constexpr int64_t kConnectRetryMs = 2000;

// The retry's deadline: kConnectRetryMs from now, or `deadline` when that is
// sooner (time_point::max(): none).
std::chrono::system_clock::time_point ConnectRetryDeadline(
    std::chrono::system_clock::time_point deadline);

// The status a retried call reports: the retry's, unless it too failed to
// reach the peer (not sent, or out of time waiting to connect); then the
// first error stands.
inline const grpc::Status& AfterConnectRetry(const grpc::Status& first, const grpc::Status& retry) {
  const bool unreached =
      retry.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || NotSent(retry);
  return unreached ? first : retry;
}

// Runs the blocking call `fn(grpc::ClientContext*)` with `deadline`
// (time_point::max(): none) and, when gRPC did not send it, once more,
// waiting for the channel to connect. The first error stands when the
// retry also fails to reach the peer.
template <typename Fn>
grpc::Status CallWithConnectRetry(std::chrono::system_clock::time_point deadline, Fn fn) {
  grpc::Status first;
  {
    grpc::ClientContext ctx;
    if (deadline != std::chrono::system_clock::time_point::max()) ctx.set_deadline(deadline);
    first = fn(&ctx);
  }
  if (!NotSent(first)) return first;
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(ConnectRetryDeadline(deadline));
  return AfterConnectRetry(first, fn(&ctx));
}

// How RecvTensor reaches a peer.
enum class DataChannelMode {
  kOff,        // the gRPC stream only
  kPreferred,  // the peer's data channel when it offers one, else gRPC
  kRequired,   // the data channel or an error (tests, benchmarks)
};

struct ChannelOptions {
  // Largest message either side accepts or sends (RunStep feeds/fetches,
  // RegisterGraph graphs). Big tensors between tasks are chunked and do not
  // count against it.
  int64_t max_message_bytes = int64_t{1} << 30;
  DataChannelMode data_channel = DataChannelMode::kPreferred;
  // Limits of the data channel; data.max_tensor_bytes also bounds tensors
  // received over the gRPC stream.
  DataChannelOptions data;
  // Deadline of control calls (and of data channel negotiation).
  int64_t control_timeout_ms = 20000;
  // The cluster token sent with every call ("": none).
  std::string auth_token;
  // When enabled(): mutual TLS (this side's certificate, the peer's checked
  // against the CA and the host dialled).
  TlsCredentials tls;
};

// What a server listens with: mutual TLS requiring a client certificate of
// the CA when `tls` is enabled, else plaintext.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsCredentials& tls);

// The metadata key that carries the cluster token.
inline constexpr char kAuthMetadataKey[] = "graphrun-auth-token";
// Equal strings, compared in time independent of where they differ.
bool TokensEqual(absl::string_view a, absl::string_view b);
// (LoadAuthToken: util/auth_token.h.)
using ::graphrun::LoadAuthToken;

// A channel to `address` (TLS when options.tls is enabled) with graphrun's settings (message
// limits, quick reconnects so a restarted task is reachable at once, the
// cluster token on every call).
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const ChannelOptions& options);

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_GRPC_UTIL_H_
