// MasterSession: one client session on a master. Holds the client's graph
// and, per distinct (feeds, fetches, targets) signature, a plan: the client
// graph placed over the devices of every task the session may use,
// partitioned per task, each piece registered on its task once per graph
// version. A step runs every task's piece concurrently under one step id,
// gathers the fetches and the step stats of all tasks, and ends the step
// on every task (CleanupGraph).
//
// Thread-safe: steps may run concurrently; Extend/Close serialize with plan
// creation.
#ifndef GRAPHRUN_DISTRIBUTED_MASTER_SESSION_H_
#define GRAPHRUN_DISTRIBUTED_MASTER_SESSION_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "distributed/protos/master.pb.h"
#include "distributed/worker_env.h"
#include "distributed/worker_interface.h"
#include "graph/op_registry.h"
#include "graph/proto/config.pb.h"
#include "graph/types.h"
#include "kernels/framework/kernel_registry.h"
#include "runtime/step_pipeline.h"

namespace graphrun {
namespace distributed {

// Whether `task` (a "/job:J/replica:R/task:T" name) may hold devices
// matching one of `filters` (all when none); InvalidArgument naming a
// filter that does not parse.
absl::StatusOr<bool> TaskPassesFilters(
    const std::string& task, const google::protobuf::RepeatedPtrField<std::string>& filters);

class HealthMonitor;

struct MasterEnv {
  std::string task;  // the master's own task; its CPU:0 is the default device
  WorkerCacheInterface* worker_cache = nullptr;
  const OpRegistry* op_registry = nullptr;
  const KernelRegistry* kernel_registry = nullptr;
  // Deadline of control calls (GetStatus, RegisterGraph, ...).
  int64_t control_timeout_ms = 20000;
  // Heartbeats to the tasks of running steps; null: none.
  HealthMonitor* health = nullptr;
  ServingLimits limits;
};

class MasterSession {
 public:
  // Validates `graph` (InvalidArgument naming the node) and lists the
  // devices of every task `config.device_filters` allows (all tasks when
  // empty); Unavailable naming a task that does not answer.
  static absl::StatusOr<std::unique_ptr<MasterSession>> Create(
      const MasterEnv* env, std::string handle, const tensorflow::GraphDef& graph,
      const tensorflow::ConfigProto& config);
  ~MasterSession();

  // Adds nodes; returns the new graph version.
  absl::StatusOr<int64_t> Extend(const tensorflow::GraphDef& graph);
  absl::Status Run(CallOptions* opts, const RunStepRequest& request, RunStepResponse* response);
  void ListDevices(ListDevicesResponse* response) const;
  // Cancels the steps still running (their Run returns Cancelled, as
  // TensorFlow's Session.close() does), deregisters every graph and deletes
  // the worker sessions (best effort). Later Runs fail with Cancelled.
  absl::Status Close();

  const std::string& handle() const { return handle_; }
  int64_t graph_version() const;

 private:
  struct TaskGraph {
    std::string task;
    std::shared_ptr<WorkerInterface> worker;
    std::string graph_handle;
    std::vector<int> arg_indices;
    std::vector<int> retval_indices;
    tensorflow::GraphDef graph_def;
  };
  struct Plan {
    std::vector<TaskGraph> tasks;
    DataTypeVector feed_types, fetch_types;
    std::atomic<uint64_t> last_used{0};  // for the cache's eviction
  };

  MasterSession(const MasterEnv* env, std::string handle) : env_(env), handle_(std::move(handle)) {}
  absl::StatusOr<std::shared_ptr<Plan>> GetOrCreatePlan(const std::vector<std::string>& feeds,
                                                        const std::vector<std::string>& fetches,
                                                        const std::vector<std::string>& targets);
  absl::Status EnsureWorkerSession(const std::string& task, WorkerInterface* worker);

 public:
  // Plans cached now (tests).
  size_t num_plans() {
    std::lock_guard<std::mutex> l(mu_);
    return plans_.size();
  }

 private:
  void DeregisterPlans(absl::flat_hash_map<std::string, std::shared_ptr<Plan>> plans);
  // `s` with a node inlined from a function named by its function.
  absl::Status Annotated(absl::Status s) const;

  const MasterEnv* const env_;
  const std::string handle_;
  std::atomic<uint64_t> plan_clock_{0};
  tensorflow::ConfigProto config_;
  // Devices of the tasks this session uses, and their tasks (sorted).
  std::vector<DeviceAttributesProto> devices_;
  std::vector<std::string> tasks_;

  mutable std::mutex mu_;
  bool closed_ = false;
  // Cancels each running step (by step id).
  std::map<int64_t, std::function<void()>> running_;
  tensorflow::GraphDef graph_def_;
  // Every function the session was given, kept for later Extends
  // (lowering inlines the calls and drops the library from graph_def_).
  tensorflow::FunctionDefLibrary library_;
  // Where each node inlined from a function body came from, so placement
  // and step errors name the function (AnnotateLoweringError).
  std::shared_ptr<const absl::flat_hash_map<std::string, std::string>> origin_;
  int64_t graph_version_ = 0;
  // Where the graph's stateful nodes go in every plan, for graph version
  // pinned_version_ (guarded by plan_mu_).
  NodeDevices pinned_;
  int64_t pinned_version_ = -1;
  absl::flat_hash_map<std::string, std::shared_ptr<Plan>> plans_;
  std::map<std::string, std::shared_ptr<WorkerInterface>> worker_sessions_;
  std::mutex plan_mu_;  // serializes plan creation (registration happens once)
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_MASTER_SESSION_H_
