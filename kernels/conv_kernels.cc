// CPU kernels for graph/ops/conv_ops.cc: Conv2D and its two gradients,
// MaxPool/AvgPool and their gradients through oneDNN; FusedBatchNorm
// (V1-V3) and its gradient, and L2Loss, as vectorised loops.
//
// Layouts: NHWC activations map to oneDNN's `nhwc` (logical dims N, C, H,
// W); TensorFlow's HWIO filters to `hwio` (logical O, I, H, W). Convolutions
// let oneDNN pick its preferred (blocked) weight layout and reorder the HWIO
// filter into it per call: that selects the JIT/brgemm implementations,
// measured 2-3x faster here than the GEMM-based path an HWIO weight layout
// forces, for a reorder the size of the filter. NCHW is rejected, as in
// TensorFlow's CPU kernels.
//
// oneDNN's C++ API reports errors by throwing dnnl::error; every call into it
// goes through DnnlCall, which turns that into an Internal status naming the
// node, so no exception crosses a kernel boundary.
//
// Primitives are built once per input geometry and cached in the kernel
// (PrimitiveCache, mutex-guarded); a oneDNN primitive may execute
// concurrently from several threads, so kernels running at once for
// different steps share them. oneDNN runs its own (OpenMP) threads; the
// batch-norm loops shard on the intra-op pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/window_util.h"
#include "graph/status.h"
#include "kernels/all_kernels.h"
#include "kernels/array_util.h"
#include "kernels/cwise_util.h"
#include "kernels/onednn_util.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace graphrun {
namespace {

using array_util::GetInput;
using array_util::IntValues;
using cwise::kBlock;
using dnnl::memory;
using Tag = dnnl::memory::format_tag;

// ---------------------------------------------------------------------------
// oneDNN plumbing.

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// Runs `fn`, converting a dnnl::error into Internal naming the node.
template <typename F>
absl::Status DnnlCall(const OpKernel& k, const char* what, const F& fn) {
  try {
    fn();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("node '", k.name(), "' (op ", k.type_string(),
                                            "): oneDNN ", what, " failed: ", e.what()));
  }
  return absl::OkStatus();
}

// One kernel's oneDNN primitives by geometry key. Entries are immutable once
// built and shared with running computations. Thread-safe; building happens
// under the lock, so concurrent first uses of a shape build once.
template <typename Entry>
class PrimitiveCache {
 public:
  using Maker = std::function<absl::StatusOr<std::shared_ptr<const Entry>>()>;

  absl::StatusOr<std::shared_ptr<const Entry>> Get(const std::vector<int64_t>& key,
                                                   const Maker& make) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
    // Bounded: a graph fed many shapes rebuilds rather than grows.
    if (entries_.size() >= kMaxEntries) entries_.clear();
    GR_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e, make());
    entries_.emplace(key, e);
    return e;
  }

 private:
  static constexpr size_t kMaxEntries = 16;
  std::mutex mu_;
  std::map<std::vector<int64_t>, std::shared_ptr<const Entry>> entries_;
};

memory Mem(const memory::desc& md, const Tensor& t) {
  return memory(md, CpuEngine(), t.raw_data());
}

// ---------------------------------------------------------------------------
// Window attributes and geometry (NHWC only).

struct WindowParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t window_h = 1, window_w = 1;  // pooling: ksize; conv: from filter
  window::Padding padding = window::Padding::kValid;
  std::vector<int64_t> explicit_paddings;  // 8 values in NHWC order, or empty
};

absl::Status ReadList4(OpKernelConstruction* c, const char* name, std::vector<int64_t>* v) {
  GR_RETURN_IF_ERROR(c->GetAttr(name, v));
  if (v->size() != 4) {
    return c->Error(absl::StrCat(name, " must have 4 elements, got ", v->size()));
  }
  if ((*v)[0] != 1 || (*v)[3] != 1) {
    return c->Error(absl::StrCat(name, " in the batch and depth dimensions must be 1 on CPU"));
  }
  return absl::OkStatus();
}

absl::Status ReadWindowParams(OpKernelConstruction* c, bool conv, WindowParams* p) {
  std::string format;
  GR_RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  if (format != "NHWC") {
    return c->Error(absl::StrCat("data_format ", format, " is not supported on CPU; use NHWC"));
  }
  std::vector<int64_t> v;
  GR_RETURN_IF_ERROR(ReadList4(c, "strides", &v));
  p->stride_h = v[1];
  p->stride_w = v[2];
  if (conv) {
    GR_RETURN_IF_ERROR(ReadList4(c, "dilations", &v));
    p->dilation_h = v[1];
    p->dilation_w = v[2];
  } else {
    GR_RETURN_IF_ERROR(ReadList4(c, "ksize", &v));
    p->window_h = v[1];
    p->window_w = v[2];
  }
  std::string padding;
  GR_RETURN_IF_ERROR(c->GetAttr("padding", &padding));
  auto pad = window::ParsePadding(padding);
  if (!pad.ok()) return c->Error(pad.status().message());
  p->padding = *pad;
  if (p->padding == window::Padding::kExplicit) {
    GR_RETURN_IF_ERROR(c->GetAttr("explicit_paddings", &p->explicit_paddings));
    if (p->explicit_paddings.size() != 8) {
      return c->Error("explicit_paddings must have 8 elements");
    }
  }
  return absl::OkStatus();
}

// The geometry of one conv or pooling computation.
struct Geometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input
  int64_t kh = 1, kw = 1, out_c = 0;   // window; output channels
  window::Dim dh, dw;                  // output sizes and paddings
  TensorShape OutputShape() const { return TensorShape({n, dh.out, dw.out, out_c}); }
  std::vector<int64_t> Key() const { return {n, h, w, c, kh, kw, out_c}; }
};

absl::StatusOr<Geometry> MakeGeometry(const OpKernel& k, const WindowParams& p,
                                      const TensorShape& input, int64_t kh, int64_t kw,
                                      int64_t out_c) {
  if (input.dims() != 4) {
    return k.Error(absl::StrCat("input must be 4-dimensional (NHWC), got ", input.DebugString()));
  }
  Geometry g;
  g.n = input.dim_size(0);
  g.h = input.dim_size(1);
  g.w = input.dim_size(2);
  g.c = input.dim_size(3);
  g.kh = kh;
  g.kw = kw;
  g.out_c = out_c;
  const bool ex = !p.explicit_paddings.empty();
  auto dh = window::ComputeDim(g.h, kh, p.dilation_h, p.stride_h, p.padding,
                               ex ? p.explicit_paddings[2] : 0, ex ? p.explicit_paddings[3] : 0);
  if (!dh.ok()) return k.Error(dh.status().message());
  auto dw = window::ComputeDim(g.w, kw, p.dilation_w, p.stride_w, p.padding,
                               ex ? p.explicit_paddings[4] : 0, ex ? p.explicit_paddings[5] : 0);
  if (!dw.ok()) return k.Error(dw.status().message());
  g.dh = *dh;
  g.dw = *dw;
  return g;
}

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

// A rank-4 shape held by an int32/int64 vector input.
absl::StatusOr<TensorShape> ShapeInput(const OpKernel& k, const Tensor& t, const char* what) {
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntValues(k, t, what));
  if (t.dims() != 1 || v.size() != 4) {
    return k.Error(
        absl::StrCat(what, " must be a vector of 4 elements, got ", t.shape().DebugString()));
  }
  auto s = TensorShape::Make(v);
  if (!s.ok()) return k.Error(absl::StrCat(what, ": ", s.status().message()));
  return *s;
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
    return DnnlCall(*this, "convolution", [&] {
      LimitOneDnnThreads(ctx->intra_op_parallelism());
      dnnl::stream s(CpuEngine());
      memory weights = Mem(e->weights.user, *filter);
      if (e->weights.reorder) {
        memory user = weights;
        weights = memory(e->weights.want, CpuEngine());
        e->weights.prim.execute(s, user, weights);
      }
      e->prim.execute(s, {{DNNL_ARG_SRC, Mem(e->descs.src, *input)},
                          {DNNL_ARG_WEIGHTS, weights},
                          {DNNL_ARG_DST, Mem(e->descs.dst, *out)}});
      s.wait();
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
    return DnnlCall(*this, "convolution backward data", [&] {
      LimitOneDnnThreads(ctx->intra_op_parallelism());
      dnnl::stream s(CpuEngine());
      memory weights = Mem(e->weights.user, *filter);
      if (e->weights.reorder) {
        memory user = weights;
        weights = memory(e->weights.want, CpuEngine());
        e->weights.prim.execute(s, user, weights);
      }
      e->prim.execute(s, {{DNNL_ARG_DIFF_DST, Mem(e->descs.dst, *dy)},
                          {DNNL_ARG_WEIGHTS, weights},
                          {DNNL_ARG_DIFF_SRC, Mem(e->descs.src, *dx)}});
      s.wait();
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
    return DnnlCall(*this, "convolution backward weights", [&] {
      LimitOneDnnThreads(ctx->intra_op_parallelism());
      dnnl::stream s(CpuEngine());
      memory user = Mem(e->weights.user, *dw);
      memory weights = e->weights.reorder ? memory(e->weights.want, CpuEngine()) : user;
      e->prim.execute(s, {{DNNL_ARG_SRC, Mem(e->descs.src, *input)},
                          {DNNL_ARG_DIFF_DST, Mem(e->descs.dst, *dy)},
                          {DNNL_ARG_DIFF_WEIGHTS, weights}});
      if (e->weights.reorder) e->weights.prim.execute(s, weights, user);
      s.wait();
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

// ---------------------------------------------------------------------------
// Pooling.

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
    return DnnlCall(*this, "pooling", [&] {
      LimitOneDnnThreads(ctx->intra_op_parallelism());
      dnnl::stream s(CpuEngine());
      e->prim.execute(
          s, {{DNNL_ARG_SRC, Mem(e->descs.src, *input)}, {DNNL_ARG_DST, Mem(e->descs.dst, *out)}});
      s.wait();
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
    return DnnlCall(*this, "pooling backward", [&] {
      LimitOneDnnThreads(ctx->intra_op_parallelism());
      dnnl::stream s(CpuEngine());
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
      s.wait();
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

// ---------------------------------------------------------------------------
// Batch normalisation over the rows of an NHWC tensor seen as [rows, C].
// Per-channel sums are accumulated row by row into channel vectors (so the
// inner loop runs over contiguous channels and vectorises), sharded over
// row ranges with one partial sum per shard.

// acc[c] += x[c].
inline void AddRow(float* __restrict acc, const float* __restrict x, int64_t n) {
  cwise::Accumulate<float, cwise::AddFn>(acc, x, n);
}
// acc[c] += (x[c] - mean[c])^2.
inline void AddSquaredDiffRow(float* __restrict acc, const float* __restrict x,
                              const float* __restrict mean, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) {
      const float d = x[i + j] - mean[i + j];
      acc[i + j] += d * d;
    }
  }
  for (; i < n; ++i) {
    const float d = x[i] - mean[i];
    acc[i] += d * d;
  }
}
// acc_dy[c] += dy[c]; acc_dyx[c] += dy[c] * (x[c] - mean[c]).
inline void AddGradSumsRow(float* __restrict acc_dy, float* __restrict acc_dyx,
                           const float* __restrict dy, const float* __restrict x,
                           const float* __restrict mean, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) {
      acc_dy[i + j] += dy[i + j];
      acc_dyx[i + j] += dy[i + j] * (x[i + j] - mean[i + j]);
    }
  }
  for (; i < n; ++i) {
    acc_dy[i] += dy[i];
    acc_dyx[i] += dy[i] * (x[i] - mean[i]);
  }
}
// y[c] = x[c] * a[c] + b[c].
inline void AffineRow(float* __restrict y, const float* __restrict x, const float* __restrict a,
                      const float* __restrict b, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) y[i + j] = x[i + j] * a[i + j] + b[i + j];
  }
  for (; i < n; ++i) y[i] = x[i] * a[i] + b[i];
}
// out[c] = dy[c] * a[c] + x[c] * b[c] + d[c].
inline void GradRow(float* __restrict out, const float* __restrict dy, const float* __restrict x,
                    const float* __restrict a, const float* __restrict b, const float* __restrict d,
                    int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) {
      out[i + j] = dy[i + j] * a[i + j] + x[i + j] * b[i + j] + d[i + j];
    }
  }
  for (; i < n; ++i) out[i] = dy[i] * a[i] + x[i] * b[i] + d[i];
}

// Sums per channel over all rows: `row_fn(acc, r)` adds row r into `acc`
// (`width` floats: one or more channel vectors). Returns the totals.
template <typename RowFn>
std::vector<float> ChannelSums(OpKernelContext* ctx, int64_t rows, int64_t width,
                               const RowFn& row_fn) {
  const int threads = ctx->intra_op_pool() ? ctx->intra_op_pool()->num_threads() : 0;
  int64_t shards = std::min<int64_t>(rows, 2 * (threads + 1));
  if (rows * width < cwise::kMinParallelWork) shards = std::min<int64_t>(rows, 1);
  std::vector<float> partial(static_cast<size_t>(std::max<int64_t>(shards, 1) * width), 0.0f);
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) {
      float* acc = partial.data() + s * width;
      const int64_t r0 = rows * s / shards, r1 = rows * (s + 1) / shards;
      for (int64_t r = r0; r < r1; ++r) row_fn(acc, r);
    }
  };
  if (shards <= 1) {
    if (shards == 1) run(0, 1);
  } else {
    cwise::ParallelFor(ctx, shards, rows / shards * width * 2, run);
  }
  std::vector<float> total(partial.begin(), partial.begin() + width);
  for (int64_t s = 1; s < shards; ++s) {
    AddRow(total.data(), partial.data() + s * width, width);
  }
  return total;
}

// Rank-1 float input of `c` elements (or of any size when `allow_empty` and
// it is empty).
absl::StatusOr<const float*> ChannelInput(const OpKernel& k, OpKernelContext* ctx, int i, int64_t c,
                                          const char* what, bool allow_empty = false) {
  GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(k, ctx, i));
  if (allow_empty && t->NumElements() == 0) return nullptr;
  if (t->dims() != 1 || t->dim_size(0) != c) {
    return k.Error(absl::StrCat(what, " must be a vector of ", c,
                                " elements (the channels of x), got ", t->shape().DebugString()));
  }
  return t->base<float>();
}

absl::Status ReadBatchNormAttrs(OpKernelConstruction* c, float* epsilon, bool* is_training) {
  GR_RETURN_IF_ERROR(c->GetAttr("epsilon", epsilon));
  GR_RETURN_IF_ERROR(c->GetAttr("is_training", is_training));
  std::string format;
  GR_RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  if (format != "NHWC") {
    return c->Error(absl::StrCat("data_format ", format, " is not supported on CPU; use NHWC"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const Tensor*> Input4D(const OpKernel& k, OpKernelContext* ctx, int i,
                                      const char* what) {
  GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(k, ctx, i));
  if (t->dims() != 4) {
    return k.Error(absl::StrCat(what, " must be 4-dimensional, got ", t->shape().DebugString()));
  }
  return t;
}

// FusedBatchNorm{,V2,V3}: y = (x - mean) / sqrt(var + epsilon) * scale +
// offset per channel. Training uses the batch's statistics, outputs the
// (running-averaged) mean and Bessel-corrected variance, and keeps the
// batch mean and biased variance in reserve_space_1/2 for the gradient.
class FusedBatchNormOp : public OpKernel {
 public:
  explicit FusedBatchNormOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, ReadBatchNormAttrs(c, &epsilon_, &is_training_));
    GR_CTX_CHECK_OK(c, c->GetAttr("exponential_avg_factor", &avg_factor_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* x_t, Input4D(*this, ctx, 0, "x"));
    const int64_t c = x_t->dim_size(3);
    const int64_t rows = c == 0 ? 0 : x_t->NumElements() / c;
    GR_ASSIGN_OR_RETURN(const float* scale, ChannelInput(*this, ctx, 1, c, "scale"));
    GR_ASSIGN_OR_RETURN(const float* offset, ChannelInput(*this, ctx, 2, c, "offset"));
    // Training with factor 1 ignores the running statistics, which may be
    // empty.
    const bool need_stats = !is_training_ || avg_factor_ != 1.0f;
    GR_ASSIGN_OR_RETURN(const float* in_mean, ChannelInput(*this, ctx, 3, c, "mean", !need_stats));
    GR_ASSIGN_OR_RETURN(const float* in_var,
                        ChannelInput(*this, ctx, 4, c, "variance", !need_stats));
    if (need_stats && (in_mean == nullptr || in_var == nullptr)) {
      return Error("mean and variance must have one element per channel");
    }
    GR_ASSIGN_OR_RETURN(Tensor * y_t, ctx->allocate_output(0, x_t->shape()));
    Tensor* outs[4];
    for (int i = 0; i < 4; ++i) {
      GR_ASSIGN_OR_RETURN(outs[i], ctx->allocate_output(i + 1, TensorShape({c})));
    }
    if (num_outputs() > 5) {
      GR_RETURN_IF_ERROR(ctx->allocate_output(5, TensorShape({0})).status());
    }
    float* batch_mean = outs[0]->base<float>();
    float* batch_var = outs[1]->base<float>();
    float* saved_mean = outs[2]->base<float>();
    float* saved_var = outs[3]->base<float>();
    const float* x = x_t->base<float>();
    float* y = y_t->base<float>();

    std::vector<float> mean(c), var(c);
    if (is_training_) {
      if (rows > 0) {
        mean = ChannelSums(ctx, rows, c, [&](float* acc, int64_t r) { AddRow(acc, x + r * c, c); });
        for (int64_t k = 0; k < c; ++k) mean[k] /= static_cast<float>(rows);
        var = ChannelSums(ctx, rows, c, [&](float* acc, int64_t r) {
          AddSquaredDiffRow(acc, x + r * c, mean.data(), c);
        });
        for (int64_t k = 0; k < c; ++k) var[k] /= static_cast<float>(rows);
      } else {
        std::fill(mean.begin(), mean.end(), std::nanf(""));
        std::fill(var.begin(), var.end(), std::nanf(""));
      }
      const float bessel =
          static_cast<float>(rows) / static_cast<float>(std::max<int64_t>(rows - 1, 1));
      const float f = avg_factor_;
      for (int64_t k = 0; k < c; ++k) {
        saved_mean[k] = mean[k];
        saved_var[k] = var[k];
        if (f == 1.0f) {
          batch_mean[k] = mean[k];
          batch_var[k] = var[k] * bessel;
        } else {
          batch_mean[k] = (1 - f) * in_mean[k] + f * mean[k];
          batch_var[k] = (1 - f) * in_var[k] + f * bessel * var[k];
        }
      }
    } else {
      std::copy(in_mean, in_mean + c, mean.begin());
      std::copy(in_var, in_var + c, var.begin());
      std::copy(in_mean, in_mean + c, batch_mean);
      std::copy(in_var, in_var + c, batch_var);
      std::copy(in_mean, in_mean + c, saved_mean);
      std::copy(in_var, in_var + c, saved_var);
    }
    std::vector<float> a(c), b(c);
    for (int64_t k = 0; k < c; ++k) {
      a[k] = scale[k] / std::sqrt(var[k] + epsilon_);
      b[k] = offset[k] - mean[k] * a[k];
    }
    cwise::ParallelFor(ctx, rows, c * 2, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        AffineRow(y + r * c, x + r * c, a.data(), b.data(), c);
      }
    });
    return absl::OkStatus();
  }

 private:
  float epsilon_ = 1e-4f;
  float avg_factor_ = 1.0f;
  bool is_training_ = true;
};

// FusedBatchNormGrad{,V2,V3}(y_backprop, x, scale, reserve_space_1 (mean),
// reserve_space_2 (variance)[, reserve_space_3]).
class FusedBatchNormGradOp : public OpKernel {
 public:
  explicit FusedBatchNormGradOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, ReadBatchNormAttrs(c, &epsilon_, &is_training_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* dy_t, Input4D(*this, ctx, 0, "y_backprop"));
    GR_ASSIGN_OR_RETURN(const Tensor* x_t, Input4D(*this, ctx, 1, "x"));
    if (dy_t->shape() != x_t->shape()) {
      return Error(absl::StrCat("y_backprop ", dy_t->shape().DebugString(), " and x ",
                                x_t->shape().DebugString(), " must have the same shape"));
    }
    const int64_t c = x_t->dim_size(3);
    const int64_t rows = c == 0 ? 0 : x_t->NumElements() / c;
    GR_ASSIGN_OR_RETURN(const float* scale, ChannelInput(*this, ctx, 2, c, "scale"));
    GR_ASSIGN_OR_RETURN(const float* mean, ChannelInput(*this, ctx, 3, c, "reserve_space_1"));
    GR_ASSIGN_OR_RETURN(const float* var, ChannelInput(*this, ctx, 4, c, "reserve_space_2"));
    GR_ASSIGN_OR_RETURN(Tensor * dx_t, ctx->allocate_output(0, x_t->shape()));
    GR_ASSIGN_OR_RETURN(Tensor * dscale_t, ctx->allocate_output(1, TensorShape({c})));
    GR_ASSIGN_OR_RETURN(Tensor * doffset_t, ctx->allocate_output(2, TensorShape({c})));
    for (int i = 3; i < 5; ++i) {
      GR_RETURN_IF_ERROR(ctx->allocate_output(i, TensorShape({0})).status());
    }
    const float* dy = dy_t->base<float>();
    const float* x = x_t->base<float>();
    std::vector<float> sums(2 * c, 0.0f);
    if (rows > 0) {
      sums = ChannelSums(ctx, rows, 2 * c, [&](float* acc, int64_t r) {
        AddGradSumsRow(acc, acc + c, dy + r * c, x + r * c, mean, c);
      });
    }
    const float* sum_dy = sums.data();
    const float* sum_dyx = sums.data() + c;
    float* dscale = dscale_t->base<float>();
    float* doffset = doffset_t->base<float>();
    // dx = dy * a + x * b + d, per channel.
    std::vector<float> a(c), b(c), d(c);
    const float inv_rows = rows > 0 ? 1.0f / static_cast<float>(rows) : 0.0f;
    for (int64_t k = 0; k < c; ++k) {
      const float inv = 1.0f / std::sqrt(var[k] + epsilon_);
      dscale[k] = sum_dyx[k] * inv;
      doffset[k] = sum_dy[k];
      a[k] = scale[k] * inv;
      if (is_training_) {
        // dx = scale * inv * (dy - mean(dy) - (x - mean) * inv^2 *
        //      mean(dy * (x - mean))).
        b[k] = -a[k] * inv * inv * sum_dyx[k] * inv_rows;
        d[k] = -a[k] * sum_dy[k] * inv_rows - b[k] * mean[k];
      } else {
        b[k] = 0.0f;
        d[k] = 0.0f;
      }
    }
    float* dx = dx_t->base<float>();
    cwise::ParallelFor(ctx, rows, c * 3, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        GradRow(dx + r * c, dy + r * c, x + r * c, a.data(), b.data(), d.data(), c);
      }
    });
    return absl::OkStatus();
  }

 private:
  float epsilon_ = 1e-4f;
  bool is_training_ = true;
};

// ---------------------------------------------------------------------------
// L2Loss: sum(t^2) / 2.

template <typename T>
T SumSquares(const T* __restrict x, int64_t n) {
  T lanes[kBlock] = {};
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) lanes[j] += x[i + j] * x[i + j];
  }
  T sum{0};
  for (int j = 0; j < kBlock; ++j) sum += lanes[j];
  for (; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

template <typename T>
class L2LossOp : public OpKernel {
 public:
  explicit L2LossOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape()));
    out->base<T>()[0] = SumSquares(t->base<T>(), t->NumElements()) / T{2};
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterConvKernels(KernelRegistry& r) {
  auto cpu_float = [](const char* op) {
    return KernelDef(op).Device(kDeviceCpu).TypeConstraint<float>("T");
  };
  r.Add(cpu_float("Conv2D"), MakeKernel<Conv2DOp>());
  r.Add(cpu_float("Conv2DBackpropInput"), MakeKernel<Conv2DBackpropInputOp>());
  r.Add(cpu_float("Conv2DBackpropFilter"), MakeKernel<Conv2DBackpropFilterOp>());
  r.Add(cpu_float("MaxPool"), MakeKernel<PoolOp<true>>());
  r.Add(cpu_float("AvgPool"), MakeKernel<PoolOp<false>>());
  r.Add(cpu_float("MaxPoolGrad"), MakeKernel<PoolGradOp<true>>());
  r.Add(cpu_float("AvgPoolGrad"), MakeKernel<PoolGradOp<false>>());
  for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}) {
    r.Add(cpu_float(op), MakeKernel<FusedBatchNormOp>());
  }
  for (const char* op : {"FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"}) {
    r.Add(cpu_float(op), MakeKernel<FusedBatchNormGradOp>());
  }
  r.Add(cpu_float("L2Loss"), MakeKernel<L2LossOp<float>>());
  r.Add(KernelDef("L2Loss").Device(kDeviceCpu).TypeConstraint<double>("T"),
        MakeKernel<L2LossOp<double>>());
}

}  // namespace graphrun
