#include "distributed/rpc/grpc_util.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/client_interceptor.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#if defined(__SANITIZE_ADDRESS__)
#define GRAPHRUN_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRAPHRUN_LSAN 1
#endif
#endif
#ifdef GRAPHRUN_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace graphrun {
namespace distributed {

namespace {

// gRPC 1.51 runs callback-API completions on a process-wide completion
// queue with its own threads ("nexting_thread") when the poller does not
// run in the background, as epoll1 does not. Each channel that made a
// callback call holds a reference to that queue; when the last such channel
// is destroyed inside a completion (a callback dropping the last owner of a
// worker client), the queue is shut down from one of its own threads, which
// cannot join itself, and the queue is freed under it: a double free or a
// crash. One channel made here, never destroyed, with one callback call
// that fails at once, holds a reference for the life of the process.
void PinCallbackCompletionQueue() {
  struct Pin {
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials());
    grpc::GenericStub stub{channel};
    grpc::ClientContext ctx;
    grpc::ByteBuffer request, response;
  };
  // Never deleted, on purpose.
  static Pin* const pin = [] {
    auto* p = new Pin();
#ifdef GRAPHRUN_LSAN
    __lsan_ignore_object(p);
#endif
    grpc::Slice empty("");
    p->request = grpc::ByteBuffer(&empty, 1);
    p->ctx.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
    p->stub.UnaryCall(&p->ctx, "/graphrun.Pin/Pin", grpc::StubOptions(), &p->request, &p->response,
                      [](grpc::Status) {});
    return p;
  }();
  (void)pin;
}

// Adds the cluster token to every call's initial metadata.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kAuthMetadataKey, *token_});
    }
    methods->Proceed();
  }

 private:
  const std::string* token_;  // the factory's, which the channel keeps
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&token_);
  }

 private:
  std::string token_;
};

}  // namespace

bool NotSent(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE &&
         absl::StrContains(s.error_message(), "failed to connect to all addresses");
}

std::chrono::system_clock::time_point ConnectRetryDeadline(
    std::chrono::system_clock::time_point deadline) {
  return std::min(deadline, DeadlineAfterMs(kConnectRetryMs));
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const ChannelOptions& options) {
  PinCallbackCompletionQueue();
  grpc::ChannelArguments args;
  int limit = static_cast<int>(
      std::min<int64_t>(options.max_message_bytes, std::numeric_limits<int>::max()));
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // gRPC also takes this as the shortest deadline of one connection
  // attempt (TCP, TLS and the HTTP/2 handshake): at 100 ms a busy peer's
  // handshake timed out ("connection attempt timed out before receiving
  // SETTINGS frame", seen under a loaded test run). Retries after a refused
  // connection still come after the backoff above (100 ms .. 1 s).
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // One channel per peer, not shared through gRPC's global subchannel pool:
  // a peer's failure then stays with the channels that talk to it.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (options.tls.enabled()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls.ca_pem;
    ssl.pem_private_key = options.tls.key_pem;
    ssl.pem_cert_chain = options.tls.cert_pem;
    creds = grpc::SslCredentials(ssl);
  }
  if (options.auth_token.empty()) return grpc::CreateCustomChannel(address, creds, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<TokenInterceptorFactory>(options.auth_token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, creds, args,
                                                                 std::move(factories));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsCredentials& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls.ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(ssl);
}

bool TokensEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

}  // namespace distributed
}  // namespace graphrun
