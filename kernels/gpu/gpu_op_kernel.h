// The base of the GPU kernels (gpu_kernels.cc, cudnn_kernels.cc): the
// kernel's GPU, its output allocation in device memory, its inputs checked
// to be in that memory, and errors that name the node, op and device.
#ifndef GRAPHRUN_KERNELS_GPU_GPU_OP_KERNEL_H_
#define GRAPHRUN_KERNELS_GPU_GPU_OP_KERNEL_H_

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/op_kernel.h"
#include "kernels/gpu/gpu_accelerator.h"

namespace graphrun {

class GpuOpKernel : public OpKernel {
 public:
  explicit GpuOpKernel(OpKernelConstruction* ctx) : OpKernel(ctx) {
    gpu_ = AsGpu(ctx->device());
    if (gpu_ == nullptr) {
      ctx->SetStatus(Error(absl::StrCat("device ", ctx->device()->name(), " is no GPU")));
    }
    context_ = absl::StrCat("node '", name(), "' (op ", type_string(), ") on ",
                            ctx->device()->name(), ": ");
  }

  // Makes the kernel's GPU current on this thread (kernel launches,
  // cuBLAS and cuDNN act on the current device, and a pool thread may
  // have run another GPU's work last), then runs ComputeOnGpu.
  absl::Status Compute(OpKernelContext* ctx) final {
    GR_RETURN_IF_ERROR(Launched(cudaSetDevice(gpu_->ordinal())));
    return ComputeOnGpu(ctx);
  }

 protected:
  virtual absl::Status ComputeOnGpu(OpKernelContext* ctx) = 0;

  absl::StatusOr<Tensor> Output(OpKernelContext* ctx, int i, const TensorShape& shape) {
    GR_ASSIGN_OR_RETURN(Tensor t, gpu_->AllocateDevice(output_type(i), shape, context_));
    ctx->set_output(i, t);
    return t;
  }
  absl::Status Launched(cudaError_t e) const {
    if (e == cudaSuccess) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat(context_, "CUDA launch failed: ", cudaGetErrorString(e)));
  }
  // Input i, which must be in this GPU's memory.
  absl::StatusOr<const Tensor*> OnGpu(OpKernelContext* ctx, int i) const {
    const Tensor& t = ctx->input(i);
    if (t.NumElements() > 0 && t.memory_space() != gpu_->memory_space()) {
      return absl::InternalError(
          absl::StrCat(context_, "input ", i, " is not in this GPU's memory"));
    }
    return &t;
  }
  absl::StatusOr<const float*> In(OpKernelContext* ctx, int i) const {
    GR_ASSIGN_OR_RETURN(const Tensor* t, OnGpu(ctx, i));
    return t->base<float>();
  }
  // A float32 temporary, or `bytes` of scratch, in device memory. Freed
  // when the Tensor goes: later work on the compute stream may reuse it,
  // which stream order makes safe.
  absl::StatusOr<Tensor> Temp(const TensorShape& shape) {
    return gpu_->AllocateDevice(DT_FLOAT, shape, context_);
  }
  absl::StatusOr<Tensor> Scratch(size_t bytes) {
    return gpu_->AllocateDevice(DT_UINT8, TensorShape({static_cast<int64_t>(bytes)}), context_);
  }
  cudaStream_t stream() const { return gpu_->compute_stream(); }

  GpuAccelerator* gpu_ = nullptr;
  std::string context_;
};

// A kernel factory from a callable making the kernel (for kernels that
// take more than the construction context).
template <typename F>
KernelFactory Factory(F make) {
  return [make](OpKernelConstruction* ctx) -> std::unique_ptr<OpKernel> { return make(ctx); };
}

// Conv2D and its gradients, MaxPool, AvgPool and their gradients through
// cuDNN (cudnn_kernels.cc); called by RegisterGpuKernels.
void RegisterCudnnKernels(KernelRegistry& r);
// FusedBatchNorm V1-V3 and their gradients (batch_norm_ops.cc); called by
// RegisterGpuKernels.
void RegisterGpuBatchNormKernels(KernelRegistry& r);
// ResourceApply{GradientDescent,Momentum,Adam} (training_ops.cc); called by
// RegisterGpuKernels.
void RegisterGpuTrainingKernels(KernelRegistry& r);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_GPU_GPU_OP_KERNEL_H_
