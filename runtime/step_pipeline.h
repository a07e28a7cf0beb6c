// The step pipeline every session shares. A client graph goes through the
// same stages whether one process runs it (DirectSession) or a cluster
// does (MasterSession, then each task's GraphMgr):
//
//   PlaceClientGraph      feeds/fetches/targets -> pruned client graph,
//                         placed over the devices the session sees
//   (MasterSession only)  partitioned per task, one piece sent to each
//   DeviceExecutors       one task's graph partitioned per local device
//                         (cross-device edges become _Send/_Recv), one
//                         Executor per device, built once
//   DeviceExecutors::RunAsync
//                         one step: every device's executor with one
//                         rendezvous, call frame and cancellation; the
//                         first error aborts the rest
//
// so what a kernel sees (step id, collectives, cancellation, tracing) is
// the same under both sessions.
#ifndef GRAPHRUN_RUNTIME_STEP_PIPELINE_H_
#define GRAPHRUN_RUNTIME_STEP_PIPELINE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/proto/config.pb.h"
#include "graph/proto/graph.pb.h"
#include "graph/proto/step_stats.pb.h"
#include "kernels/framework/kernel_registry.h"
#include "placement/placer.h"
#include "runtime/client_graph.h"
#include "runtime/device.h"
#include "runtime/device_factory.h"
#include "runtime/executor.h"
#include "runtime/function_call.h"

namespace graphrun {

// The client graph of `spec` (pruned to what the fetches and targets
// need, with _Arg/_Retval for feeds and fetches on spec.client_device),
// placed over `devices`. Unplaced nodes go to spec.client_device's task,
// on the device type of highest priority (`device_factories`; null: the
// default registry) that has kernels for them: an accelerator before the
// CPU. Errors name the node (no kernel on any allowed device, an
// impossible constraint) or the feed/fetch/target.
//
// `pinned` (may be null): node name -> device, from PlaceStatefulNodes;
// those nodes are placed there whatever the run keeps of their groups.
using NodeDevices = absl::flat_hash_map<std::string, std::string>;
absl::StatusOr<ClientGraph> PlaceClientGraph(
    const tensorflow::GraphDef& def, const OpRegistry& op_registry,
    const KernelRegistry& kernel_registry, const ClientGraphSpec& spec,
    const std::vector<placement::DeviceInfo>& devices, const tensorflow::ConfigProto& config,
    const DeviceFactoryRegistry* device_factories = nullptr, const NodeDevices* pinned = nullptr);

// The devices of the session graph's stateful nodes and of the nodes that
// take a resource or a reference, from one placement of the whole graph,
// as TensorFlow places a session's whole graph once: a variable, its
// reads and its updates then share one device in every run, whatever part
// of their colocation group a run prunes to (a run that only initialises a
// variable would otherwise put it on an accelerator whose kernels can read
// it, and a training run on the CPU with its update, where it does not
// exist). `previous` (may be null): the placements before an Extend, kept
// where the extended graph allows (state already lives on those devices).
// Empty when the whole graph cannot be placed; runs then place what they
// keep.
NodeDevices PlaceStatefulNodes(const tensorflow::GraphDef& def, const OpRegistry& op_registry,
                               const KernelRegistry& kernel_registry,
                               const std::string& client_device,
                               const std::vector<placement::DeviceInfo>& devices,
                               const tensorflow::ConfigProto& config,
                               const DeviceFactoryRegistry* device_factories = nullptr,
                               const NodeDevices* previous = nullptr);

// One task's executors for a placed graph: one per local device.
class DeviceExecutors {
 public:
  // Partitions `graph` (every node assigned to a device of `device_mgr`)
  // per device and builds each piece's Executor. Errors name the node (a
  // device this task does not have, a missing kernel, bad attrs).
  // `functions`: how call-frame bodies are instantiated
  // (runtime/function_call.h; its device_mgr is `device_mgr`).
  static absl::StatusOr<std::unique_ptr<DeviceExecutors>> Build(
      const Graph& graph, DeviceMgr* device_mgr, const OpRegistry& op_registry,
      const KernelRegistry& kernels, const FunctionRuntimeOptions& functions = {});

  struct StepArgs {
    int64_t step_id = 0;
    Rendezvous* rendezvous = nullptr;             // not owned; outlives the step
    CallFrameInterface* call_frame = nullptr;     // not owned; outlives the step
    CancellationManager* cancellation = nullptr;  // not owned; outlives the step
    ThreadPool* inter_op_pool = nullptr;          // not owned
    // Instead of inter_op_pool when set (a call frame: its caller's).
    std::function<void(std::function<void()>)> runner;
    CollectiveExecutor* collectives = nullptr;  // not owned; null = none
    tensorflow::StepStats* stats = nullptr;     // null = no tracing
    // Instead of `stats` when set (a call frame): every device's nodes go
    // to this collector (the caller's), named "stats_prefix/NODE".
    StepStatsCollector* stats_parent = nullptr;
    std::string stats_prefix;
    // false: every device's executor starts on the pool (the caller's
    // thread is free at once, to watch a deadline); true: the last starts
    // on the caller's thread (cheap graphs finish without a switch).
    bool run_last_inline = true;
  };
  // Runs one step on every device. `done` runs once, after every executor
  // finished, with the first error (which also aborts the rendezvous and
  // cancels the step, so the others stop). `self` (this object, shared)
  // is kept alive until then.
  static void RunAsync(std::shared_ptr<const DeviceExecutors> self, const StepArgs& args,
                       std::function<void(const absl::Status&)> done);

  int num_devices() const { return static_cast<int>(units_.size()); }
  // The per-device pieces, as RunMetadata.partition_graphs reports them.
  std::vector<tensorflow::GraphDef> partition_graphs() const;

 private:
  struct Unit {
    Device* device;
    std::unique_ptr<Executor> executor;
    tensorflow::GraphDef graph_def;
  };
  std::vector<Unit> units_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_STEP_PIPELINE_H_
