// Neural-network CPU kernels: Relu/Relu6 and their gradients, Softmax,
// LogSoftmax, BiasAdd/BiasAddGrad and the softmax cross-entropy losses.
// Softmax-style kernels work on rows of the last dimension and subtract the
// row maximum before exponentiating, so large logits do not overflow.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/math/cwise_util.h"
#include "kernels/nn/register.h"

namespace graphrun {
namespace {

struct ReluF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T x) {
    return x > T{0} ? x : T{0};
  }
};
struct Relu6F {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T x) {
    const T y = x > T{0} ? x : T{0};
    return y < T{6} ? y : T{6};
  }
};
// Apply(gradients, features).
struct ReluGradF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T g, T f) {
    return f > T{0} ? g : T{0};
  }
};
struct Relu6GradF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T g, T f) {
    return f > T{0} && f < T{6} ? g : T{0};
  }
};

// ---- Softmax family -------------------------------------------------------

template <typename T>
T RowMax(const T* x, int64_t n) {
  T m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// out[i] = exp(x[i] - max); returns the sum of out.
template <typename T>
T ExpShifted(const T* x, T max, T* out, int64_t n) {
  T sum{0};
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::exp(x[i] - max);
    sum += out[i];
  }
  return sum;
}

// Checks the logits input of Softmax-like kernels: rank >= 1.
absl::Status CheckLogits(const OpKernel& k, const Tensor& x) {
  if (!x.IsInitialized()) return k.Error("input is not initialized");
  if (x.dims() < 1) {
    return k.Error(absl::StrCat("logits must have rank >= 1, got shape ", x.shape().DebugString()));
  }
  return absl::OkStatus();
}

template <typename T, bool kLog>
class SoftmaxOp : public OpKernel {
 public:
  explicit SoftmaxOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    GR_RETURN_IF_ERROR(CheckLogits(*this, x));
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    const int64_t depth = x.dim_size(x.dims() - 1);
    if (depth == 0 || x.NumElements() == 0) return absl::OkStatus();
    const int64_t rows = x.NumElements() / depth;
    const T* in = x.base<T>();
    T* o = out->base<T>();
    cwise::ParallelFor(ctx, rows, depth * 25, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = in + r * depth;
        T* orow = o + r * depth;
        const T max = RowMax(xr, depth);
        const T sum = ExpShifted(xr, max, orow, depth);
        if (kLog) {
          // (x - max) - log(sum), not x - (max + log(sum)): the latter
          // loses the small term against a large max.
          const T log_sum = std::log(sum);
          for (int64_t i = 0; i < depth; ++i) orow[i] = (xr[i] - max) - log_sum;
        } else {
          const T inv = T{1} / sum;
          for (int64_t i = 0; i < depth; ++i) orow[i] *= inv;
        }
      }
    });
    return absl::OkStatus();
  }
};

// loss[b] = -sum_c labels[b,c] * log_softmax(features)[b,c];
// backprop[b,c] = softmax(features)[b,c] - labels[b,c].
template <typename T>
class SoftmaxXentOp : public OpKernel {
 public:
  explicit SoftmaxXentOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& features = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    if (!features.IsInitialized() || !labels.IsInitialized()) {
      return Error("input is not initialized");
    }
    if (features.dims() != 2 || labels.dims() != 2 || features.dim_size(1) != labels.dim_size(1) ||
        (labels.dim_size(0) != features.dim_size(0) && labels.dim_size(0) != 1)) {
      return Error(
          absl::StrCat("features and labels must be matrices of the same shape (labels "
                       "may have one row), got ",
                       features.shape().DebugString(), " and ", labels.shape().DebugString()));
    }
    const int64_t batch = features.dim_size(0), depth = features.dim_size(1);
    GR_ASSIGN_OR_RETURN(Tensor * loss, ctx->allocate_output(0, TensorShape({batch})));
    GR_ASSIGN_OR_RETURN(Tensor * backprop, ctx->allocate_output(1, features.shape()));
    const T* f = features.base<T>();
    const T* l = labels.base<T>();
    const int64_t label_stride = labels.dim_size(0) == 1 ? 0 : depth;
    T* lo = loss->base<T>();
    T* bp = backprop->base<T>();
    if (depth == 0) {
      std::fill(lo, lo + batch, T{0});
      return absl::OkStatus();
    }
    cwise::ParallelFor(ctx, batch, depth * 30, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* fr = f + r * depth;
        const T* lr = l + r * label_stride;
        T* br = bp + r * depth;
        const T max = RowMax(fr, depth);
        const T sum = ExpShifted(fr, max, br, depth);
        const T log_sum = std::log(sum);
        const T inv = T{1} / sum;
        T acc{0};
        for (int64_t i = 0; i < depth; ++i) {
          acc += lr[i] * (log_sum - (fr[i] - max));
          br[i] = br[i] * inv - lr[i];
        }
        lo[r] = acc;
      }
    });
    return absl::OkStatus();
  }
};

template <typename T>
class SparseSoftmaxXentOp : public OpKernel {
 public:
  explicit SparseSoftmaxXentOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& features = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    if (!features.IsInitialized() || !labels.IsInitialized()) {
      return Error("input is not initialized");
    }
    if (features.dims() != 2 || labels.dims() != 1 || labels.dim_size(0) != features.dim_size(0)) {
      return Error(
          absl::StrCat("features must be a matrix and labels a vector of its batch size, "
                       "got ",
                       features.shape().DebugString(), " and ", labels.shape().DebugString()));
    }
    if (labels.dtype() != DT_INT32 && labels.dtype() != DT_INT64) {
      return Error("labels must be int32 or int64");
    }
    const int64_t batch = features.dim_size(0), depth = features.dim_size(1);
    auto label_at = [&](int64_t r) -> int64_t {
      return labels.dtype() == DT_INT32 ? labels.base<int32_t>()[r] : labels.base<int64_t>()[r];
    };
    for (int64_t r = 0; r < batch; ++r) {
      const int64_t lab = label_at(r);
      if (lab < 0 || lab >= depth) {
        return Error(absl::StrCat("received a label value of ", lab,
                                  " which is outside the valid range of [0, ", depth, ")"));
      }
    }
    GR_ASSIGN_OR_RETURN(Tensor * loss, ctx->allocate_output(0, TensorShape({batch})));
    GR_ASSIGN_OR_RETURN(Tensor * backprop, ctx->allocate_output(1, features.shape()));
    const T* f = features.base<T>();
    T* lo = loss->base<T>();
    T* bp = backprop->base<T>();
    cwise::ParallelFor(ctx, batch, depth * 25, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* fr = f + r * depth;
        T* br = bp + r * depth;
        const int64_t lab = label_at(r);
        const T max = RowMax(fr, depth);
        const T sum = ExpShifted(fr, max, br, depth);
        const T inv = T{1} / sum;
        for (int64_t i = 0; i < depth; ++i) br[i] *= inv;
        br[lab] -= T{1};
        lo[r] = std::log(sum) - (fr[lab] - max);
      }
    });
    return absl::OkStatus();
  }
};

// ---- BiasAdd --------------------------------------------------------------

// Reads data_format ("NHWC" when the op has no such attr, as BiasAddV1).
absl::Status ReadNchw(OpKernelConstruction* c, bool* nchw) {
  *nchw = false;
  if (!c->HasAttr("data_format")) return absl::OkStatus();
  std::string format;
  GR_RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  if (format != "NHWC" && format != "NCHW") {
    return c->Error(absl::StrCat("unsupported data_format '", format, "'"));
  }
  *nchw = format == "NCHW";
  return absl::OkStatus();
}

// The [outer, channels, inner] view of a value tensor: NHWC puts channels
// last (inner = 1), NCHW second.
struct ChannelView {
  int64_t outer = 1, channels = 1, inner = 1;
};
ChannelView ViewChannels(const Tensor& t, bool nchw) {
  ChannelView v;
  const int cdim = nchw ? 1 : t.dims() - 1;
  for (int d = 0; d < t.dims(); ++d) {
    if (d < cdim) v.outer *= t.dim_size(d);
    if (d == cdim) v.channels = t.dim_size(d);
    if (d > cdim) v.inner *= t.dim_size(d);
  }
  return v;
}

template <typename T>
class BiasAddOp : public OpKernel {
 public:
  explicit BiasAddOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, ReadNchw(c, &nchw_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(0);
    const Tensor& bias = ctx->input(1);
    if (!value.IsInitialized() || !bias.IsInitialized()) {
      return Error("input is not initialized");
    }
    if (value.dims() < 2 || bias.dims() != 1) {
      return Error(absl::StrCat("value must have rank >= 2 and bias rank 1, got ",
                                value.shape().DebugString(), " and ", bias.shape().DebugString()));
    }
    const ChannelView v = ViewChannels(value, nchw_);
    if (bias.dim_size(0) != v.channels) {
      return Error(absl::StrCat("bias of shape ", bias.shape().DebugString(),
                                " does not match the channel dimension of ",
                                value.shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, value.shape()));
    const T* in = value.base<T>();
    const T* bp = bias.base<T>();
    T* o = out->base<T>();
    const int64_t C = v.channels;
    if (v.inner == 1) {  // NHWC: add the bias vector to each row of C
      cwise::ParallelFor(ctx, v.outer, C, [&](int64_t b, int64_t e) {
        for (int64_t n = b; n < e; ++n) {
          cwise::MapVV<T, T, cwise::AddFn>(in + n * C, bp, o + n * C, C);
        }
      });
      return absl::OkStatus();
    }
    // NCHW: one bias value per row of `inner` elements.
    cwise::ParallelFor(ctx, v.outer * C, v.inner, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        cwise::MapVS<T, T, cwise::AddFn>(in + r * v.inner, bp[r % C], o + r * v.inner, v.inner);
      }
    });
    return absl::OkStatus();
  }

 private:
  bool nchw_ = false;
};

template <typename T>
class BiasAddGradOp : public OpKernel {
 public:
  explicit BiasAddGradOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, ReadNchw(c, &nchw_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    if (!grad.IsInitialized()) return Error("input is not initialized");
    if (grad.dims() < 2) {
      return Error(
          absl::StrCat("out_backprop must have rank >= 2, got ", grad.shape().DebugString()));
    }
    const ChannelView v = ViewChannels(grad, nchw_);
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({v.channels})));
    T* o = out->base<T>();
    std::fill(o, o + v.channels, T{0});
    const T* g = grad.base<T>();
    const int64_t C = v.channels;
    if (grad.NumElements() == 0) return absl::OkStatus();
    // Shards of `outer` accumulate private partial sums, added in order.
    const int64_t shards = std::max<int64_t>(1, std::min<int64_t>(8, grad.NumElements() / 65536));
    const int64_t per = (v.outer + shards - 1) / shards;
    std::vector<T> partial(shards * C, T{0});
    cwise::ParallelFor(ctx, shards, per * C * v.inner, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s) {
        T* acc = partial.data() + s * C;
        const int64_t end = std::min(v.outer, (s + 1) * per);
        for (int64_t n = s * per; n < end; ++n) {
          const T* row = g + n * C * v.inner;
          if (v.inner == 1) {
            cwise::Accumulate<T, cwise::AddFn>(acc, row, C);
            continue;
          }
          for (int64_t c = 0; c < C; ++c) {
            const T* p = row + c * v.inner;
            T sum{0};
            for (int64_t i = 0; i < v.inner; ++i) sum += p[i];
            acc[c] += sum;
          }
        }
      }
    });
    for (int64_t s = 0; s < shards; ++s) {
      for (int64_t c = 0; c < C; ++c) o[c] += partial[s * C + c];
    }
    return absl::OkStatus();
  }

 private:
  bool nchw_ = false;
};

template <typename T>
KernelDef Cpu(const char* op) {
  return std::move(KernelDef(op).Device(kDeviceCpu).TypeConstraint<T>("T"));
}

template <typename... Ts>
void AddFloatKernels(KernelRegistry& r) {
  (r.Add(Cpu<Ts>("Softmax"), MakeKernel<SoftmaxOp<Ts, false>>()), ...);
  (r.Add(Cpu<Ts>("LogSoftmax"), MakeKernel<SoftmaxOp<Ts, true>>()), ...);
  (r.Add(Cpu<Ts>("SoftmaxCrossEntropyWithLogits"), MakeKernel<SoftmaxXentOp<Ts>>()), ...);
  (r.Add(Cpu<Ts>("SparseSoftmaxCrossEntropyWithLogits"), MakeKernel<SparseSoftmaxXentOp<Ts>>()),
   ...);
}

template <typename... Ts>
void AddNumericKernels(KernelRegistry& r) {
  (r.Add(Cpu<Ts>("Relu"), MakeKernel<cwise::UnaryOp<Ts, ReluF>>()), ...);
  (r.Add(Cpu<Ts>("Relu6"), MakeKernel<cwise::UnaryOp<Ts, Relu6F>>()), ...);
  (r.Add(Cpu<Ts>("ReluGrad"), MakeKernel<cwise::BinaryOp<Ts, Ts, ReluGradF, true>>()), ...);
  (r.Add(Cpu<Ts>("Relu6Grad"), MakeKernel<cwise::BinaryOp<Ts, Ts, Relu6GradF, true>>()), ...);
  (r.Add(Cpu<Ts>("BiasAdd"), MakeKernel<BiasAddOp<Ts>>()), ...);
  (r.Add(Cpu<Ts>("BiasAddV1"), MakeKernel<BiasAddOp<Ts>>()), ...);
  (r.Add(Cpu<Ts>("BiasAddGrad"), MakeKernel<BiasAddGradOp<Ts>>()), ...);
}

}  // namespace

void RegisterNnKernels(KernelRegistry& r) {
  AddFloatKernels<float, double>(r);
  AddNumericKernels<float, double, int32_t, int64_t>(r);
}

}  // namespace graphrun
