// GrpcWorkerClient: WorkerInterface over the WorkerService stub (gRPC
// callback API, no thread per call). RecvTensor goes over the peer's data
// channel (data_channel.h: one pooled raw TCP connection per peer,
// negotiated through GetStatus on first use) unless
// ChannelOptions::data_channel says otherwise or the peer offers none; the
// fallback is a gRPC server stream whose chunks are copied once, straight
// into the tensor's aligned buffer.
// GrpcWorkerCache: task name -> client, one channel per task address, and
// the local task short-circuited to the in-process Worker.
//
// Thread-safe.
#ifndef GRAPHRUN_DISTRIBUTED_RPC_GRPC_WORKER_CLIENT_H_
#define GRAPHRUN_DISTRIBUTED_RPC_GRPC_WORKER_CLIENT_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "distributed/cluster_spec.h"
#include "distributed/protos/worker_service.grpc.pb.h"
#include "distributed/rpc/grpc_util.h"
#include "distributed/worker_interface.h"

namespace graphrun {
namespace distributed {

class GrpcWorkerClient : public WorkerInterface {
 public:
  // `task` names the peer in errors.
  GrpcWorkerClient(std::string task, std::string address, std::shared_ptr<grpc::Channel> channel,
                   ChannelOptions options = {});

  void GetStatusAsync(const GetStatusRequest& request, GetStatusResponse* response,
                      StatusCallback done) override;
  // GetStatus with `timeout_ms` as its deadline.
  void HeartbeatAsync(int64_t timeout_ms, StatusCallback done) override;
  void CreateWorkerSessionAsync(const CreateWorkerSessionRequest& request,
                                CreateWorkerSessionResponse* response,
                                StatusCallback done) override;
  void DeleteWorkerSessionAsync(const DeleteWorkerSessionRequest& request,
                                DeleteWorkerSessionResponse* response,
                                StatusCallback done) override;
  void RegisterGraphAsync(const RegisterGraphRequest& request, RegisterGraphResponse* response,
                          StatusCallback done) override;
  void DeregisterGraphAsync(const DeregisterGraphRequest& request,
                            DeregisterGraphResponse* response, StatusCallback done) override;
  void RunGraphAsync(CallOptions* opts, const RunGraphRequest& request, RunGraphResponse* response,
                     StatusCallback done) override;
  void CleanupGraphAsync(const CleanupGraphRequest& request, CleanupGraphResponse* response,
                         StatusCallback done) override;
  void CleanupAllAsync(const CleanupAllRequest& request, CleanupAllResponse* response,
                       StatusCallback done) override;
  void RecvTensorAsync(CallOptions* opts, const RecvTensorRequest& request,
                       RecvTensorResult* response, StatusCallback done) override;
  // Over the data channel when there is one (one-way: OK once written),
  // else a gRPC call (OK once the peer has it).
  void PushTensorAsync(const std::string& key, const Tensor& tensor, StatusCallback done) override;
  // The data channel's connection, while there is one.
  std::function<void()> WatchLoss(std::function<void(const absl::Status&)> on_lost) override;

  // Deadline of the control calls (all but RunGraph and RecvTensor, which
  // take theirs from CallOptions).
  void set_control_timeout_ms(int64_t ms) { control_timeout_ms_ = ms; }

  // RecvTensor calls started on each path so far.
  struct RecvTensorCounts {
    int64_t data_channel = 0;
    int64_t grpc = 0;
  };
  RecvTensorCounts recv_tensor_counts() const {
    return {num_data_channel_.load(), num_grpc_.load()};
  }

 private:
  template <typename Req, typename Resp, typename Method>
  void Unary(Method method, CallOptions* opts, int64_t timeout_ms, const Req& request,
             Resp* response, StatusCallback done);
  // The pooled connection to the peer's data channel, negotiated (GetStatus
  // for the port, then connect; bounded by the control and connect
  // timeouts) when there is none or it broke. After a failure in
  // kPreferred mode, callers use gRPC for a while before trying again.
  absl::StatusOr<std::shared_ptr<DataConnection>> DataConnectionForRecv();
  absl::StatusOr<std::shared_ptr<DataConnection>> Negotiate();

  const std::string task_;
  const std::string who_;
  const std::string address_;
  const ChannelOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<WorkerService::Stub> stub_;  // shared with calls in flight (retries)
  int64_t control_timeout_ms_ = 20000;

  std::mutex data_mu_;  // held while negotiating: one attempt at a time
  std::shared_ptr<DataConnection> data_;
  int64_t data_retry_after_ms_ = 0;
  std::atomic<int64_t> num_data_channel_{0};
  std::atomic<int64_t> num_grpc_{0};
};

// GetStatus (with stats when `include_stats`) of the task at `address`
// ("host:port"), bounded by timeout_ms: `graphrun status`. Errors name the
// address.
absl::StatusOr<GetStatusResponse> FetchTaskStatus(const std::string& address,
                                                  const ChannelOptions& options, bool include_stats,
                                                  int64_t timeout_ms);

class GrpcWorkerCache : public WorkerCacheInterface {
 public:
  GrpcWorkerCache(ClusterSpec cluster, ChannelOptions options);
  // Calls for `task` go to `worker` directly (not owned; must outlive the
  // cache's use).
  void SetLocalWorker(const std::string& task, WorkerInterface* worker);
  // Replaces the addresses (used once ports are known); existing clients
  // of changed addresses are dropped.
  void SetClusterSpec(ClusterSpec cluster);

  std::vector<std::string> ListTasks() const override;
  absl::StatusOr<std::shared_ptr<WorkerInterface>> GetWorker(const std::string& task) override;
  std::map<std::string, std::string> Addresses() const override;
  // At most kMaxLearnedTasks tasks are kept; an address that changes
  // replaces the old one (a restarted task).
  absl::Status LearnAddresses(const std::map<std::string, std::string>& addresses) override;
  static constexpr size_t kMaxLearnedTasks = 4096;
  // Sum over the current remote clients.
  GrpcWorkerClient::RecvTensorCounts recv_tensor_counts() const;

 private:
  const ChannelOptions options_;
  mutable std::mutex mu_;
  ClusterSpec cluster_;
  // Tasks the cluster does not name, told by masters of sessions here.
  std::map<std::string, std::string> learned_;
  std::string local_task_;
  WorkerInterface* local_worker_ = nullptr;
  std::map<std::string, std::pair<std::string, std::shared_ptr<GrpcWorkerClient>>> clients_;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_GRPC_WORKER_CLIENT_H_
