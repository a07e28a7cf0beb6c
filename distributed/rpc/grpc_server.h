// GrpcServer: one task of a cluster — its devices, a Worker and a Master —
// serving WorkerService and MasterService on one gRPC port.
//
//   auto server = GrpcServer::Create(options);   // devices, services
//   server->Start();                             // listens; bound_port()
//   ... server->target() == "grpc://127.0.0.1:PORT"
//   server->Stop();                              // aborts steps, shuts down
//
// Listens where its cluster entry says (distributed/rpc/bind_address.h:
// the entry's host if it is an address of this machine, else the wildcard
// address) unless ServerOptions::bind_host says otherwise. A server that
// would listen beyond loopback refuses to start without credentials (TLS
// or a token) unless ServerOptions::insecure, and then warns. Port:
// the task's address in the cluster spec, or ServerOptions::port when set
// (0 = any free port, reported by bound_port()). With
// ServerOptions::await_cluster, calls are answered Unavailable until
// UpdateCluster() names the peers: a launcher learns the port a task bound
// first and hands out the cluster after (distributed/launcher_link.h).
//
// Thread-safe; Stop() may be called from any thread, more than once.
#ifndef GRAPHRUN_DISTRIBUTED_RPC_GRPC_SERVER_H_
#define GRAPHRUN_DISTRIBUTED_RPC_GRPC_SERVER_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/cluster_spec.h"
#include "distributed/collective_remote.h"
#include "distributed/health.h"
#include "distributed/master.h"
#include "distributed/rpc/data_channel.h"
#include "distributed/rpc/grpc_util.h"
#include "distributed/rpc/grpc_worker_client.h"
#include "distributed/worker.h"
#include "util/metrics_http.h"

namespace grpc {
class Server;
}

namespace graphrun {
namespace distributed {

class GrpcWorkerService;
class GrpcMasterService;
class ServingGate;

struct ServerOptions {
  ClusterSpec cluster;
  std::string job;
  int task = 0;
  // "": from the task's cluster entry (bind_address.h).
  std::string bind_host;
  // Listen beyond loopback although no credentials protect the task.
  bool insecure = false;
  // The cluster token: every call must carry it, and this task's calls to
  // its peers carry it ("": none). The data channel checks it too, with an
  // HMAC handshake.
  std::string auth_token;
  // Mutual TLS on every connection, gRPC and data channel, when enabled():
  // peers and clients must present certificates of the cluster CA.
  TlsCredentials tls;
  // Directories the task's file-touching ops (SaveV2, RestoreV2, dataset
  // readers, ...) may use: PermissionDenied naming the node and path
  // elsewhere. An empty list: no file at all; nullopt: any file (servers
  // inside the client's own process).
  std::optional<std::vector<std::string>> allowed_dirs;
  // -1: the port of the task's address in `cluster`; 0: any free port.
  int port = -1;
  int num_cpus = 1;          // CPU devices of the task
  int intra_op_threads = 0;  // 0 = number of cores
  int inter_op_threads = 0;  // 0 = number of cores
  // Largest gRPC message (feeds, fetches, graphs); tensors between tasks
  // are chunked and may be larger. At most 2 GiB - 1.
  int64_t max_message_bytes = int64_t{1} << 30;
  int64_t recv_chunk_bytes = int64_t{4} << 20;
  // RecvTensor transport: this server offers a data channel (raw TCP on a
  // second port of bind_host) unless kOff, and its clients use peers'
  // channels per the mode (kRequired: no gRPC fallback; Start fails if the
  // channel cannot listen).
  DataChannelMode data_channel = DataChannelMode::kPreferred;
  // Largest tensor this task accepts from a peer (either path):
  // ResourceExhausted beyond it.
  int64_t max_recv_tensor_bytes = int64_t{8} << 30;
  int64_t control_timeout_ms = 20000;
  // Heartbeats to the peers in use (distributed/health.h): every this many
  // ms, a peer dead after this many unanswered in a row. 0: none.
  int64_t heartbeat_interval_ms = 1000;
  int heartbeat_misses = 3;
  // Small all-reduces (recursive doubling) push their pieces to the peers
  // instead of waiting for them to ask (distributed/collective_remote.h);
  // only with heartbeats, which then see a dead peer. Every task of a
  // group must say the same (else InvalidArgument at the first run).
  bool collective_push = true;
  // Prometheus metrics (util/metrics.h) over HTTP at bind_host:metrics_port
  // /metrics; -1: none, 0: any free port (metrics_port() says which).
  int metrics_port = -1;
  // Sessions, concurrent steps and graph sizes this task serves at most.
  ServingLimits limits;
  // Serve only after UpdateCluster() (calls before get Unavailable).
  bool await_cluster = false;
  const OpRegistry* op_registry = nullptr;          // null = default
  const KernelRegistry* kernel_registry = nullptr;  // null = default
};

class GrpcServer {
 public:
  // InvalidArgument naming the option (a task not in the cluster, bad
  // limits, thread counts).
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(const ServerOptions& options);
  ~GrpcServer();

  // Unavailable naming the address when the port cannot be bound.
  absl::Status Start();
  // Aborts running steps, stops serving (in-flight calls are cancelled
  // after a short grace period) and waits for the handlers.
  void Stop();
  // Blocks until Stop() finished.
  void Join();

  int bound_port() const { return bound_port_; }
  // The host it listens on (after Start: resolved from the cluster entry
  // when not given).
  const std::string& bind_host() const { return options_.bind_host; }
  // The data channel's port; 0 when it is off (or not started).
  int data_port() const;
  // The metrics endpoint's port; 0 when there is none.
  int metrics_port() const;
  // RecvTensor calls this task made to peers, per path.
  GrpcWorkerClient::RecvTensorCounts recv_tensor_counts() const;
  // "grpc://127.0.0.1:PORT" (the bind host, or 127.0.0.1 for 0.0.0.0).
  std::string target() const;
  const std::string& task_name() const { return task_name_; }
  // Replaces the peers' addresses (in-process clusters learn free ports
  // only after every server started) and opens an await_cluster server.
  void UpdateCluster(const ClusterSpec& cluster);

  Worker* worker() { return worker_.get(); }
  RemoteCollectives* collectives() { return collectives_.get(); }
  HealthMonitor* health() { return health_.get(); }
  Master* master() { return master_.get(); }
  DeviceMgr* device_mgr() { return device_mgr_.get(); }

 private:
  GrpcServer() = default;
  // `graphrun status`'s view of this task (GetStatus with include_stats).
  void FillStats(std::chrono::steady_clock::time_point start, TaskStats* stats);

  ServerOptions options_;
  std::string task_name_;
  std::unique_ptr<DeviceMgr> device_mgr_;
  std::unique_ptr<ThreadPool> inter_op_pool_;
  // Heartbeats (stopped first, in Stop()); destroyed last, after the
  // watches the collectives and master sessions hold.
  std::unique_ptr<HealthMonitor> health_;
  // Declared first: destroyed after the worker cache, whose late call
  // completions may still reach it.
  std::unique_ptr<RemoteCollectives> collectives_;
  std::unique_ptr<GrpcWorkerCache> worker_cache_;
  WorkerEnv worker_env_;
  MasterEnv master_env_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Master> master_;
  std::unique_ptr<GrpcWorkerService> worker_service_;
  std::unique_ptr<GrpcMasterService> master_service_;
  std::unique_ptr<ServingGate> gate_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<DataChannelServer> data_server_;
  std::unique_ptr<MetricsHttpServer> metrics_server_;
  int bound_port_ = 0;
  std::string local_target_;  // registered with LocalMaster while started

  mutable std::mutex mu_;
  std::condition_variable stopped_cv_;
  bool started_ = false, stopped_ = false, stop_done_ = false;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_GRPC_SERVER_H_
