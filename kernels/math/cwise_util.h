// Shared machinery for element-wise kernels (cwise_ops.cc, nn_kernels.cc):
// sharding onto the intra-op pool, NumPy broadcasting of two inputs, and the
// UnaryOp / BinaryOp kernel templates.
//
// Code-size model: the per-element work is a functor `F` with
// `static Out Apply(T a, T b)` (binary) or `static T Apply(T x)` (unary).
// Only three tight loops are instantiated per (functor, type) — both
// operands vectors, left scalar, right scalar — written so gcc vectorises
// them; shape handling, broadcasting and sharding are type-erased and shared
// by every op (ComputeBinary / ComputeUnary in cwise_ops.cc).
#ifndef GRAPHRUN_KERNELS_MATH_CWISE_UTIL_H_
#define GRAPHRUN_KERNELS_MATH_CWISE_UTIL_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "graph/tensor.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {
namespace cwise {

// Below this much work (elements x cost per element) sharding costs more
// than it saves, and the work runs inline without building a std::function.
constexpr int64_t kMinParallelWork = int64_t{1} << 16;

// Runs fn(begin, end) over [0, n): inline for small work, otherwise sharded
// on the context's intra-op pool. `cost` is rough cycles per unit.
template <typename F>
void ParallelFor(OpKernelContext* ctx, int64_t n, int64_t cost, const F& fn) {
  if (n <= 0) return;
  if (n * cost < kMinParallelWork || ctx->intra_op_pool() == nullptr) {
    fn(int64_t{0}, n);
    return;
  }
  ctx->intra_op_pool()->ParallelFor(n, cost, fn);
}

// The broadcast of two shapes with size-1 output dimensions dropped and
// adjacent dimensions that broadcast alike merged.
struct BroadcastPlan {
  TensorShape out_shape;
  DimVector dims;       // merged output dimensions, outermost first
  DimVector x_strides;  // element strides of x per merged dim, 0 = broadcast
  DimVector y_strides;
};
// False when the shapes do not broadcast.
bool MakeBroadcastPlan(absl::Span<const int64_t> x, absl::Span<const int64_t> y,
                       BroadcastPlan* plan);

// The three loops of one binary functor, type-erased.
struct BinaryLoops {
  void (*vv)(const void* x, const void* y, void* out, int64_t n);
  void (*sv)(const void* x, const void* y, void* out, int64_t n);  // x[0]
  void (*vs)(const void* x, const void* y, void* out, int64_t n);  // y[0]
  int x_size;                                                      // bytes per input element
  int out_size;                                                    // bytes per output element
  int cost;  // cycles per element, for sharding
};

// Vectorisable element loops. gcc -O2 vectorises only loops it needs no
// runtime alias checks or remainder handling for ("very cheap" cost model),
// and honours __restrict only on function parameters. So every loop here
// takes __restrict parameters and runs fixed blocks of kBlock elements
// (vectorised) followed by a scalar tail. Use these rather than writing
// element loops over local pointers.
constexpr int kBlock = 16;

template <typename T, typename Out, typename F>
inline void MapVV(const T* __restrict a, const T* __restrict b, Out* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) o[i + j] = F::Apply(a[i + j], b[i + j]);
  }
  for (; i < n; ++i) o[i] = F::Apply(a[i], b[i]);
}
template <typename T, typename Out, typename F>
inline void MapSV(const T a, const T* __restrict b, Out* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) o[i + j] = F::Apply(a, b[i + j]);
  }
  for (; i < n; ++i) o[i] = F::Apply(a, b[i]);
}
template <typename T, typename Out, typename F>
inline void MapVS(const T* __restrict a, const T b, Out* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) o[i + j] = F::Apply(a[i + j], b);
  }
  for (; i < n; ++i) o[i] = F::Apply(a[i], b);
}
template <typename T, typename Out, typename F>
inline void Map(const T* __restrict a, Out* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) o[i + j] = F::Apply(a[i + j]);
  }
  for (; i < n; ++i) o[i] = F::Apply(a[i]);
}
// o[i] = F::Apply(o[i], a[i]): accumulation into an output row.
template <typename T, typename F>
inline void Accumulate(T* __restrict o, const T* __restrict a, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) o[i + j] = F::Apply(o[i + j], a[i + j]);
  }
  for (; i < n; ++i) o[i] = F::Apply(o[i], a[i]);
}

struct AddFn {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T a, T b) {
    return a + b;
  }
};
struct MulFn {
  static constexpr int kCost = 1;
  template <typename T>
  static T Apply(T a, T b) {
    return a * b;
  }
};

template <typename T, typename Out, typename F>
struct BinaryLoopsFor {
  static void VV(const void* x, const void* y, void* out, int64_t n) {
    MapVV<T, Out, F>(static_cast<const T*>(x), static_cast<const T*>(y), static_cast<Out*>(out), n);
  }
  static void SV(const void* x, const void* y, void* out, int64_t n) {
    MapSV<T, Out, F>(*static_cast<const T*>(x), static_cast<const T*>(y), static_cast<Out*>(out),
                     n);
  }
  static void VS(const void* x, const void* y, void* out, int64_t n) {
    MapVS<T, Out, F>(static_cast<const T*>(x), *static_cast<const T*>(y), static_cast<Out*>(out),
                     n);
  }
  static constexpr BinaryLoops kLoops = {VV, SV, VS, sizeof(T), sizeof(Out), F::kCost};
};

struct BinaryOptions {
  // Reject differing shapes instead of broadcasting (gradient ops).
  bool require_same_shape = false;
  // Equal/NotEqual with incompatible_shape_error = false: incompatible
  // shapes give a scalar `incompatible_value` instead of an error.
  bool error_on_incompatible = true;
  bool incompatible_value = false;
};

// Computes output 0 of `kernel` from inputs 0 and 1 with `loops`.
// InvalidArgument naming the node when the shapes do not broadcast.
absl::Status ComputeBinary(const OpKernel& kernel, OpKernelContext* ctx, const BinaryLoops& loops,
                           const BinaryOptions& options = BinaryOptions());

// out[i] = F::Apply(x[i]) for a whole tensor, type-erased.
using UnaryLoop = void (*)(const void* x, void* out, int64_t n);

template <typename T, typename F>
void UnaryLoopFor(const void* x, void* out, int64_t n) {
  Map<T, T, F>(static_cast<const T*>(x), static_cast<T*>(out), n);
}

// Output 0 = loop(input 0), same shape; `elem_size` bytes per element.
absl::Status ComputeUnary(const OpKernel& kernel, OpKernelContext* ctx, UnaryLoop loop,
                          int elem_size, int cost);

template <typename T, typename F>
class UnaryOp : public OpKernel {
 public:
  explicit UnaryOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    return ComputeUnary(*this, ctx, UnaryLoopFor<T, F>, sizeof(T), F::kCost);
  }
};

template <typename T, typename Out, typename F, bool kSameShape = false>
class BinaryOp : public OpKernel {
 public:
  explicit BinaryOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    BinaryOptions options;
    options.require_same_shape = kSameShape;
    return ComputeBinary(*this, ctx, BinaryLoopsFor<T, Out, F>::kLoops, options);
  }
};

}  // namespace cwise
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_MATH_CWISE_UTIL_H_
