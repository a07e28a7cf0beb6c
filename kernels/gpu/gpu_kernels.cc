// GPU kernels (float32): MatMul through cuBLAS; element-wise ops with
// broadcasting, BiasAdd and its gradient, reductions over contiguous axes,
// Softmax, LogSoftmax and the sparse cross-entropy through gpu_kernels.cu;
// Cast between float, double, int8, uint8, int32, int64 and bool; Fill
// and friends; and the ops that only move or describe tensors
// (Identity, Reshape, Shape, ...). Convolutions and pooling go through
// cuDNN (cudnn_kernels.cc). Variables, data input and the ops left
// out stay on the CPU (the placer's type priority sends each node to the
// GPU only where a kernel exists).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/op_kernel.h"
#include "kernels/gpu/gpu_accelerator.h"
#include "kernels/gpu/gpu_launch.h"
#include "kernels/gpu/gpu_op_kernel.h"

namespace graphrun {
namespace {

class UnaryOpKernel : public GpuOpKernel {
 public:
  UnaryOpKernel(OpKernelConstruction* ctx, gpu::UnaryOp op) : GpuOpKernel(ctx), op_(op) {}
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const float* x, In(ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, ctx->input(0).shape()));
    return Launched(gpu::LaunchUnary(op_, x, y.base<float>(), y.NumElements(), stream()));
  }

 private:
  gpu::UnaryOp op_;
};

// NumPy broadcasting of two shapes into `s`; InvalidArgument for shapes
// that do not broadcast, Unimplemented beyond kMaxBroadcastRank dims.
absl::Status Broadcast(const TensorShape& a, const TensorShape& b, TensorShape* out,
                       gpu::BroadcastShape* s) {
  const int rank = std::max(a.dims(), b.dims());
  if (rank > gpu::kMaxBroadcastRank) {
    return absl::UnimplementedError(absl::StrCat(
        "broadcasting ", rank, " dimensions (the GPU does ", gpu::kMaxBroadcastRank, ")"));
  }
  std::vector<int64_t> dims(rank);
  int64_t sa = 1, sb = 1;
  s->rank = rank;
  for (int d = rank - 1; d >= 0; --d) {
    const int ia = d - (rank - a.dims()), ib = d - (rank - b.dims());
    const int64_t da = ia >= 0 ? a.dim_size(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim_size(ib) : 1;
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("incompatible shapes: ", a.DebugString(), " and ", b.DebugString()));
    }
    dims[d] = da == 1 ? db : da;
    s->out_dims[d] = dims[d];
    s->a_strides[d] = da == 1 ? 0 : sa;
    s->b_strides[d] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  *out = TensorShape(dims);
  return absl::OkStatus();
}

class BinaryOpKernel : public GpuOpKernel {
 public:
  BinaryOpKernel(OpKernelConstruction* ctx, gpu::BinaryOp op) : GpuOpKernel(ctx), op_(op) {}
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const float* a, In(ctx, 0));
    GR_ASSIGN_OR_RETURN(const float* b, In(ctx, 1));
    TensorShape shape;
    gpu::BroadcastShape s;
    absl::Status st = Broadcast(ctx->input(0).shape(), ctx->input(1).shape(), &shape, &s);
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat(context_, st.message()));
    GR_ASSIGN_OR_RETURN(Tensor out, Output(ctx, 0, shape));
    return Launched(
        gpu::LaunchBinary(op_, a, b, out.base<float>(), out.NumElements(), s, stream()));
  }

 private:
  gpu::BinaryOp op_;
};

class MatMulOp : public GpuOpKernel {
 public:
  explicit MatMulOp(OpKernelConstruction* ctx) : GpuOpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("transpose_a", &ta_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("transpose_b", &tb_));
  }
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    if (a.dims() != 2 || b.dims() != 2) return Error("inputs must be matrices");
    const int64_t m = ta_ ? a.dim_size(1) : a.dim_size(0);
    const int64_t k = ta_ ? a.dim_size(0) : a.dim_size(1);
    const int64_t kb = tb_ ? b.dim_size(1) : b.dim_size(0);
    const int64_t n = tb_ ? b.dim_size(0) : b.dim_size(1);
    if (k != kb) {
      return Error(absl::StrCat("inner dimensions differ: ", a.shape().DebugString(), " and ",
                                b.shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(const float* pa, In(ctx, 0));
    GR_ASSIGN_OR_RETURN(const float* pb, In(ctx, 1));
    GR_ASSIGN_OR_RETURN(Tensor c, Output(ctx, 0, TensorShape({m, n})));
    if (m == 0 || n == 0) return absl::OkStatus();
    if (k == 0) return Launched(gpu::LaunchFill(c.base<float>(), 0.f, m * n, stream()));
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
    const float one = 1.f, zero = 0.f;
    std::lock_guard<std::mutex> l(gpu_->cublas_mu());
    cublasStatus_t s =
        cublasSgemm(gpu_->cublas(), tb_ ? CUBLAS_OP_T : CUBLAS_OP_N,
                    ta_ ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                    static_cast<int>(k), &one, pb, static_cast<int>(b.dim_size(1)), pa,
                    static_cast<int>(a.dim_size(1)), &zero, c.base<float>(), static_cast<int>(n));
    if (s != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(
          absl::StrCat(context_, "cublasSgemm failed: ", cublasGetStatusString(s)));
    }
    return absl::OkStatus();
  }

 private:
  bool ta_ = false, tb_ = false;
};

class BiasAddOp : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& bias = ctx->input(1);
    if (x.dims() < 1 || bias.dims() != 1 || x.dim_size(x.dims() - 1) != bias.dim_size(0)) {
      return Error(absl::StrCat("bias ", bias.shape().DebugString(), " does not match the last ",
                                "dimension of ", x.shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(const float* px, In(ctx, 0));
    GR_ASSIGN_OR_RETURN(const float* pb, In(ctx, 1));
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, x.shape()));
    const int64_t cols = bias.dim_size(0);
    return Launched(gpu::LaunchBiasAdd(px, pb, y.base<float>(),
                                       cols == 0 ? 0 : x.NumElements() / cols, cols, stream()));
  }
};

class BiasAddGradOp : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    const Tensor& g = ctx->input(0);
    if (g.dims() < 1) return Error("gradient must have at least one dimension");
    const int64_t cols = g.dim_size(g.dims() - 1);
    GR_ASSIGN_OR_RETURN(const float* pg, In(ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, TensorShape({cols})));
    return Launched(gpu::LaunchReduce(gpu::ReduceOp::kSum, pg, y.base<float>(), 1,
                                      cols == 0 ? 0 : g.NumElements() / cols, cols, stream()));
  }
};

class ReduceOpKernel : public GpuOpKernel {
 public:
  ReduceOpKernel(OpKernelConstruction* ctx, gpu::ReduceOp op) : GpuOpKernel(ctx), op_(op) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("keep_dims", &keep_dims_));
  }
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& axes = ctx->input(1);  // HostMemory
    if (axes.memory_space() != nullptr) {
      return absl::InternalError(absl::StrCat(context_, "axes are not in host memory"));
    }
    std::vector<bool> reduced(x.dims(), false);
    for (int64_t i = 0; i < axes.NumElements(); ++i) {
      int64_t a = axes.dtype() == DT_INT64 ? axes.flat<int64_t>()[i] : axes.flat<int32_t>()[i];
      if (a < 0) a += x.dims();
      if (a < 0 || a >= x.dims()) {
        return Error(absl::StrCat("axis ", a, " out of range for ", x.shape().DebugString()));
      }
      if (reduced[a]) {  // as the CPU kernel (and TensorFlow) says it
        return Error(
            absl::StrCat("Invalid reduction arguments: Axes contains duplicate dimension: ", a));
      }
      reduced[a] = true;
    }
    int first = -1, last = -1;
    for (int d = 0; d < x.dims(); ++d) {
      if (!reduced[d]) continue;
      if (first < 0) first = d;
      if (last >= 0 && last != d - 1) {
        return absl::UnimplementedError(absl::StrCat(context_, "reducing non-adjacent axes of ",
                                                     x.shape().DebugString(), " on the GPU"));
      }
      last = d;
    }
    int64_t outer = 1, reduce = 1, inner = 1;
    std::vector<int64_t> out_dims;
    for (int d = 0; d < x.dims(); ++d) {
      if (first >= 0 && d >= first && d <= last) {
        reduce *= x.dim_size(d);
        if (keep_dims_) out_dims.push_back(1);
      } else {
        (first < 0 || d < first ? outer : inner) *= x.dim_size(d);
        out_dims.push_back(x.dim_size(d));
      }
    }
    GR_ASSIGN_OR_RETURN(const float* px, In(ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, TensorShape(out_dims)));
    if (op_ == gpu::ReduceOp::kMax && reduce == 0 && y.NumElements() > 0) {
      return Error("max of an empty reduction");
    }
    return Launched(gpu::LaunchReduce(op_, px, y.base<float>(), outer, reduce, inner, stream()));
  }

 private:
  gpu::ReduceOp op_;
  bool keep_dims_ = false;
};

class SoftmaxOp : public GpuOpKernel {
 public:
  SoftmaxOp(OpKernelConstruction* ctx, bool log) : GpuOpKernel(ctx), log_(log) {}
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (x.dims() < 1) return Error("logits must have at least one dimension");
    const int64_t cols = x.dim_size(x.dims() - 1);
    GR_ASSIGN_OR_RETURN(const float* px, In(ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, x.shape()));
    return Launched(gpu::LaunchSoftmax(px, y.base<float>(), cols == 0 ? 0 : x.NumElements() / cols,
                                       cols, log_, stream()));
  }

 private:
  bool log_;
};

class SparseXentOp : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    if (logits.dims() != 2 || labels.dims() != 1 || labels.dim_size(0) != logits.dim_size(0)) {
      return Error(absl::StrCat("logits ", logits.shape().DebugString(), " and labels ",
                                labels.shape().DebugString(), " do not match"));
    }
    if (labels.NumElements() > 0 && labels.memory_space() != gpu_->memory_space()) {
      return absl::InternalError(absl::StrCat(context_, "labels are not in this GPU's memory"));
    }
    GR_ASSIGN_OR_RETURN(const float* pl, In(ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor loss, Output(ctx, 0, TensorShape({logits.dim_size(0)})));
    GR_ASSIGN_OR_RETURN(Tensor backprop, Output(ctx, 1, logits.shape()));
    return Launched(gpu::LaunchSparseXent(pl, labels.raw_data(), labels.dtype() == DT_INT64,
                                          loss.base<float>(), backprop.base<float>(),
                                          logits.dim_size(0), logits.dim_size(1), stream()));
  }
};

class FillOp : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    const Tensor& dims = ctx->input(0);   // HostMemory
    const Tensor& value = ctx->input(1);  // HostMemory
    if (dims.memory_space() != nullptr || value.memory_space() != nullptr) {
      return absl::InternalError(absl::StrCat(context_, "dims and value must be in host memory"));
    }
    std::vector<int64_t> d;
    for (int64_t i = 0; i < dims.NumElements(); ++i) {
      int64_t v = dims.dtype() == DT_INT64 ? dims.flat<int64_t>()[i] : dims.flat<int32_t>()[i];
      if (v < 0) return Error(absl::StrCat("negative dimension ", v));
      d.push_back(v);
    }
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, TensorShape(d)));
    return Launched(
        gpu::LaunchFill(y.base<float>(), value.scalar<float>(), y.NumElements(), stream()));
  }
};

class FillLikeOp : public GpuOpKernel {
 public:
  FillLikeOp(OpKernelConstruction* ctx, float value) : GpuOpKernel(ctx), value_(value) {}
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, ctx->input(0).shape()));
    return Launched(gpu::LaunchFill(y.base<float>(), value_, y.NumElements(), stream()));
  }

 private:
  float value_;
};

// A float constant, copied to the GPU each step on the compute stream.
class ConstOp : public GpuOpKernel {
 public:
  explicit ConstOp(OpKernelConstruction* ctx) : GpuOpKernel(ctx) {
    const auto& attr = ctx->def().attr();
    auto it = attr.find("value");
    if (it == attr.end()) {
      ctx->SetStatus(Error("no value"));
      return;
    }
    absl::StatusOr<Tensor> t = Tensor::FromProto(it->second.tensor());
    if (!t.ok()) {
      ctx->SetStatus(Error(t.status().message()));
      return;
    }
    value_ = *t;
  }
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, value_.shape()));
    return Launched(cudaMemcpyAsync(y.raw_data(), value_.raw_data(),
                                    static_cast<size_t>(value_.TotalBytes()),
                                    cudaMemcpyHostToDevice, stream()));
  }

 private:
  Tensor value_;
};

// Cast between the types of gpu::CastType, with the CPU kernel's rules.
// Truncate only matters for bfloat16, which the GPU does not cast.
constexpr std::pair<DataType, gpu::CastType> kCastTypes[] = {
    {DT_FLOAT, gpu::CastType::kFloat}, {DT_DOUBLE, gpu::CastType::kDouble},
    {DT_INT8, gpu::CastType::kInt8},   {DT_UINT8, gpu::CastType::kUint8},
    {DT_INT32, gpu::CastType::kInt32}, {DT_INT64, gpu::CastType::kInt64},
    {DT_BOOL, gpu::CastType::kBool},
};

std::vector<DataType> GpuCastTypes() {
  std::vector<DataType> v;
  for (const auto& [dt, code] : kCastTypes) v.push_back(dt);
  return v;
}

gpu::CastType CastCode(DataType dt) {
  for (const auto& [t, code] : kCastTypes) {
    if (t == dt) return code;
  }
  return gpu::CastType::kFloat;  // unreachable: the registration allows no other
}

class CastOp : public GpuOpKernel {
 public:
  explicit CastOp(OpKernelConstruction* ctx) : GpuOpKernel(ctx) {
    DataType src, dst;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("SrcT", &src));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("DstT", &dst));
    src_ = CastCode(src);
    dst_ = CastCode(dst);
  }
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* x, OnGpu(ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, x->shape()));
    return Launched(
        gpu::LaunchCast(src_, x->raw_data(), dst_, y.raw_data(), y.NumElements(), stream()));
  }

 private:
  gpu::CastType src_ = gpu::CastType::kFloat, dst_ = gpu::CastType::kFloat;
};

// Ops that pass their input's buffer through (a view of the same device
// memory) or only read its shape.
class ForwardOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->forward_input(0, 0);
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterGpuKernels(KernelRegistry& r) {
  auto f = [](const char* op) {
    return KernelDef(op).Device(kDeviceGpu).TypeConstraint("T", DT_FLOAT);
  };
  const std::pair<const char*, gpu::UnaryOp> unary[] = {
      {"Neg", gpu::UnaryOp::kNeg},       {"Relu", gpu::UnaryOp::kRelu},
      {"Square", gpu::UnaryOp::kSquare}, {"Sqrt", gpu::UnaryOp::kSqrt},
      {"Exp", gpu::UnaryOp::kExp},       {"Log", gpu::UnaryOp::kLog},
      {"Tanh", gpu::UnaryOp::kTanh},     {"Sigmoid", gpu::UnaryOp::kSigmoid},
  };
  for (const auto& [op, u] : unary) {
    gpu::UnaryOp code = u;
    r.Add(f(op), Factory([code](OpKernelConstruction* c) {
            return std::make_unique<UnaryOpKernel>(c, code);
          }));
  }
  const std::pair<const char*, gpu::BinaryOp> binary[] = {
      {"Add", gpu::BinaryOp::kAdd},
      {"AddV2", gpu::BinaryOp::kAdd},
      {"Sub", gpu::BinaryOp::kSub},
      {"Mul", gpu::BinaryOp::kMul},
      {"RealDiv", gpu::BinaryOp::kDiv},
      {"Maximum", gpu::BinaryOp::kMaximum},
      {"Minimum", gpu::BinaryOp::kMinimum},
      {"ReluGrad", gpu::BinaryOp::kReluGrad},
      {"SquaredDifference", gpu::BinaryOp::kSquaredDifference},
  };
  for (const auto& [op, b] : binary) {
    gpu::BinaryOp code = b;
    r.Add(f(op), Factory([code](OpKernelConstruction* c) {
            return std::make_unique<BinaryOpKernel>(c, code);
          }));
  }
  r.Add(f("MatMul"), MakeKernel<MatMulOp>());
  RegisterCudnnKernels(r);
  RegisterGpuBatchNormKernels(r);
  RegisterGpuTrainingKernels(r);
  r.Add(f("BiasAdd"), MakeKernel<BiasAddOp>());
  r.Add(f("BiasAddGrad"), MakeKernel<BiasAddGradOp>());
  const std::pair<const char*, gpu::ReduceOp> reduce[] = {
      {"Sum", gpu::ReduceOp::kSum}, {"Mean", gpu::ReduceOp::kMean}, {"Max", gpu::ReduceOp::kMax}};
  for (const auto& [op, red] : reduce) {
    gpu::ReduceOp code = red;
    r.Add(f(op).HostMemory("reduction_indices"), Factory([code](OpKernelConstruction* c) {
            return std::make_unique<ReduceOpKernel>(c, code);
          }));
  }
  r.Add(f("Softmax"),
        Factory([](OpKernelConstruction* c) { return std::make_unique<SoftmaxOp>(c, false); }));
  r.Add(f("LogSoftmax"),
        Factory([](OpKernelConstruction* c) { return std::make_unique<SoftmaxOp>(c, true); }));
  r.Add(f("SparseSoftmaxCrossEntropyWithLogits"), MakeKernel<SparseXentOp>());
  r.Add(KernelDef("Cast")
            .Device(kDeviceGpu)
            .TypeConstraint("SrcT", GpuCastTypes())
            .TypeConstraint("DstT", GpuCastTypes()),
        MakeKernel<CastOp>());
  r.Add(f("Fill").HostMemory("dims").HostMemory("value"), MakeKernel<FillOp>());
  r.Add(f("ZerosLike"),
        Factory([](OpKernelConstruction* c) { return std::make_unique<FillLikeOp>(c, 0.f); }));
  r.Add(f("OnesLike"),
        Factory([](OpKernelConstruction* c) { return std::make_unique<FillLikeOp>(c, 1.f); }));
  r.Add(KernelDef("Const").Device(kDeviceGpu).TypeConstraint("dtype", DT_FLOAT),
        MakeKernel<ConstOp>());
  for (const char* op : {"Identity", "StopGradient", "Snapshot"}) {
    r.Add(f(op), MakeKernel<ForwardOp>());
  }
  // Reshape, ExpandDims, Squeeze and Shape compute on the host (their CPU
  // kernels read only shapes, never the data) and pass the buffer through.
  for (const auto& [op, host] : std::vector<std::pair<const char*, const char*>>{
           {"Reshape", "shape"}, {"ExpandDims", "dim"}, {"Squeeze", ""}, {"Shape", "output"}}) {
    KernelDef def = f(op);
    if (*host != '\0') def.HostMemory(host);
    const KernelRegistry* registry = &r;
    r.Add(std::move(def), [registry](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
      absl::StatusOr<std::unique_ptr<OpKernel>> k = registry->CreateKernelForType(
          c->def(), c->op_def(), c->input_types(), c->output_types(), c->device(), kDeviceCpu);
      if (!k.ok()) {
        c->SetStatus(k.status());
        return nullptr;
      }
      return *std::move(k);
    });
  }
}

}  // namespace graphrun
