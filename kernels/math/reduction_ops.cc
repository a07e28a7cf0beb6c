// Reductions (Sum, Mean, Prod, Max, Min) and ArgMax/ArgMin on CPU.
//
// A reduction first collapses the input: size-1 dimensions are dropped and
// adjacent dimensions that are all reduced or all kept are merged, so any
// reduction becomes a short alternating list. It then runs one pass per
// reduced group, innermost first, each a [A, R, B] reduction (reduce R, keep
// A and B): B == 1 is a row reduction with 16 independent accumulators (so
// gcc vectorises it), B > 1 accumulates rows of B contiguous elements. Most
// real reductions need a single pass.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/math/cwise_util.h"
#include "kernels/math/register.h"

namespace graphrun {
namespace {

struct ReductionPlan {
  TensorShape out_shape;  // keep_dims applied
  DimVector dims;         // collapsed input dimensions
  absl::InlinedVector<bool, 8> reduced;
  int64_t reduced_count = 1;  // input elements per output element
  bool any_reduced() const {
    return std::find(reduced.begin(), reduced.end(), true) != reduced.end();
  }
};

// Reads axis `k` of an int32/int64 axes tensor.
int64_t AxisAt(const Tensor& axes, int64_t k) {
  return axes.dtype() == DT_INT32 ? axes.base<int32_t>()[k] : axes.base<int64_t>()[k];
}

absl::Status MakeReductionPlan(const OpKernel& kernel, const Tensor& input, const Tensor& axes,
                               bool keep_dims, ReductionPlan* plan) {
  if (!input.IsInitialized() || !axes.IsInitialized()) {
    return kernel.Error("input is not initialized");
  }
  if (axes.dtype() != DT_INT32 && axes.dtype() != DT_INT64) {
    return kernel.Error("reduction_indices must be int32 or int64");
  }
  if (axes.dims() > 1) {
    return kernel.Error(absl::StrCat("reduction_indices must be a scalar or vector, got shape ",
                                     axes.shape().DebugString()));
  }
  const int rank = input.dims();
  absl::InlinedVector<bool, 8> reduce(rank, false);
  for (int64_t k = 0; k < axes.NumElements(); ++k) {
    const int64_t a = AxisAt(axes, k);
    if (a < -rank || a >= rank) {
      return kernel.Error(absl::StrCat("invalid reduction dimension ", a, " for input of rank ",
                                       rank, " (shape ", input.shape().DebugString(), ")"));
    }
    const int64_t d = a < 0 ? a + rank : a;
    if (reduce[d]) {
      // As TensorFlow says it (a sum over one axis twice is no sum).
      return kernel.Error(
          absl::StrCat("Invalid reduction arguments: Axes contains duplicate dimension: ", d));
    }
    reduce[d] = true;
  }
  DimVector out_dims;
  for (int d = 0; d < rank; ++d) {
    const int64_t size = input.dim_size(d);
    if (reduce[d]) {
      plan->reduced_count *= size;
      if (keep_dims) out_dims.push_back(1);
    } else {
      out_dims.push_back(size);
    }
    if (size == 1) continue;
    if (!plan->dims.empty() && plan->reduced.back() == reduce[d]) {
      plan->dims.back() *= size;
    } else {
      plan->dims.push_back(size);
      plan->reduced.push_back(reduce[d]);
    }
  }
  plan->out_shape = TensorShape(absl::MakeConstSpan(out_dims));
  return absl::OkStatus();
}

struct SumR {
  template <typename T>
  static T Init() {
    return T{0};
  }
  template <typename T>
  static T Combine(T a, T b) {
    return a + b;
  }
};
struct ProdR {
  template <typename T>
  static T Init() {
    return T{1};
  }
  template <typename T>
  static T Combine(T a, T b) {
    return a * b;
  }
};
struct MaxR {
  template <typename T>
  static T Init() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  template <typename T>
  static T Combine(T a, T b) {
    return a > b ? a : b;
  }
};
struct MinR {
  template <typename T>
  static T Init() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  }
  template <typename T>
  static T Combine(T a, T b) {
    return a < b ? a : b;
  }
};

// Red::Combine as a binary functor for cwise::Accumulate.
template <typename Red>
struct CombineFn {
  template <typename T>
  static T Apply(T a, T b) {
    return Red::Combine(a, b);
  }
};

template <typename T, typename Red>
T RowReduce(const T* __restrict p, int64_t n) {
  constexpr int kLanes = 16;
  T acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = Red::template Init<T>();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = Red::Combine(acc[j], p[i + j]);
  }
  T r = Red::template Init<T>();
  for (; i < n; ++i) r = Red::Combine(r, p[i]);
  for (int j = 0; j < kLanes; ++j) r = Red::Combine(r, acc[j]);
  return r;
}

// dst[a, b] = reduce over r of src[a, r, b].
template <typename T, typename Red>
void ReducePass(OpKernelContext* ctx, const T* src, T* dst, int64_t A, int64_t R, int64_t B) {
  if (B == 1 && A < 4 && R >= 65536) {
    // Few long rows: split each row into chunks reduced in parallel, then
    // combine the partial results in a fixed order (deterministic).
    constexpr int64_t kMaxChunks = 16;
    const int64_t chunks = std::min<int64_t>(kMaxChunks, R / 16384);
    const int64_t len = (R + chunks - 1) / chunks;
    for (int64_t a = 0; a < A; ++a) {
      T partial[kMaxChunks];
      const T* row = src + a * R;
      cwise::ParallelFor(ctx, chunks, len, [&](int64_t b, int64_t e) {
        for (int64_t s = b; s < e; ++s) {
          const int64_t start = s * len;
          partial[s] =
              RowReduce<T, Red>(row + start, std::max<int64_t>(0, std::min(len, R - start)));
        }
      });
      T r = partial[0];
      for (int64_t s = 1; s < chunks; ++s) r = Red::Combine(r, partial[s]);
      dst[a] = r;
    }
    return;
  }
  constexpr int64_t kColBlock = 1024;
  const int64_t blocks = (B + kColBlock - 1) / kColBlock;
  cwise::ParallelFor(ctx, A * blocks, R * std::min(B, kColBlock), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t a = u / blocks;
      if (B == 1) {
        dst[a] = RowReduce<T, Red>(src + a * R, R);
        continue;
      }
      const int64_t jb = (u % blocks) * kColBlock;
      const int64_t n = std::min(B, jb + kColBlock) - jb;
      T* o = dst + a * B + jb;
      std::fill(o, o + n, Red::template Init<T>());
      for (int64_t r = 0; r < R; ++r) {
        cwise::Accumulate<T, CombineFn<Red>>(o, src + (a * R + r) * B + jb, n);
      }
    }
  });
}

template <typename T, typename Red>
void RunReduction(OpKernelContext* ctx, const ReductionPlan& plan, const T* in, T* out) {
  DimVector dims = plan.dims;
  absl::InlinedVector<bool, 8> reduced = plan.reduced;
  std::vector<T> buf[2];
  int which = 0;
  const T* src = in;
  while (true) {
    int g = static_cast<int>(reduced.size()) - 1;
    while (!reduced[g]) --g;
    int64_t A = 1, B = 1;
    for (int d = 0; d < g; ++d) A *= dims[d];
    for (int d = g + 1; d < static_cast<int>(dims.size()); ++d) B *= dims[d];
    const int64_t R = dims[g];
    dims.erase(dims.begin() + g);
    reduced.erase(reduced.begin() + g);
    const bool last = std::find(reduced.begin(), reduced.end(), true) == reduced.end();
    T* dst = out;
    if (!last) {
      buf[which].resize(A * B);
      dst = buf[which].data();
    }
    ReducePass<T, Red>(ctx, src, dst, A, R, B);
    if (last) return;
    src = dst;
    which ^= 1;
  }
}

template <typename T, typename Red>
class ReductionOp : public OpKernel {
 public:
  explicit ReductionOp(OpKernelConstruction* c) : OpKernel(c), mean_(c->def().op() == "Mean") {
    GR_CTX_CHECK_OK(c, c->GetAttr("keep_dims", &keep_dims_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    ReductionPlan plan;
    GR_RETURN_IF_ERROR(MakeReductionPlan(*this, input, ctx->input(1), keep_dims_, &plan));
    if (input.NumElements() > 0 && !plan.any_reduced()) {
      // Only size-1 dimensions (or none) are reduced: a reshape.
      GR_ASSIGN_OR_RETURN(Tensor out, input.Reshaped(plan.out_shape));
      ctx->set_output(0, std::move(out));
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, plan.out_shape));
    T* o = out->base<T>();
    const int64_t n = out->NumElements();
    if (n == 0) return absl::OkStatus();
    if (input.NumElements() == 0) {
      T init = Red::template Init<T>();
      if (mean_) {
        init = std::numeric_limits<T>::has_quiet_NaN ? std::numeric_limits<T>::quiet_NaN() : T{0};
      }
      std::fill(o, o + n, init);
      return absl::OkStatus();
    }
    RunReduction<T, Red>(ctx, plan, input.base<T>(), o);
    if (mean_) {
      const T count = static_cast<T>(plan.reduced_count);
      for (int64_t i = 0; i < n; ++i) o[i] /= count;
    }
    return absl::OkStatus();
  }

 private:
  const bool mean_;
  bool keep_dims_ = false;
};

template <typename T, bool kMax>
class ArgOp : public OpKernel {
 public:
  explicit ArgOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& dim = ctx->input(1);
    if (!input.IsInitialized() || !dim.IsInitialized()) {
      return Error("input is not initialized");
    }
    if (dim.NumElements() != 1 || (dim.dtype() != DT_INT32 && dim.dtype() != DT_INT64)) {
      return Error(absl::StrCat("dimension must be a single int32/int64, got ", dim.DebugString()));
    }
    const int rank = input.dims();
    int64_t axis = AxisAt(dim, 0);
    if (axis < -rank || axis >= rank) {
      return Error(absl::StrCat("dimension ", axis, " must be in [", -rank, ", ", rank,
                                ") for input of shape ", input.shape().DebugString()));
    }
    if (axis < 0) axis += rank;
    const int64_t R = input.dim_size(axis);
    if (R == 0) {
      return Error(absl::StrCat("reduction axis ", axis, " is empty in shape ",
                                input.shape().DebugString()));
    }
    int64_t A = 1, B = 1;
    TensorShape out_shape;
    for (int d = 0; d < rank; ++d) {
      if (d < axis) A *= input.dim_size(d);
      if (d > axis) B *= input.dim_size(d);
      if (d != axis) out_shape.AddDim(input.dim_size(d));
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    if (out->NumElements() == 0) return absl::OkStatus();
    if (out->dtype() == DT_INT32) {
      Run(ctx, input.base<T>(), out->base<int32_t>(), A, R, B);
    } else if (out->dtype() == DT_INT64) {
      Run(ctx, input.base<T>(), out->base<int64_t>(), A, R, B);
    } else {
      return Error("output_type must be int32 or int64");
    }
    return absl::OkStatus();
  }

 private:
  static bool Better(T a, T b) { return kMax ? a > b : a < b; }

  // First index of the extreme value along R (ties keep the first).
  template <typename I>
  static void Run(OpKernelContext* ctx, const T* in, I* out, int64_t A, int64_t R, int64_t B) {
    cwise::ParallelFor(ctx, A, R * B, [&](int64_t begin, int64_t end) {
      std::vector<T> best;
      for (int64_t a = begin; a < end; ++a) {
        const T* p = in + a * R * B;
        if (B == 1) {
          T v = p[0];
          I idx = 0;
          for (int64_t r = 1; r < R; ++r) {
            if (Better(p[r], v)) {
              v = p[r];
              idx = static_cast<I>(r);
            }
          }
          out[a] = idx;
          continue;
        }
        I* o = out + a * B;
        best.assign(p, p + B);
        std::fill(o, o + B, I{0});
        for (int64_t r = 1; r < R; ++r) {
          const T* row = p + r * B;
          for (int64_t j = 0; j < B; ++j) {
            if (Better(row[j], best[j])) {
              best[j] = row[j];
              o[j] = static_cast<I>(r);
            }
          }
        }
      }
    });
  }
};

template <typename Red, typename... Ts>
void AddReduction(KernelRegistry& r, const char* op) {
  (r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint<Ts>("T"),
         MakeKernel<ReductionOp<Ts, Red>>()),
   ...);
}

template <bool kMax, typename... Ts>
void AddArg(KernelRegistry& r, const char* op) {
  (r.Add(KernelDef(op)
             .Device(kDeviceCpu)
             .TypeConstraint<Ts>("T")
             .TypeConstraint("output_type", {DT_INT32, DT_INT64}),
         MakeKernel<ArgOp<Ts, kMax>>()),
   ...);
}

}  // namespace

void RegisterReductionKernels(KernelRegistry& r) {
  AddReduction<SumR, float, double, int32_t, int64_t>(r, "Sum");
  AddReduction<SumR, float, double, int32_t, int64_t>(r, "Mean");
  AddReduction<ProdR, float, double, int32_t, int64_t>(r, "Prod");
  AddReduction<MaxR, float, double, int32_t, int64_t>(r, "Max");
  AddReduction<MinR, float, double, int32_t, int64_t>(r, "Min");
  AddArg<true, float, double, int32_t, int64_t>(r, "ArgMax");
  AddArg<false, float, double, int32_t, int64_t>(r, "ArgMin");
}

}  // namespace graphrun
