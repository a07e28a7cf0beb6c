// Executor: runs one partition graph (all nodes on one device) as a
// dataflow computation. A node runs when all its inputs are available;
// cheap kernels run inline on the thread that made them ready, expensive
// ones go to the inter-op pool. Implements TensorFlow's v1 control-flow
// semantics: dead values propagate from the untaken Switch output (a node
// with a dead input does not run and its outputs are dead; Merge runs on
// its first live input; _Send forwards deadness), and while loops run in
// frames (Enter starts/joins a child frame, NextIteration advances the
// iteration, Exit returns to the parent, with up to parallel_iterations
// iterations in flight).
//
// An Executor is immutable after Create and may run many steps
// concurrently; each RunAsync has its own per-step state.
#ifndef GRAPHRUN_RUNTIME_EXECUTOR_H_
#define GRAPHRUN_RUNTIME_EXECUTOR_H_

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/proto/step_stats.pb.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/op_kernel.h"
#include "kernels/framework/step_stats.h"
#include "runtime/function_call.h"

namespace graphrun {

struct ExecutorParams {
  DeviceBase* device = nullptr;                     // not owned
  const KernelRegistry* kernel_registry = nullptr;  // not owned
  // How the graph's call frames are instantiated (runtime/function_call.h):
  // the task's devices (not owned; outlive the executor), soft placement,
  // nesting and size limits.
  FunctionRuntimeOptions functions;
};

class Executor {
 public:
  struct Args {
    int64_t step_id = 0;
    Rendezvous* rendezvous = nullptr;                     // not owned
    CallFrameInterface* call_frame = nullptr;             // not owned
    CancellationManager* cancellation_manager = nullptr;  // not owned
    StepStatsCollector* stats_collector = nullptr;        // null = no tracing
    // Runs closures on the inter-op pool.
    std::function<void(std::function<void()>)> runner;
    CollectiveExecutor* collective_executor = nullptr;  // not owned; null = none
  };
  using DoneCallback = std::function<void(const absl::Status&)>;

  // Instantiates a kernel for every node of `graph` (taking ownership).
  // Errors name the node (no kernel for the op/device/types, bad attrs).
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const ExecutorParams& params,
                                                          std::unique_ptr<Graph> graph);
  ~Executor();

  // Runs one step; `done` is called exactly once, with the first error of
  // the step (errors abort the rendezvous and cancel the step).
  void RunAsync(const Args& args, DoneCallback done);
  // Blocking form of RunAsync.
  absl::Status Run(const Args& args);

  const Graph& graph() const { return *graph_; }

  struct Impl;  // immutable per-graph state (executor.cc)

 private:
  Executor() = default;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_EXECUTOR_H_
