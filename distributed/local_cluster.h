// LocalCluster: a whole cluster of in-process GrpcServers on loopback
// (or a given host's) ports, for tests and `graphrun cluster --in_process`. Servers start on
// free ports (port 0, so no race with other processes), then learn each
// other's addresses.
//
// Thread-compatible: start, use, stop from one thread; the servers are
// thread-safe.
#ifndef GRAPHRUN_DISTRIBUTED_LOCAL_CLUSTER_H_
#define GRAPHRUN_DISTRIBUTED_LOCAL_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/cluster_spec.h"
#include "distributed/rpc/grpc_server.h"

namespace graphrun {
namespace distributed {

struct LocalClusterOptions {
  // Job name -> number of tasks, e.g. {{"ps", 2}, {"worker", 2}}.
  std::map<std::string, int> jobs;
  // Per server (ServerOptions fields; cluster/job/task/port are set here).
  // The servers bind server.bind_host, else `host`.
  ServerOptions server;
  // The host the cluster names for every task.
  std::string host = "127.0.0.1";
  // >= 0: the k-th server (job order, then index) serves metrics at port
  // metrics_port_base + k (0: each at any free port). -1: server's own.
  int metrics_port_base = -1;
};

class LocalCluster {
 public:
  // Unavailable if a server cannot start; every started server is stopped.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();

  const ClusterSpec& cluster_spec() const { return spec_; }
  // "grpc://HOST:PORT" of a task; empty when there is no such task.
  std::string target(const std::string& job, int task) const;
  // Null when there is no such task (or it was stopped).
  GrpcServer* server(const std::string& job, int task);
  // Stops one task (its address then refuses connections).
  void StopTask(const std::string& job, int task);
  void StopAll();

 private:
  LocalCluster() = default;
  ClusterSpec spec_;
  std::map<std::pair<std::string, int>, std::unique_ptr<GrpcServer>> servers_;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_LOCAL_CLUSTER_H_
