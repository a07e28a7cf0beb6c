// CPU kernels for common inference ops the op census (docs/op_census.md)
// found missing: Pad, PadV2 and MirrorPad; BatchMatMul and BatchMatMulV2
// (with broadcast batch dimensions); DepthwiseConv2dNative; ResizeBilinear
// and ResizeNearestNeighbor. Semantics follow TensorFlow's kernels;
// schemas are in graph/ops (array_ops, math_ops, conv_ops, nn_ops).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/array_util.h"
#include "kernels/math/onednn_util.h"
#include "kernels/nn/onednn_conv_internal.h"
#include "kernels/nn/register.h"
#include "oneapi/dnnl/dnnl.h"

namespace graphrun {
namespace {

using array_util::GetInput;

// Copies element `src_i` of `src` to element `dst_i` of `dst` (same dtype;
// a string's contents charged to the memory budget first).
inline absl::Status CopyElement(const Tensor& src, int64_t src_i, const Tensor& dst,
                                int64_t dst_i) {
  if (src.dtype() == DT_STRING) return array_util::CopyElements(src, src_i, dst, dst_i, 1);
  const size_t sz = DataTypeSize(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw_data()) + dst_i * sz,
              static_cast<const char*>(src.raw_data()) + src_i * sz, sz);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Pad, PadV2, MirrorPad.

class PadOp : public OpKernel {
 public:
  enum class Mode { kConstant, kReflect, kSymmetric };
  PadOp(OpKernelConstruction* c, bool mirror) : OpKernel(c) {
    if (mirror) {
      std::string mode;
      GR_CTX_CHECK_OK(c, c->GetAttr("mode", &mode));
      mode_ = mode == "REFLECT" ? Mode::kReflect : Mode::kSymmetric;
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* pads, GetInput(*this, ctx, 1));
    const int rank = in->dims();
    if (pads->dims() != 2 || pads->dim_size(0) != rank || pads->dim_size(1) != 2) {
      return Error(absl::StrCat("paddings must be [", rank, ", 2] for an input of rank ", rank,
                                ", got ", pads->shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> p, array_util::IntValues(*this, *pads, "paddings"));
    DimVector dims(rank);
    for (int d = 0; d < rank; ++d) {
      const int64_t n = in->dim_size(d), before = p[2 * d], after = p[2 * d + 1];
      if (before < 0 || after < 0) {
        return Error(absl::StrCat("paddings must be non-negative, got [", before, ", ", after,
                                  "] for dimension ", d));
      }
      if (mode_ != Mode::kConstant) {
        const int64_t limit = mode_ == Mode::kReflect ? n - 1 : n;
        if (before > limit || after > limit) {
          return Error(absl::StrCat(
              "paddings [", before, ", ", after, "] of dimension ", d, " must be at most ", limit,
              " for ", mode_ == Mode::kReflect ? "REFLECT" : "SYMMETRIC", " of size ", n));
        }
      }
      constexpr int64_t kMaxDim = int64_t{1} << 40;
      if (before > kMaxDim || after > kMaxDim || n + before + after > kMaxDim) {
        return Error(absl::StrCat("padded size is too large: dimension ", d, " of size ", n,
                                  " padded by [", before, ", ", after, "]"));
      }
      dims[d] = n + before + after;
    }
    absl::StatusOr<TensorShape> shape = TensorShape::Make(dims);
    if (!shape.ok())
      return Error(absl::StrCat("padded size is too large: ", shape.status().message()));
    const TensorShape& out_shape = *shape;
    // Per dimension, the input index each output index reads (-1: padding);
    // built once the output is allocated (no larger than it).
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    const int64_t total = out->NumElements();
    // An empty output: no tables (a dimension may be huge beside a 0).
    if (total == 0) return absl::OkStatus();
    std::vector<std::vector<int64_t>> src(rank);
    for (int d = 0; d < rank; ++d) {
      const int64_t n = in->dim_size(d), before = p[2 * d], size = dims[d];
      src[d].resize(size);
      for (int64_t o = 0; o < size; ++o) {
        int64_t i = o - before;
        if (i < 0 || i >= n) {
          switch (mode_) {
            case Mode::kConstant:
              i = -1;
              break;
            case Mode::kReflect:
              i = i < 0 ? -i : 2 * n - 2 - i;
              break;
            case Mode::kSymmetric:
              i = i < 0 ? -i - 1 : 2 * n - 1 - i;
              break;
          }
        }
        src[d][o] = i;
      }
    }
    Tensor fill(in->dtype(), TensorShape({}));
    if (ctx->num_inputs() > 2) {
      GR_ASSIGN_OR_RETURN(const Tensor* cv, GetInput(*this, ctx, 2));
      if (cv->NumElements() != 1) return Error("constant_values must be a scalar");
      GR_RETURN_IF_ERROR(CopyElement(*cv, 0, fill, 0));
    } else if (in->dtype() != DT_STRING) {
      std::memset(fill.raw_data(), 0, DataTypeSize(in->dtype()));
    }
    std::vector<int64_t> in_stride(rank, 1);
    for (int d = rank - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * in->dim_size(d + 1);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t o = 0; o < total; ++o) {
      int64_t off = 0;
      bool pad = false;
      for (int d = 0; d < rank; ++d) {
        const int64_t i = src[d][idx[d]];
        if (i < 0) {
          pad = true;
          break;
        }
        off += i * in_stride[d];
      }
      GR_RETURN_IF_ERROR(pad ? CopyElement(fill, 0, *out, o) : CopyElement(*in, off, *out, o));
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[d] < out_shape.dim_size(d)) break;
        idx[d] = 0;
      }
    }
    return absl::OkStatus();
  }

 private:
  Mode mode_ = Mode::kConstant;
};

// ---------------------------------------------------------------------------
// BatchMatMul, BatchMatMulV2.

template <typename T>
class BatchMatMulOp : public OpKernel {
 public:
  BatchMatMulOp(OpKernelConstruction* c, bool broadcast) : OpKernel(c), broadcast_(broadcast) {
    GR_CTX_CHECK_OK(c, c->GetAttr("adj_x", &adj_x_));
    GR_CTX_CHECK_OK(c, c->GetAttr("adj_y", &adj_y_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* x, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* y, GetInput(*this, ctx, 1));
    if (x->dims() < 2 || y->dims() < 2) {
      return Error(absl::StrCat("inputs must have rank >= 2, got ", x->shape().DebugString(),
                                " and ", y->shape().DebugString()));
    }
    const int xr = x->dims(), yr = y->dims();
    const int64_t m = x->dim_size(adj_x_ ? xr - 1 : xr - 2);
    const int64_t k = x->dim_size(adj_x_ ? xr - 2 : xr - 1);
    const int64_t ky = y->dim_size(adj_y_ ? yr - 1 : yr - 2);
    const int64_t n = y->dim_size(adj_y_ ? yr - 2 : yr - 1);
    if (k != ky) {
      return Error(absl::StrCat("contracting dimensions differ: x ", x->shape().DebugString(),
                                " and y ", y->shape().DebugString(), " (adj_x ", adj_x_, ", adj_y ",
                                adj_y_, ")"));
    }
    // Batch dimensions, right-aligned and broadcast.
    const int br = std::max(xr, yr) - 2;
    std::vector<int64_t> bx(br, 1), by(br, 1), batch(br);
    for (int i = 0; i < xr - 2; ++i) bx[br - (xr - 2) + i] = x->dim_size(i);
    for (int i = 0; i < yr - 2; ++i) by[br - (yr - 2) + i] = y->dim_size(i);
    TensorShape out_shape;
    for (int i = 0; i < br; ++i) {
      if (bx[i] != by[i] && bx[i] != 1 && by[i] != 1) {
        return Error(absl::StrCat("batch dimensions do not broadcast: x ", x->shape().DebugString(),
                                  ", y ", y->shape().DebugString()));
      }
      if (!broadcast_ && xr != yr) return Error("BatchMatMul needs inputs of equal rank");
      if (!broadcast_ && bx[i] != by[i]) {
        return Error(absl::StrCat("batch dimensions differ: x ", x->shape().DebugString(), ", y ",
                                  y->shape().DebugString()));
      }
      batch[i] = std::max(bx[i], by[i]);
      out_shape.AddDim(batch[i]);
    }
    out_shape.AddDim(m);
    out_shape.AddDim(n);
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    int64_t num_batches = 1;
    for (int64_t b : batch) num_batches *= b;
    const T* xp = x->base<T>();
    const T* yp = y->base<T>();
    T* op = out->base<T>();
    std::vector<int64_t> idx(br, 0);
    for (int64_t b = 0; b < num_batches; ++b) {
      int64_t xo = 0, yo = 0;
      for (int i = 0; i < br; ++i) {
        xo = xo * bx[i] + (bx[i] == 1 ? 0 : idx[i]);
        yo = yo * by[i] + (by[i] == 1 ? 0 : idx[i]);
      }
      const T* a = xp + xo * m * k;
      const T* bm = yp + yo * k * n;
      T* c = op + b * m * n;
      if constexpr (std::is_same_v<T, float>) {
        // oneDNN's row-major sgemm, as MatMul (the leading dimension is the
        // stored row length).
        if (b == 0) LimitOneDnnThreads(ctx->intra_op_parallelism());
        dnnl_status_t st = dnnl_sgemm(adj_x_ ? 'T' : 'N', adj_y_ ? 'T' : 'N', m, n, k, 1.0f, a,
                                      adj_x_ ? m : k, bm, adj_y_ ? k : n, 0.0f, c, n);
        if (st != dnnl_success) {
          return Error(absl::StrCat("dnnl_sgemm failed, status ", static_cast<int>(st)));
        }
        for (int i = br - 1; i >= 0; --i) {
          if (++idx[i] < batch[i]) break;
          idx[i] = 0;
        }
        continue;
      }
      std::fill(c, c + m * n, T{0});
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < k; ++p) {
          const T av = adj_x_ ? a[p * m + i] : a[i * k + p];
          if (adj_y_) {
            for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * bm[j * k + p];
          } else {
            const T* row = bm + p * n;
            for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * row[j];
          }
        }
      }
      for (int i = br - 1; i >= 0; --i) {
        if (++idx[i] < batch[i]) break;
        idx[i] = 0;
      }
    }
    return absl::OkStatus();
  }

 private:
  bool broadcast_;
  bool adj_x_ = false, adj_y_ = false;
};

// ---------------------------------------------------------------------------
// DepthwiseConv2dNative: NHWC input, filter [kh, kw, in_c, multiplier].

template <typename T>
class DepthwiseConvOp : public OpKernel {
 public:
  explicit DepthwiseConvOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, onednn_conv::ReadWindowParams(c, /*conv=*/true, &params_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* filter, GetInput(*this, ctx, 1));
    if (filter->dims() != 4) {
      return Error(
          absl::StrCat("filter must be 4-dimensional, got ", filter->shape().DebugString()));
    }
    const int64_t mult = filter->dim_size(3);
    GR_ASSIGN_OR_RETURN(onednn_conv::Geometry g,
                        onednn_conv::MakeGeometry(*this, params_, in->shape(), filter->dim_size(0),
                                                  filter->dim_size(1), in->dim_size(3) * mult));
    if (filter->dim_size(2) != g.c) {
      return Error(absl::StrCat("input depth ", g.c, " must equal the filter's in-depth ",
                                filter->dim_size(2)));
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, g.OutputShape()));
    const T* ip = in->base<T>();
    const T* fp = filter->base<T>();
    T* op = out->base<T>();
    const int64_t oh = g.dh.out, ow = g.dw.out, c = g.c;
    for (int64_t b = 0; b < g.n; ++b) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t x = 0; x < ow; ++x) {
          T* o = op + ((b * oh + y) * ow + x) * c * mult;
          std::fill(o, o + c * mult, T{0});
          for (int64_t i = 0; i < g.kh; ++i) {
            const int64_t iy = y * params_.stride_h - g.dh.pad_before + i * params_.dilation_h;
            if (iy < 0 || iy >= g.h) continue;
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ix = x * params_.stride_w - g.dw.pad_before + j * params_.dilation_w;
              if (ix < 0 || ix >= g.w) continue;
              const T* src = ip + ((b * g.h + iy) * g.w + ix) * c;
              const T* f = fp + (i * g.kw + j) * c * mult;
              for (int64_t ch = 0; ch < c; ++ch) {
                for (int64_t q = 0; q < mult; ++q) o[ch * mult + q] += src[ch] * f[ch * mult + q];
              }
            }
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  onednn_conv::WindowParams params_;
};

// ---------------------------------------------------------------------------
// ResizeBilinear, ResizeNearestNeighbor (NHWC).

struct ResizeGeometry {
  int64_t batch, in_h, in_w, out_h, out_w, channels;
  float scale_h, scale_w;
};

absl::StatusOr<ResizeGeometry> GetResize(const OpKernel& k, OpKernelContext* ctx,
                                         bool align_corners) {
  GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(k, ctx, 0));
  GR_ASSIGN_OR_RETURN(const Tensor* size, GetInput(k, ctx, 1));
  if (in->dims() != 4) {
    return k.Error(absl::StrCat("images must be 4-dimensional, got ", in->shape().DebugString()));
  }
  if (size->dtype() != DT_INT32 || size->NumElements() != 2) {
    return k.Error("size must be an int32 vector of 2 elements");
  }
  ResizeGeometry g;
  g.batch = in->dim_size(0);
  g.in_h = in->dim_size(1);
  g.in_w = in->dim_size(2);
  g.channels = in->dim_size(3);
  g.out_h = size->flat<int32_t>()[0];
  g.out_w = size->flat<int32_t>()[1];
  if (g.out_h <= 0 || g.out_w <= 0) {
    return k.Error(absl::StrCat("size must be positive, got [", g.out_h, ", ", g.out_w, "]"));
  }
  if (g.in_h <= 0 || g.in_w <= 0) return k.Error("input images must not be empty");
  auto scale = [&](int64_t in, int64_t out) {
    return align_corners && out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                                    : static_cast<float>(in) / static_cast<float>(out);
  };
  g.scale_h = scale(g.in_h, g.out_h);
  g.scale_w = scale(g.in_w, g.out_w);
  return g;
}

template <typename T>
class ResizeBilinearOp : public OpKernel {
 public:
  explicit ResizeBilinearOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, c->GetAttr("align_corners", &align_corners_));
    GR_CTX_CHECK_OK(c, c->GetAttr("half_pixel_centers", &half_pixel_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResizeGeometry g, GetResize(*this, ctx, align_corners_));
    const Tensor& in = ctx->input(0);
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(
                                          0, TensorShape({g.batch, g.out_h, g.out_w, g.channels})));
    // An empty output: no weight tables (a size may be huge beside a 0).
    if (out->NumElements() == 0) return absl::OkStatus();
    struct Weight {
      int64_t lower, upper;
      float lerp;
    };
    auto weights = [&](int64_t out_size, int64_t in_size, float scale) {
      std::vector<Weight> w(out_size);
      for (int64_t o = 0; o < out_size; ++o) {
        const float pos = half_pixel_ ? (static_cast<float>(o) + 0.5f) * scale - 0.5f
                                      : static_cast<float>(o) * scale;
        const float f = std::floor(pos);
        w[o].lower = std::max<int64_t>(static_cast<int64_t>(f), 0);
        w[o].upper = std::min<int64_t>(static_cast<int64_t>(std::ceil(pos)), in_size - 1);
        w[o].lerp = pos - f;
      }
      return w;
    };
    const std::vector<Weight> wy = weights(g.out_h, g.in_h, g.scale_h);
    const std::vector<Weight> wx = weights(g.out_w, g.in_w, g.scale_w);
    const T* ip = in.base<T>();
    float* op = out->base<float>();
    const int64_t c = g.channels;
    for (int64_t b = 0; b < g.batch; ++b) {
      const T* img = ip + b * g.in_h * g.in_w * c;
      for (int64_t y = 0; y < g.out_h; ++y) {
        const T* top = img + wy[y].lower * g.in_w * c;
        const T* bottom = img + wy[y].upper * g.in_w * c;
        for (int64_t x = 0; x < g.out_w; ++x) {
          float* o = op + ((b * g.out_h + y) * g.out_w + x) * c;
          for (int64_t ch = 0; ch < c; ++ch) {
            const float tl = static_cast<float>(top[wx[x].lower * c + ch]);
            const float tr = static_cast<float>(top[wx[x].upper * c + ch]);
            const float bl = static_cast<float>(bottom[wx[x].lower * c + ch]);
            const float br = static_cast<float>(bottom[wx[x].upper * c + ch]);
            const float t = tl + (tr - tl) * wx[x].lerp;
            const float bo = bl + (br - bl) * wx[x].lerp;
            o[ch] = t + (bo - t) * wy[y].lerp;
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  bool align_corners_ = false, half_pixel_ = false;
};

class ResizeNearestOp : public OpKernel {
 public:
  explicit ResizeNearestOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, c->GetAttr("align_corners", &align_corners_));
    GR_CTX_CHECK_OK(c, c->GetAttr("half_pixel_centers", &half_pixel_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResizeGeometry g, GetResize(*this, ctx, align_corners_));
    const Tensor& in = ctx->input(0);
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(
                                          0, TensorShape({g.batch, g.out_h, g.out_w, g.channels})));
    auto source = [&](int64_t o, float scale, int64_t in_size) {
      const float pos =
          half_pixel_ ? (static_cast<float>(o) + 0.5f) * scale : static_cast<float>(o) * scale;
      int64_t i = align_corners_ ? static_cast<int64_t>(std::round(pos))
                                 : static_cast<int64_t>(std::floor(pos));
      return std::max<int64_t>(0, std::min<int64_t>(i, in_size - 1));
    };
    const int64_t c = g.channels;
    for (int64_t b = 0; b < g.batch; ++b) {
      for (int64_t y = 0; y < g.out_h; ++y) {
        const int64_t iy = source(y, g.scale_h, g.in_h);
        for (int64_t x = 0; x < g.out_w; ++x) {
          const int64_t ix = source(x, g.scale_w, g.in_w);
          for (int64_t ch = 0; ch < c; ++ch) {
            GR_RETURN_IF_ERROR(CopyElement(in, ((b * g.in_h + iy) * g.in_w + ix) * c + ch, *out,
                                           ((b * g.out_h + y) * g.out_w + x) * c + ch));
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  bool align_corners_ = false, half_pixel_ = false;
};

}  // namespace

void RegisterInferenceKernels(KernelRegistry& r) {
  const std::vector<DataType> all = array_util::AllTypes();
  r.Add(KernelDef("Pad").Device(kDeviceCpu).TypeConstraint("T", all),
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<PadOp>(c, false);
        });
  r.Add(KernelDef("PadV2").Device(kDeviceCpu).TypeConstraint("T", all),
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<PadOp>(c, false);
        });
  r.Add(KernelDef("MirrorPad").Device(kDeviceCpu).TypeConstraint("T", all),
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<PadOp>(c, true);
        });
  auto batch_matmul = [&](auto tag, DataType dt) {
    using T = decltype(tag);
    for (const char* op : {"BatchMatMul", "BatchMatMulV2"}) {
      const bool broadcast = std::string(op) == "BatchMatMulV2";
      r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint("T", dt),
            [broadcast](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
              return std::make_unique<BatchMatMulOp<T>>(c, broadcast);
            });
    }
  };
  batch_matmul(float{}, DT_FLOAT);
  batch_matmul(double{}, DT_DOUBLE);
  batch_matmul(int32_t{}, DT_INT32);
  batch_matmul(int64_t{}, DT_INT64);
  r.Add(KernelDef("DepthwiseConv2dNative").Device(kDeviceCpu).TypeConstraint("T", DT_FLOAT),
        MakeKernel<DepthwiseConvOp<float>>());
  r.Add(KernelDef("DepthwiseConv2dNative").Device(kDeviceCpu).TypeConstraint("T", DT_DOUBLE),
        MakeKernel<DepthwiseConvOp<double>>());
  auto bilinear = [&](auto tag, DataType dt) {
    using T = decltype(tag);
    r.Add(KernelDef("ResizeBilinear").Device(kDeviceCpu).TypeConstraint("T", dt),
          MakeKernel<ResizeBilinearOp<T>>());
  };
  bilinear(float{}, DT_FLOAT);
  bilinear(double{}, DT_DOUBLE);
  bilinear(uint8_t{}, DT_UINT8);
  bilinear(int8_t{}, DT_INT8);
  bilinear(uint16_t{}, DT_UINT16);
  bilinear(int16_t{}, DT_INT16);
  bilinear(int32_t{}, DT_INT32);
  bilinear(int64_t{}, DT_INT64);
  r.Add(KernelDef("ResizeNearestNeighbor").Device(kDeviceCpu).TypeConstraint("T", all),
        MakeKernel<ResizeNearestOp>());
}

}  // namespace graphrun
