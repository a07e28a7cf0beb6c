// What a Worker (and its GraphMgr) share: the task's identity, devices,
// registries, pools and the way to reach peers. Not owned by the worker.
#ifndef GRAPHRUN_DISTRIBUTED_WORKER_ENV_H_
#define GRAPHRUN_DISTRIBUTED_WORKER_ENV_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "graph/op_registry.h"
#include "graph/proto/graph.pb.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/thread_pool.h"
#include "runtime/device.h"

namespace graphrun {
namespace distributed {

class WorkerCacheInterface;
class RemoteCollectives;
class HealthMonitor;

// What one task serves at most; over a limit is ResourceExhausted naming
// the task, the count and the flag. (ServerOptions; `graphrun server`
// --max_sessions, --max_concurrent_steps, --max_graph_nodes,
// --max_plans_per_session.)
struct ServingLimits {
  int64_t max_sessions = 1000;          // master sessions, and worker sessions
  int64_t max_concurrent_steps = 1000;  // master RunStep calls, and worker RunGraph calls
  int64_t max_graph_nodes = 1 << 20;    // one graph (CreateSession, Extend, RegisterGraph)
  // Function calls nested in one another (a graph's function library).
  int64_t max_function_depth = 64;
  // Plans (registered graphs) one master session keeps, one per (feeds,
  // fetches, targets) signature; beyond it the least recently used is
  // deregistered, so a client cycling through signatures cannot grow the
  // tasks without end.
  int64_t max_plans_per_session = 256;
};

// ResourceExhausted when `def` has more than `max_nodes` nodes.
inline absl::Status CheckGraphSize(const std::string& task, const tensorflow::GraphDef& def,
                                   int64_t max_nodes) {
  if (def.node_size() > max_nodes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("task ", task, ": a graph of ", def.node_size(),
                     " nodes is over the limit of ", max_nodes, " (--max_graph_nodes)"));
  }
  return absl::OkStatus();
}

struct WorkerEnv {
  std::string task;                 // "/job:ps/replica:0/task:0"
  DeviceMgr* device_mgr = nullptr;  // this task's devices
  const OpRegistry* op_registry = nullptr;
  const KernelRegistry* kernel_registry = nullptr;
  ThreadPool* inter_op_pool = nullptr;           // runs executor closures
  WorkerCacheInterface* worker_cache = nullptr;  // peers (and this task)
  RemoteCollectives* collectives = nullptr;      // null: no collectives
  // Watches the masters of running steps (null: nobody does).
  HealthMonitor* health = nullptr;
  ServingLimits limits;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_WORKER_ENV_H_
