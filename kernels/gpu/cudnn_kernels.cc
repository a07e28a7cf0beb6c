// Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter, MaxPool,
// MaxPoolGrad, AvgPool and AvgPoolGrad through cuDNN (float32, NHWC: the
// layouts and attributes the CPU kernels take, conv_window.h):
//  - tensors are described to cuDNN as NHWC; TensorFlow's HWIO filter is
//    transposed to cuDNN's KRSC (OHWI), and a filter gradient back;
//  - cuDNN pads symmetrically, while TensorFlow's SAME padding puts the odd
//    one after. Such an input is padded explicitly into a temporary (zeros
//    for a convolution, -inf for max pooling) and an input gradient is
//    computed for the padded input, then cropped. AvgPool leaves padding
//    out of its averages, which explicit padding cannot do: asymmetric
//    padding of AvgPool and AvgPoolGrad is Unimplemented on the GPU,
//    naming the node;
//  - convolutions compute in float32 (CUDNN_FMA_MATH: no TF32), with the
//    algorithm cuDNN's heuristics rank first among those whose workspace
//    fits in 256 MiB.
// Empty tensors never reach cuDNN: an empty output is done, and an output
// whose inputs are empty (no batch, no channels) is zeros.
#include <cudnn.h>

#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/conv_window.h"
#include "kernels/gpu/gpu_launch.h"
#include "kernels/gpu/gpu_op_kernel.h"

namespace graphrun {
namespace {

using conv_window::Geometry;
using conv_window::WindowParams;

constexpr size_t kMaxWorkspace = size_t{256} << 20;
constexpr int kMaxAlgos = 16;

// A cuDNN descriptor, destroyed with its owner.
template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Desc {
 public:
  Desc() { ok_ = Create(&d_) == CUDNN_STATUS_SUCCESS; }
  ~Desc() {
    if (ok_) Destroy(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  T get() const { return d_; }
  bool ok() const { return ok_; }

 private:
  T d_{};
  bool ok_ = false;
};
using TensorDesc =
    Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                      cudnnDestroyConvolutionDescriptor>;
using PoolDesc =
    Desc<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;

// The padding cuDNN applies, and the explicit padding done before it when
// TensorFlow's is not symmetric.
struct Padding {
  int64_t top = 0, bottom = 0, left = 0, right = 0;
  bool Symmetric() const { return top == bottom && left == right; }
};
Padding PaddingOf(const Geometry& g) {
  return {g.dh.pad_before, g.dh.pad_after, g.dw.pad_before, g.dw.pad_after};
}

class CudnnOpKernel : public GpuOpKernel {
 public:
  CudnnOpKernel(OpKernelConstruction* ctx, bool conv) : GpuOpKernel(ctx) {
    absl::Status s = conv_window::ReadWindowParams(ctx, conv, &window_);
    if (!s.ok()) ctx->SetStatus(s);
  }

 protected:
  absl::Status Check(cudnnStatus_t s, const char* what) const {
    if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(context_, what, ": ", cudnnGetErrorString(s)));
  }
  absl::Status Made(bool ok) const {
    return ok ? absl::OkStatus()
              : absl::InternalError(absl::StrCat(context_, "creating a cuDNN descriptor failed"));
  }
  absl::Status Describe(const TensorDesc& d, int64_t n, int64_t h, int64_t w, int64_t c) const {
    GR_RETURN_IF_ERROR(Made(d.ok()));
    return Check(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                            static_cast<int>(n), static_cast<int>(c),
                                            static_cast<int>(h), static_cast<int>(w)),
                 "cudnnSetTensor4dDescriptor");
  }
  // cuDNN takes int dimensions.
  absl::Status Fits(const TensorShape& s) const {
    for (int i = 0; i < s.dims(); ++i) {
      if (s.dim_size(i) > std::numeric_limits<int>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat(context_, "dimension ", i, " of ", s.DebugString(), " is too large"));
      }
    }
    return absl::OkStatus();
  }
  absl::Status Zeros(Tensor& t) const {
    return Launched(gpu::LaunchFill(t.base<float>(), 0.f, t.NumElements(), stream()));
  }
  // `x` (NHWC, geometry g) padded by `p` into a temporary, `value` around.
  absl::StatusOr<Tensor> Pad(const Tensor& x, const Geometry& g, const Padding& p, float value) {
    const int64_t h2 = g.h + p.top + p.bottom, w2 = g.w + p.left + p.right;
    GR_ASSIGN_OR_RETURN(Tensor t, Temp(TensorShape({g.n, h2, w2, g.c})));
    GR_RETURN_IF_ERROR(Launched(gpu::LaunchPadNhwc(x.base<float>(), t.base<float>(), g.n, g.h, g.w,
                                                   g.c, p.top, p.left, h2, w2, value, stream())));
    return t;
  }
  absl::Status Crop(const Tensor& padded, const Geometry& g, const Padding& p, Tensor& out) {
    const int64_t h2 = g.h + p.top + p.bottom, w2 = g.w + p.left + p.right;
    return Launched(gpu::LaunchCropNhwc(padded.base<float>(), out.base<float>(), g.n, g.h, g.w, g.c,
                                        p.top, p.left, h2, w2, stream()));
  }

  WindowParams window_;
};

// ---------------------------------------------------------------------------
// Convolutions.

// The descriptors of one convolution: input (possibly padded), filter
// (KRSC), the convolution and the output.
struct ConvSetup {
  TensorDesc x, y;
  FilterDesc f;
  ConvDesc conv;
};

class ConvOpKernel : public CudnnOpKernel {
 public:
  explicit ConvOpKernel(OpKernelConstruction* ctx) : CudnnOpKernel(ctx, /*conv=*/true) {}

 protected:
  // The geometry of input shape `in` under a HWIO filter of shape `filter`.
  absl::StatusOr<Geometry> Geom(const TensorShape& in, const TensorShape& filter) const {
    if (filter.dims() != 4) {
      return Error(absl::StrCat("filter must be 4-dimensional (HWIO), got ", filter.DebugString()));
    }
    if (in.dims() == 4 && filter.dim_size(2) != in.dim_size(3)) {
      return Error(absl::StrCat("filter ", filter.DebugString(), " needs ", filter.dim_size(2),
                                " input channels, the input ", in.DebugString(), " has ",
                                in.dim_size(3)));
    }
    GR_RETURN_IF_ERROR(Fits(in));
    return conv_window::MakeGeometry(*this, window_, in, filter.dim_size(0), filter.dim_size(1),
                                     filter.dim_size(3));
  }
  // Descriptors for geometry g, padding `p` applied explicitly when it is
  // not symmetric.
  absl::Status Setup(const Geometry& g, const Padding& p, ConvSetup* s) const {
    const bool sym = p.Symmetric();
    const int64_t h = sym ? g.h : g.h + p.top + p.bottom;
    const int64_t w = sym ? g.w : g.w + p.left + p.right;
    GR_RETURN_IF_ERROR(Describe(s->x, g.n, h, w, g.c));
    GR_RETURN_IF_ERROR(Describe(s->y, g.n, g.dh.out, g.dw.out, g.out_c));
    GR_RETURN_IF_ERROR(Made(s->f.ok() && s->conv.ok()));
    GR_RETURN_IF_ERROR(
        Check(cudnnSetFilter4dDescriptor(s->f.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                         static_cast<int>(g.out_c), static_cast<int>(g.c),
                                         static_cast<int>(g.kh), static_cast<int>(g.kw)),
              "cudnnSetFilter4dDescriptor"));
    GR_RETURN_IF_ERROR(
        Check(cudnnSetConvolution2dDescriptor(
                  s->conv.get(), static_cast<int>(sym ? p.top : 0),
                  static_cast<int>(sym ? p.left : 0), static_cast<int>(window_.stride_h),
                  static_cast<int>(window_.stride_w), static_cast<int>(window_.dilation_h),
                  static_cast<int>(window_.dilation_w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              "cudnnSetConvolution2dDescriptor"));
    return Check(cudnnSetConvolutionMathType(s->conv.get(), CUDNN_FMA_MATH),
                 "cudnnSetConvolutionMathType");
  }
  // The filter, HWIO -> KRSC, in a temporary.
  absl::StatusOr<Tensor> FilterKrsc(const Tensor& f) {
    GR_ASSIGN_OR_RETURN(
        Tensor t, Temp(TensorShape({f.dim_size(3), f.dim_size(0), f.dim_size(1), f.dim_size(2)})));
    gpu::Dims4 dims, perm;
    for (int i = 0; i < 4; ++i) dims.v[i] = f.dim_size(i);
    perm.v[0] = 3, perm.v[1] = 0, perm.v[2] = 1, perm.v[3] = 2;
    GR_RETURN_IF_ERROR(
        Launched(gpu::LaunchTranspose4(f.base<float>(), t.base<float>(), dims, perm, stream())));
    return t;
  }
  // The first ranked algorithm that succeeded and fits the workspace.
  template <typename Perf>
  absl::StatusOr<Perf> Pick(const Perf* perf, int n, const char* what) const {
    for (int i = 0; i < n; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) return perf[i];
    }
    return absl::ResourceExhaustedError(absl::StrCat(context_, "cuDNN has no ", what,
                                                     " algorithm for this shape within ",
                                                     kMaxWorkspace >> 20, " MiB of workspace"));
  }
};

class Conv2DOp : public ConvOpKernel {
 public:
  using ConvOpKernel::ConvOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* x, OnGpu(ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* f, OnGpu(ctx, 1));
    GR_ASSIGN_OR_RETURN(Geometry g, Geom(x->shape(), f->shape()));
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, g.OutputShape()));
    if (y.NumElements() == 0) return absl::OkStatus();
    if (x->NumElements() == 0 || f->NumElements() == 0) return Zeros(y);
    const Padding p = PaddingOf(g);
    Tensor in = *x;
    if (!p.Symmetric()) {
      GR_ASSIGN_OR_RETURN(in, Pad(*x, g, p, 0.f));
    }
    GR_ASSIGN_OR_RETURN(Tensor fk, FilterKrsc(*f));
    ConvSetup s;
    GR_RETURN_IF_ERROR(Setup(g, p, &s));
    std::lock_guard<std::mutex> l(gpu_->cudnn_mu());
    cudnnConvolutionFwdAlgoPerf_t perf[kMaxAlgos];
    int n = 0;
    GR_RETURN_IF_ERROR(
        Check(cudnnGetConvolutionForwardAlgorithm_v7(gpu_->cudnn(), s.x.get(), s.f.get(),
                                                     s.conv.get(), s.y.get(), kMaxAlgos, &n, perf),
              "cudnnGetConvolutionForwardAlgorithm_v7"));
    GR_ASSIGN_OR_RETURN(cudnnConvolutionFwdAlgoPerf_t algo, Pick(perf, n, "forward"));
    GR_ASSIGN_OR_RETURN(Tensor ws, Scratch(algo.memory > 0 ? algo.memory : 1));
    const float alpha = 1.f, beta = 0.f;
    return Check(
        cudnnConvolutionForward(gpu_->cudnn(), &alpha, s.x.get(), in.base<float>(), s.f.get(),
                                fk.base<float>(), s.conv.get(), algo.algo, ws.raw_data(),
                                algo.memory, &beta, s.y.get(), y.base<float>()),
        "cudnnConvolutionForward");
  }
};

class Conv2DBackpropInputOp : public ConvOpKernel {
 public:
  using ConvOpKernel::ConvOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(TensorShape in_shape,
                        conv_window::ShapeInput(*this, ctx->input(0), "input_sizes"));
    GR_ASSIGN_OR_RETURN(const Tensor* f, OnGpu(ctx, 1));
    GR_ASSIGN_OR_RETURN(const Tensor* dy, OnGpu(ctx, 2));
    GR_ASSIGN_OR_RETURN(Geometry g, Geom(in_shape, f->shape()));
    if (dy->shape() != g.OutputShape()) {
      return Error(absl::StrCat("out_backprop has shape ", dy->shape().DebugString(), ", not ",
                                g.OutputShape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(Tensor dx, Output(ctx, 0, in_shape));
    if (dx.NumElements() == 0) return absl::OkStatus();
    if (dy->NumElements() == 0 || f->NumElements() == 0) return Zeros(dx);
    const Padding p = PaddingOf(g);
    Tensor grad = dx;
    if (!p.Symmetric()) {
      GR_ASSIGN_OR_RETURN(
          grad, Temp(TensorShape({g.n, g.h + p.top + p.bottom, g.w + p.left + p.right, g.c})));
    }
    GR_ASSIGN_OR_RETURN(Tensor fk, FilterKrsc(*f));
    ConvSetup s;
    GR_RETURN_IF_ERROR(Setup(g, p, &s));
    {
      std::lock_guard<std::mutex> l(gpu_->cudnn_mu());
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxAlgos];
      int n = 0;
      GR_RETURN_IF_ERROR(Check(
          cudnnGetConvolutionBackwardDataAlgorithm_v7(gpu_->cudnn(), s.f.get(), s.y.get(),
                                                      s.conv.get(), s.x.get(), kMaxAlgos, &n, perf),
          "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
      GR_ASSIGN_OR_RETURN(cudnnConvolutionBwdDataAlgoPerf_t algo, Pick(perf, n, "input gradient"));
      GR_ASSIGN_OR_RETURN(Tensor ws, Scratch(algo.memory > 0 ? algo.memory : 1));
      const float alpha = 1.f, beta = 0.f;
      GR_RETURN_IF_ERROR(Check(cudnnConvolutionBackwardData(
                                   gpu_->cudnn(), &alpha, s.f.get(), fk.base<float>(), s.y.get(),
                                   dy->base<float>(), s.conv.get(), algo.algo, ws.raw_data(),
                                   algo.memory, &beta, s.x.get(), grad.base<float>()),
                               "cudnnConvolutionBackwardData"));
    }
    if (!p.Symmetric()) GR_RETURN_IF_ERROR(Crop(grad, g, p, dx));
    return absl::OkStatus();
  }
};

class Conv2DBackpropFilterOp : public ConvOpKernel {
 public:
  using ConvOpKernel::ConvOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* x, OnGpu(ctx, 0));
    GR_ASSIGN_OR_RETURN(TensorShape f_shape,
                        conv_window::ShapeInput(*this, ctx->input(1), "filter_sizes"));
    GR_ASSIGN_OR_RETURN(const Tensor* dy, OnGpu(ctx, 2));
    GR_ASSIGN_OR_RETURN(Geometry g, Geom(x->shape(), f_shape));
    if (dy->shape() != g.OutputShape()) {
      return Error(absl::StrCat("out_backprop has shape ", dy->shape().DebugString(), ", not ",
                                g.OutputShape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(Tensor df, Output(ctx, 0, f_shape));
    if (df.NumElements() == 0) return absl::OkStatus();
    if (dy->NumElements() == 0 || x->NumElements() == 0) return Zeros(df);
    const Padding p = PaddingOf(g);
    Tensor in = *x;
    if (!p.Symmetric()) {
      GR_ASSIGN_OR_RETURN(in, Pad(*x, g, p, 0.f));
    }
    GR_ASSIGN_OR_RETURN(Tensor dk, Temp(TensorShape({g.out_c, g.kh, g.kw, g.c})));
    ConvSetup s;
    GR_RETURN_IF_ERROR(Setup(g, p, &s));
    {
      std::lock_guard<std::mutex> l(gpu_->cudnn_mu());
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxAlgos];
      int n = 0;
      GR_RETURN_IF_ERROR(Check(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(
              gpu_->cudnn(), s.x.get(), s.y.get(), s.conv.get(), s.f.get(), kMaxAlgos, &n, perf),
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7"));
      GR_ASSIGN_OR_RETURN(cudnnConvolutionBwdFilterAlgoPerf_t algo,
                          Pick(perf, n, "filter gradient"));
      GR_ASSIGN_OR_RETURN(Tensor ws, Scratch(algo.memory > 0 ? algo.memory : 1));
      const float alpha = 1.f, beta = 0.f;
      GR_RETURN_IF_ERROR(Check(cudnnConvolutionBackwardFilter(
                                   gpu_->cudnn(), &alpha, s.x.get(), in.base<float>(), s.y.get(),
                                   dy->base<float>(), s.conv.get(), algo.algo, ws.raw_data(),
                                   algo.memory, &beta, s.f.get(), dk.base<float>()),
                               "cudnnConvolutionBackwardFilter"));
    }
    // KRSC -> HWIO.
    gpu::Dims4 dims, perm;
    dims.v[0] = g.out_c, dims.v[1] = g.kh, dims.v[2] = g.kw, dims.v[3] = g.c;
    perm.v[0] = 1, perm.v[1] = 2, perm.v[2] = 3, perm.v[3] = 0;
    return Launched(
        gpu::LaunchTranspose4(dk.base<float>(), df.base<float>(), dims, perm, stream()));
  }
};

// ---------------------------------------------------------------------------
// Pooling.

class PoolOpKernel : public CudnnOpKernel {
 public:
  PoolOpKernel(OpKernelConstruction* ctx, bool max)
      : CudnnOpKernel(ctx, /*conv=*/false), max_(max) {}

 protected:
  absl::StatusOr<Geometry> Geom(const TensorShape& in) const {
    if (in.dims() != 4) {
      return Error(absl::StrCat("input must be 4-dimensional (NHWC), got ", in.DebugString()));
    }
    GR_RETURN_IF_ERROR(Fits(in));
    GR_ASSIGN_OR_RETURN(Geometry g, conv_window::MakeGeometry(*this, window_, in, window_.window_h,
                                                              window_.window_w, in.dim_size(3)));
    if (!max_ && !PaddingOf(g).Symmetric()) {
      return absl::UnimplementedError(
          absl::StrCat(context_, "AvgPool on the GPU pads symmetrically only; this window over ",
                       in.DebugString(), " needs padding ", g.dh.pad_before, "/", g.dh.pad_after,
                       " x ", g.dw.pad_before, "/", g.dw.pad_after, " (run it on the CPU)"));
    }
    return g;
  }
  // Descriptors for geometry g: x (padded explicitly when not symmetric)
  // and y.
  absl::Status Setup(const Geometry& g, const PoolDesc& pd, const TensorDesc& x,
                     const TensorDesc& y) const {
    const Padding p = PaddingOf(g);
    const bool sym = p.Symmetric();
    GR_RETURN_IF_ERROR(Describe(x, g.n, sym ? g.h : g.h + p.top + p.bottom,
                                sym ? g.w : g.w + p.left + p.right, g.c));
    GR_RETURN_IF_ERROR(Describe(y, g.n, g.dh.out, g.dw.out, g.c));
    GR_RETURN_IF_ERROR(Made(pd.ok()));
    return Check(
        cudnnSetPooling2dDescriptor(
            pd.get(),
            max_ ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
            CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(g.kh), static_cast<int>(g.kw),
            static_cast<int>(sym ? p.top : 0), static_cast<int>(sym ? p.left : 0),
            static_cast<int>(window_.stride_h), static_cast<int>(window_.stride_w)),
        "cudnnSetPooling2dDescriptor");
  }
  static float PadValue() { return -std::numeric_limits<float>::infinity(); }

  const bool max_;
};

class PoolOp : public PoolOpKernel {
 public:
  using PoolOpKernel::PoolOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* x, OnGpu(ctx, 0));
    GR_ASSIGN_OR_RETURN(Geometry g, Geom(x->shape()));
    GR_ASSIGN_OR_RETURN(Tensor y, Output(ctx, 0, g.OutputShape()));
    if (y.NumElements() == 0) return absl::OkStatus();
    const Padding p = PaddingOf(g);
    Tensor in = *x;
    if (!p.Symmetric()) {
      GR_ASSIGN_OR_RETURN(in, Pad(*x, g, p, PadValue()));
    }
    PoolDesc pd;
    TensorDesc xd, yd;
    GR_RETURN_IF_ERROR(Setup(g, pd, xd, yd));
    std::lock_guard<std::mutex> l(gpu_->cudnn_mu());
    const float alpha = 1.f, beta = 0.f;
    return Check(cudnnPoolingForward(gpu_->cudnn(), pd.get(), &alpha, xd.get(), in.base<float>(),
                                     &beta, yd.get(), y.base<float>()),
                 "cudnnPoolingForward");
  }
};

// MaxPoolGrad(orig_input, orig_output, grad) and
// AvgPoolGrad(orig_input_shape, grad).
class PoolGradOp : public PoolOpKernel {
 public:
  using PoolOpKernel::PoolOpKernel;
  absl::Status ComputeOnGpu(OpKernelContext* ctx) override {
    const Tensor* x = nullptr;
    const Tensor* y = nullptr;
    TensorShape in_shape;
    if (max_) {
      GR_ASSIGN_OR_RETURN(x, OnGpu(ctx, 0));
      GR_ASSIGN_OR_RETURN(y, OnGpu(ctx, 1));
      in_shape = x->shape();
    } else {
      GR_ASSIGN_OR_RETURN(in_shape,
                          conv_window::ShapeInput(*this, ctx->input(0), "orig_input_shape"));
    }
    GR_ASSIGN_OR_RETURN(const Tensor* dy, OnGpu(ctx, max_ ? 2 : 1));
    GR_ASSIGN_OR_RETURN(Geometry g, Geom(in_shape));
    if (dy->shape() != g.OutputShape() || (y != nullptr && y->shape() != g.OutputShape())) {
      return Error(absl::StrCat("the pooled tensors must have shape ",
                                g.OutputShape().DebugString(), ", got ",
                                dy->shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(Tensor dx, Output(ctx, 0, in_shape));
    if (dx.NumElements() == 0) return absl::OkStatus();
    if (dy->NumElements() == 0) return Zeros(dx);
    const Padding p = PaddingOf(g);
    const bool sym = p.Symmetric();
    Tensor in = max_ ? *x : dx, grad = dx;
    if (!sym) {
      GR_ASSIGN_OR_RETURN(in, Pad(*x, g, p, PadValue()));
      GR_ASSIGN_OR_RETURN(grad, Temp(in.shape()));
    }
    PoolDesc pd;
    TensorDesc xd, yd;
    GR_RETURN_IF_ERROR(Setup(g, pd, xd, yd));
    {
      std::lock_guard<std::mutex> l(gpu_->cudnn_mu());
      const float alpha = 1.f, beta = 0.f;
      // Average pooling reads neither x nor y: dy and dx stand in.
      const float* yv = max_ ? y->base<float>() : dy->base<float>();
      GR_RETURN_IF_ERROR(
          Check(cudnnPoolingBackward(gpu_->cudnn(), pd.get(), &alpha, yd.get(), yv, yd.get(),
                                     dy->base<float>(), xd.get(), in.base<float>(), &beta, xd.get(),
                                     grad.base<float>()),
                "cudnnPoolingBackward"));
    }
    if (!sym) GR_RETURN_IF_ERROR(Crop(grad, g, p, dx));
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterCudnnKernels(KernelRegistry& r) {
  auto f = [](const char* op) {
    return KernelDef(op).Device(kDeviceGpu).TypeConstraint("T", DT_FLOAT);
  };
  r.Add(f("Conv2D"), MakeKernel<Conv2DOp>());
  r.Add(f("Conv2DBackpropInput").HostMemory("input_sizes"), MakeKernel<Conv2DBackpropInputOp>());
  r.Add(f("Conv2DBackpropFilter").HostMemory("filter_sizes"), MakeKernel<Conv2DBackpropFilterOp>());
  for (const bool max : {true, false}) {
    r.Add(f(max ? "MaxPool" : "AvgPool"),
          Factory([max](OpKernelConstruction* c) { return std::make_unique<PoolOp>(c, max); }));
    KernelDef grad = f(max ? "MaxPoolGrad" : "AvgPoolGrad");
    if (!max) grad.HostMemory("orig_input_shape");
    r.Add(std::move(grad),
          Factory([max](OpKernelConstruction* c) { return std::make_unique<PoolGradOp>(c, max); }));
  }
}

}  // namespace graphrun
