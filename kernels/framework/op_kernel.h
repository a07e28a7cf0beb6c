// OpKernel: the code that computes one node, created once per node per
// partition graph and run once per step (and per loop iteration). A kernel
// returns an absl::Status; it must validate its inputs (shapes, ranks,
// indices) and never crash on bad input.
//
// Thread-safety: Compute() may run concurrently for different steps or
// iterations, so a kernel keeps no per-call state in members (or guards it).
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_OP_KERNEL_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_OP_KERNEL_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "graph/node_def_util.h"
#include "graph/proto/node_def.pb.h"
#include "graph/proto/op_def.pb.h"
#include "graph/status.h"
#include "graph/tensor.h"
#include "kernels/framework/cancellation.h"
#include "kernels/framework/collective.h"
#include "kernels/framework/device_base.h"
#include "kernels/framework/rendezvous.h"
#include "kernels/framework/resource_mgr.h"
#include "kernels/framework/step_stats.h"
#include "kernels/framework/variable.h"

namespace graphrun {

// What flows along one edge at run time: a tensor, or for ref-typed edges
// a reference to a variable. `tensor` uninitialised and `ref` null = no
// value (a dead input of Merge, or an output the kernel did not set).
struct TensorValue {
  Tensor tensor;
  std::shared_ptr<Var> ref;
  bool has_value() const { return tensor.IsInitialized() || ref != nullptr; }
};

// Arguments and results of a graph run, by index (_Arg / _Retval nodes).
class CallFrameInterface {
 public:
  virtual ~CallFrameInterface() = default;
  virtual absl::StatusOr<Tensor> GetArg(int index) const = 0;
  virtual absl::Status SetRetval(int index, const Tensor& value) = 0;
};

class OpKernelContext;

// Runs library functions as call frames, for the kernels of calls that
// function lowering left in a graph (runtime/function_call.h implements
// it; the executor of a graph with a function library hands it to that
// graph's kernels).
class FunctionLibraryRuntime {
 public:
  virtual ~FunctionLibraryRuntime() = default;
  // One function instantiated on one device, ready to run many times,
  // also concurrently.
  class Body {
   public:
    virtual ~Body() = default;
    // Runs the body on `args` in ctx's step; `done` gets its results.
    virtual void Run(OpKernelContext* ctx, std::vector<Tensor> args,
                     std::function<void(absl::StatusOr<std::vector<Tensor>>)> done) = 0;
  };
  // Errors name the function (missing, bad body, no kernel on `device`).
  virtual absl::StatusOr<std::unique_ptr<Body>> Instantiate(const tensorflow::NameAttrList& f,
                                                            const DataTypeVector& in,
                                                            const DataTypeVector& out,
                                                            DeviceBase* device) = 0;
};

// What one executor run made for itself (TensorFlow's per-step container):
// a kernel that creates a resource living only as long as the run (a
// loop gradient's stacks) adds its release here, and the executor calls
// every release when the run ends, whatever its outcome: succeeded, failed,
// cancelled, or with the op that would have freed it dead.
class StepResources {
 public:
  StepResources() = default;
  StepResources(const StepResources&) = delete;
  StepResources& operator=(const StepResources&) = delete;
  void Add(std::function<void()> release) {
    std::lock_guard<std::mutex> l(mu_);
    releases_.push_back(std::move(release));
  }
  // Calls (and forgets) every release, in the order added.
  void ReleaseAll() {
    std::vector<std::function<void()>> r;
    {
      std::lock_guard<std::mutex> l(mu_);
      r.swap(releases_);
    }
    for (auto& f : r) f();
  }

 private:
  std::mutex mu_;
  std::vector<std::function<void()>> releases_;  // guarded by mu_
};

class OpKernelConstruction {
 public:
  OpKernelConstruction(const tensorflow::NodeDef& def, const tensorflow::OpDef& op_def,
                       DataTypeVector inputs, DataTypeVector outputs, DeviceBase* device)
      : def_(def),
        op_def_(op_def),
        input_types_(std::move(inputs)),
        output_types_(std::move(outputs)),
        device_(device) {}

  const tensorflow::NodeDef& def() const { return def_; }
  const tensorflow::OpDef& op_def() const { return op_def_; }
  const DataTypeVector& input_types() const { return input_types_; }
  const DataTypeVector& output_types() const { return output_types_; }
  DeviceBase* device() const { return device_; }
  // The graph's function runtime; null when the graph has no library.
  FunctionLibraryRuntime* function_library() const { return function_library_; }
  void set_function_library(FunctionLibraryRuntime* f) { function_library_ = f; }

  template <typename T>
  absl::Status GetAttr(absl::string_view name, T* v) const {
    return ::graphrun::GetAttr(NodeAttrs(def_), name, v);
  }
  bool HasAttr(absl::string_view name) const { return ::graphrun::HasAttr(NodeAttrs(def_), name); }
  // Records the first construction error; the kernel is then discarded.
  void SetStatus(const absl::Status& s) {
    if (status_.ok()) status_ = s;
  }
  const absl::Status& status() const { return status_; }
  // InvalidArgument naming the node.
  absl::Status Error(absl::string_view msg) const {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", def_.name(), "' (op ", def_.op(), "): ", msg));
  }

 private:
  const tensorflow::NodeDef& def_;
  const tensorflow::OpDef& op_def_;
  DataTypeVector input_types_, output_types_;
  DeviceBase* device_;
  FunctionLibraryRuntime* function_library_ = nullptr;
  absl::Status status_;
};

// In a kernel constructor: record the error and return.
#define GR_CTX_CHECK_OK(ctx, expr) \
  do {                             \
    ::absl::Status gr_s_ = (expr); \
    if (!gr_s_.ok()) {             \
      (ctx)->SetStatus(gr_s_);     \
      return;                      \
    }                              \
  } while (0)

class OpKernelContext;
class AsyncOpKernel;

class OpKernel {
 public:
  explicit OpKernel(OpKernelConstruction* ctx);
  virtual ~OpKernel() = default;
  OpKernel(const OpKernel&) = delete;
  OpKernel& operator=(const OpKernel&) = delete;

  virtual absl::Status Compute(OpKernelContext* ctx) = 0;
  virtual AsyncOpKernel* AsAsync() { return nullptr; }
  // Cheap kernels run inline on the executor thread instead of being
  // scheduled on the pool.
  virtual bool IsExpensive() const { return expensive_; }

  const std::string& name() const { return def_.name(); }
  const std::string& type_string() const { return def_.op(); }
  const tensorflow::NodeDef& def() const { return def_; }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  // InvalidArgument "node 'name' (op X): msg".
  absl::Status Error(absl::string_view msg) const {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", name(), "' (op ", type_string(), "): ", msg));
  }

 protected:
  void set_expensive(bool e) { expensive_ = e; }

 private:
  tensorflow::NodeDef def_;
  DataTypeVector input_types_, output_types_;
  bool expensive_ = true;
};

class AsyncOpKernel : public OpKernel {
 public:
  using DoneCallback = std::function<void(absl::Status)>;
  using OpKernel::OpKernel;
  AsyncOpKernel* AsAsync() final { return this; }
  // Must call `done` exactly once, possibly on another thread.
  virtual void ComputeAsync(OpKernelContext* ctx, DoneCallback done) = 0;
  // Runs ComputeAsync and blocks until done.
  absl::Status Compute(OpKernelContext* ctx) final;
};

class OpKernelContext {
 public:
  // Everything the executor hands one kernel invocation.
  struct Params {
    int64_t step_id = 0;
    DeviceBase* device = nullptr;
    OpKernel* op_kernel = nullptr;
    const TensorValue* inputs = nullptr;  // num_inputs entries
    int num_inputs = 0;
    Rendezvous* rendezvous = nullptr;
    CancellationManager* cancellation_manager = nullptr;
    CallFrameInterface* call_frame = nullptr;
    FrameAndIter frame_iter;
    bool is_input_dead = false;  // some input is dead (only Merge sees that)
    // Runs a closure on the inter-op pool (for async kernels' work).
    std::function<void(std::function<void()>)> runner;
    // The step's collectives (null: this session runs none).
    CollectiveExecutor* collective_executor = nullptr;
    // This executor run's resources (null outside an executor run).
    StepResources* step_resources = nullptr;
    // Where the run saves node stats (null: the step is not traced).
    StepStatsCollector* stats_collector = nullptr;
  };

  explicit OpKernelContext(Params* params);

  // This step's params for running `kernel` on other inputs inside this
  // kernel (an adapter around another device's or type's kernel).
  Params InnerParams(OpKernel* kernel, const TensorValue* inputs, int num_inputs) const {
    Params p = *params_;
    p.op_kernel = kernel;
    p.inputs = inputs;
    p.num_inputs = num_inputs;
    return p;
  }

  int num_inputs() const { return params_->num_inputs; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  // The input value; for a ref input, a snapshot of the variable (its
  // current tensor, read under the variable's lock; uninitialised tensor if
  // never assigned).
  const Tensor& input(int i);
  bool has_input(int i) const { return params_->inputs[i].has_value(); }
  bool input_is_ref(int i) const { return params_->inputs[i].ref != nullptr; }
  // The variable behind a ref input (null when not a ref).
  const std::shared_ptr<Var>& input_ref(int i) const { return params_->inputs[i].ref; }
  const TensorValue& input_value(int i) const { return params_->inputs[i]; }

  // Allocates output `i` with the output's dtype.
  absl::StatusOr<Tensor*> allocate_output(int i, const TensorShape& shape);
  void set_output(int i, Tensor t) { outputs_[i].tensor = std::move(t); }
  void set_output_ref(int i, std::shared_ptr<Var> v) { outputs_[i].ref = std::move(v); }
  // Passes input `in` (value or ref) through to output `out` unchanged.
  void forward_input(int in, int out) { outputs_[out] = params_->inputs[in]; }
  DataType output_type(int i) const { return params_->op_kernel->output_type(i); }

  int64_t step_id() const { return params_->step_id; }
  DeviceBase* device() const { return params_->device; }
  ResourceMgr* resource_manager() const { return params_->device->resource_manager(); }
  Rendezvous* rendezvous() const { return params_->rendezvous; }
  CancellationManager* cancellation_manager() const { return params_->cancellation_manager; }
  CollectiveExecutor* collective_executor() const { return params_->collective_executor; }
  StepResources* step_resources() const { return params_->step_resources; }
  StepStatsCollector* stats_collector() const { return params_->stats_collector; }
  CallFrameInterface* call_frame() const { return params_->call_frame; }
  const FrameAndIter& frame_iter() const { return params_->frame_iter; }
  bool is_input_dead() const { return params_->is_input_dead; }
  const std::function<void(std::function<void()>)>& runner() const { return params_->runner; }
  OpKernel* op_kernel() const { return params_->op_kernel; }
  ThreadPool* intra_op_pool() const { return params_->device->intra_op_pool(); }
  int intra_op_parallelism() const { return params_->device->intra_op_parallelism(); }

  // The outputs, for the executor.
  std::vector<TensorValue>* mutable_outputs() { return &outputs_; }

 private:
  Params* params_;
  std::vector<TensorValue> outputs_;
  std::vector<Tensor> ref_snapshots_;  // per input, filled lazily
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_OP_KERNEL_H_
