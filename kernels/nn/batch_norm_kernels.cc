// CPU kernels for graph/ops/conv_ops.cc that need no oneDNN: FusedBatchNorm
// (V1-V3) and its gradient, and L2Loss, as vectorised loops over NHWC
// tensors. The batch-norm loops shard on the intra-op pool. Registered by
// RegisterConvKernels (conv_kernels.cc).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/array_util.h"
#include "kernels/math/cwise_util.h"
#include "kernels/nn/onednn_conv_internal.h"

namespace graphrun {
namespace onednn_conv {
namespace {

using array_util::GetInput;
using cwise::kBlock;

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

void RegisterBatchNormKernels(KernelRegistry& r) {
  auto cpu_float = [](const char* op) {
    return KernelDef(op).Device(kDeviceCpu).TypeConstraint<float>("T");
  };
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

}  // namespace onednn_conv
}  // namespace graphrun
