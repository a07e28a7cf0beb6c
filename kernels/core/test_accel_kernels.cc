#include "kernels/core/test_accel_kernels.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/core/register.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {
namespace {

struct AccelOpDef {
  const char* op;
  std::vector<const char*> host_memory;
};

const std::vector<AccelOpDef>& AccelOpDefs() {
  static const std::vector<AccelOpDef>* defs = new std::vector<AccelOpDef>{
      {"Const", {}},
      {"Identity", {}},
      {"StopGradient", {}},
      {"Add", {}},
      {"AddV2", {}},
      {"AddN", {}},
      {"Sub", {}},
      {"Mul", {}},
      {"RealDiv", {}},
      {"Neg", {}},
      {"Square", {}},
      {"Sqrt", {}},
      {"Exp", {}},
      {"Log", {}},
      {"Tanh", {}},
      {"Sigmoid", {}},
      {"Maximum", {}},
      {"Minimum", {}},
      {"Relu", {}},
      {"ReluGrad", {}},
      {"BiasAdd", {}},
      {"BiasAddGrad", {}},
      {"MatMul", {}},
      {"Softmax", {}},
      {"LogSoftmax", {}},
      {"SparseSoftmaxCrossEntropyWithLogits", {}},
      {"SoftmaxCrossEntropyWithLogits", {}},
      {"Sum", {"reduction_indices"}},
      {"Mean", {"reduction_indices"}},
      {"Max", {"reduction_indices"}},
      {"Reshape", {"shape"}},
      {"Shape", {"output"}},
      {"Fill", {"dims"}},
      {"ZerosLike", {}},
      {"OnesLike", {}},
      {"Cast", {}},
      {"Transpose", {"perm"}},
      {"ExpandDims", {"dim"}},
      {"Tile", {"multiples"}},
      {"BroadcastGradientArgs", {"s0", "s1", "r0", "r1"}},
  };
  return *defs;
}

// Runs the op's CPU kernel on the device's compute stream: decodes the
// inputs that lie in this device's memory, computes, and encodes every
// output that is not HostMemory.
class TestAccelOp : public AsyncOpKernel {
 public:
  TestAccelOp(OpKernelConstruction* ctx, const KernelRegistry* registry) : AsyncOpKernel(ctx) {
    accelerator_ = ctx->device()->accelerator();
    if (accelerator_ == nullptr) {
      ctx->SetStatus(Error(absl::StrCat("device ", ctx->device()->name(), " (",
                                        ctx->device()->device_type(), ") is no accelerator")));
      return;
    }
    absl::StatusOr<MemoryTypes> mt =
        registry->GetMemoryTypes(ctx->def(), ctx->op_def(), kDeviceTestAccel,
                                 [a = accelerator_](DataType t) { return a->CanHold(t); });
    if (!mt.ok()) {
      ctx->SetStatus(mt.status());
      return;
    }
    memory_ = *std::move(mt);
    absl::StatusOr<std::unique_ptr<OpKernel>> inner =
        registry->CreateKernelForType(ctx->def(), ctx->op_def(), ctx->input_types(),
                                      ctx->output_types(), ctx->device(), kDeviceCpu);
    if (!inner.ok()) {
      ctx->SetStatus(inner.status());
      return;
    }
    inner_ = *std::move(inner);
    if (inner_->AsAsync() != nullptr) {
      ctx->SetStatus(Error("TEST_ACCEL runs synchronous CPU kernels only"));
      return;
    }
    context_ = absl::StrCat("node '", name(), "' (op ", type_string(), ") on ",
                            ctx->device()->name(), ": ");
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    accelerator_->EnqueueCompute([this, ctx, done = std::move(done)] { done(Run(ctx)); });
  }

 private:
  absl::Status Run(OpKernelContext* ctx) {
    const DeviceMemorySpace* mine = accelerator_->memory_space();
    std::vector<TensorValue> inputs(ctx->num_inputs());
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      if (!ctx->has_input(i)) continue;
      const Tensor& t = ctx->input(i);
      if (t.memory_space() == nullptr) {
        inputs[i].tensor = t;
      } else if (t.memory_space() == mine) {
        GR_ASSIGN_OR_RETURN(inputs[i].tensor, Tensor::Allocate(t.dtype(), t.shape(), context_));
        TestAccelTransform(t.raw_data(), inputs[i].tensor.raw_data(),
                           static_cast<size_t>(t.TotalBytes()));
      } else {
        return absl::InternalError(absl::StrCat(context_, "input ", i, " lies in the memory of ",
                                                t.memory_space()->device_name()));
      }
    }
    OpKernelContext::Params p =
        ctx->InnerParams(inner_.get(), inputs.data(), static_cast<int>(inputs.size()));
    OpKernelContext inner_ctx(&p);
    GR_RETURN_IF_ERROR(inner_->Compute(&inner_ctx));
    std::vector<TensorValue>& outputs = *inner_ctx.mutable_outputs();
    for (int i = 0; i < num_outputs(); ++i) {
      Tensor& t = outputs[i].tensor;
      if (memory_.output_on_host[i] || !t.IsInitialized() || outputs[i].ref != nullptr) {
        (*ctx->mutable_outputs())[i] = std::move(outputs[i]);
        continue;
      }
      GR_ASSIGN_OR_RETURN(Tensor dev, accelerator_->AllocateDevice(t.dtype(), t.shape(), context_));
      TestAccelTransform(t.raw_data(), dev.raw_data(), static_cast<size_t>(t.TotalBytes()));
      ctx->set_output(i, std::move(dev));
    }
    return absl::OkStatus();
  }

  Accelerator* accelerator_ = nullptr;
  MemoryTypes memory_;
  std::unique_ptr<OpKernel> inner_;
  std::string context_;  // "node 'x' (op Y) on DEVICE: "
};

}  // namespace

const std::vector<std::string>& TestAccelOps() {
  static const std::vector<std::string>* ops = [] {
    auto* v = new std::vector<std::string>();
    for (const AccelOpDef& d : AccelOpDefs()) v->push_back(d.op);
    return v;
  }();
  return *ops;
}

void RegisterTestAccelKernels(KernelRegistry& r) {
  const KernelRegistry* registry = &r;
  for (const AccelOpDef& d : AccelOpDefs()) {
    KernelDef def(d.op);
    def.Device(kDeviceTestAccel);
    for (const char* arg : d.host_memory) def.HostMemory(arg);
    // What the CPU kernel serves, for types the device can hold.
    def.Predicate([registry](const tensorflow::NodeDef& n) {
      for (const auto& [name, v] : n.attr()) {
        if (v.value_case() == tensorflow::AttrValue::kType && !FixedSizeDeviceType(v.type())) {
          return false;
        }
      }
      return registry->HasKernel(n, kDeviceCpu);
    });
    r.Add(std::move(def), [registry](OpKernelConstruction* ctx) -> std::unique_ptr<OpKernel> {
      return std::make_unique<TestAccelOp>(ctx, registry);
    });
  }
  RegisterAcceleratorTransferKernels(r, kDeviceTestAccel);
  RegisterAcceleratorVariableKernels(r, kDeviceTestAccel, {DT_FLOAT, DT_DOUBLE});
  RegisterAcceleratorCollectiveKernels(r, kDeviceTestAccel, {DT_FLOAT, DT_DOUBLE});
}

}  // namespace graphrun
