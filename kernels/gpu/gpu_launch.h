// CUDA kernels of the GPU device, behind plain launch functions (raw device
// pointers and a stream), so that nvcc compiles only gpu_kernels.cu and the
// OpKernels (gpu_kernels.cc) stay ordinary C++. Every launch returns the
// launch's cudaError_t; the work runs in stream order.
#ifndef GRAPHRUN_KERNELS_GPU_GPU_LAUNCH_H_
#define GRAPHRUN_KERNELS_GPU_GPU_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace graphrun {
namespace gpu {

enum class UnaryOp { kNeg, kRelu, kSquare, kSqrt, kExp, kLog, kTanh, kSigmoid, kIdentity };
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kReluGrad, kSquaredDifference };
enum class ReduceOp { kSum, kMean, kMax };

constexpr int kMaxBroadcastRank = 6;

// y[i] = op(x[i]).
cudaError_t LaunchUnary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream);

// out = op(a, b) with NumPy broadcasting: `rank` output dims, and per input
// the element stride of each output dim (0 where it broadcasts).
struct BroadcastShape {
  int rank = 0;
  int64_t out_dims[kMaxBroadcastRank] = {};
  int64_t a_strides[kMaxBroadcastRank] = {};
  int64_t b_strides[kMaxBroadcastRank] = {};
};
cudaError_t LaunchBinary(BinaryOp op, const float* a, const float* b, float* out, int64_t n,
                         const BroadcastShape& shape, cudaStream_t stream);

// y[r, c] = x[r, c] + bias[c].
cudaError_t LaunchBiasAdd(const float* x, const float* bias, float* y, int64_t rows, int64_t cols,
                          cudaStream_t stream);

// x viewed as [outer, reduce, inner]: y[o, i] = op over r of x[o, r, i].
cudaError_t LaunchReduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t reduce,
                         int64_t inner, cudaStream_t stream);

// Row-wise softmax (or log-softmax) of [rows, cols].
cudaError_t LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, bool log,
                          cudaStream_t stream);

// SparseSoftmaxCrossEntropyWithLogits: loss[r] and backprop[r, c] from
// logits [rows, cols] and labels (int32 when !labels64). A label outside
// [0, cols) gives NaN loss and backprop for its row (TensorFlow's GPU
// behaviour).
cudaError_t LaunchSparseXent(const float* logits, const void* labels, bool labels64, float* loss,
                             float* backprop, int64_t rows, int64_t cols, cudaStream_t stream);

// y[i] = value.
cudaError_t LaunchFill(float* y, float value, int64_t n, cudaStream_t stream);

// var -= alpha[0] * delta (alpha in device memory).
cudaError_t LaunchApplyGradientDescent(float* var, const float* alpha, const float* delta,
                                       int64_t n, cudaStream_t stream);

// accum = accum * momentum + grad; var -= lr * accum (Nesterov: var -=
// grad * lr + accum * momentum * lr). Scalars in device memory.
cudaError_t LaunchApplyMomentum(float* var, float* accum, const float* lr, const float* grad,
                                const float* momentum, bool nesterov, int64_t n,
                                cudaStream_t stream);

// Adam as the CPU kernel computes it: lr_t = lr sqrt(1 - beta2_power) /
// (1 - beta1_power); m += (grad - m)(1 - beta1); v += (grad^2 - v)(1 -
// beta2); var -= lr_t m / (sqrt(v) + epsilon) (Nesterov: m beta1 + (1 -
// beta1) grad for m). Scalars in device memory.
struct AdamArgs {
  float* var = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const float* beta1_power = nullptr;
  const float* beta2_power = nullptr;
  const float* lr = nullptr;
  const float* beta1 = nullptr;
  const float* beta2 = nullptr;
  const float* epsilon = nullptr;
  const float* grad = nullptr;
  bool nesterov = false;
  int64_t n = 0;
};
cudaError_t LaunchApplyAdam(const AdamArgs& args, cudaStream_t stream);

// The element types Cast converts between on the GPU.
enum class CastType { kFloat, kDouble, kInt8, kUint8, kInt32, kInt64, kBool };

// y[i] = x[i] as the CPU's Cast converts it: float to integer saturates
// (NaN gives 0), anything to bool is x != 0, bool is 0 or 1.
cudaError_t LaunchCast(CastType from, const void* x, CastType to, void* y, int64_t n,
                       cudaStream_t stream);

// y [n, h2, w2, c] = x [n, h, w, c] at rows top.., columns left.., and
// `value` elsewhere (explicit padding for cuDNN, which pads symmetrically).
cudaError_t LaunchPadNhwc(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t c,
                          int64_t top, int64_t left, int64_t h2, int64_t w2, float value,
                          cudaStream_t stream);

// y [n, h, w, c] = rows top.., columns left.. of x [n, h2, w2, c].
cudaError_t LaunchCropNhwc(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t c,
                           int64_t top, int64_t left, int64_t h2, int64_t w2, cudaStream_t stream);

// Four dims or a permutation of them.
struct Dims4 {
  int64_t v[4] = {};
};
// y = x (dims `dims`) transposed: y's dim d is x's dim perm[d].
cudaError_t LaunchTranspose4(const float* x, float* y, Dims4 dims, Dims4 perm, cudaStream_t stream);

// Batch normalisation of x [rows, c] (NHWC), as the CPU's FusedBatchNorm:
// in training, the batch's mean and biased variance normalise x, and the
// outputs are the running-averaged mean and Bessel-corrected variance
// (`factor` 1: the batch's own) and, saved for the gradient, the batch mean
// and biased variance; in inference, in_mean and in_var normalise x and are
// copied to all four. y = (x - mean) / sqrt(var + epsilon) * scale + offset.
// `scratch`: BatchNormScratchFloats(rows, c) floats of device memory.
struct BatchNormArgs {
  const float* x = nullptr;
  const float* scale = nullptr;
  const float* offset = nullptr;
  const float* in_mean = nullptr;  // may be null in training with factor 1
  const float* in_var = nullptr;
  float* y = nullptr;
  float* batch_mean = nullptr;
  float* batch_var = nullptr;
  float* saved_mean = nullptr;
  float* saved_var = nullptr;
  float* scratch = nullptr;
  int64_t rows = 0, c = 0;
  float epsilon = 1e-4f, factor = 1.f;
  bool training = true;
};
int64_t BatchNormScratchFloats(int64_t rows, int64_t c);
cudaError_t LaunchBatchNorm(const BatchNormArgs& args, cudaStream_t stream);

// The gradient, from dy and x [rows, c] and the mean and variance saved by
// the forward pass: dx, dscale, doffset (the CPU's FusedBatchNormGrad).
struct BatchNormGradArgs {
  const float* dy = nullptr;
  const float* x = nullptr;
  const float* scale = nullptr;
  const float* mean = nullptr;
  const float* var = nullptr;
  float* dx = nullptr;
  float* dscale = nullptr;
  float* doffset = nullptr;
  float* scratch = nullptr;  // BatchNormScratchFloats(rows, c) floats
  int64_t rows = 0, c = 0;
  float epsilon = 1e-4f;
  bool training = true;
};
cudaError_t LaunchBatchNormGrad(const BatchNormGradArgs& args, cudaStream_t stream);

}  // namespace gpu
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_GPU_GPU_LAUNCH_H_
