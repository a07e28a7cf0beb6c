// ResourceApplyGradientDescent, ResourceApplyMomentum and ResourceApplyAdam
// on the GPU (float32), so a variable, its reads and its updates live in
// the GPU's memory (the handle and the resource manager on the host, the
// tensor in device memory; kernels/core's variable kernels for the GPU).
// As on the CPU: the variables are locked in address order, must be
// initialised, float and of one shape, and one whose buffer someone else
// still holds (an earlier read) is copied first (device to device, in
// stream order) and updated in the copy. Scalars stay in device memory.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/variable.h"
#include "kernels/gpu/gpu_launch.h"
#include "kernels/gpu/gpu_op_kernel.h"

namespace graphrun {
namespace {

enum class Rule { kGradientDescent, kMomentum, kAdam };

class GpuApplyOp : public GpuOpKernel {
 public:
  GpuApplyOp(OpKernelConstruction* ctx, Rule rule) : GpuOpKernel(ctx), rule_(rule) {
    if (ctx->HasAttr("use_nesterov")) {
      GR_CTX_CHECK_OK(ctx, ctx->GetAttr("use_nesterov", &nesterov_));
    }
    num_vars_ = rule == Rule::kGradientDescent ? 1 : rule == Rule::kMomentum ? 2 : 3;
    for (const auto& arg : ctx->op_def().input_arg()) arg_names_.push_back(arg.name());
  }

  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    std::vector<std::shared_ptr<Var>> vars;
    for (int i = 0; i < num_vars_; ++i) {
      const Tensor& h = ctx->input(i);
      if (h.dtype() != DT_RESOURCE || h.NumElements() != 1) {
        return Error(absl::StrCat("input ", i, " must be a resource handle"));
      }
      const ResourceHandle& handle = h.base<ResourceHandle>()[0];
      auto v = ctx->resource_manager()->Lookup<Var>(handle.container, handle.name);
      if (!v.ok()) {
        return array_util::Annotate(
            *this, absl::FailedPreconditionError(
                       absl::StrCat("attempting to use uninitialized value ", handle.name,
                                    " (resource variable not found on ", ctx->device()->name(),
                                    ": ", v.status().message(), ")")));
      }
      vars.push_back(*std::move(v));
    }
    // Every other input is a float in this GPU's memory: scalars, and the
    // gradient.
    std::vector<const float*> in(static_cast<size_t>(num_inputs()), nullptr);
    const Tensor* grad = nullptr;
    for (int i = num_vars_; i < num_inputs(); ++i) {
      GR_ASSIGN_OR_RETURN(const Tensor* t, OnGpu(ctx, i));
      const std::string& arg = arg_names_[static_cast<size_t>(i)];
      if (arg == "grad" || arg == "delta") {
        grad = t;
      } else if (t->dims() != 0) {
        return Error(absl::StrCat(arg, " is not a scalar: got ", t->shape().DebugString()));
      }
      in[static_cast<size_t>(i)] = t->base<float>();
    }
    std::vector<Var*> order;
    for (const auto& v : vars) order.push_back(v.get());
    std::sort(order.begin(), order.end());
    if (std::unique(order.begin(), order.end()) != order.end()) {
      return Error("the variables of one update must be different variables");
    }
    std::vector<std::unique_lock<std::mutex>> locks;
    for (Var* v : order) locks.emplace_back(v->mu);
    for (int i = 0; i < num_vars_; ++i) {
      Var* v = vars[static_cast<size_t>(i)].get();
      const std::string& arg = arg_names_[static_cast<size_t>(i)];
      if (!v->initialized) return array_util::Annotate(*this, v->UninitializedError());
      if (v->tensor.dtype() != DT_FLOAT) {
        return Error(absl::StrCat(arg, " (variable ", v->name(), ") holds ",
                                  DataTypeString(v->tensor.dtype()), ", expected float"));
      }
      if (v->tensor.NumElements() > 0 && v->tensor.memory_space() != gpu_->memory_space()) {
        return Error(absl::StrCat(arg, " (variable ", v->name(), ") is not in this GPU's memory"));
      }
      if (v->tensor.shape() != grad->shape()) {
        return Error(absl::StrCat(
            arg, " and grad do not have the same shape: ", v->tensor.shape().DebugString(), " vs ",
            grad->shape().DebugString()));
      }
      if (!v->tensor.RefCountIsOne()) {
        GR_ASSIGN_OR_RETURN(Tensor copy,
                            gpu_->AllocateDevice(DT_FLOAT, v->tensor.shape(), context_));
        GR_RETURN_IF_ERROR(Launched(cudaMemcpyAsync(copy.raw_data(), v->tensor.raw_data(),
                                                    static_cast<size_t>(v->tensor.TotalBytes()),
                                                    cudaMemcpyDeviceToDevice, stream())));
        v->tensor = std::move(copy);
      }
    }
    auto var = [&](int i) { return vars[static_cast<size_t>(i)]->tensor.base<float>(); };
    const int64_t n = grad->NumElements();
    switch (rule_) {
      case Rule::kGradientDescent:  // var, alpha, delta
        return Launched(gpu::LaunchApplyGradientDescent(var(0), in[1], in[2], n, stream()));
      case Rule::kMomentum:  // var, accum, lr, grad, momentum
        return Launched(
            gpu::LaunchApplyMomentum(var(0), var(1), in[2], in[3], in[4], nesterov_, n, stream()));
      case Rule::kAdam: {  // var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad
        gpu::AdamArgs a;
        a.var = var(0);
        a.m = var(1);
        a.v = var(2);
        a.beta1_power = in[3];
        a.beta2_power = in[4];
        a.lr = in[5];
        a.beta1 = in[6];
        a.beta2 = in[7];
        a.epsilon = in[8];
        a.grad = in[9];
        a.nesterov = nesterov_;
        a.n = n;
        return Launched(gpu::LaunchApplyAdam(a, stream()));
      }
    }
    return absl::InternalError("unknown update rule");
  }

 private:
  Rule rule_;
  int num_vars_ = 1;
  bool nesterov_ = false;
  std::vector<std::string> arg_names_;
};

}  // namespace

void RegisterGpuTrainingKernels(KernelRegistry& r) {
  const std::pair<const char*, Rule> ops[] = {
      {"ResourceApplyGradientDescent", Rule::kGradientDescent},
      {"ResourceApplyMomentum", Rule::kMomentum},
      {"ResourceApplyAdam", Rule::kAdam}};
  for (const auto& [op, rule] : ops) {
    KernelDef def = KernelDef(op).Device(kDeviceGpu).TypeConstraint("T", DT_FLOAT);
    def.HostMemory("var");
    if (rule != Rule::kGradientDescent) def.HostMemory(rule == Rule::kMomentum ? "accum" : "m");
    if (rule == Rule::kAdam) def.HostMemory("v");
    const Rule k = rule;
    r.Add(std::move(def), Factory([k](OpKernelConstruction* ctx) -> std::unique_ptr<OpKernel> {
            return std::make_unique<GpuApplyOp>(ctx, k);
          }));
  }
}

}  // namespace graphrun
