// The elementwise arithmetic of collectives, shared by every transport so
// that all of them reduce alike: merge one buffer into an accumulator
// (Add, Mul, Min, Max) and finish (Id, or Div by the group size; integer
// division truncates, as TensorFlow's). Types: float, double, int32, int64.
#ifndef GRAPHRUN_RUNTIME_COLLECTIVE_MATH_H_
#define GRAPHRUN_RUNTIME_COLLECTIVE_MATH_H_

#include <algorithm>
#include <cstdint>

#include "graph/types.h"
#include "kernels/framework/collective.h"

// gcc's -O2 vectorizes only loops whose trip count it knows; these are
// memory-bound loops over megabytes, worth vectorizing whatever n is.
#if defined(__GNUC__) && !defined(__clang__)
#define GRAPHRUN_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define GRAPHRUN_VECTORIZE
#endif

namespace graphrun {
namespace collective_math {

template <typename T>
GRAPHRUN_VECTORIZE void Merge(CollectiveMerge op, T* __restrict acc, const T* __restrict in,
                              int64_t n) {
  switch (op) {
    case CollectiveMerge::kAdd:
      for (int64_t i = 0; i < n; ++i) acc[i] += in[i];
      break;
    case CollectiveMerge::kMul:
      for (int64_t i = 0; i < n; ++i) acc[i] *= in[i];
      break;
    case CollectiveMerge::kMin:
      for (int64_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]);
      break;
    case CollectiveMerge::kMax:
      for (int64_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
      break;
  }
}

// out = a (op) b, elementwise (out may not alias a or b).
template <typename T>
GRAPHRUN_VECTORIZE void MergeInto(CollectiveMerge op, T* __restrict out, const T* __restrict a,
                                  const T* __restrict b, int64_t n) {
  switch (op) {
    case CollectiveMerge::kAdd:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
      break;
    case CollectiveMerge::kMul:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
      break;
    case CollectiveMerge::kMin:
      for (int64_t i = 0; i < n; ++i) out[i] = std::min(a[i], b[i]);
      break;
    case CollectiveMerge::kMax:
      for (int64_t i = 0; i < n; ++i) out[i] = std::max(a[i], b[i]);
      break;
  }
}

template <typename T>
GRAPHRUN_VECTORIZE void Finish(CollectiveFinal op, T* __restrict acc, int64_t n, int group_size) {
  if (op != CollectiveFinal::kDiv) return;
  const T d = static_cast<T>(group_size);
  for (int64_t i = 0; i < n; ++i) acc[i] /= d;
}

// True for the dtypes Merge/Finish take.
inline bool Reducible(DataType dt) {
  return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_INT32 || dt == DT_INT64;
}

// Calls fn(T{}) with the element type of `dt` (REQUIRES: Reducible(dt);
// other types: nothing).
template <typename Fn>
void ForReducible(DataType dt, Fn&& fn) {
  switch (dt) {
    case DT_FLOAT:
      return fn(float{});
    case DT_DOUBLE:
      return fn(double{});
    case DT_INT32:
      return fn(int32_t{});
    case DT_INT64:
      return fn(int64_t{});
    default:
      return;
  }
}

// Merge of `n` elements of `dt` (REQUIRES: Reducible(dt)).
inline void Merge(DataType dt, CollectiveMerge op, char* acc, const char* in, int64_t n) {
  ForReducible(dt, [&](auto tag) {
    using T = decltype(tag);
    Merge(op, reinterpret_cast<T*>(acc), reinterpret_cast<const T*>(in), n);
  });
}

// out = a (op) b for `n` elements of `dt` (REQUIRES: Reducible(dt)).
inline void MergeInto(DataType dt, CollectiveMerge op, char* out, const char* a, const char* b,
                      int64_t n) {
  ForReducible(dt, [&](auto tag) {
    using T = decltype(tag);
    MergeInto(op, reinterpret_cast<T*>(out), reinterpret_cast<const T*>(a),
              reinterpret_cast<const T*>(b), n);
  });
}

inline void Finish(DataType dt, CollectiveFinal op, char* acc, int64_t n, int group_size) {
  ForReducible(dt, [&](auto tag) {
    using T = decltype(tag);
    Finish(op, reinterpret_cast<T*>(acc), n, group_size);
  });
}

}  // namespace collective_math
}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_COLLECTIVE_MATH_H_
