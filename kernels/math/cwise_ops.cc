// Element-wise CPU kernels: arithmetic with NumPy broadcasting, unary math,
// comparisons, logic, AddN and Select/SelectV2 (Cast is cast_op.cc). The shared drivers
// declared in cwise_util.h (ComputeBinary, ComputeUnary) live here.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/math/cwise_util.h"
#include "kernels/math/register.h"

namespace graphrun {
namespace cwise {

bool MakeBroadcastPlan(absl::Span<const int64_t> x, absl::Span<const int64_t> y,
                       BroadcastPlan* plan) {
  const int xr = static_cast<int>(x.size()), yr = static_cast<int>(y.size());
  const int rank = std::max(xr, yr);
  DimVector out_dims;
  plan->dims.clear();
  absl::InlinedVector<bool, 8> bx, by;  // per merged dim: broadcast in x / y
  for (int i = 0; i < rank; ++i) {
    const int64_t xd = i >= rank - xr ? x[i - (rank - xr)] : 1;
    const int64_t yd = i >= rank - yr ? y[i - (rank - yr)] : 1;
    int64_t o;
    if (xd == yd || yd == 1) {
      o = xd;
    } else if (xd == 1) {
      o = yd;
    } else {
      return false;
    }
    out_dims.push_back(o);
    if (o == 1) continue;
    const bool bxi = xd != o, byi = yd != o;
    if (!plan->dims.empty() && bx.back() == bxi && by.back() == byi) {
      plan->dims.back() *= o;
    } else {
      plan->dims.push_back(o);
      bx.push_back(bxi);
      by.push_back(byi);
    }
  }
  plan->out_shape = TensorShape(absl::MakeConstSpan(out_dims));
  const int r = static_cast<int>(plan->dims.size());
  plan->x_strides.assign(r, 0);
  plan->y_strides.assign(r, 0);
  int64_t sx = 1, sy = 1;
  for (int d = r - 1; d >= 0; --d) {
    if (!bx[d]) {
      plan->x_strides[d] = sx;
      sx *= plan->dims[d];
    }
    if (!by[d]) {
      plan->y_strides[d] = sy;
      sy *= plan->dims[d];
    }
  }
  return true;
}

namespace {

// Runs `loops` over a broadcast: the innermost merged dimension is one call
// of a vector/vector, scalar/vector or vector/scalar loop; the outer
// dimensions are walked with an odometer. Work is split into (row, chunk)
// units so a few long rows still shard.
void RunBroadcast(OpKernelContext* ctx, const BroadcastPlan& plan, const BinaryLoops& loops,
                  const char* xp, const char* yp, char* op) {
  const int r = static_cast<int>(plan.dims.size());
  if (r == 0) {
    loops.vv(xp, yp, op, 1);
    return;
  }
  const int64_t len = plan.dims[r - 1];
  const int64_t sx = plan.x_strides[r - 1], sy = plan.y_strides[r - 1];
  auto* row_fn = sx != 0 && sy != 0 ? loops.vv : (sx != 0 ? loops.vs : loops.sv);
  const int outer = r - 1;
  int64_t rows = 1;
  for (int d = 0; d < outer; ++d) rows *= plan.dims[d];
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (len + kChunk - 1) / kChunk;
  const int64_t xs = loops.x_size, os = loops.out_size;
  auto work = [&](int64_t begin, int64_t end) {
    int64_t row = begin / chunks;
    DimVector idx(outer, 0);
    int64_t xoff = 0, yoff = 0;
    for (int64_t d = outer - 1, rem = row; d >= 0; --d) {
      idx[d] = rem % plan.dims[d];
      rem /= plan.dims[d];
      xoff += idx[d] * plan.x_strides[d];
      yoff += idx[d] * plan.y_strides[d];
    }
    for (int64_t u = begin; u < end; ++u) {
      const int64_t cur = u / chunks;
      while (row < cur) {  // advance the odometer by one row
        ++row;
        for (int d = outer - 1; d >= 0; --d) {
          xoff += plan.x_strides[d];
          yoff += plan.y_strides[d];
          if (++idx[d] < plan.dims[d]) break;
          xoff -= plan.x_strides[d] * plan.dims[d];
          yoff -= plan.y_strides[d] * plan.dims[d];
          idx[d] = 0;
        }
      }
      const int64_t start = (u % chunks) * kChunk;
      const int64_t n = std::min(kChunk, len - start);
      row_fn(xp + (xoff + start * sx) * xs, yp + (yoff + start * sy) * xs,
             op + (row * len + start) * os, n);
    }
  };
  ParallelFor(ctx, rows * chunks, std::min(len, kChunk) * loops.cost, work);
}

}  // namespace

absl::Status ComputeBinary(const OpKernel& kernel, OpKernelContext* ctx, const BinaryLoops& loops,
                           const BinaryOptions& options) {
  const Tensor& x = ctx->input(0);
  const Tensor& y = ctx->input(1);
  if (!x.IsInitialized() || !y.IsInitialized()) {
    return kernel.Error("input is not initialized");
  }
  const char* xp = x.raw_data();
  const char* yp = y.raw_data();
  const int64_t xs = loops.x_size, os = loops.out_size;
  if (x.shape() == y.shape()) {
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    char* op = out->raw_data();
    ParallelFor(ctx, x.NumElements(), loops.cost, [&](int64_t b, int64_t e) {
      loops.vv(xp + b * xs, yp + b * xs, op + b * os, e - b);
    });
    return absl::OkStatus();
  }
  if (options.require_same_shape) {
    return kernel.Error(absl::StrCat("inputs must have the same shape, got ",
                                     x.shape().DebugString(), " and ", y.shape().DebugString()));
  }
  if (y.NumElements() == 1 && y.dims() <= x.dims()) {
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    char* op = out->raw_data();
    ParallelFor(ctx, x.NumElements(), loops.cost,
                [&](int64_t b, int64_t e) { loops.vs(xp + b * xs, yp, op + b * os, e - b); });
    return absl::OkStatus();
  }
  if (x.NumElements() == 1 && x.dims() <= y.dims()) {
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, y.shape()));
    char* op = out->raw_data();
    ParallelFor(ctx, y.NumElements(), loops.cost,
                [&](int64_t b, int64_t e) { loops.sv(xp, yp + b * xs, op + b * os, e - b); });
    return absl::OkStatus();
  }
  BroadcastPlan plan;
  if (!MakeBroadcastPlan(x.shape().dim_sizes(), y.shape().dim_sizes(), &plan)) {
    if (!options.error_on_incompatible) {
      GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape()));
      out->scalar<bool>() = options.incompatible_value;
      return absl::OkStatus();
    }
    return kernel.Error(absl::StrCat("incompatible shapes for broadcasting: ",
                                     x.shape().DebugString(), " and ", y.shape().DebugString()));
  }
  GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, plan.out_shape));
  if (out->NumElements() == 0) return absl::OkStatus();
  RunBroadcast(ctx, plan, loops, xp, yp, out->raw_data());
  return absl::OkStatus();
}

absl::Status ComputeUnary(const OpKernel& kernel, OpKernelContext* ctx, UnaryLoop loop,
                          int elem_size, int cost) {
  const Tensor& x = ctx->input(0);
  if (!x.IsInitialized()) return kernel.Error("input is not initialized");
  GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
  const char* xp = x.raw_data();
  char* op = out->raw_data();
  const int64_t es = elem_size;
  ParallelFor(ctx, x.NumElements(), cost,
              [&](int64_t b, int64_t e) { loop(xp + b * es, op + b * es, e - b); });
  return absl::OkStatus();
}

}  // namespace cwise

namespace {

using cwise::BinaryOp;
using cwise::UnaryOp;

// ---- Binary functors ------------------------------------------------------

struct AddF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T a, T b) {
    return a + b;
  }
};
struct SubF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T a, T b) {
    return a - b;
  }
};
struct MulF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T a, T b) {
    return a * b;
  }
};
struct DivF {  // floating point only
  static constexpr int kCost = 4;
  template <typename T>
  static T Apply(T a, T b) {
    return a / b;
  }
};
// Integer division truncating toward zero. Zero divisors are rejected before
// the loop runs; the guards keep INT_MIN / -1 and x / 0 from trapping.
struct IntDivF {
  static constexpr int kCost = 8;
  template <typename T>
  static T Apply(T a, T b) {
    using U = std::make_unsigned_t<T>;
    if (b == -1) return static_cast<T>(U{0} - static_cast<U>(a));
    return b == 0 ? T{0} : static_cast<T>(a / b);
  }
};
// Division rounding toward negative infinity, and the remainder that goes
// with it (sign of the divisor), as TensorFlow's FloorDiv / FloorMod.
struct FloorDivF {
  static constexpr int kCost = 8;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::floor(a / b);
    } else {
      using U = std::make_unsigned_t<T>;
      if (b == -1) return static_cast<T>(U{0} - static_cast<U>(a));
      if (b == 0) return T{0};
      T q = a / b;
      return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
    }
  }
};
struct FloorModF {
  static constexpr int kCost = 8;
  template <typename T>
  static T Apply(T a, T b) {
    T r;
    if constexpr (std::is_floating_point_v<T>) {
      r = std::fmod(a, b);
    } else {
      if (b == -1 || b == 0) return T{0};
      r = a % b;
    }
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
};
struct MaximumF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T a, T b) {
    return a > b ? a : b;
  }
};
struct MinimumF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T a, T b) {
    return a < b ? a : b;
  }
};
struct SquaredDifferenceF {
  static constexpr int kCost = 2;
  template <typename T>
  static T Apply(T a, T b) {
    return (a - b) * (a - b);
  }
};
struct PowF {
  static constexpr int kCost = 40;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else {  // negative exponents are rejected before the loop runs
      using U = std::make_unsigned_t<T>;
      U result = 1, base = static_cast<U>(a);
      for (T e = b; e > 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return static_cast<T>(result);
    }
  }
};
// Gradients through the forward output y: Apply(y, dy).
struct SigmoidGradF {
  static constexpr int kCost = 3;
  template <typename T>
  static T Apply(T y, T dy) {
    return dy * y * (T{1} - y);
  }
};
struct TanhGradF {
  static constexpr int kCost = 3;
  template <typename T>
  static T Apply(T y, T dy) {
    return dy * (T{1} - y * y);
  }
};

#define GR_COMPARE_FUNCTOR_(Name, expr)         \
  struct Name {                                 \
    static constexpr int kCost = 1;             \
    template <typename T>                       \
    static bool Apply(const T& a, const T& b) { \
      return expr;                              \
    }                                           \
  }
GR_COMPARE_FUNCTOR_(LessF, a < b);
GR_COMPARE_FUNCTOR_(LessEqualF, a <= b);
GR_COMPARE_FUNCTOR_(GreaterF, a > b);
GR_COMPARE_FUNCTOR_(GreaterEqualF, a >= b);
GR_COMPARE_FUNCTOR_(EqualF, a == b);
GR_COMPARE_FUNCTOR_(NotEqualF, a != b);
GR_COMPARE_FUNCTOR_(LogicalAndF, a&& b);
GR_COMPARE_FUNCTOR_(LogicalOrF, a || b);
#undef GR_COMPARE_FUNCTOR_

// ---- Unary functors -------------------------------------------------------

struct NegF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T x) {
    return -x;
  }
};
struct SquareF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T x) {
    return x * x;
  }
};
struct AbsF {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T x) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fabs(x);
    } else {
      return x < 0 ? -x : x;
    }
  }
};
struct SqrtF {
  static constexpr int kCost = 8;
  template <typename T>
  static T Apply(T x) {
    return std::sqrt(x);
  }
};
struct RsqrtF {
  static constexpr int kCost = 10;
  template <typename T>
  static T Apply(T x) {
    return T{1} / std::sqrt(x);
  }
};
struct ExpF {
  static constexpr int kCost = 20;
  template <typename T>
  static T Apply(T x) {
    return std::exp(x);
  }
};
struct LogF {
  static constexpr int kCost = 20;
  template <typename T>
  static T Apply(T x) {
    return std::log(x);
  }
};
struct SigmoidF {
  static constexpr int kCost = 25;
  template <typename T>
  static T Apply(T x) {
    return T{1} / (T{1} + std::exp(-x));
  }
};
struct TanhF {
  static constexpr int kCost = 25;
  template <typename T>
  static T Apply(T x) {
    return std::tanh(x);
  }
};
struct LogicalNotF {
  static constexpr int kCost = 1;
  static bool Apply(bool x) { return !x; }
};

// ---- Kernels with extra checks --------------------------------------------

// Integer Div and Pow: reject zero divisors / negative exponents, which
// TensorFlow reports as errors rather than computing garbage.
template <typename T, typename F>
class CheckedIntBinaryOp : public OpKernel {
  static constexpr bool kByZero = !std::is_same_v<F, PowF>;

 public:
  explicit CheckedIntBinaryOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& y = ctx->input(1);
    if (!y.IsInitialized()) return Error("input is not initialized");
    const T* p = y.base<T>();
    bool bad = false;
    for (int64_t i = 0, n = y.NumElements(); i < n; ++i) {
      bad |= kByZero ? p[i] == 0 : p[i] < 0;
    }
    if (bad) {
      return Error(kByZero ? "integer division by zero"
                           : "integers to negative integer powers are not allowed");
    }
    return cwise::ComputeBinary(*this, ctx, cwise::BinaryLoopsFor<T, T, F>::kLoops);
  }
};

// Equal / NotEqual honour incompatible_shape_error.
template <typename T, typename F>
class EqualityOp : public OpKernel {
 public:
  explicit EqualityOp(OpKernelConstruction* c) : OpKernel(c) {
    bool error = true;
    GR_CTX_CHECK_OK(c, c->GetAttr("incompatible_shape_error", &error));
    options_.error_on_incompatible = error;
    options_.incompatible_value = std::is_same_v<F, NotEqualF>;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    return cwise::ComputeBinary(*this, ctx, cwise::BinaryLoopsFor<T, bool, F>::kLoops, options_);
  }

 private:
  cwise::BinaryOptions options_;
};

template <typename T>
class AddNOp : public OpKernel {
 public:
  explicit AddNOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs();
    if (n < 1) return Error("needs at least one input");
    absl::InlinedVector<const T*, 8> in(n);
    const Tensor& first = ctx->input(0);
    for (int k = 0; k < n; ++k) {
      const Tensor& t = ctx->input(k);
      if (!t.IsInitialized()) return Error("input is not initialized");
      if (t.shape() != first.shape()) {
        return Error(absl::StrCat("inputs must have the same shape: input 0 is ",
                                  first.shape().DebugString(), ", input ", k, " is ",
                                  t.shape().DebugString()));
      }
      in[k] = t.base<T>();
    }
    if (n == 1) {
      ctx->set_output(0, first);
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, first.shape()));
    T* o = out->base<T>();
    cwise::ParallelFor(ctx, first.NumElements(), n, [&](int64_t b, int64_t e) {
      cwise::MapVV<T, T, cwise::AddFn>(in[0] + b, in[1] + b, o + b, e - b);
      for (int k = 2; k < n; ++k) {
        cwise::Accumulate<T, cwise::AddFn>(o + b, in[k] + b, e - b);
      }
    });
    return absl::OkStatus();
  }
};

// ---- Select ---------------------------------------------------------------

// Select and SelectV2 only move elements, so one instantiation per element
// size (T is a same-sized unsigned integer, or std::string) serves all types.
template <typename T>
class SelectOp : public OpKernel {
 public:
  explicit SelectOp(OpKernelConstruction* c) : OpKernel(c), v2_(c->def().op() == "SelectV2") {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& cond = ctx->input(0);
    const Tensor& t = ctx->input(1);
    const Tensor& e = ctx->input(2);
    if (!cond.IsInitialized() || !t.IsInitialized() || !e.IsInitialized()) {
      return Error("input is not initialized");
    }
    if (cond.shape() == t.shape() && t.shape() == e.shape()) {
      return SameShape(ctx, cond, t, e);
    }
    return v2_ ? ComputeV2(ctx, cond, t, e) : ComputeV1(ctx, cond, t, e);
  }

 private:
  absl::Status SameShape(OpKernelContext* ctx, const Tensor& cond, const Tensor& t,
                         const Tensor& e) {
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, t.shape()));
    const bool* c = cond.base<bool>();
    const T* tp = t.base<T>();
    const T* ep = e.base<T>();
    T* o = out->base<T>();
    cwise::ParallelFor(ctx, t.NumElements(), 1, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) o[i] = c[i] ? tp[i] : ep[i];
    });
    return absl::OkStatus();
  }

  absl::Status ComputeV1(OpKernelContext* ctx, const Tensor& cond, const Tensor& t,
                         const Tensor& e) {
    if (t.shape() != e.shape()) {
      return Error(absl::StrCat("'t' and 'e' must have the same shape, got ",
                                t.shape().DebugString(), " and ", e.shape().DebugString()));
    }
    if (cond.dims() == 0) {
      ctx->set_output(0, cond.scalar<bool>() ? t : e);
      return absl::OkStatus();
    }
    if (cond.dims() != 1 || t.dims() < 1 || cond.dim_size(0) != t.dim_size(0)) {
      return Error(
          absl::StrCat("condition must be a scalar, a vector matching the first dimension "
                       "of 't', or the shape of 't'; got ",
                       cond.shape().DebugString(), " for 't' of shape ", t.shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, t.shape()));
    const int64_t rows = t.dim_size(0);
    const int64_t row = rows == 0 ? 0 : t.NumElements() / rows;
    const bool* c = cond.base<bool>();
    const T* tp = t.base<T>();
    const T* ep = e.base<T>();
    T* o = out->base<T>();
    cwise::ParallelFor(ctx, rows, row, [&](int64_t b, int64_t end) {
      for (int64_t r = b; r < end; ++r) {
        const T* src = (c[r] ? tp : ep) + r * row;
        std::copy(src, src + row, o + r * row);
      }
    });
    return absl::OkStatus();
  }

  absl::Status ComputeV2(OpKernelContext* ctx, const Tensor& cond, const Tensor& t,
                         const Tensor& e) {
    TensorShape shape = t.shape();
    if (!BroadcastInto(e.shape(), &shape) || !BroadcastInto(cond.shape(), &shape)) {
      return Error(
          absl::StrCat("incompatible shapes for broadcasting: ", cond.shape().DebugString(), ", ",
                       t.shape().DebugString(), " and ", e.shape().DebugString()));
    }
    if (cond.NumElements() == 1 && cond.dims() <= shape.dims() && t.shape() == shape &&
        e.shape() == shape) {
      ctx->set_output(0, cond.base<bool>()[0] ? t : e);
      return absl::OkStatus();
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    const int rank = shape.dims();
    // Per-dimension element strides of each input, 0 where it broadcasts.
    DimVector sc(rank, 0), st(rank, 0), se(rank, 0);
    auto strides = [&](const TensorShape& s, DimVector* out_strides) {
      int64_t stride = 1;
      for (int d = s.dims() - 1; d >= 0; --d) {
        const int od = rank - s.dims() + d;
        (*out_strides)[od] = s.dim_size(d) == 1 ? 0 : stride;
        stride *= s.dim_size(d);
      }
    };
    strides(cond.shape(), &sc);
    strides(t.shape(), &st);
    strides(e.shape(), &se);
    const bool* c = cond.base<bool>();
    const T* tp = t.base<T>();
    const T* ep = e.base<T>();
    T* o = out->base<T>();
    // Calls fn(i, value) for every output element i.
    auto walk = [&](auto&& fn) {
      DimVector idx(rank, 0);
      int64_t oc = 0, ot = 0, oe = 0;
      for (int64_t i = 0, n = out->NumElements(); i < n; ++i) {
        fn(i, c[oc] ? tp[ot] : ep[oe]);
        for (int d = rank - 1; d >= 0; --d) {
          oc += sc[d];
          ot += st[d];
          oe += se[d];
          if (++idx[d] < shape.dim_size(d)) break;
          oc -= sc[d] * shape.dim_size(d);
          ot -= st[d] * shape.dim_size(d);
          oe -= se[d] * shape.dim_size(d);
          idx[d] = 0;
        }
      }
    };
    if constexpr (std::is_same_v<T, std::string>) {
      // Broadcasting copies a string many times: its contents are charged
      // to the memory budget before they are copied.
      int64_t bytes = 0;
      walk([&](int64_t, const std::string& v) {
        const int64_t b = StringHeapBytes(static_cast<int64_t>(v.size()));
        bytes = bytes > std::numeric_limits<int64_t>::max() - b
                    ? std::numeric_limits<int64_t>::max()
                    : bytes + b;
      });
      GR_RETURN_IF_ERROR(out->buffer()->ChargeContents(
          bytes, absl::StrCat("the string contents selected into a ", shape.DebugString(),
                              " string tensor")));
    }
    walk([&](int64_t i, const T& v) { o[i] = v; });
    return absl::OkStatus();
  }

  // Broadcasts `*shape` with `a` in place; false when incompatible.
  static bool BroadcastInto(const TensorShape& a, TensorShape* shape) {
    cwise::BroadcastPlan plan;
    if (!cwise::MakeBroadcastPlan(a.dim_sizes(), shape->dim_sizes(), &plan)) {
      return false;
    }
    *shape = plan.out_shape;
    return true;
  }

  const bool v2_;
};

// ---- Registration ---------------------------------------------------------

template <typename T>
KernelDef Cpu(const char* op) {
  return std::move(KernelDef(op).Device(kDeviceCpu).TypeConstraint<T>("T"));
}

// half and bfloat16 compute in float: each element is widened, computed
// with F and rounded back (to nearest even), as TensorFlow's CPU kernels do
// through Eigen::half / Eigen::bfloat16.
inline float Widen(Half h) { return HalfToFloat(h.bits); }
inline float Widen(BFloat16 b) { return BFloat16ToFloat(b.bits); }
template <typename T>
T Narrow(float f);
template <>
inline Half Narrow<Half>(float f) {
  return Half{FloatToHalf(f)};
}
template <>
inline BFloat16 Narrow<BFloat16>(float f) {
  return BFloat16{FloatToBFloat16(f)};
}
template <typename F>
struct ViaFloat {
  static constexpr int kCost = F::kCost + 4;
  template <typename T>
  static T Apply(T a, T b) {
    return Narrow<T>(F::Apply(Widen(a), Widen(b)));
  }
  template <typename T>
  static T Apply(T x) {
    return Narrow<T>(F::Apply(Widen(x)));
  }
};

template <typename F, typename... Ts>
void AddBinary(KernelRegistry& r, const char* op) {
  (r.Add(Cpu<Ts>(op), MakeKernel<BinaryOp<Ts, Ts, F>>()), ...);
}
template <typename F, typename... Ts>
void AddCompare(KernelRegistry& r, const char* op) {
  (r.Add(Cpu<Ts>(op), MakeKernel<BinaryOp<Ts, bool, F>>()), ...);
}
template <typename F, typename... Ts>
void AddUnary(KernelRegistry& r, const char* op) {
  (r.Add(Cpu<Ts>(op), MakeKernel<UnaryOp<Ts, F>>()), ...);
}
template <typename F, typename... Ts>
void AddEquality(KernelRegistry& r, const char* op) {
  (r.Add(Cpu<Ts>(op), MakeKernel<EqualityOp<Ts, F>>()), ...);
}

void AddSelect(KernelRegistry& r, const char* op) {
  r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint("T", {DT_BOOL, DT_UINT8, DT_INT8}),
        MakeKernel<SelectOp<uint8_t>>());
  r.Add(KernelDef(op)
            .Device(kDeviceCpu)
            .TypeConstraint("T", {DT_INT16, DT_UINT16, DT_HALF, DT_BFLOAT16}),
        MakeKernel<SelectOp<uint16_t>>());
  r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint("T", {DT_FLOAT, DT_INT32, DT_UINT32}),
        MakeKernel<SelectOp<uint32_t>>());
  r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint("T", {DT_DOUBLE, DT_INT64, DT_UINT64}),
        MakeKernel<SelectOp<uint64_t>>());
  r.Add(Cpu<std::string>(op), MakeKernel<SelectOp<std::string>>());
}

}  // namespace

void RegisterCwiseKernels(KernelRegistry& r) {
  // half / bfloat16 through float; complex64 / complex128 arithmetic.
  using C64 = std::complex<float>;
  using C128 = std::complex<double>;
  for (const char* op : {"Add", "AddV2"}) AddBinary<ViaFloat<AddF>, Half, BFloat16>(r, op);
  AddBinary<ViaFloat<SubF>, Half, BFloat16>(r, "Sub");
  AddBinary<ViaFloat<MulF>, Half, BFloat16>(r, "Mul");
  AddBinary<ViaFloat<DivF>, Half, BFloat16>(r, "RealDiv");
  AddBinary<ViaFloat<DivF>, Half, BFloat16>(r, "Div");
  AddBinary<ViaFloat<MaximumF>, Half, BFloat16>(r, "Maximum");
  AddBinary<ViaFloat<MinimumF>, Half, BFloat16>(r, "Minimum");
  AddUnary<ViaFloat<NegF>, Half, BFloat16>(r, "Neg");
  AddUnary<ViaFloat<SquareF>, Half, BFloat16>(r, "Square");
  AddUnary<ViaFloat<SqrtF>, Half, BFloat16>(r, "Sqrt");
  AddUnary<ViaFloat<RsqrtF>, Half, BFloat16>(r, "Rsqrt");
  AddUnary<ViaFloat<ExpF>, Half, BFloat16>(r, "Exp");
  AddUnary<ViaFloat<LogF>, Half, BFloat16>(r, "Log");
  AddUnary<ViaFloat<SigmoidF>, Half, BFloat16>(r, "Sigmoid");
  AddUnary<ViaFloat<TanhF>, Half, BFloat16>(r, "Tanh");
  for (const char* op : {"Add", "AddV2"}) AddBinary<AddF, C64, C128>(r, op);
  AddBinary<SubF, C64, C128>(r, "Sub");
  AddBinary<MulF, C64, C128>(r, "Mul");
  AddBinary<DivF, C64, C128>(r, "RealDiv");
  AddBinary<DivF, C64, C128>(r, "Div");
  AddUnary<NegF, C64, C128>(r, "Neg");
  AddUnary<SquareF, C64, C128>(r, "Square");
  AddBinary<AddF, float, double, int32_t, int64_t, uint8_t, int8_t, uint16_t, int16_t>(r, "Add");
  AddBinary<AddF, float, double, int32_t, int64_t, uint8_t, int8_t, uint16_t, int16_t>(r, "AddV2");
  AddBinary<SubF, float, double, int32_t, int64_t, uint8_t, int8_t, uint16_t, int16_t>(r, "Sub");
  AddBinary<MulF, float, double, int32_t, int64_t, uint8_t, int8_t, uint16_t, int16_t>(r, "Mul");
  AddBinary<DivF, float, double>(r, "RealDiv");
  AddBinary<DivF, float, double>(r, "Div");
  AddBinary<MaximumF, float, double, int32_t, int64_t, uint8_t, int8_t, uint16_t, int16_t>(
      r, "Maximum");
  AddBinary<MinimumF, float, double, int32_t, int64_t, uint8_t, int8_t, uint16_t, int16_t>(
      r, "Minimum");
  AddBinary<SquaredDifferenceF, float, double, int32_t, int64_t>(r, "SquaredDifference");
  AddBinary<PowF, float, double>(r, "Pow");
  r.Add(Cpu<int32_t>("Div"), MakeKernel<CheckedIntBinaryOp<int32_t, IntDivF>>());
  r.Add(Cpu<int64_t>("Div"), MakeKernel<CheckedIntBinaryOp<int64_t, IntDivF>>());
  AddBinary<FloorDivF, float, double>(r, "FloorDiv");
  AddBinary<FloorModF, float, double>(r, "FloorMod");
  r.Add(Cpu<int32_t>("FloorDiv"), MakeKernel<CheckedIntBinaryOp<int32_t, FloorDivF>>());
  r.Add(Cpu<int64_t>("FloorDiv"), MakeKernel<CheckedIntBinaryOp<int64_t, FloorDivF>>());
  r.Add(Cpu<int32_t>("FloorMod"), MakeKernel<CheckedIntBinaryOp<int32_t, FloorModF>>());
  r.Add(Cpu<int64_t>("FloorMod"), MakeKernel<CheckedIntBinaryOp<int64_t, FloorModF>>());
  r.Add(Cpu<int32_t>("Pow"), MakeKernel<CheckedIntBinaryOp<int32_t, PowF>>());
  r.Add(Cpu<int64_t>("Pow"), MakeKernel<CheckedIntBinaryOp<int64_t, PowF>>());
  AddBinary<SigmoidGradF, float, double>(r, "SigmoidGrad");
  AddBinary<TanhGradF, float, double>(r, "TanhGrad");

  AddUnary<NegF, float, double, int32_t, int64_t>(r, "Neg");
  AddUnary<SquareF, float, double, int32_t, int64_t>(r, "Square");
  AddUnary<AbsF, float, double, int32_t, int64_t>(r, "Abs");
  AddUnary<SqrtF, float, double>(r, "Sqrt");
  AddUnary<RsqrtF, float, double>(r, "Rsqrt");
  AddUnary<ExpF, float, double>(r, "Exp");
  AddUnary<LogF, float, double>(r, "Log");
  AddUnary<SigmoidF, float, double>(r, "Sigmoid");
  AddUnary<TanhF, float, double>(r, "Tanh");

  r.Add(Cpu<float>("AddN"), MakeKernel<AddNOp<float>>());
  r.Add(Cpu<double>("AddN"), MakeKernel<AddNOp<double>>());
  r.Add(Cpu<int32_t>("AddN"), MakeKernel<AddNOp<int32_t>>());
  r.Add(Cpu<int64_t>("AddN"), MakeKernel<AddNOp<int64_t>>());

  AddCompare<LessF, float, double, int32_t, int64_t>(r, "Less");
  AddCompare<LessEqualF, float, double, int32_t, int64_t>(r, "LessEqual");
  AddCompare<GreaterF, float, double, int32_t, int64_t>(r, "Greater");
  AddCompare<GreaterEqualF, float, double, int32_t, int64_t>(r, "GreaterEqual");
  AddEquality<EqualF, float, double, int32_t, int64_t, bool, std::string>(r, "Equal");
  AddEquality<NotEqualF, float, double, int32_t, int64_t, bool, std::string>(r, "NotEqual");
  r.Add(KernelDef("LogicalAnd").Device(kDeviceCpu),
        MakeKernel<BinaryOp<bool, bool, LogicalAndF>>());
  r.Add(KernelDef("LogicalOr").Device(kDeviceCpu), MakeKernel<BinaryOp<bool, bool, LogicalOrF>>());
  r.Add(KernelDef("LogicalNot").Device(kDeviceCpu), MakeKernel<UnaryOp<bool, LogicalNotF>>());

  AddSelect(r, "Select");
  AddSelect(r, "SelectV2");
}

}  // namespace graphrun
