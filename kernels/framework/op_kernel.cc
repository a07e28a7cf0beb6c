#include "kernels/framework/op_kernel.h"

#include <condition_variable>
#include <mutex>

namespace graphrun {

OpKernel::OpKernel(OpKernelConstruction* ctx)
    : def_(ctx->def()), input_types_(ctx->input_types()), output_types_(ctx->output_types()) {}

absl::Status AsyncOpKernel::Compute(OpKernelContext* ctx) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;
  ComputeAsync(ctx, [&](absl::Status s) {
    std::lock_guard<std::mutex> l(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  return status;
}

OpKernelContext::OpKernelContext(Params* params)
    : params_(params), outputs_(params->op_kernel->num_outputs()) {}

const Tensor& OpKernelContext::input(int i) {
  const TensorValue& v = params_->inputs[i];
  if (v.ref == nullptr) return v.tensor;
  if (ref_snapshots_.empty()) ref_snapshots_.resize(params_->num_inputs);
  std::lock_guard<std::mutex> l(v.ref->mu);
  ref_snapshots_[i] = v.ref->tensor;
  return ref_snapshots_[i];
}

absl::StatusOr<Tensor*> OpKernelContext::allocate_output(int i, const TensorShape& shape) {
  if (i < 0 || i >= num_outputs()) {
    return absl::InternalError(absl::StrCat("output index ", i, " out of range"));
  }
  DataType dt = BaseType(output_type(i));
  if (!DataTypeSupported(dt)) {
    return params_->op_kernel->Error(
        absl::StrCat("cannot allocate output of type ", DataTypeString(dt)));
  }
  GR_ASSIGN_OR_RETURN(
      outputs_[i].tensor,
      Tensor::Allocate(dt, shape,
                       absl::StrCat("node '", params_->op_kernel->name(), "' (op ",
                                    params_->op_kernel->type_string(), "): output ", i, ": ")));
  return &outputs_[i].tensor;
}

}  // namespace graphrun
