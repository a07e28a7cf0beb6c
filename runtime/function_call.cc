#include "runtime/function_call.h"

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/function_lowering.h"
#include "graph/graph.h"
#include "graph/node_def_util.h"
#include "graph/ops/all_ops.h"
#include "graph/status.h"
#include "placement/device_spec.h"
#include "placement/placer.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/local_rendezvous.h"
#include "runtime/step_pipeline.h"

namespace graphrun {
namespace {

// The call's inputs and the body's results.
class Frame : public CallFrameInterface {
 public:
  Frame(std::vector<Tensor> args, size_t num_rets)
      : args_(std::move(args)), rets_(num_rets), set_(num_rets, false) {}
  absl::StatusOr<Tensor> GetArg(int index) const override {
    if (index < 0 || static_cast<size_t>(index) >= args_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("no argument ", index));
    }
    return args_[index];
  }
  absl::Status SetRetval(int index, const Tensor& value) override {
    std::lock_guard<std::mutex> l(mu_);
    if (index < 0 || static_cast<size_t>(index) >= rets_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("no result ", index));
    }
    rets_[index] = value;
    set_[index] = true;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Tensor>> Take(const std::string& fname) {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < set_.size(); ++i) {
      if (!set_[i]) {
        return absl::InternalError(
            absl::StrCat("function '", fname, "' returned no value for result ", i));
      }
    }
    return std::move(rets_);
  }

 private:
  const std::vector<Tensor> args_;
  std::mutex mu_;
  std::vector<Tensor> rets_;
  std::vector<bool> set_;
};

// One run of a body. It runs with a rendezvous and a cancellation manager
// of its own: a failing body aborts only them, so the caller's step fails
// with the call kernel's error (naming the call and the function), not
// with the cancellations it would cause. Cancelling the caller's step
// cancels the body.
struct RunState {
  RunState(std::vector<Tensor> args, size_t n) : frame(std::move(args), n) {}
  Frame frame;
  LocalRendezvous rendezvous;
  CancellationManager cancellation;
  CancellationManager* parent = nullptr;
  CancellationToken token = 0;
  std::unique_ptr<StepStatsCollector> stats;  // the body's nodes, under the call

  // Null (after calling done) when the caller's step is already cancelled.
  static std::shared_ptr<RunState> Start(
      OpKernelContext* ctx, std::vector<Tensor> args, size_t num_rets, const std::string& name,
      const std::function<void(absl::StatusOr<std::vector<Tensor>>)>& done) {
    auto state = std::make_shared<RunState>(std::move(args), num_rets);
    state->parent = ctx->cancellation_manager();
    if (state->parent != nullptr) {
      state->token = state->parent->NewToken();
      if (!state->parent->RegisterCallback(
              state->token, [st = state.get()] { st->cancellation.StartCancel(); })) {
        done(
            absl::CancelledError(absl::StrCat("in function '", name, "': the step was cancelled")));
        return nullptr;
      }
    }
    return state;
  }

  void Finish(const absl::Status& s, const std::string& name,
              const std::function<void(absl::StatusOr<std::vector<Tensor>>)>& done) {
    if (parent != nullptr) parent->DeregisterCallback(token);
    if (!s.ok()) {
      done(absl::Status(s.code(), absl::StrCat("in function '", name, "': ", s.message())));
      return;
    }
    done(frame.Take(name));
  }
};

class CallBody : public FunctionLibraryRuntime::Body {
 public:
  CallBody(std::string name, std::unique_ptr<Executor> executor, size_t num_rets)
      : name_(std::move(name)), executor_(std::move(executor)), num_rets_(num_rets) {}

  void Run(OpKernelContext* ctx, std::vector<Tensor> args,
           std::function<void(absl::StatusOr<std::vector<Tensor>>)> done) override {
    std::shared_ptr<RunState> state = RunState::Start(ctx, std::move(args), num_rets_, name_, done);
    if (state == nullptr) return;
    Executor::Args a;
    a.step_id = ctx->step_id();
    a.rendezvous = &state->rendezvous;
    a.call_frame = &state->frame;
    a.cancellation_manager = &state->cancellation;
    a.runner = ctx->runner();
    a.collective_executor = ctx->collective_executor();
    if (ctx->stats_collector() != nullptr) {
      state->stats =
          std::make_unique<StepStatsCollector>(ctx->stats_collector(), ctx->op_kernel()->name());
      a.stats_collector = state->stats.get();
    }
    executor_->RunAsync(a, [this, state, done = std::move(done)](const absl::Status& s) {
      state->Finish(s, name_, done);
    });
  }

 private:
  const std::string name_;
  std::unique_ptr<Executor> executor_;
  const size_t num_rets_;
};

// A body placed over several devices of the task: one executor per device
// (DeviceExecutors), joined through the run's own rendezvous.
class MultiDeviceBody : public FunctionLibraryRuntime::Body {
 public:
  MultiDeviceBody(std::string name, std::shared_ptr<const DeviceExecutors> executors,
                  size_t num_rets)
      : name_(std::move(name)), executors_(std::move(executors)), num_rets_(num_rets) {}

  void Run(OpKernelContext* ctx, std::vector<Tensor> args,
           std::function<void(absl::StatusOr<std::vector<Tensor>>)> done) override {
    std::shared_ptr<RunState> state = RunState::Start(ctx, std::move(args), num_rets_, name_, done);
    if (state == nullptr) return;
    DeviceExecutors::StepArgs a;
    a.step_id = ctx->step_id();
    a.rendezvous = &state->rendezvous;
    a.call_frame = &state->frame;
    a.cancellation = &state->cancellation;
    a.runner = ctx->runner();
    a.collectives = ctx->collective_executor();
    if (ctx->stats_collector() != nullptr) {
      a.stats_parent = ctx->stats_collector();
      a.stats_prefix = ctx->op_kernel()->name();
    }
    DeviceExecutors::RunAsync(executors_, a,
                              [this, state, done = std::move(done)](const absl::Status& s) {
                                state->Finish(s, name_, done);
                              });
  }

 private:
  const std::string name_;
  const std::shared_ptr<const DeviceExecutors> executors_;
  const size_t num_rets_;
};

// Bodies are instantiated depth first, on the thread that builds the
// outermost executor (a call kernel's constructor instantiates its body,
// whose executor builds its kernels, ...). Recursion is an error, but a
// call graph shaped like a diamond (f calls g twice, g calls h twice, ...)
// would still make exponentially many bodies: one build may make at most
// kMaxBodies bodies of max_nodes nodes in all, nested max_depth deep
// (FunctionRuntimeOptions).
constexpr int kMaxBodies = 1024;
thread_local int tl_depth = 0;
thread_local int tl_bodies = 0;
thread_local int64_t tl_nodes = 0;

class BuildScope {
 public:
  BuildScope() {
    if (tl_depth++ == 0) {
      tl_bodies = 0;
      tl_nodes = 0;
    }
  }
  ~BuildScope() { --tl_depth; }
  BuildScope(const BuildScope&) = delete;
  BuildScope& operator=(const BuildScope&) = delete;
};

class Runtime : public FunctionLibraryRuntime {
 public:
  Runtime(const tensorflow::FunctionDefLibrary* library, const KernelRegistry* kernels,
          const FunctionRuntimeOptions& options)
      : library_(library), kernels_(kernels), options_(options) {}

  absl::StatusOr<std::unique_ptr<Body>> Instantiate(const tensorflow::NameAttrList& f,
                                                    const DataTypeVector& in,
                                                    const DataTypeVector& out,
                                                    DeviceBase* device) override {
    BuildScope build;
    if (tl_depth > options_.max_depth) {
      return absl::ResourceExhaustedError(
          absl::StrCat("call frames nest deeper than ", options_.max_depth,
                       " (instantiating function '", f.name(), "'; --max_function_depth)"));
    }
    if (++tl_bodies > kMaxBodies) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the graph's call frames make more than ", kMaxBodies,
                       " function bodies (instantiating function '", f.name(),
                       "'; a function calling another several times, nested)"));
    }
    tensorflow::GraphDef def;
    *def.mutable_library() = *library_;
    def.mutable_versions()->set_producer(kGraphDefConsumerVersion);
    tensorflow::NodeDef* call = def.add_node();
    call->set_name(f.name());  // body nodes are "<function>/<node>"
    call->set_op("StatefulPartitionedCall");
    tensorflow::AttrValue fv;
    *fv.mutable_func() = f;
    (*call->mutable_attr())["f"] = fv;
    (*call->mutable_attr())["Tin"] = MakeAttr(absl::MakeConstSpan(in));
    (*call->mutable_attr())["Tout"] = MakeAttr(absl::MakeConstSpan(out));
    (*call->mutable_attr())[kInlineAttr] = MakeAttr(true);
    for (size_t i = 0; i < in.size(); ++i) {
      tensorflow::NodeDef* arg = def.add_node();
      arg->set_name(absl::StrCat("_arg_", i));
      arg->set_op("_Arg");
      (*arg->mutable_attr())["T"] = MakeAttr(in[i]);
      (*arg->mutable_attr())["index"] = MakeAttr(static_cast<int64_t>(i));
      call->add_input(arg->name());
    }
    for (size_t i = 0; i < out.size(); ++i) {
      tensorflow::NodeDef* ret = def.add_node();
      ret->set_name(absl::StrCat("_retval_", i));
      ret->set_op("_Retval");
      ret->add_input(absl::StrCat(f.name(), ":", i));
      (*ret->mutable_attr())["T"] = MakeAttr(out[i]);
      (*ret->mutable_attr())["index"] = MakeAttr(static_cast<int64_t>(i));
    }
    const OpRegistry& ops = DefaultOpRegistry();
    LoweringOptions lowering;
    lowering.max_depth = options_.max_depth;
    lowering.max_nodes = options_.max_nodes;
    GR_ASSIGN_OR_RETURN(tensorflow::GraphDef canonical,
                        CanonicalizeGraphDefForSession(def, ops, lowering));
    GR_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, GraphFromGraphDef(canonical, ops));
    tl_nodes += graph->num_nodes();
    if (tl_nodes > options_.max_nodes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the graph's call-frame bodies make more than ", options_.max_nodes,
                       " nodes (instantiating function '", f.name(), "'; --max_graph_nodes)"));
    }
    bool requests = false;
    for (Node* n : graph->nodes()) requests |= !n->requested_device().empty();
    if (requests && options_.device_mgr != nullptr) {
      GR_ASSIGN_OR_RETURN(bool one_device, PlaceBody(f.name(), graph.get(), device));
      if (!one_device) {
        GR_ASSIGN_OR_RETURN(
            std::unique_ptr<DeviceExecutors> ex,
            DeviceExecutors::Build(*graph, options_.device_mgr, ops, *kernels_, options_));
        return std::unique_ptr<FunctionLibraryRuntime::Body>(
            new MultiDeviceBody(f.name(), std::move(ex), out.size()));
      }
    }
    for (Node* n : graph->nodes()) n->set_assigned_device(device->name());
    ExecutorParams params{device, kernels_, options_};
    GR_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::Create(params, std::move(graph)));
    return std::unique_ptr<FunctionLibraryRuntime::Body>(
        new CallBody(f.name(), std::move(ex), out.size()));
  }

 private:
  // Places the body's nodes over the caller's task's devices (the file
  // comment of function_call.h). True when they all land on `device`.
  absl::StatusOr<bool> PlaceBody(const std::string& fname, Graph* graph, DeviceBase* device) {
    GR_ASSIGN_OR_RETURN(placement::DeviceSpec caller, placement::DeviceSpec::Parse(device->name()));
    const placement::DeviceSpec task = caller.TaskPart();
    for (Node* n : graph->nodes()) {
      if (n->requested_device().empty()) continue;
      absl::StatusOr<placement::DeviceSpec> want =
          placement::DeviceSpec::Parse(n->requested_device());
      if (!want.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("function '", fname, "': node '", n->name(),
                                                       "': ", want.status().message()));
      }
      if (!want->TaskPart().IsCompatibleWith(task)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "function '", fname, "': node '", n->name(), "' asks for device '",
            n->requested_device(), "', but a call frame runs on its caller's task (",
            task.ToString(),
            "); inline the function (drop _noinline) to place its nodes on other tasks"));
      }
    }
    std::vector<placement::DeviceInfo> devices;
    for (const auto& d : options_.device_mgr->devices()) {
      absl::StatusOr<placement::DeviceSpec> s = placement::DeviceSpec::Parse(d->name());
      if (s.ok() && s->TaskPart() == task) devices.push_back({d->name(), d->device_type()});
    }
    placement::PlacerOptions popts;
    popts.default_device = device->name();
    popts.allow_soft_placement = options_.allow_soft_placement;
    const KernelRegistry* kr = kernels_;
    popts.supports_device = [kr](const Node& n, const std::string& type) {
      return kr->HasKernel(n.def(), type);
    };
    absl::Status placed = placement::Place(graph, devices, popts);
    if (!placed.ok()) {
      return absl::Status(placed.code(),
                          absl::StrCat("function '", fname, "': ", placed.message()));
    }
    for (Node* n : graph->nodes()) {
      if (n->assigned_device() != device->name()) return false;
    }
    return true;
  }

  const tensorflow::FunctionDefLibrary* library_;
  const KernelRegistry* kernels_;
  const FunctionRuntimeOptions options_;
};

}  // namespace

std::unique_ptr<FunctionLibraryRuntime> NewFunctionLibraryRuntime(
    const tensorflow::FunctionDefLibrary* library, const KernelRegistry* kernels,
    const FunctionRuntimeOptions& options) {
  return std::make_unique<Runtime>(library, kernels, options);
}

}  // namespace graphrun
