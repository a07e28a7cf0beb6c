// CPU kernels for graph/ops/conv_ops.cc: MaxPool/AvgPool and their
// gradients through oneDNN, on NHWC activations (oneDNN's `nhwc`, logical
// dims N, C, H, W). Registered by RegisterConvKernels (conv_kernels.cc); the
// shared plumbing and geometry are in onednn_conv_internal.h.
#include <algorithm>
#include <memory>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/array_util.h"
#include "kernels/nn/onednn_conv_internal.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace graphrun {
namespace onednn_conv {
namespace {

using array_util::GetInput;
using dnnl::memory;
using Tag = dnnl::memory::format_tag;

struct PoolDescs {
  memory::desc src, dst;
  memory::dims strides, kernel, pad_l, pad_r;
};

PoolDescs MakePoolDescs(const Geometry& g, const WindowParams& p) {
  const auto f32 = memory::data_type::f32;
  PoolDescs d;
  d.src = memory::desc({g.n, g.c, g.h, g.w}, f32, Tag::nhwc);
  d.dst = memory::desc({g.n, g.c, g.dh.out, g.dw.out}, f32, Tag::nhwc);
  d.strides = {p.stride_h, p.stride_w};
  d.kernel = {g.kh, g.kw};
  d.pad_l = {g.dh.pad_before, g.dw.pad_before};
  d.pad_r = {g.dh.pad_after, g.dw.pad_after};
  return d;
}

dnnl::pooling_forward::primitive_desc PoolForwardPd(const PoolDescs& d, dnnl::algorithm alg,
                                                    dnnl::prop_kind prop) {
  dnnl::pooling_forward::desc desc(prop, alg, d.src, d.dst, d.strides, d.kernel, d.pad_l, d.pad_r);
  return dnnl::pooling_forward::primitive_desc(desc, CpuEngine());
}

// TensorFlow's average pooling divides by the number of in-bounds taps.
dnnl::algorithm PoolAlgorithm(bool max) {
  return max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
}

class PoolBase : public OpKernel {
 public:
  explicit PoolBase(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, ReadWindowParams(c, /*conv=*/false, &params_));
  }

 protected:
  absl::StatusOr<Geometry> PoolGeometry(const TensorShape& input) const {
    return MakeGeometry(*this, params_, input, params_.window_h, params_.window_w,
                        input.dims() == 4 ? input.dim_size(3) : 0);
  }
  WindowParams params_;
};

// MaxPool / AvgPool.
template <bool kMax>
class PoolOp : public PoolBase {
 public:
  using PoolBase::PoolBase;

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* input, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(Geometry g, PoolGeometry(input->shape()));
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, g.OutputShape()));
    if (out->NumElements() == 0) return absl::OkStatus();
    GR_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e,
                        cache_.Get(g.Key(), [&] { return Build(g); }));
    return RunOnStream(*this, ctx, "pooling", [&](dnnl::stream& s) {
      e->prim.execute(
          s, {{DNNL_ARG_SRC, Mem(e->descs.src, *input)}, {DNNL_ARG_DST, Mem(e->descs.dst, *out)}});
    });
  }

 private:
  struct Entry {
    PoolDescs descs;
    dnnl::pooling_forward prim;
  };
  absl::StatusOr<std::shared_ptr<const Entry>> Build(const Geometry& g) {
    auto e = std::make_shared<Entry>();
    GR_RETURN_IF_ERROR(DnnlCall(*this, "pooling setup", [&] {
      e->descs = MakePoolDescs(g, params_);
      e->prim = dnnl::pooling_forward(
          PoolForwardPd(e->descs, PoolAlgorithm(kMax), dnnl::prop_kind::forward_inference));
    }));
    return std::shared_ptr<const Entry>(std::move(e));
  }

  PrimitiveCache<Entry> cache_;
};

// MaxPoolGrad(orig_input, orig_output, grad) and
// AvgPoolGrad(orig_input_shape, grad). Max pooling's gradient reruns the
// forward pass in training mode for oneDNN's workspace (where each window's
// maximum was), so orig_output is only checked for shape.
template <bool kMax>
class PoolGradOp : public PoolBase {
 public:
  using PoolBase::PoolBase;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor* input = nullptr;
    TensorShape in_shape;
    if (kMax) {
      GR_ASSIGN_OR_RETURN(input, GetInput(*this, ctx, 0));
      in_shape = input->shape();
    } else {
      GR_ASSIGN_OR_RETURN(const Tensor* sizes, GetInput(*this, ctx, 0));
      GR_ASSIGN_OR_RETURN(in_shape, ShapeInput(*this, *sizes, "orig_input_shape"));
    }
    const int grad_index = kMax ? 2 : 1;
    GR_ASSIGN_OR_RETURN(const Tensor* dy, GetInput(*this, ctx, grad_index));
    GR_ASSIGN_OR_RETURN(Geometry g, PoolGeometry(in_shape));
    if (dy->shape() != g.OutputShape()) {
      return Error(absl::StrCat("grad has shape ", dy->shape().DebugString(),
                                " but the pooling output is ", g.OutputShape().DebugString()));
    }
    if (kMax) {
      GR_ASSIGN_OR_RETURN(const Tensor* orig_out, GetInput(*this, ctx, 1));
      if (orig_out->shape() != g.OutputShape()) {
        return Error(absl::StrCat("orig_output has shape ", orig_out->shape().DebugString(),
                                  ", expected ", g.OutputShape().DebugString()));
      }
    }
    GR_ASSIGN_OR_RETURN(Tensor * dx, ctx->allocate_output(0, in_shape));
    if (dx->NumElements() == 0) return absl::OkStatus();
    if (dy->NumElements() == 0) {
      std::fill_n(dx->base<float>(), dx->NumElements(), 0.0f);
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e,
                        cache_.Get(g.Key(), [&] { return Build(g); }));
    return RunOnStream(*this, ctx, "pooling backward", [&](dnnl::stream& s) {
      std::unordered_map<int, memory> args = {{DNNL_ARG_DIFF_DST, Mem(e->descs.dst, *dy)},
                                              {DNNL_ARG_DIFF_SRC, Mem(e->descs.src, *dx)}};
      if (kMax) {
        memory workspace(e->workspace, CpuEngine());
        memory scratch_dst(e->descs.dst, CpuEngine());
        e->forward.execute(s, {{DNNL_ARG_SRC, Mem(e->descs.src, *input)},
                               {DNNL_ARG_DST, scratch_dst},
                               {DNNL_ARG_WORKSPACE, workspace}});
        args.emplace(DNNL_ARG_WORKSPACE, workspace);
      }
      e->backward.execute(s, args);
    });
  }

 private:
  struct Entry {
    PoolDescs descs;
    memory::desc workspace;
    dnnl::pooling_forward forward;  // max only: produces the workspace
    dnnl::pooling_backward backward;
  };
  absl::StatusOr<std::shared_ptr<const Entry>> Build(const Geometry& g) {
    auto e = std::make_shared<Entry>();
    GR_RETURN_IF_ERROR(DnnlCall(*this, "pooling backward setup", [&] {
      const PoolDescs& d = e->descs = MakePoolDescs(g, params_);
      auto fwd_pd = PoolForwardPd(d, PoolAlgorithm(kMax), dnnl::prop_kind::forward_training);
      dnnl::pooling_backward::desc desc(PoolAlgorithm(kMax), d.src, d.dst, d.strides, d.kernel,
                                        d.pad_l, d.pad_r);
      dnnl::pooling_backward::primitive_desc pd(desc, CpuEngine(), fwd_pd);
      if (kMax) {
        e->workspace = fwd_pd.workspace_desc();
        e->forward = dnnl::pooling_forward(fwd_pd);
      }
      e->backward = dnnl::pooling_backward(pd);
    }));
    return std::shared_ptr<const Entry>(std::move(e));
  }

  PrimitiveCache<Entry> cache_;
};

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  auto cpu_float = [](const char* op) {
    return KernelDef(op).Device(kDeviceCpu).TypeConstraint<float>("T");
  };
  r.Add(cpu_float("MaxPool"), MakeKernel<PoolOp<true>>());
  r.Add(cpu_float("AvgPool"), MakeKernel<PoolOp<false>>());
  r.Add(cpu_float("MaxPoolGrad"), MakeKernel<PoolGradOp<true>>());
  r.Add(cpu_float("AvgPoolGrad"), MakeKernel<PoolGradOp<false>>());
}

}  // namespace onednn_conv
}  // namespace graphrun
