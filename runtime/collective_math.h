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

namespace graphrun {
namespace collective_math {

template <typename T>
void Merge(CollectiveMerge op, T* __restrict acc, const T* __restrict in, int64_t n) {
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

template <typename T>
void Finish(CollectiveFinal op, T* acc, int64_t n, int group_size) {
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
