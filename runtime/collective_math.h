// The elementwise arithmetic of collectives, shared by every transport so
// that all of them reduce alike: merge one buffer into an accumulator
// (Add, Mul, Min, Max) and finish (Id, or Div by the group size; integer
// division truncates, as TensorFlow's). Types: float, double, int32, int64.
#ifndef GRAPHRUN_RUNTIME_COLLECTIVE_MATH_H_
#define GRAPHRUN_RUNTIME_COLLECTIVE_MATH_H_

#include <algorithm>
#include <cstdint>

#include "graph/types.h"
#include "kernels/collective.h"

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

// Merge of `n` elements of `dt` (REQUIRES: Reducible(dt)).
inline void Merge(DataType dt, CollectiveMerge op, char* acc, const char* in, int64_t n) {
  switch (dt) {
    case DT_FLOAT:
      return Merge(op, reinterpret_cast<float*>(acc), reinterpret_cast<const float*>(in), n);
    case DT_DOUBLE:
      return Merge(op, reinterpret_cast<double*>(acc), reinterpret_cast<const double*>(in), n);
    case DT_INT32:
      return Merge(op, reinterpret_cast<int32_t*>(acc), reinterpret_cast<const int32_t*>(in), n);
    case DT_INT64:
      return Merge(op, reinterpret_cast<int64_t*>(acc), reinterpret_cast<const int64_t*>(in), n);
    default:
      return;
  }
}

// out = a (op) b for `n` elements of `dt` (REQUIRES: Reducible(dt)).
inline void MergeInto(DataType dt, CollectiveMerge op, char* out, const char* a, const char* b,
                      int64_t n) {
  switch (dt) {
    case DT_FLOAT:
      return MergeInto(op, reinterpret_cast<float*>(out), reinterpret_cast<const float*>(a),
                       reinterpret_cast<const float*>(b), n);
    case DT_DOUBLE:
      return MergeInto(op, reinterpret_cast<double*>(out), reinterpret_cast<const double*>(a),
                       reinterpret_cast<const double*>(b), n);
    case DT_INT32:
      return MergeInto(op, reinterpret_cast<int32_t*>(out), reinterpret_cast<const int32_t*>(a),
                       reinterpret_cast<const int32_t*>(b), n);
    case DT_INT64:
      return MergeInto(op, reinterpret_cast<int64_t*>(out), reinterpret_cast<const int64_t*>(a),
                       reinterpret_cast<const int64_t*>(b), n);
    default:
      return;
  }
}

inline void Finish(DataType dt, CollectiveFinal op, char* acc, int64_t n, int group_size) {
  switch (dt) {
    case DT_FLOAT:
      return Finish(op, reinterpret_cast<float*>(acc), n, group_size);
    case DT_DOUBLE:
      return Finish(op, reinterpret_cast<double*>(acc), n, group_size);
    case DT_INT32:
      return Finish(op, reinterpret_cast<int32_t*>(acc), n, group_size);
    case DT_INT64:
      return Finish(op, reinterpret_cast<int64_t*>(acc), n, group_size);
    default:
      return;
  }
}

}  // namespace collective_math
}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_COLLECTIVE_MATH_H_
