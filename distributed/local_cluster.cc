#include "distributed/local_cluster.h"

#include "absl/strings/str_cat.h"
#include "graph/status.h"

namespace graphrun {
namespace distributed {

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  std::unique_ptr<LocalCluster> c(new LocalCluster());
  ClusterSpec placeholder;
  for (const auto& [job, n] : options.jobs) {
    if (n < 1) return absl::InvalidArgumentError(absl::StrCat("job '", job, "' needs >= 1 task"));
    for (int i = 0; i < n; ++i) placeholder.AddTask(job, absl::StrCat(options.host, ":0"));
  }
  if (placeholder.empty()) return absl::InvalidArgumentError("local cluster has no jobs");
  int k = 0;
  for (const auto& [job, n] : options.jobs) {
    for (int i = 0; i < n; ++i, ++k) {
      ServerOptions so = options.server;
      so.cluster = placeholder;
      so.job = job;
      so.task = i;
      so.port = 0;
      if (options.metrics_port_base == 0) so.metrics_port = 0;
      if (options.metrics_port_base > 0) so.metrics_port = options.metrics_port_base + k;
      GR_ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> s, GrpcServer::Create(so));
      GR_RETURN_IF_ERROR(s->Start());
      c->spec_.AddTask(job, absl::StrCat(options.host, ":", s->bound_port()));
      c->servers_[{job, i}] = std::move(s);
    }
  }
  for (auto& [key, s] : c->servers_) s->UpdateCluster(c->spec_);
  return c;
}

LocalCluster::~LocalCluster() { StopAll(); }

std::string LocalCluster::target(const std::string& job, int task) const {
  auto addr = spec_.Address(job, task);
  return addr.ok() ? absl::StrCat("grpc://", *addr) : "";
}

GrpcServer* LocalCluster::server(const std::string& job, int task) {
  auto it = servers_.find({job, task});
  return it == servers_.end() ? nullptr : it->second.get();
}

void LocalCluster::StopTask(const std::string& job, int task) {
  auto it = servers_.find({job, task});
  if (it == servers_.end()) return;
  it->second->Stop();
  servers_.erase(it);
}

void LocalCluster::StopAll() {
  for (auto& [key, s] : servers_) s->Stop();
  servers_.clear();
}

}  // namespace distributed
}  // namespace graphrun
