#include "distributed/rpc/grpc_services.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "distributed/rpc/grpc_util.h"
#include "util/metrics.h"

namespace graphrun {
namespace distributed {
namespace {

// Starts a call and waits for its callback; while waiting, a cancelled
// gRPC call (client gone, deadline passed, server shutting down) cancels
// `opts`. Returns only after the callback ran, so the request, response
// and opts may live on the handler's stack.
absl::Status Wait(grpc::ServerContext* ctx, CallOptions* opts,
                  const std::function<void(StatusCallback)>& start) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
  };
  auto st = std::make_shared<State>();
  // A throw from the handler (an allocation outside the memory budget, a
  // library's exception) answers with a Status, never gRPC's "Unknown:
  // Unexpected error in RPC handling".
  try {
    start([st](const absl::Status& s) {
      std::lock_guard<std::mutex> l(st->mu);
      st->status = s;
      st->done = true;
      st->cv.notify_all();
    });
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory handling the request (std::bad_alloc)");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("handling the request: ", e.what()));
  }
  std::unique_lock<std::mutex> l(st->mu);
  bool cancelled = false;
  while (!st->done) {
    st->cv.wait_for(l, std::chrono::milliseconds(50));
    if (!st->done && !cancelled && ctx->IsCancelled()) {
      cancelled = true;
      if (opts != nullptr) {
        l.unlock();
        opts->StartCancel();
        l.lock();
      }
    }
  }
  return st->status;
}

template <typename Req, typename Resp, typename Fn>
grpc::Status Handle(grpc::ServerContext* ctx, const Req* req, Resp* resp, Fn fn) {
  return ToGrpcStatus(
      Wait(ctx, nullptr, [&](StatusCallback done) { fn(*req, resp, std::move(done)); }));
}

}  // namespace

grpc::Status ServingGate::Closed() const {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "task " + task_ + " is starting: it has not received its cluster yet");
}

grpc::Status ServingGate::Check(grpc::ServerContext* ctx) const {
  if (!token_.empty()) {
    const auto& md = ctx->client_metadata();
    auto it = md.find(kAuthMetadataKey);
    if (it == md.end() ||
        !TokensEqual(absl::string_view(it->second.data(), it->second.size()), token_)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this cluster needs its token (--auth_token_file or "
                          "GRAPHRUN_AUTH_TOKEN)");
    }
  }
  return open() ? grpc::Status::OK : Closed();
}

// Answers from a handler: Unauthenticated without the cluster token,
// Unavailable while `gate_` is closed.
#define GR_CHECK_GATE()                             \
  do {                                              \
    if (gate_ != nullptr) {                         \
      grpc::Status gate_status = gate_->Check(ctx); \
      if (!gate_status.ok()) return gate_status;    \
    }                                               \
  } while (false)

#define GR_WORKER_UNARY(Method, Req, Resp)                                                       \
  grpc::Status GrpcWorkerService::Method(grpc::ServerContext* ctx, const Req* req, Resp* resp) { \
    GR_CHECK_GATE();                                                                             \
    return Handle(ctx, req, resp, [this](const Req& r, Resp* p, StatusCallback d) {              \
      worker_->Method##Async(r, p, std::move(d));                                                \
    });                                                                                          \
  }

GR_WORKER_UNARY(CreateWorkerSession, CreateWorkerSessionRequest, CreateWorkerSessionResponse)
GR_WORKER_UNARY(DeleteWorkerSession, DeleteWorkerSessionRequest, DeleteWorkerSessionResponse)
GR_WORKER_UNARY(RegisterGraph, RegisterGraphRequest, RegisterGraphResponse)
GR_WORKER_UNARY(DeregisterGraph, DeregisterGraphRequest, DeregisterGraphResponse)
GR_WORKER_UNARY(CleanupGraph, CleanupGraphRequest, CleanupGraphResponse)
GR_WORKER_UNARY(CleanupAll, CleanupAllRequest, CleanupAllResponse)
#undef GR_WORKER_UNARY

grpc::Status GrpcWorkerService::GetStatus(grpc::ServerContext* ctx, const GetStatusRequest* req,
                                          GetStatusResponse* resp) {
  GR_CHECK_GATE();
  int port = data_port_.load();
  if (port > 0) ctx->AddTrailingMetadata(kDataPortMetadataKey, std::to_string(port));
  grpc::Status st = Handle(
      ctx, req, resp, [this](const GetStatusRequest& r, GetStatusResponse* p, StatusCallback d) {
        worker_->GetStatusAsync(r, p, std::move(d));
      });
  if (st.ok() && req->include_stats() && stats_) stats_(resp->mutable_stats());
  return st;
}

grpc::Status GrpcWorkerService::RunGraph(grpc::ServerContext* ctx, const RunGraphRequest* req,
                                         RunGraphResponse* resp) {
  GR_CHECK_GATE();
  CallOptions opts;
  return ToGrpcStatus(Wait(ctx, &opts, [&](StatusCallback done) {
    worker_->RunGraphAsync(&opts, *req, resp, std::move(done));
  }));
}

grpc::Status GrpcWorkerService::PushTensor(grpc::ServerContext* ctx, const PushTensorRequest* req,
                                           PushTensorResponse*) {
  GR_CHECK_GATE();
  absl::StatusOr<Tensor> t = Tensor::FromProto(req->tensor());
  if (!t.ok()) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "PushTensor of '", req->rendezvous_key().substr(0, 200), "': ", t.status().message())));
  }
  return ToGrpcStatus(Wait(ctx, nullptr, [&](StatusCallback done) {
    worker_->PushTensorAsync(req->rendezvous_key(), *t, std::move(done));
  }));
}

grpc::Status GrpcWorkerService::RecvTensor(grpc::ServerContext* ctx, const RecvTensorRequest* req,
                                           grpc::ServerWriter<RecvTensorChunk>* writer) {
  GR_CHECK_GATE();
  CallOptions opts;
  RecvTensorResult result;
  absl::Status s = Wait(ctx, &opts, [&](StatusCallback done) {
    worker_->RecvTensorAsync(&opts, *req, &result, std::move(done));
  });
  if (!s.ok()) return ToGrpcStatus(s);
  RecvTensorChunk chunk;
  TensorMeta* meta = chunk.mutable_meta();
  meta->set_is_dead(result.is_dead);
  const Tensor& t = result.tensor;
  if (result.is_dead || !t.IsInitialized()) {
    meta->set_is_dead(true);
    return writer->Write(chunk) ? grpc::Status::OK
                                : grpc::Status(grpc::StatusCode::CANCELLED, "receiver went away");
  }
  meta->set_dtype(static_cast<tensorflow::DataType>(t.dtype()));
  t.shape().AsProto(meta->mutable_shape());
  if (DataTypeSize(t.dtype()) == 0) {
    // Strings and resources: one message.
    t.AsProtoTensorContent(meta->mutable_value());
    return writer->Write(chunk) ? grpc::Status::OK
                                : grpc::Status(grpc::StatusCode::CANCELLED, "receiver went away");
  }
  const int64_t total = t.TotalBytes();
  meta->set_total_bytes(total);
  Metrics::Get().Increment("graphrun_sent_bytes_total",
                           {{"peer", SentPeerLabel(req->rendezvous_key())}, {"path", "grpc"}},
                           static_cast<double>(total));
  int64_t offset = 0;
  grpc::WriteOptions wo;
  do {
    int64_t n = std::min(chunk_bytes_, total - offset);
    chunk.set_offset(offset);
    chunk.mutable_data()->assign(t.raw_data() + offset, static_cast<size_t>(n));
    if (!writer->Write(chunk, wo)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "receiver went away");
    }
    chunk.clear_meta();
    offset += n;
  } while (offset < total);
  return grpc::Status::OK;
}

#define GR_MASTER_UNARY(Method, Req, Resp)                                                       \
  grpc::Status GrpcMasterService::Method(grpc::ServerContext* ctx, const Req* req, Resp* resp) { \
    GR_CHECK_GATE();                                                                             \
    return Handle(ctx, req, resp, [this](const Req& r, Resp* p, StatusCallback d) {              \
      master_->Method##Async(r, p, std::move(d));                                                \
    });                                                                                          \
  }

GR_MASTER_UNARY(CreateSession, CreateSessionRequest, CreateSessionResponse)
GR_MASTER_UNARY(ExtendSession, ExtendSessionRequest, ExtendSessionResponse)
GR_MASTER_UNARY(CloseSession, CloseSessionRequest, CloseSessionResponse)
GR_MASTER_UNARY(ListDevices, ListDevicesRequest, ListDevicesResponse)
GR_MASTER_UNARY(Reset, ResetRequest, ResetResponse)
#undef GR_MASTER_UNARY

grpc::Status GrpcMasterService::RunStep(grpc::ServerContext* ctx, const RunStepRequest* req,
                                        RunStepResponse* resp) {
  GR_CHECK_GATE();
  CallOptions opts;
  return ToGrpcStatus(Wait(ctx, &opts, [&](StatusCallback done) {
    master_->RunStepAsync(&opts, *req, resp, std::move(done));
  }));
}

#undef GR_CHECK_GATE

}  // namespace distributed
}  // namespace graphrun
