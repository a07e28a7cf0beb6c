// The CUDA kernels behind gpu_launch.h: grid-stride loops for element-wise
// work, one block per row for softmax and cross-entropy, and one thread per
// output for reductions (enough for the MLP's and CNN's shapes; a
// tree reduction would serve long reductions better).
#include <cfloat>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/gpu/gpu_launch.h"

namespace graphrun {
namespace gpu {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b > 65535 * 8) b = 65535 * 8;
  return b < 1 ? 1 : static_cast<int>(b);
}

__device__ float ApplyUnary(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kRelu:
      return x > 0.f ? x : 0.f;
    case UnaryOp::kSquare:
      return x * x;
    case UnaryOp::kSqrt:
      return sqrtf(x);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kLog:
      return logf(x);
    case UnaryOp::kTanh:
      return tanhf(x);
    case UnaryOp::kSigmoid:
      return 1.f / (1.f + expf(-x));
    case UnaryOp::kIdentity:
      return x;
  }
  return x;
}

__device__ float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kMaximum:
      return a > b ? a : b;
    case BinaryOp::kMinimum:
      return a < b ? a : b;
    case BinaryOp::kReluGrad:  // a: gradients, b: features
      return b > 0.f ? a : 0.f;
    case BinaryOp::kSquaredDifference:
      return (a - b) * (a - b);
  }
  return a;
}

__global__ void UnaryKernel(UnaryOp op, const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = ApplyUnary(op, x[i]);
  }
}

__global__ void BinaryKernel(BinaryOp op, const float* a, const float* b, float* out, int64_t n,
                             BroadcastShape s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    int64_t rest = i, ai = 0, bi = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t coord = rest % s.out_dims[d];
      rest /= s.out_dims[d];
      ai += coord * s.a_strides[d];
      bi += coord * s.b_strides[d];
    }
    out[i] = ApplyBinary(op, a[ai], b[bi]);
  }
}

__global__ void BiasAddKernel(const float* x, const float* bias, float* y, int64_t n,
                              int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = x[i] + bias[i % cols];
  }
}

__global__ void ReduceKernel(ReduceOp op, const float* x, float* y, int64_t outer, int64_t reduce,
                             int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t o = i / inner, in = i % inner;
    const float* p = x + o * reduce * inner + in;
    float acc = op == ReduceOp::kMax ? -FLT_MAX : 0.f;
    for (int64_t r = 0; r < reduce; ++r) {
      const float v = p[r * inner];
      acc = op == ReduceOp::kMax ? (v > acc ? v : acc) : acc + v;
    }
    if (op == ReduceOp::kMean && reduce > 0) acc /= static_cast<float>(reduce);
    y[i] = acc;
  }
}

// One block per row; shared memory for the block's max and sum.
__device__ float BlockReduce(float v, bool max, float* shared) {
  const int t = threadIdx.x;
  shared[t] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) shared[t] = max ? fmaxf(shared[t], shared[t + s]) : shared[t] + shared[t + s];
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

// The row's maximum and sum of exp(x - maximum), in every thread.
__device__ void RowMaxAndSum(const float* row, int64_t cols, float* shared, float* max,
                             float* sum) {
  float m = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = BlockReduce(m, true, shared);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
  *max = m;
  *sum = BlockReduce(s, false, shared);
}

__global__ void SoftmaxKernel(const float* x, float* y, int64_t cols, bool log) {
  __shared__ float shared[kThreads];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float m, sum;
  RowMaxAndSum(row, cols, shared, &m, &sum);
  const float log_sum = logf(sum);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[c] = log ? row[c] - m - log_sum : expf(row[c] - m) / sum;
  }
}

__global__ void SparseXentKernel(const float* logits, const void* labels, bool labels64,
                                 float* loss, float* backprop, int64_t cols) {
  __shared__ float shared[kThreads];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * cols;
  float* grad = backprop + r * cols;
  const int64_t label = labels64 ? static_cast<const int64_t*>(labels)[r]
                                 : static_cast<const int32_t*>(labels)[r];
  const bool valid = label >= 0 && label < cols;
  float m, sum;
  RowMaxAndSum(row, cols, shared, &m, &sum);
  const float log_sum = logf(sum);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    grad[c] = valid ? expf(row[c] - m) / sum - (c == label ? 1.f : 0.f) : NAN;
  }
  if (threadIdx.x == 0) loss[r] = valid ? log_sum - (row[label] - m) : NAN;
}

__global__ void FillKernel(float* y, float value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = value;
  }
}

__global__ void ApplyGradientDescentKernel(float* var, const float* alpha, const float* delta,
                                           int64_t n) {
  const float a = alpha[0];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    var[i] -= a * delta[i];
  }
}

__global__ void ApplyMomentumKernel(float* var, float* accum, const float* lr, const float* grad,
                                    const float* momentum, bool nesterov, int64_t n) {
  const float l = lr[0], m = momentum[0];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    const float a = accum[i] * m + grad[i];
    accum[i] = a;
    var[i] -= nesterov ? grad[i] * l + a * m * l : l * a;
  }
}

__global__ void ApplyAdamKernel(float* var, float* m, float* v, const float* beta1_power,
                                const float* beta2_power, const float* lr, const float* beta1,
                                const float* beta2, const float* epsilon, const float* grad,
                                bool nesterov, int64_t n) {
  const float b1 = beta1[0], one_minus_b1 = 1.f - beta1[0], one_minus_b2 = 1.f - beta2[0];
  const float lr_t = lr[0] * sqrtf(1.f - beta2_power[0]) / (1.f - beta1_power[0]);
  const float eps = epsilon[0];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    const float g = grad[i];
    const float mi = m[i] + (g - m[i]) * one_minus_b1;
    const float vi = v[i] + (g * g - v[i]) * one_minus_b2;
    m[i] = mi;
    v[i] = vi;
    const float step = nesterov ? mi * b1 + one_minus_b1 * g : mi;
    var[i] -= step * lr_t / (sqrtf(vi) + eps);
  }
}

// y [n, h2, w2, c] = x [n, h, w, c] placed at (top, left), `value` around.
__global__ void PadNhwcKernel(const float* x, float* y, int64_t total, int64_t h, int64_t w,
                              int64_t c, int64_t top, int64_t left, int64_t h2, int64_t w2,
                              float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t ch = i % c;
    const int64_t col = (i / c) % w2;
    const int64_t row = (i / (c * w2)) % h2;
    const int64_t b = i / (c * w2 * h2);
    const int64_t r = row - top, q = col - left;
    y[i] = (r >= 0 && r < h && q >= 0 && q < w) ? x[((b * h + r) * w + q) * c + ch] : value;
  }
}

// y [n, h, w, c] = the window of x [n, h2, w2, c] at (top, left).
__global__ void CropNhwcKernel(const float* x, float* y, int64_t total, int64_t h, int64_t w,
                               int64_t c, int64_t top, int64_t left, int64_t h2, int64_t w2) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t ch = i % c;
    const int64_t q = (i / c) % w;
    const int64_t r = (i / (c * w)) % h;
    const int64_t b = i / (c * w * h);
    y[i] = x[((b * h2 + r + top) * w2 + q + left) * c + ch];
  }
}

// y = x with its 4 dims permuted: y dim d is x dim perm[d].
__global__ void Transpose4Kernel(const float* x, float* y, int64_t total, Dims4 xd, Dims4 perm) {
  int64_t xs[4];
  xs[3] = 1;
  for (int d = 2; d >= 0; --d) xs[d] = xs[d + 1] * xd.v[d + 1];
  int64_t yd[4];
  for (int d = 0; d < 4; ++d) yd[d] = xd.v[perm.v[d]];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{blockDim.x} * gridDim.x) {
    int64_t rest = i, src = 0;
    for (int d = 3; d >= 0; --d) {
      const int64_t idx = rest % yd[d];
      rest /= yd[d];
      src += idx * xs[perm.v[d]];
    }
    y[i] = x[src];
  }
}

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchBinary(BinaryOp op, const float* a, const float* b, float* out, int64_t n,
                         const BroadcastShape& shape, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  BinaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, a, b, out, n, shape);
  return cudaGetLastError();
}

cudaError_t LaunchBiasAdd(const float* x, const float* bias, float* y, int64_t rows, int64_t cols,
                          cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  BiasAddKernel<<<Blocks(n), kThreads, 0, stream>>>(x, bias, y, n, cols);
  return cudaGetLastError();
}

cudaError_t LaunchReduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t reduce,
                         int64_t inner, cudaStream_t stream) {
  const int64_t n = outer * inner;
  if (n == 0) return cudaSuccess;
  ReduceKernel<<<Blocks(n), kThreads, 0, stream>>>(op, x, y, outer, reduce, inner);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, bool log,
                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  SoftmaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols, log);
  return cudaGetLastError();
}

cudaError_t LaunchSparseXent(const float* logits, const void* labels, bool labels64, float* loss,
                             float* backprop, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  SparseXentKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, labels, labels64,
                                                                         loss, backprop, cols);
  return cudaGetLastError();
}

cudaError_t LaunchFill(float* y, float value, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillKernel<<<Blocks(n), kThreads, 0, stream>>>(y, value, n);
  return cudaGetLastError();
}

cudaError_t LaunchApplyGradientDescent(float* var, const float* alpha, const float* delta,
                                       int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ApplyGradientDescentKernel<<<Blocks(n), kThreads, 0, stream>>>(var, alpha, delta, n);
  return cudaGetLastError();
}

namespace {

template <typename D, typename S>
__device__ D CastValue(S v) {
  if constexpr (std::is_same<D, bool>::value) {
    return v != S(0);
  } else if constexpr (std::is_floating_point<S>::value && std::is_integral<D>::value) {
    using L = std::numeric_limits<D>;
    if (!(v == v)) return D(0);
    if (v <= static_cast<S>(L::min())) return L::min();
    if (v >= static_cast<S>(L::max())) return L::max();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

template <typename S, typename D>
__global__ void CastKernel(const S* x, D* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = CastValue<D>(x[i]);
  }
}

// f(T{}) for the C++ type of `t`.
template <typename F>
cudaError_t WithCastType(CastType t, F f) {
  switch (t) {
    case CastType::kFloat:
      return f(float{});
    case CastType::kDouble:
      return f(double{});
    case CastType::kInt8:
      return f(int8_t{});
    case CastType::kUint8:
      return f(uint8_t{});
    case CastType::kInt32:
      return f(int32_t{});
    case CastType::kInt64:
      return f(int64_t{});
    case CastType::kBool:
      return f(bool{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchApplyMomentum(float* var, float* accum, const float* lr, const float* grad,
                                const float* momentum, bool nesterov, int64_t n,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ApplyMomentumKernel<<<Blocks(n), kThreads, 0, stream>>>(var, accum, lr, grad, momentum, nesterov,
                                                         n);
  return cudaGetLastError();
}

cudaError_t LaunchApplyAdam(const AdamArgs& a, cudaStream_t stream) {
  if (a.n == 0) return cudaSuccess;
  ApplyAdamKernel<<<Blocks(a.n), kThreads, 0, stream>>>(
      a.var, a.m, a.v, a.beta1_power, a.beta2_power, a.lr, a.beta1, a.beta2, a.epsilon, a.grad,
      a.nesterov, a.n);
  return cudaGetLastError();
}

cudaError_t LaunchCast(CastType from, const void* x, CastType to, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return WithCastType(from, [&](auto s) {
    return WithCastType(to, [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      CastKernel<S, D><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x),
                                                          static_cast<D*>(y), n);
      return cudaGetLastError();
    });
  });
}

cudaError_t LaunchPadNhwc(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t c,
                          int64_t top, int64_t left, int64_t h2, int64_t w2, float value,
                          cudaStream_t stream) {
  const int64_t total = n * h2 * w2 * c;
  if (total == 0) return cudaSuccess;
  PadNhwcKernel<<<Blocks(total), kThreads, 0, stream>>>(x, y, total, h, w, c, top, left, h2, w2,
                                                       value);
  return cudaGetLastError();
}

cudaError_t LaunchCropNhwc(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t c,
                           int64_t top, int64_t left, int64_t h2, int64_t w2,
                           cudaStream_t stream) {
  const int64_t total = n * h * w * c;
  if (total == 0) return cudaSuccess;
  CropNhwcKernel<<<Blocks(total), kThreads, 0, stream>>>(x, y, total, h, w, c, top, left, h2,
                                                        w2);
  return cudaGetLastError();
}

cudaError_t LaunchTranspose4(const float* x, float* y, Dims4 dims, Dims4 perm,
                             cudaStream_t stream) {
  const int64_t total = dims.v[0] * dims.v[1] * dims.v[2] * dims.v[3];
  if (total == 0) return cudaSuccess;
  Transpose4Kernel<<<Blocks(total), kThreads, 0, stream>>>(x, y, total, dims, perm);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace graphrun
