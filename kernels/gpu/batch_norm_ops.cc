// FusedBatchNorm (V1-V3) and FusedBatchNormGrad (V1-V3) on the GPU, float32
// NHWC, with the CPU kernel's checks and outputs (batch_norm_kernels.cu does
// the work).
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/gpu/gpu_launch.h"
#include "kernels/gpu/gpu_op_kernel.h"

namespace graphrun {
namespace {

absl::Status ReadAttrs(OpKernelConstruction* c, float* epsilon, bool* is_training) {
  GR_RETURN_IF_ERROR(c->GetAttr("epsilon", epsilon));
  GR_RETURN_IF_ERROR(c->GetAttr("is_training", is_training));
  std::string format;
  GR_RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  if (format != "NHWC") {
    return c->Error(absl::StrCat("data_format ", format, " is not supported on the GPU; use NHWC"));
  }
  return absl::OkStatus();
}

class BatchNormBase : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::StatusOr<const Tensor*> Input4D(OpKernelContext* ctx, int i, const char* what) {
    GR_ASSIGN_OR_RETURN(const Tensor* t, OnGpu(ctx, i));
    if (t->dims() != 4) {
      return Error(absl::StrCat(what, " must be 4-dimensional, got ", t->shape().DebugString()));
    }
    return t;
  }
  // A vector of `c` floats (or, when `allow_empty`, possibly empty: null).
  absl::StatusOr<const float*> Channels(OpKernelContext* ctx, int i, int64_t c, const char* what,
                                        bool allow_empty = false) {
    GR_ASSIGN_OR_RETURN(const Tensor* t, OnGpu(ctx, i));
    if (allow_empty && t->NumElements() == 0) return nullptr;
    if (t->dims() != 1 || t->dim_size(0) != c) {
      return Error(absl::StrCat(what, " must be a vector of ", c,
                                " elements (the channels of x), got ", t->shape().DebugString()));
    }
    return t->base<float>();
  }
};

class FusedBatchNormOp : public BatchNormBase {
 public:
  explicit FusedBatchNormOp(OpKernelConstruction* c) : BatchNormBase(c) {
    GR_CTX_CHECK_OK(c, ReadAttrs(c, &epsilon_, &is_training_));
    GR_CTX_CHECK_OK(c, c->GetAttr("exponential_avg_factor", &avg_factor_));
  }

  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* x, Input4D(ctx, 0, "x"));
    gpu::BatchNormArgs p;
    p.c = x->dim_size(3);
    p.rows = p.c == 0 ? 0 : x->NumElements() / p.c;
    p.x = x->base<float>();
    GR_ASSIGN_OR_RETURN(p.scale, Channels(ctx, 1, p.c, "scale"));
    GR_ASSIGN_OR_RETURN(p.offset, Channels(ctx, 2, p.c, "offset"));
    const bool need_stats = !is_training_ || avg_factor_ != 1.0f;
    GR_ASSIGN_OR_RETURN(p.in_mean, Channels(ctx, 3, p.c, "mean", !need_stats));
    GR_ASSIGN_OR_RETURN(p.in_var, Channels(ctx, 4, p.c, "variance", !need_stats));
    if (need_stats && p.c > 0 && (p.in_mean == nullptr || p.in_var == nullptr)) {
      return Error("mean and variance must have one element per channel");
    }
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, x->shape()));
    Tensor outs[4];
    for (int i = 0; i < 4; ++i) {
      GR_ASSIGN_OR_RETURN(outs[i], Output(ctx, i + 1, TensorShape({p.c})));
    }
    if (num_outputs() > 5) GR_RETURN_IF_ERROR(Output(ctx, 5, TensorShape({0})).status());
    GR_ASSIGN_OR_RETURN(Tensor scratch,
                        Temp(TensorShape({gpu::BatchNormScratchFloats(p.rows, p.c)})));
    p.y = y.base<float>();
    p.batch_mean = outs[0].base<float>();
    p.batch_var = outs[1].base<float>();
    p.saved_mean = outs[2].base<float>();
    p.saved_var = outs[3].base<float>();
    p.scratch = scratch.base<float>();
    p.epsilon = epsilon_;
    p.factor = avg_factor_;
    p.training = is_training_;
    return Launched(gpu::LaunchBatchNorm(p, stream()));
  }

 private:
  float epsilon_ = 1e-4f;
  float avg_factor_ = 1.0f;
  bool is_training_ = true;
};

// Inputs: y_backprop, x, scale, reserve_space_1 (mean), reserve_space_2
// (variance)[, reserve_space_3].
class FusedBatchNormGradOp : public BatchNormBase {
 public:
  explicit FusedBatchNormGradOp(OpKernelConstruction* c) : BatchNormBase(c) {
    GR_CTX_CHECK_OK(c, ReadAttrs(c, &epsilon_, &is_training_));
  }

  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* dy, Input4D(ctx, 0, "y_backprop"));
    GR_ASSIGN_OR_RETURN(const Tensor* x, Input4D(ctx, 1, "x"));
    if (dy->shape() != x->shape()) {
      return Error(absl::StrCat("y_backprop ", dy->shape().DebugString(), " and x ",
                                x->shape().DebugString(), " must have the same shape"));
    }
    gpu::BatchNormGradArgs p;
    p.c = x->dim_size(3);
    p.rows = p.c == 0 ? 0 : x->NumElements() / p.c;
    p.dy = dy->base<float>();
    p.x = x->base<float>();
    GR_ASSIGN_OR_RETURN(p.scale, Channels(ctx, 2, p.c, "scale"));
    GR_ASSIGN_OR_RETURN(p.mean, Channels(ctx, 3, p.c, "reserve_space_1"));
    GR_ASSIGN_OR_RETURN(p.var, Channels(ctx, 4, p.c, "reserve_space_2"));
    GR_ASSIGN_OR_RETURN(Tensor dx, Output(ctx, 0, x->shape()));
    GR_ASSIGN_OR_RETURN(Tensor dscale, Output(ctx, 1, TensorShape({p.c})));
    GR_ASSIGN_OR_RETURN(Tensor doffset, Output(ctx, 2, TensorShape({p.c})));
    for (int i = 3; i < 5; ++i) GR_RETURN_IF_ERROR(Output(ctx, i, TensorShape({0})).status());
    GR_ASSIGN_OR_RETURN(Tensor scratch,
                        Temp(TensorShape({gpu::BatchNormScratchFloats(p.rows, p.c)})));
    p.dx = dx.base<float>();
    p.dscale = dscale.base<float>();
    p.doffset = doffset.base<float>();
    p.scratch = scratch.base<float>();
    p.epsilon = epsilon_;
    p.training = is_training_;
    return Launched(gpu::LaunchBatchNormGrad(p, stream()));
  }

 private:
  float epsilon_ = 1e-4f;
  bool is_training_ = true;
};

}  // namespace

void RegisterGpuBatchNormKernels(KernelRegistry& r) {
  auto f = [](const char* op) {
    return KernelDef(op).Device(kDeviceGpu).TypeConstraint("T", DT_FLOAT);
  };
  for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}) {
    r.Add(f(op), MakeKernel<FusedBatchNormOp>());
  }
  for (const char* op : {"FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"}) {
    r.Add(f(op), MakeKernel<FusedBatchNormGradOp>());
  }
}

}  // namespace graphrun
