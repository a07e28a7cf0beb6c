#include "distributed/rpc/grpc_session.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "distributed/cluster_spec.h"
#include "distributed/rpc/local_master.h"
#include "graph/status.h"
#include "runtime/session_factory.h"

namespace graphrun {
namespace distributed {
namespace {

// Extra time a step's RPC gets beyond the step's own deadline, so the
// master reports DeadlineExceeded naming the tasks before gRPC gives up.
constexpr int64_t kStepRpcGraceMs = 10000;

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcSession>> GrpcSession::Create(const SessionOptions& options) {
  absl::string_view rest = options.target;
  int port = 0;
  // A port past 65535 is refused (gRPC took it modulo 65536: another
  // service), and so is port 0.
  if (!absl::ConsumePrefix(&rest, "grpc://") || !ParseHostPort(rest, &port) || port == 0) {
    return absl::InvalidArgumentError(absl::StrCat("session target '", options.target,
                                                   "' is not grpc://host:port (port 1 to 65535)"));
  }
  std::unique_ptr<GrpcSession> s(new GrpcSession());
  s->options_ = options;
  s->address_ = std::string(rest);
  s->who_ = absl::StrCat("master at ", s->address_);
  ChannelOptions co;
  if (options.auth_token.empty()) {
    GR_ASSIGN_OR_RETURN(co.auth_token, LoadAuthToken(""));
  } else {
    co.auth_token = options.auth_token;
  }
  if (options.tls.enabled()) {
    co.tls = options.tls;
  } else {
    GR_ASSIGN_OR_RETURN(co.tls, LoadTlsCredentials("", "", ""));
  }
  s->stub_ = MasterService::NewStub(NewChannel(s->address_, co));
  return s;
}

GrpcSession::~GrpcSession() { Close().IgnoreError(); }

std::optional<absl::Status> GrpcSession::CallLocal(
    const std::function<void(MasterInterface*, CallOptions*, StatusCallback)>& start) {
  absl::Status result;
  bool local = LocalMaster::Call(options_.target, [&](MasterInterface* m, CallOptions* opts) {
    absl::Status s = CallAndWait([&](StatusCallback done) { start(m, opts, std::move(done)); });
    // Named as errors over gRPC are (FromGrpcStatus).
    result = AnnotatePeerStatus(s.code(), std::string(s.message()), who_);
  });
  if (!local) return std::nullopt;
  return result;
}

std::string GrpcSession::handle() {
  std::lock_guard<std::mutex> l(mu_);
  return handle_;
}

absl::Status GrpcSession::Create(const tensorflow::GraphDef& graph) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return absl::FailedPreconditionError("session is closed");
    if (!handle_.empty()) {
      return absl::FailedPreconditionError("session already has a graph; use Extend");
    }
  }
  CreateSessionRequest req;
  *req.mutable_graph_def() = graph;
  *req.mutable_config() = options_.config;
  CreateSessionResponse resp;
  std::optional<absl::Status> local =
      CallLocal([&](MasterInterface* m, CallOptions*, StatusCallback done) {
        m->CreateSessionAsync(req, &resp, std::move(done));
      });
  if (local.has_value()) {
    GR_RETURN_IF_ERROR(*local);
  } else {
    GR_RETURN_IF_ERROR(FromGrpcStatus(CallWithConnectRetry(DeadlineAfterMs(control_timeout_ms_),
                                                           [&](grpc::ClientContext* ctx) {
                                                             return stub_->CreateSession(ctx, req,
                                                                                         &resp);
                                                           }),
                                      who_));
  }
  std::lock_guard<std::mutex> l(mu_);
  handle_ = resp.session_handle();
  return absl::OkStatus();
}

absl::Status GrpcSession::Extend(const tensorflow::GraphDef& graph) {
  if (handle().empty()) return Create(graph);
  ExtendSessionRequest req;
  req.set_session_handle(handle());
  *req.mutable_graph_def() = graph;
  ExtendSessionResponse resp;
  std::optional<absl::Status> local =
      CallLocal([&](MasterInterface* m, CallOptions*, StatusCallback done) {
        m->ExtendSessionAsync(req, &resp, std::move(done));
      });
  if (local.has_value()) return *local;
  return FromGrpcStatus(CallWithConnectRetry(DeadlineAfterMs(control_timeout_ms_),
                                             [&](grpc::ClientContext* ctx) {
                                               return stub_->ExtendSession(ctx, req, &resp);
                                             }),
                        who_);
}

absl::StatusOr<std::vector<Tensor>> GrpcSession::Run(const tensorflow::RunOptions& options,
                                                     const NamedTensorList& feeds,
                                                     const std::vector<std::string>& fetches,
                                                     const std::vector<std::string>& targets,
                                                     tensorflow::RunMetadata* metadata) {
  std::string h = handle();
  if (h.empty()) return absl::FailedPreconditionError("session has no graph; call Create first");
  RunStepRequest req;
  req.set_session_handle(h);
  for (const auto& [name, t] : feeds) {
    if (!t.IsInitialized()) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' is an empty tensor"));
    }
    auto* f = req.add_feed();
    f->set_name(name);
    t.AsProtoTensorContent(f->mutable_tensor());
  }
  for (const auto& f : fetches) req.add_fetch(f);
  for (const auto& t : targets) req.add_target(t);
  *req.mutable_options() = options;
  int64_t timeout = options.timeout_in_ms() > 0 ? options.timeout_in_ms()
                                                : options_.config.operation_timeout_in_ms();
  if (timeout > 0 && options.timeout_in_ms() <= 0)
    req.mutable_options()->set_timeout_in_ms(timeout);
  RunStepResponse resp;
  // The master enforces the step's deadline itself; only gRPC needs one.
  std::optional<absl::Status> local =
      CallLocal([&](MasterInterface* m, CallOptions* opts, StatusCallback done) {
        m->RunStepAsync(opts, req, &resp, std::move(done));
      });
  if (local.has_value()) {
    GR_RETURN_IF_ERROR(*local);
  } else {
    auto deadline = timeout > 0 ? DeadlineAfterMs(timeout + kStepRpcGraceMs)
                                : std::chrono::system_clock::time_point::max();
    GR_RETURN_IF_ERROR(FromGrpcStatus(
        CallWithConnectRetry(
            deadline, [&](grpc::ClientContext* ctx) { return stub_->RunStep(ctx, req, &resp); }),
        who_));
  }
  if (resp.tensor_size() != static_cast<int>(fetches.size())) {
    return absl::InternalError(absl::StrCat(who_, " returned ", resp.tensor_size(), " tensors for ",
                                            fetches.size(), " fetches"));
  }
  std::vector<Tensor> out;
  for (const auto& t : resp.tensor()) {
    auto v = Tensor::FromProto(t.tensor());
    if (!v.ok()) return AnnotateStatus(v.status(), absl::StrCat("fetch '", t.name(), "': "));
    out.push_back(std::move(*v));
  }
  if (metadata != nullptr) metadata->Swap(resp.mutable_metadata());
  return out;
}

absl::StatusOr<std::vector<DeviceAttributes>> GrpcSession::ListDevices() {
  ListDevicesRequest req;
  req.set_session_handle(handle());
  ListDevicesResponse resp;
  std::optional<absl::Status> local =
      CallLocal([&](MasterInterface* m, CallOptions*, StatusCallback done) {
        m->ListDevicesAsync(req, &resp, std::move(done));
      });
  if (local.has_value()) {
    GR_RETURN_IF_ERROR(*local);
  } else {
    GR_RETURN_IF_ERROR(FromGrpcStatus(CallWithConnectRetry(DeadlineAfterMs(control_timeout_ms_),
                                                           [&](grpc::ClientContext* ctx) {
                                                             return stub_->ListDevices(ctx, req,
                                                                                       &resp);
                                                           }),
                                      who_));
  }
  std::vector<DeviceAttributes> out;
  for (const auto* list : {&resp.local_device(), &resp.remote_device()}) {
    for (const auto& d : *list) {
      out.push_back({d.name(), d.device_type(), d.memory_limit(), d.incarnation()});
    }
  }
  return out;
}

absl::Status GrpcSession::Close() {
  std::string h;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    h = handle_;
  }
  if (h.empty()) return absl::OkStatus();
  CloseSessionRequest req;
  req.set_session_handle(h);
  CloseSessionResponse resp;
  std::optional<absl::Status> local =
      CallLocal([&](MasterInterface* m, CallOptions*, StatusCallback done) {
        m->CloseSessionAsync(req, &resp, std::move(done));
      });
  if (local.has_value()) return *local;
  return FromGrpcStatus(CallWithConnectRetry(DeadlineAfterMs(control_timeout_ms_),
                                             [&](grpc::ClientContext* ctx) {
                                               return stub_->CloseSession(ctx, req, &resp);
                                             }),
                        who_);
}

absl::Status GrpcSession::Reset(const std::vector<std::string>& containers) {
  ResetRequest req;
  for (const auto& c : containers) req.add_container(c);
  for (const auto& f : options_.config.device_filters()) req.add_device_filters(f);
  ResetResponse resp;
  std::optional<absl::Status> local =
      CallLocal([&](MasterInterface* m, CallOptions*, StatusCallback done) {
        m->ResetAsync(req, &resp, std::move(done));
      });
  if (local.has_value()) return *local;
  return FromGrpcStatus(
      CallWithConnectRetry(DeadlineAfterMs(control_timeout_ms_),
                           [&](grpc::ClientContext* ctx) { return stub_->Reset(ctx, req, &resp); }),
      who_);
}

void RegisterGrpcSession() {
  RegisterSessionFactory(
      "grpc", [](const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
        GR_ASSIGN_OR_RETURN(std::unique_ptr<GrpcSession> s, GrpcSession::Create(options));
        return std::unique_ptr<Session>(std::move(s));
      });
}

}  // namespace distributed
}  // namespace graphrun
