// Kernels for v1 control flow. Deadness and frames are the executor's
// business; these kernels only route values.
#include "kernels/core/register.h"

namespace graphrun {
namespace {

class SwitchOp : public OpKernel {
 public:
  explicit SwitchOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& pred = ctx->input(1);
    if (pred.dtype() != DT_BOOL || pred.NumElements() != 1 || pred.dims() != 0) {
      return Error(absl::StrCat("pred must be a bool scalar, got ", pred.DebugString()));
    }
    ctx->forward_input(0, pred.scalar<bool>() ? 1 : 0);
    return absl::OkStatus();
  }
};

// _SwitchN (lowered Case): an index out of [0, num_outs) picks the last
// output, as Case's default branch.
class SwitchNOp : public OpKernel {
 public:
  explicit SwitchNOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& index = ctx->input(1);
    if (index.dtype() != DT_INT32 || index.dims() != 0) {
      return Error(absl::StrCat("output_index must be an int32 scalar, got ", index.DebugString()));
    }
    int32_t i = index.scalar<int32_t>();
    if (i < 0 || i >= ctx->num_outputs()) i = ctx->num_outputs() - 1;
    ctx->forward_input(0, i);
    return absl::OkStatus();
  }
};

class MergeOp : public OpKernel {
 public:
  explicit MergeOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      if (ctx->has_input(i)) {
        ctx->forward_input(i, 0);
        ctx->set_output(1, Tensor::Scalar<int32_t>(i));
        return absl::OkStatus();
      }
    }
    // Every input dead: the executor marks the outputs dead.
    return absl::OkStatus();
  }
};

class ForwardOp : public OpKernel {
 public:
  explicit ForwardOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->forward_input(0, 0);
    return absl::OkStatus();
  }
};

class LoopCondOp : public OpKernel {
 public:
  explicit LoopCondOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    if (t.dims() != 0) {
      return Error(absl::StrCat("input must be a scalar, got ", t.shape().DebugString()));
    }
    ctx->forward_input(0, 0);
    return absl::OkStatus();
  }
};

class ControlTriggerOp : public OpKernel {
 public:
  explicit ControlTriggerOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext*) override { return absl::OkStatus(); }
};

}  // namespace

void RegisterControlFlowKernels(KernelRegistry& r) {
  for (const char* dev : {kDeviceCpu, kDeviceGpu}) {
    r.Add(KernelDef("Switch").Device(dev), MakeKernel<SwitchOp>());
    r.Add(KernelDef("RefSwitch").Device(dev), MakeKernel<SwitchOp>());
    r.Add(KernelDef("_SwitchN").Device(dev).HostMemory("output_index"), MakeKernel<SwitchNOp>());
    r.Add(KernelDef("Merge").Device(dev), MakeKernel<MergeOp>());
    r.Add(KernelDef("RefMerge").Device(dev), MakeKernel<MergeOp>());
    for (const char* op :
         {"Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration"}) {
      r.Add(KernelDef(op).Device(dev), MakeKernel<ForwardOp>());
    }
    r.Add(KernelDef("LoopCond").Device(dev), MakeKernel<LoopCondOp>());
    r.Add(KernelDef("ControlTrigger").Device(dev), MakeKernel<ControlTriggerOp>());
  }
}

}  // namespace graphrun
