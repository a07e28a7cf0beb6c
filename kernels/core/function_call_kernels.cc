// PartitionedCall / StatefulPartitionedCall as call frames: the kernel of a
// call that function lowering left in the graph (a function marked
// `_noinline`, graph/function_lowering.h) runs the function's body in an
// executor of its own, on the call's device, once per call: its inputs are
// the body's _Arg values, its outputs the body's _Retval values.
//
// The body is instantiated when the kernel is built (errors in it fail the
// session's setup, naming the function), through the FunctionLibraryRuntime
// the executor hands its kernels (runtime/function_call.h). Each run shares
// the caller's step: step id, cancellation, collectives, inter-op pool and
// rendezvous.
#include <memory>
#include <utility>
#include <vector>

#include "kernels/core/register.h"

namespace graphrun {
namespace {

class CallOp : public AsyncOpKernel {
 public:
  explicit CallOp(OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    const tensorflow::AttrValue* f = nullptr;
    GR_CTX_CHECK_OK(ctx, GetAttr(NodeAttrs(ctx->def()), "f", &f));
    if (!f->has_func()) {
      ctx->SetStatus(ctx->Error("attr 'f' is not a function"));
      return;
    }
    FunctionLibraryRuntime* flr = ctx->function_library();
    if (flr == nullptr) {
      ctx->SetStatus(ctx->Error(absl::StrCat("calls function '", f->func().name(),
                                             "' but the graph has no function library")));
      return;
    }
    auto body = flr->Instantiate(f->func(), ctx->input_types(), ctx->output_types(), ctx->device());
    if (!body.ok()) {
      ctx->SetStatus(absl::Status(
          body.status().code(), absl::StrCat("node '", ctx->def().name(), "' (op ", ctx->def().op(),
                                             "): ", body.status().message())));
      return;
    }
    body_ = *std::move(body);
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    std::vector<Tensor> args;
    args.reserve(static_cast<size_t>(ctx->num_inputs()));
    for (int i = 0; i < ctx->num_inputs(); ++i) args.push_back(ctx->input(i));
    body_->Run(ctx, std::move(args),
               [this, ctx, done = std::move(done)](absl::StatusOr<std::vector<Tensor>> rets) {
                 if (!rets.ok()) {
                   done(absl::Status(rets.status().code(),
                                     absl::StrCat("node '", name(), "' (op ", type_string(),
                                                  "): ", rets.status().message())));
                   return;
                 }
                 for (size_t i = 0; i < rets->size(); ++i) {
                   ctx->set_output(static_cast<int>(i), std::move((*rets)[i]));
                 }
                 done(absl::OkStatus());
               });
  }

 private:
  std::unique_ptr<FunctionLibraryRuntime::Body> body_;
};

}  // namespace

void RegisterFunctionCallKernels(KernelRegistry& r) {
  for (const char* op : {"PartitionedCall", "StatefulPartitionedCall"}) {
    r.Add(KernelDef(op).Device(kDeviceCpu), MakeKernel<CallOp>());
  }
}

}  // namespace graphrun
