// The in-process session: the step pipeline (runtime/step_pipeline.h) with
// one task. It places the client graph of each distinct (feeds, fetches,
// targets) signature over this process's devices, builds one Executor per
// device (cached), and runs all of a step's devices concurrently with one
// LocalRendezvous.
#ifndef GRAPHRUN_RUNTIME_DIRECT_SESSION_H_
#define GRAPHRUN_RUNTIME_DIRECT_SESSION_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kernels/framework/kernel_registry.h"
#include "runtime/collective_local.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/session.h"
#include "runtime/step_pipeline.h"

namespace graphrun {

class DirectSession : public Session {
 public:
  // InvalidArgument for bad options (device counts, thread counts).
  static absl::StatusOr<std::unique_ptr<DirectSession>> Create(const SessionOptions& options);
  ~DirectSession() override;

  absl::Status Create(const tensorflow::GraphDef& graph) override;
  absl::Status Extend(const tensorflow::GraphDef& graph) override;
  using Session::Run;
  absl::StatusOr<std::vector<Tensor>> Run(const tensorflow::RunOptions& options,
                                          const NamedTensorList& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets,
                                          tensorflow::RunMetadata* metadata) override;
  absl::StatusOr<std::vector<DeviceAttributes>> ListDevices() override;
  absl::Status Close() override;

  const DeviceMgr& device_mgr() const { return *device_mgr_; }

 private:
  struct ExecutorsAndKeys {
    std::shared_ptr<const DeviceExecutors> executors;
    DataTypeVector feed_types, fetch_types;
  };

  DirectSession() = default;
  // The stateful nodes' devices for graph version `version` (`def`).
  std::shared_ptr<const NodeDevices> Pinned(const tensorflow::GraphDef& def, int64_t version,
                                            const std::vector<placement::DeviceInfo>& devices);
  absl::StatusOr<std::shared_ptr<ExecutorsAndKeys>> GetOrCreateExecutors(
      const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
      const std::vector<std::string>& targets);
  // `library`: every function the session was given, kept for later
  // Extends (lowering inlines the calls and drops the library from `def`).
  absl::Status ValidateAndSetGraph(tensorflow::GraphDef def,
                                   tensorflow::FunctionDefLibrary library);
  // `s` with a node inlined from a function named by its function.
  absl::Status Annotated(absl::Status s);

  SessionOptions options_;
  const OpRegistry* op_registry_ = nullptr;
  const KernelRegistry* kernel_registry_ = nullptr;
  std::unique_ptr<DeviceMgr> device_mgr_;
  std::unique_ptr<ThreadPool> inter_op_pool_;
  // Collectives among this session's devices (in-graph replicas).
  std::unique_ptr<InProcessCollectives> collectives_;

  std::mutex mu_;
  bool has_graph_ = false;
  bool closed_ = false;
  tensorflow::GraphDef graph_def_;
  tensorflow::FunctionDefLibrary library_;
  // Where each node inlined from a function body came from, so placement
  // and step errors name the function (AnnotateLoweringError).
  std::shared_ptr<const absl::flat_hash_map<std::string, std::string>> origin_;
  int64_t graph_version_ = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<ExecutorsAndKeys>> executors_;
  // Where the graph's stateful nodes go in every run (PlaceStatefulNodes),
  // computed at the first run of each graph version; the last version's.
  std::shared_ptr<const NodeDevices> pinned_;
  int64_t pinned_version_ = -1;
  std::atomic<int64_t> next_step_id_{1};
  // Steps in flight, so Close() can cancel them.
  std::vector<CancellationManager*> running_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_DIRECT_SESSION_H_
