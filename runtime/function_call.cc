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
#include "runtime/executor.h"
#include "runtime/local_rendezvous.h"

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

class CallBody : public FunctionLibraryRuntime::Body {
 public:
  CallBody(std::string name, std::unique_ptr<Executor> executor, size_t num_rets)
      : name_(std::move(name)), executor_(std::move(executor)), num_rets_(num_rets) {}

  // The body runs with a rendezvous and a cancellation manager of its own:
  // a failing body aborts only them, so the caller's step fails with the
  // call kernel's error (naming the call and the function), not with the
  // cancellations it would cause. Cancelling the caller's step cancels
  // the body.
  void Run(OpKernelContext* ctx, std::vector<Tensor> args,
           std::function<void(absl::StatusOr<std::vector<Tensor>>)> done) override {
    struct State {
      State(std::vector<Tensor> args, size_t n) : frame(std::move(args), n) {}
      Frame frame;
      LocalRendezvous rendezvous;
      CancellationManager cancellation;
      CancellationManager* parent = nullptr;
      CancellationToken token = 0;
      std::unique_ptr<StepStatsCollector> stats;  // the body's nodes, under the call
    };
    auto state = std::make_shared<State>(std::move(args), num_rets_);
    state->parent = ctx->cancellation_manager();
    if (state->parent != nullptr) {
      state->token = state->parent->NewToken();
      if (!state->parent->RegisterCallback(
              state->token, [st = state.get()] { st->cancellation.StartCancel(); })) {
        done(absl::CancelledError(
            absl::StrCat("in function '", name_, "': the step was cancelled")));
        return;
      }
    }
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
      if (state->parent != nullptr) state->parent->DeregisterCallback(state->token);
      if (!s.ok()) {
        done(absl::Status(s.code(), absl::StrCat("in function '", name_, "': ", s.message())));
        return;
      }
      done(state->frame.Take(name_));
    });
  }

 private:
  const std::string name_;
  std::unique_ptr<Executor> executor_;
  const size_t num_rets_;
};

// Bodies are instantiated depth first, on the thread that builds the
// outermost executor (a call kernel's constructor instantiates its body,
// whose executor builds its kernels, ...). Recursion is an error, but a
// call graph shaped like a diamond (f calls g twice, g calls h twice, ...)
// would still make exponentially many bodies: one build may make at most
// kMaxBodies bodies of kMaxNodes nodes in all, nested kMaxDepth deep.
constexpr int kMaxDepth = 64;
constexpr int kMaxBodies = 1024;
constexpr int64_t kMaxNodes = int64_t{1} << 20;
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
  Runtime(const tensorflow::FunctionDefLibrary* library, const KernelRegistry* kernels)
      : library_(library), kernels_(kernels) {}

  absl::StatusOr<std::unique_ptr<Body>> Instantiate(const tensorflow::NameAttrList& f,
                                                    const DataTypeVector& in,
                                                    const DataTypeVector& out,
                                                    DeviceBase* device) override {
    BuildScope build;
    if (tl_depth > kMaxDepth) {
      return absl::ResourceExhaustedError(absl::StrCat("call frames nest deeper than ", kMaxDepth,
                                                       " (instantiating function '", f.name(),
                                                       "')"));
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
    GR_ASSIGN_OR_RETURN(tensorflow::GraphDef canonical, CanonicalizeGraphDefForSession(def, ops));
    GR_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, GraphFromGraphDef(canonical, ops));
    tl_nodes += graph->num_nodes();
    if (tl_nodes > kMaxNodes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the graph's call-frame bodies make more than ", kMaxNodes,
                       " nodes (instantiating function '", f.name(), "')"));
    }
    for (Node* n : graph->nodes()) n->set_assigned_device(device->name());
    ExecutorParams params{device, kernels_};
    GR_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::Create(params, std::move(graph)));
    return std::unique_ptr<FunctionLibraryRuntime::Body>(
        new CallBody(f.name(), std::move(ex), out.size()));
  }

 private:
  const tensorflow::FunctionDefLibrary* library_;
  const KernelRegistry* kernels_;
};

}  // namespace

std::unique_ptr<FunctionLibraryRuntime> NewFunctionLibraryRuntime(
    const tensorflow::FunctionDefLibrary* library, const KernelRegistry* kernels) {
  return std::make_unique<Runtime>(library, kernels);
}

}  // namespace graphrun
