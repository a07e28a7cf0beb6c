// half and bfloat16 for the common math ops of inference and training
// graphs (MatMul, BatchMatMul, reductions, Softmax, Relu, BiasAdd, Conv2D,
// pooling, FusedBatchNorm and their gradients), computed in float: the
// inputs of type T are widened, the op's float kernel runs, and its
// outputs of type T are rounded back (to nearest even), as TensorFlow's CPU
// kernels compute these types through float. Inputs and outputs of other
// types (a reduction's axes, FusedBatchNorm's float scale and statistics)
// pass through unchanged. The elementwise ops have kernels of their own
// (cwise_ops.cc).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/node_def_util.h"
#include "graph/status.h"
#include "graph/types.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/op_kernel.h"
#include "kernels/math/register.h"

namespace graphrun {
namespace {

absl::StatusOr<Tensor> Widened(const Tensor& t, DataType dtype, absl::string_view context) {
  GR_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DT_FLOAT, t.shape(), context));
  const int64_t n = t.NumElements();
  float* dst = out.base<float>();
  if (dtype == DT_HALF) {
    const Half* src = t.base<Half>();
    for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i].bits);
  } else {
    const BFloat16* src = t.base<BFloat16>();
    for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16ToFloat(src[i].bits);
  }
  return out;
}

absl::StatusOr<Tensor> Narrowed(const Tensor& t, DataType dtype, absl::string_view context) {
  GR_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(dtype, t.shape(), context));
  const int64_t n = t.NumElements();
  const float* src = t.base<float>();
  if (dtype == DT_HALF) {
    Half* dst = out.base<Half>();
    for (int64_t i = 0; i < n; ++i) dst[i].bits = FloatToHalf(src[i]);
  } else {
    BFloat16* dst = out.base<BFloat16>();
    for (int64_t i = 0; i < n; ++i) dst[i].bits = FloatToBFloat16(src[i]);
  }
  return out;
}

class ViaFloatOp : public OpKernel {
 public:
  ViaFloatOp(OpKernelConstruction* ctx, const KernelRegistry* registry) : OpKernel(ctx) {
    absl::Status s = ctx->GetAttr("T", &dtype_);
    if (!s.ok()) {
      ctx->SetStatus(s);
      return;
    }
    tensorflow::NodeDef def = ctx->def();
    (*def.mutable_attr())["T"].set_type(DT_FLOAT);
    DataTypeVector in = ctx->input_types(), out = ctx->output_types();
    for (DataType& t : in) t = t == dtype_ ? DT_FLOAT : t;
    for (DataType& t : out) t = t == dtype_ ? DT_FLOAT : t;
    absl::StatusOr<std::unique_ptr<OpKernel>> inner =
        registry->CreateKernel(def, ctx->op_def(), in, out, ctx->device());
    if (!inner.ok()) {
      ctx->SetStatus(absl::Status(inner.status().code(),
                                  absl::StrCat(inner.status().message(), " (computing ",
                                               DataTypeString(dtype_), " through float)")));
      return;
    }
    inner_ = *std::move(inner);
    set_expensive(inner_->IsExpensive());
    context_ = absl::StrCat("node '", name(), "' (op ", type_string(), "): ");
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    std::vector<TensorValue> inputs(ctx->num_inputs());
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      if (input_type(i) == dtype_) {
        GR_ASSIGN_OR_RETURN(inputs[i].tensor, Widened(ctx->input(i), dtype_, context_));
      } else {
        inputs[i] = ctx->input_value(i);
      }
    }
    OpKernelContext::Params p =
        ctx->InnerParams(inner_.get(), inputs.data(), static_cast<int>(inputs.size()));
    OpKernelContext inner_ctx(&p);
    GR_RETURN_IF_ERROR(inner_->Compute(&inner_ctx));
    std::vector<TensorValue>& outputs = *inner_ctx.mutable_outputs();
    for (int i = 0; i < num_outputs(); ++i) {
      if (output_type(i) == dtype_ && outputs[i].tensor.IsInitialized()) {
        GR_ASSIGN_OR_RETURN(Tensor narrowed, Narrowed(outputs[i].tensor, dtype_, context_));
        ctx->set_output(i, std::move(narrowed));
      } else {
        (*ctx->mutable_outputs())[i] = std::move(outputs[i]);
      }
    }
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_INVALID;
  std::unique_ptr<OpKernel> inner_;
  std::string context_;  // "node 'x' (op Y): ", for allocation errors
};

}  // namespace

const std::vector<std::string>& ViaFloatOps() {
  static const std::vector<std::string>* ops = new std::vector<std::string>{
      "MatMul",
      "BatchMatMul",
      "BatchMatMulV2",
      "Sum",
      "Mean",
      "Max",
      "Min",
      "Prod",
      "Softmax",
      "LogSoftmax",
      "SoftmaxCrossEntropyWithLogits",
      "SparseSoftmaxCrossEntropyWithLogits",
      "Relu",
      "Relu6",
      "ReluGrad",
      "Relu6Grad",
      "BiasAdd",
      "BiasAddV1",
      "BiasAddGrad",
      "Conv2D",
      "Conv2DBackpropInput",
      "Conv2DBackpropFilter",
      "DepthwiseConv2dNative",
      "MaxPool",
      "AvgPool",
      "MaxPoolGrad",
      "AvgPoolGrad",
      "FusedBatchNorm",
      "FusedBatchNormV2",
      "FusedBatchNormV3",
      "FusedBatchNormGrad",
      "FusedBatchNormGradV2",
      "FusedBatchNormGradV3",
      "ResizeBilinear",
      "SquaredDifference",
      "Abs",
  };
  return *ops;
}

void RegisterViaFloatKernels(KernelRegistry& r) {
  const KernelRegistry* registry = &r;
  for (const std::string& op : ViaFloatOps()) {
    r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint("T", {DT_HALF, DT_BFLOAT16}),
          [registry](OpKernelConstruction* ctx) -> std::unique_ptr<OpKernel> {
            return std::make_unique<ViaFloatOp>(ctx, registry);
          });
  }
}

}  // namespace graphrun
