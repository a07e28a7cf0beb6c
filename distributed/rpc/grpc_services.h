// The gRPC services of a server: thin synchronous adapters from
// WorkerService / MasterService to the in-process WorkerInterface /
// MasterInterface. A handler waits for the interface's callback and
// forwards a client's cancellation (or a passed deadline) into the call.
//
// Thread-safe.
#ifndef GRAPHRUN_DISTRIBUTED_RPC_GRPC_SERVICES_H_
#define GRAPHRUN_DISTRIBUTED_RPC_GRPC_SERVICES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "distributed/master_interface.h"
#include "distributed/protos/master_service.grpc.pb.h"
#include "distributed/protos/worker_service.grpc.pb.h"
#include "distributed/worker_interface.h"

namespace graphrun {
namespace distributed {

// Whether a server answers calls yet. A task started by a launcher binds
// its port before it knows its peers' addresses; until the cluster
// arrives, calls get Unavailable (callers retry it) instead of a task that
// would reach the wrong peers. Thread-safe.
class ServingGate {
 public:
  // `auth_token` not empty: every call must carry it (kAuthMetadataKey).
  explicit ServingGate(std::string task, std::string auth_token = "")
      : task_(std::move(task)), token_(std::move(auth_token)) {}
  void Open() { open_.store(true); }
  bool open() const { return open_.load(); }
  // The status a call gets while closed.
  grpc::Status Closed() const;
  // OK when `ctx`'s call may be served: UNAUTHENTICATED (and nothing
  // else: no task name) without the cluster token, else Closed() while
  // closed.
  grpc::Status Check(grpc::ServerContext* ctx) const;

 private:
  const std::string task_;
  const std::string token_;
  std::atomic<bool> open_{false};
};

class GrpcWorkerService final : public WorkerService::Service {
 public:
  // `worker` must outlive the service. Tensors stream in `chunk_bytes`
  // pieces.
  GrpcWorkerService(WorkerInterface* worker, int64_t chunk_bytes)
      : worker_(worker), chunk_bytes_(chunk_bytes) {}

  // While `gate` (owned by the server) says not ready, every call is
  // answered Unavailable with its message: a task that has not yet
  // received its cluster from its launcher.
  void set_gate(const ServingGate* gate) { gate_ = gate; }

  // The data channel port GetStatus advertises (trailing metadata
  // kDataPortMetadataKey); 0 = none.
  void set_data_port(int port) { data_port_.store(port); }
  // Fills GetStatusResponse.stats when a caller asks (include_stats).
  void set_stats(std::function<void(TaskStats*)> fill) { stats_ = std::move(fill); }

  grpc::Status GetStatus(grpc::ServerContext* ctx, const GetStatusRequest* req,
                         GetStatusResponse* resp) override;
  grpc::Status CreateWorkerSession(grpc::ServerContext* ctx, const CreateWorkerSessionRequest* req,
                                   CreateWorkerSessionResponse* resp) override;
  grpc::Status DeleteWorkerSession(grpc::ServerContext* ctx, const DeleteWorkerSessionRequest* req,
                                   DeleteWorkerSessionResponse* resp) override;
  grpc::Status RegisterGraph(grpc::ServerContext* ctx, const RegisterGraphRequest* req,
                             RegisterGraphResponse* resp) override;
  grpc::Status DeregisterGraph(grpc::ServerContext* ctx, const DeregisterGraphRequest* req,
                               DeregisterGraphResponse* resp) override;
  grpc::Status RunGraph(grpc::ServerContext* ctx, const RunGraphRequest* req,
                        RunGraphResponse* resp) override;
  grpc::Status CleanupGraph(grpc::ServerContext* ctx, const CleanupGraphRequest* req,
                            CleanupGraphResponse* resp) override;
  grpc::Status CleanupAll(grpc::ServerContext* ctx, const CleanupAllRequest* req,
                          CleanupAllResponse* resp) override;
  grpc::Status RecvTensor(grpc::ServerContext* ctx, const RecvTensorRequest* req,
                          grpc::ServerWriter<RecvTensorChunk>* writer) override;
  grpc::Status PushTensor(grpc::ServerContext* ctx, const PushTensorRequest* req,
                          PushTensorResponse* resp) override;

 private:
  WorkerInterface* worker_;
  const int64_t chunk_bytes_;
  std::atomic<int> data_port_{0};
  const ServingGate* gate_ = nullptr;
  std::function<void(TaskStats*)> stats_;
};

class GrpcMasterService final : public MasterService::Service {
 public:
  explicit GrpcMasterService(MasterInterface* master) : master_(master) {}
  // As GrpcWorkerService::set_gate.
  void set_gate(const ServingGate* gate) { gate_ = gate; }

  grpc::Status CreateSession(grpc::ServerContext* ctx, const CreateSessionRequest* req,
                             CreateSessionResponse* resp) override;
  grpc::Status ExtendSession(grpc::ServerContext* ctx, const ExtendSessionRequest* req,
                             ExtendSessionResponse* resp) override;
  grpc::Status RunStep(grpc::ServerContext* ctx, const RunStepRequest* req,
                       RunStepResponse* resp) override;
  grpc::Status CloseSession(grpc::ServerContext* ctx, const CloseSessionRequest* req,
                            CloseSessionResponse* resp) override;
  grpc::Status ListDevices(grpc::ServerContext* ctx, const ListDevicesRequest* req,
                           ListDevicesResponse* resp) override;
  grpc::Status Reset(grpc::ServerContext* ctx, const ResetRequest* req,
                     ResetResponse* resp) override;

 private:
  MasterInterface* master_;
  const ServingGate* gate_ = nullptr;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_GRPC_SERVICES_H_
