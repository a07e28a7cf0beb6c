// GraphMgr: the graphs one worker session registered on this task. A
// registered graph is this task's piece of a placed client graph; the
// step pipeline's last stages (runtime/step_pipeline.h, as DirectSession
// runs them) partition it per local device and build an Executor per
// device, once; steps then run all of them with one rendezvous and call
// frame.
//
// Thread-safe; a graph deregistered while a step runs stays alive until
// the step ends.
#ifndef GRAPHRUN_DISTRIBUTED_GRAPH_MGR_H_
#define GRAPHRUN_DISTRIBUTED_GRAPH_MGR_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "distributed/worker_env.h"
#include "distributed/worker_interface.h"
#include "graph/proto/graph.pb.h"
#include "graph/proto/step_stats.pb.h"
#include "runtime/executor.h"
#include "runtime/step_pipeline.h"

namespace graphrun {
namespace distributed {

class GraphMgr {
 public:
  explicit GraphMgr(const WorkerEnv* env) : env_(env) {}

  // Returns the new graph's handle. InvalidArgument naming the node for
  // a node not placed on a device of this task, an invalid graph or a
  // missing kernel; FailedPrecondition naming the device for a _Send whose
  // send_device_incarnation is not the device's.
  absl::StatusOr<std::string> Register(const tensorflow::GraphDef& def);
  // NotFound naming the handle.
  absl::Status Deregister(const std::string& handle);
  void DeregisterAll();

  struct StepParams {
    int64_t step_id = 0;
    Rendezvous* rendezvous = nullptr;             // not owned; outlives the step
    CallFrameInterface* call_frame = nullptr;     // not owned; outlives the step
    CancellationManager* cancellation = nullptr;  // not owned; outlives the step
    tensorflow::StepStats* stats = nullptr;       // null = no tracing
  };
  // Runs every device's executor of `handle`; `done` gets the first error
  // (which also aborts the rendezvous and cancels the step).
  void ExecuteAsync(const std::string& handle, const StepParams& params, StatusCallback done);

 private:
  const WorkerEnv* env_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const DeviceExecutors>> items_;
  std::atomic<int64_t> next_id_{1};
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_GRAPH_MGR_H_
