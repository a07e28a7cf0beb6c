// CPU kernels for graph/ops/conv_ops.cc: Conv2D and its two gradients
// through oneDNN. Pooling is in pool_kernels.cc, FusedBatchNorm and L2Loss in
// batch_norm_kernels.cc; the oneDNN plumbing (engine, DnnlCall, primitive
// cache) and window geometry they share are in onednn_conv_internal.h.
//
// Layouts: NHWC activations map to oneDNN's `nhwc` (logical dims N, C, H,
// W); TensorFlow's HWIO filters to `hwio` (logical O, I, H, W). Convolutions
// let oneDNN pick its preferred (blocked) weight layout and reorder the HWIO
// filter into it per call: that selects the JIT/brgemm implementations,
// measured 2-3x faster here than the GEMM-based path an HWIO weight layout
// forces, for a reorder the size of the filter. NCHW is rejected, as in
// TensorFlow's CPU kernels.
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/array_util.h"
#include "kernels/nn/onednn_conv_internal.h"
#include "kernels/nn/register.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace graphrun {
namespace {

using array_util::GetInput;
using dnnl::memory;
using onednn_conv::CpuEngine;
using onednn_conv::DnnlCall;
using onednn_conv::Geometry;
using onednn_conv::MakeGeometry;
using onednn_conv::Mem;
using onednn_conv::PrimitiveCache;
using onednn_conv::ReadWindowParams;
using onednn_conv::RunOnStream;
using onednn_conv::ShapeInput;
using onednn_conv::WindowParams;
using Tag = dnnl::memory::format_tag;

// Conv geometry from the input and HWIO filter shapes.
absl::StatusOr<Geometry> ConvGeometry(const OpKernel& k, const WindowParams& p,
                                      const TensorShape& input, const TensorShape& filter) {
  if (filter.dims() != 4) {
    return k.Error(absl::StrCat("filter must be 4-dimensional (HWIO), got ", filter.DebugString()));
  }
  GR_ASSIGN_OR_RETURN(Geometry g, MakeGeometry(k, p, input, filter.dim_size(0), filter.dim_size(1),
                                               filter.dim_size(3)));
  if (g.c != filter.dim_size(2)) {
    return k.Error(absl::StrCat("input depth ", g.c, " must equal the filter's in-depth ",
                                filter.dim_size(2), " (input ", input.DebugString(), ", filter ",
                                filter.DebugString(), ")"));
  }
  return g;
}

// ---------------------------------------------------------------------------
// Convolutions.

struct ConvDescs {
  memory::desc src, user_weights, any_weights, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

ConvDescs MakeConvDescs(const Geometry& g, const WindowParams& p) {
  const auto f32 = memory::data_type::f32;
  ConvDescs d;
  d.src = memory::desc({g.n, g.c, g.h, g.w}, f32, Tag::nhwc);
  d.user_weights = memory::desc({g.out_c, g.c, g.kh, g.kw}, f32, Tag::hwio);
  d.any_weights = memory::desc({g.out_c, g.c, g.kh, g.kw}, f32, Tag::any);
  d.dst = memory::desc({g.n, g.out_c, g.dh.out, g.dw.out}, f32, Tag::nhwc);
  d.strides = {p.stride_h, p.stride_w};
  d.dilates = {p.dilation_h - 1, p.dilation_w - 1};
  d.pad_l = {g.dh.pad_before, g.dw.pad_before};
  d.pad_r = {g.dh.pad_after, g.dw.pad_after};
  return d;
}

dnnl::convolution_forward::primitive_desc ForwardPd(const ConvDescs& d) {
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, d.src, d.any_weights,
                                       d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, CpuEngine());
}

// Weights in the user's HWIO layout, reordered into `want` when it differs.
struct WeightsLayout {
  memory::desc user, want;
  bool reorder = false;
  dnnl::reorder prim;  // user -> want (or want -> user for weight gradients)
};

WeightsLayout MakeWeightsLayout(const memory::desc& user, const memory::desc& want, bool to_user) {
  WeightsLayout w;
  w.user = user;
  w.want = want;
  w.reorder = user != want;
  if (w.reorder) {
    w.prim = dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), to_user ? want : user,
                                                         CpuEngine(), to_user ? user : want));
  }
  return w;
}

// The filter as the primitive wants it: a memory over `filter` itself, or,
// when the layouts differ, a reorder of it into `layout.want` enqueued on `s`.
memory WeightsIn(dnnl::stream& s, const WeightsLayout& layout, const Tensor& filter) {
  memory weights = Mem(layout.user, filter);
  if (layout.reorder) {
    memory user = weights;
    weights = memory(layout.want, CpuEngine());
    layout.prim.execute(s, user, weights);
  }
  return weights;
}

class ConvBase : public OpKernel {
 public:
  explicit ConvBase(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, ReadWindowParams(c, /*conv=*/true, &params_));
  }

 protected:
  WindowParams params_;
};

class Conv2DOp : public ConvBase {
 public:
  using ConvBase::ConvBase;

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* input, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* filter, GetInput(*this, ctx, 1));
    GR_ASSIGN_OR_RETURN(Geometry g, ConvGeometry(*this, params_, input->shape(), filter->shape()));
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, g.OutputShape()));
    if (out->NumElements() == 0) return absl::OkStatus();
    if (input->NumElements() == 0 || filter->NumElements() == 0) {
      std::fill_n(out->base<float>(), out->NumElements(), 0.0f);
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e,
                        cache_.Get(g.Key(), [&] { return Build(g); }));
    return RunOnStream(*this, ctx, "convolution", [&](dnnl::stream& s) {
      memory weights = WeightsIn(s, e->weights, *filter);
      e->prim.execute(s, {{DNNL_ARG_SRC, Mem(e->descs.src, *input)},
                          {DNNL_ARG_WEIGHTS, weights},
                          {DNNL_ARG_DST, Mem(e->descs.dst, *out)}});
    });
  }

 private:
  struct Entry {
    ConvDescs descs;
    WeightsLayout weights;
    dnnl::convolution_forward prim;
  };
  absl::StatusOr<std::shared_ptr<const Entry>> Build(const Geometry& g) {
    auto e = std::make_shared<Entry>();
    GR_RETURN_IF_ERROR(DnnlCall(*this, "convolution setup", [&] {
      e->descs = MakeConvDescs(g, params_);
      auto pd = ForwardPd(e->descs);
      e->weights = MakeWeightsLayout(e->descs.user_weights, pd.weights_desc(),
                                     /*to_user=*/false);
      e->prim = dnnl::convolution_forward(pd);
    }));
    return std::shared_ptr<const Entry>(std::move(e));
  }

  PrimitiveCache<Entry> cache_;
};

// Checks out_backprop's shape against the geometry's output.
absl::Status CheckOutBackprop(const OpKernel& k, const Geometry& g, const Tensor& out_backprop) {
  if (out_backprop.shape() != g.OutputShape()) {
    return k.Error(absl::StrCat("out_backprop has shape ", out_backprop.shape().DebugString(),
                                " but the convolution's output is ",
                                g.OutputShape().DebugString()));
  }
  return absl::OkStatus();
}

class Conv2DBackpropInputOp : public ConvBase {
 public:
  using ConvBase::ConvBase;

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* sizes, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* filter, GetInput(*this, ctx, 1));
    GR_ASSIGN_OR_RETURN(const Tensor* dy, GetInput(*this, ctx, 2));
    GR_ASSIGN_OR_RETURN(TensorShape in_shape, ShapeInput(*this, *sizes, "input_sizes"));
    GR_ASSIGN_OR_RETURN(Geometry g, ConvGeometry(*this, params_, in_shape, filter->shape()));
    GR_RETURN_IF_ERROR(CheckOutBackprop(*this, g, *dy));
    GR_ASSIGN_OR_RETURN(Tensor * dx, ctx->allocate_output(0, in_shape));
    if (dx->NumElements() == 0) return absl::OkStatus();
    if (dy->NumElements() == 0 || filter->NumElements() == 0) {
      std::fill_n(dx->base<float>(), dx->NumElements(), 0.0f);
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e,
                        cache_.Get(g.Key(), [&] { return Build(g); }));
    return RunOnStream(*this, ctx, "convolution backward data", [&](dnnl::stream& s) {
      memory weights = WeightsIn(s, e->weights, *filter);
      e->prim.execute(s, {{DNNL_ARG_DIFF_DST, Mem(e->descs.dst, *dy)},
                          {DNNL_ARG_WEIGHTS, weights},
                          {DNNL_ARG_DIFF_SRC, Mem(e->descs.src, *dx)}});
    });
  }

 private:
  struct Entry {
    ConvDescs descs;
    WeightsLayout weights;
    dnnl::convolution_backward_data prim;
  };
  absl::StatusOr<std::shared_ptr<const Entry>> Build(const Geometry& g) {
    auto e = std::make_shared<Entry>();
    GR_RETURN_IF_ERROR(DnnlCall(*this, "convolution backward data setup", [&] {
      const ConvDescs& d = e->descs = MakeConvDescs(g, params_);
      auto hint = ForwardPd(d);
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.src,
                                                 d.any_weights, d.dst, d.strides, d.dilates,
                                                 d.pad_l, d.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, CpuEngine(), hint);
      e->weights = MakeWeightsLayout(d.user_weights, pd.weights_desc(),
                                     /*to_user=*/false);
      e->prim = dnnl::convolution_backward_data(pd);
    }));
    return std::shared_ptr<const Entry>(std::move(e));
  }

  PrimitiveCache<Entry> cache_;
};

class Conv2DBackpropFilterOp : public ConvBase {
 public:
  using ConvBase::ConvBase;

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* input, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* sizes, GetInput(*this, ctx, 1));
    GR_ASSIGN_OR_RETURN(const Tensor* dy, GetInput(*this, ctx, 2));
    GR_ASSIGN_OR_RETURN(TensorShape f_shape, ShapeInput(*this, *sizes, "filter_sizes"));
    GR_ASSIGN_OR_RETURN(Geometry g, ConvGeometry(*this, params_, input->shape(), f_shape));
    GR_RETURN_IF_ERROR(CheckOutBackprop(*this, g, *dy));
    GR_ASSIGN_OR_RETURN(Tensor * dw, ctx->allocate_output(0, f_shape));
    if (dw->NumElements() == 0) return absl::OkStatus();
    if (dy->NumElements() == 0 || input->NumElements() == 0) {
      std::fill_n(dw->base<float>(), dw->NumElements(), 0.0f);
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e,
                        cache_.Get(g.Key(), [&] { return Build(g); }));
    return RunOnStream(*this, ctx, "convolution backward weights", [&](dnnl::stream& s) {
      memory user = Mem(e->weights.user, *dw);
      memory weights = e->weights.reorder ? memory(e->weights.want, CpuEngine()) : user;
      e->prim.execute(s, {{DNNL_ARG_SRC, Mem(e->descs.src, *input)},
                          {DNNL_ARG_DIFF_DST, Mem(e->descs.dst, *dy)},
                          {DNNL_ARG_DIFF_WEIGHTS, weights}});
      if (e->weights.reorder) e->weights.prim.execute(s, weights, user);
    });
  }

 private:
  struct Entry {
    ConvDescs descs;
    WeightsLayout weights;  // reorder: oneDNN's layout -> HWIO
    dnnl::convolution_backward_weights prim;
  };
  absl::StatusOr<std::shared_ptr<const Entry>> Build(const Geometry& g) {
    auto e = std::make_shared<Entry>();
    GR_RETURN_IF_ERROR(DnnlCall(*this, "convolution backward weights setup", [&] {
      const ConvDescs& d = e->descs = MakeConvDescs(g, params_);
      auto hint = ForwardPd(d);
      dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, d.src,
                                                    d.any_weights, d.dst, d.strides, d.dilates,
                                                    d.pad_l, d.pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, CpuEngine(), hint);
      e->weights = MakeWeightsLayout(d.user_weights, pd.diff_weights_desc(),
                                     /*to_user=*/true);
      e->prim = dnnl::convolution_backward_weights(pd);
    }));
    return std::shared_ptr<const Entry>(std::move(e));
  }

  PrimitiveCache<Entry> cache_;
};

}  // namespace

void RegisterConvKernels(KernelRegistry& r) {
  auto cpu_float = [](const char* op) {
    return KernelDef(op).Device(kDeviceCpu).TypeConstraint<float>("T");
  };
  r.Add(cpu_float("Conv2D"), MakeKernel<Conv2DOp>());
  r.Add(cpu_float("Conv2DBackpropInput"), MakeKernel<Conv2DBackpropInputOp>());
  r.Add(cpu_float("Conv2DBackpropFilter"), MakeKernel<Conv2DBackpropFilterOp>());
  onednn_conv::RegisterPoolKernels(r);
  onednn_conv::RegisterBatchNormKernels(r);
}

}  // namespace graphrun
