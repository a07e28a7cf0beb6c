// Batch normalisation on the GPU (gpu_launch.h's LaunchBatchNorm and
// LaunchBatchNormGrad), over an NHWC tensor seen as [rows, c], as the CPU
// kernel (kernels/nn/batch_norm_kernels.cc) computes it:
//  - per-channel sums in two stages, deterministic: blocks of 32 channels x
//    8 row lanes (consecutive threads read consecutive channels) sum a
//    stride of rows each into partial sums per block row, which one thread
//    per channel then adds in a fixed order;
//  - one thread per channel for the per-channel coefficients;
//  - a grid-stride loop for the element-wise pass.
#include <cmath>
#include <cstdint>

#include "kernels/gpu/gpu_launch.h"

namespace graphrun {
namespace gpu {
namespace {

constexpr int kChannels = 32;  // channels per block
constexpr int kLanes = 8;      // row lanes per block
constexpr int kThreads = 256;
constexpr int64_t kMaxChunks = 256;

enum class SumKind { kX, kSquaredDiff, kGrad };

// The number of block rows (chunks of rows) the sums use.
int64_t Chunks(int64_t rows) {
  int64_t g = (rows + kLanes * 64 - 1) / (kLanes * 64);
  if (g > kMaxChunks) g = kMaxChunks;
  return g < 1 ? 1 : g;
}

int Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b > 65535 * 8) b = 65535 * 8;
  return b < 1 ? 1 : static_cast<int>(b);
}

// partial[g * 2c + k] (and partial[g * 2c + c + k] for kGrad): the sum over
// the rows of block row g of x (kX), (x - mean)^2 (kSquaredDiff), or dy and
// dy (x - mean) (kGrad), for channel k.
__global__ void PartialSumsKernel(SumKind kind, const float* x, const float* dy, const float* mean,
                                  float* partial, int64_t rows, int64_t c) {
  __shared__ float s0[kLanes][kChannels];
  __shared__ float s1[kLanes][kChannels];
  const int64_t k = blockIdx.x * int64_t{kChannels} + threadIdx.x;
  const int64_t g = blockIdx.y, chunks = gridDim.y;
  float a0 = 0.f, a1 = 0.f;
  if (k < c) {
    const float m = kind == SumKind::kX ? 0.f : mean[k];
    for (int64_t r = g * kLanes + threadIdx.y; r < rows; r += chunks * kLanes) {
      const float v = x[r * c + k];
      if (kind == SumKind::kX) {
        a0 += v;
      } else if (kind == SumKind::kSquaredDiff) {
        a0 += (v - m) * (v - m);
      } else {
        const float d = dy[r * c + k];
        a0 += d;
        a1 += d * (v - m);
      }
    }
  }
  s0[threadIdx.y][threadIdx.x] = a0;
  s1[threadIdx.y][threadIdx.x] = a1;
  __syncthreads();
  if (threadIdx.y == 0 && k < c) {
    float t0 = 0.f, t1 = 0.f;
    for (int l = 0; l < kLanes; ++l) {
      t0 += s0[l][threadIdx.x];
      t1 += s1[l][threadIdx.x];
    }
    partial[g * 2 * c + k] = t0;
    partial[g * 2 * c + c + k] = t1;
  }
}

// total[k] = scale * sum over g of partial[g * 2c + k], for k < width
// (width c, or 2c for both sums of kGrad).
__global__ void FinishSumsKernel(const float* partial, float* total, int64_t chunks, int64_t c,
                                 int64_t width, float scale) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < width;
       k += int64_t{blockDim.x} * gridDim.x) {
    float t = 0.f;
    for (int64_t g = 0; g < chunks; ++g) t += partial[g * 2 * c + k];
    total[k] = t * scale;
  }
}

// The forward pass's per-channel outputs and coefficients a (scale) and b
// (shift): y = x a + b.
__global__ void ForwardCoefficientsKernel(BatchNormArgs p, const float* mean, const float* var,
                                          float* a, float* b) {
  const float bessel = static_cast<float>(p.rows) /
                       static_cast<float>(p.rows - 1 > 1 ? p.rows - 1 : 1);
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < p.c;
       k += int64_t{blockDim.x} * gridDim.x) {
    const float m = p.training ? mean[k] : p.in_mean[k];
    const float v = p.training ? var[k] : p.in_var[k];
    p.saved_mean[k] = m;
    p.saved_var[k] = v;
    if (!p.training) {
      p.batch_mean[k] = m;
      p.batch_var[k] = v;
    } else if (p.factor == 1.f) {
      p.batch_mean[k] = m;
      p.batch_var[k] = v * bessel;
    } else {
      p.batch_mean[k] = (1 - p.factor) * p.in_mean[k] + p.factor * m;
      p.batch_var[k] = (1 - p.factor) * p.in_var[k] + p.factor * bessel * v;
    }
    a[k] = p.scale[k] / sqrtf(v + p.epsilon);
    b[k] = p.offset[k] - m * a[k];
  }
}

__global__ void AffineKernel(const float* x, const float* a, const float* b, float* y, int64_t n,
                             int64_t c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t k = i % c;
    y[i] = x[i] * a[k] + b[k];
  }
}

// The gradient's per-channel outputs and coefficients: dx = dy a + x b + d.
__global__ void GradCoefficientsKernel(BatchNormGradArgs p, const float* sums, float* a, float* b,
                                       float* d) {
  const float inv_rows = p.rows > 0 ? 1.f / static_cast<float>(p.rows) : 0.f;
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < p.c;
       k += int64_t{blockDim.x} * gridDim.x) {
    const float sum_dy = sums[k], sum_dyx = sums[p.c + k];
    const float inv = 1.f / sqrtf(p.var[k] + p.epsilon);
    p.dscale[k] = sum_dyx * inv;
    p.doffset[k] = sum_dy;
    a[k] = p.scale[k] * inv;
    if (p.training) {
      b[k] = -a[k] * inv * inv * sum_dyx * inv_rows;
      d[k] = -a[k] * sum_dy * inv_rows - b[k] * p.mean[k];
    } else {
      b[k] = 0.f;
      d[k] = 0.f;
    }
  }
}

__global__ void GradKernel(const float* dy, const float* x, const float* a, const float* b,
                           const float* d, float* dx, int64_t n, int64_t c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t k = i % c;
    dx[i] = dy[i] * a[k] + x[i] * b[k] + d[k];
  }
}

// Sums of `kind` per channel into total[0, width), through `partial`.
cudaError_t ChannelSums(SumKind kind, const float* x, const float* dy, const float* mean,
                        float* partial, float* total, int64_t rows, int64_t c, float scale,
                        cudaStream_t stream) {
  const int64_t chunks = Chunks(rows);
  const dim3 grid(static_cast<unsigned>((c + kChannels - 1) / kChannels),
                  static_cast<unsigned>(chunks));
  PartialSumsKernel<<<grid, dim3(kChannels, kLanes), 0, stream>>>(kind, x, dy, mean, partial,
                                                                  rows, c);
  const int64_t width = kind == SumKind::kGrad ? 2 * c : c;
  FinishSumsKernel<<<Blocks(width), kThreads, 0, stream>>>(partial, total, chunks, c, width,
                                                           scale);
  return cudaGetLastError();
}

}  // namespace

int64_t BatchNormScratchFloats(int64_t rows, int64_t c) { return (Chunks(rows) + 3) * 2 * c; }

cudaError_t LaunchBatchNorm(const BatchNormArgs& p, cudaStream_t stream) {
  if (p.c == 0) return cudaSuccess;
  float* partial = p.scratch;
  float* mean = partial + Chunks(p.rows) * 2 * p.c;
  float* var = mean + p.c;
  float* a = var + p.c;
  float* b = a + p.c;
  if (p.training) {
    // No rows: the mean and variance are NaN, as on the CPU.
    const float inv_rows = p.rows > 0 ? 1.f / static_cast<float>(p.rows) : NAN;
    cudaError_t e =
        ChannelSums(SumKind::kX, p.x, nullptr, nullptr, partial, mean, p.rows, p.c, inv_rows,
                    stream);
    if (e != cudaSuccess) return e;
    e = ChannelSums(SumKind::kSquaredDiff, p.x, nullptr, mean, partial, var, p.rows, p.c,
                    inv_rows, stream);
    if (e != cudaSuccess) return e;
  }
  ForwardCoefficientsKernel<<<Blocks(p.c), kThreads, 0, stream>>>(p, mean, var, a, b);
  const int64_t n = p.rows * p.c;
  if (n > 0) AffineKernel<<<Blocks(n), kThreads, 0, stream>>>(p.x, a, b, p.y, n, p.c);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormGrad(const BatchNormGradArgs& p, cudaStream_t stream) {
  if (p.c == 0) return cudaSuccess;
  float* partial = p.scratch;
  float* sums = partial + Chunks(p.rows) * 2 * p.c;  // 2c: sum dy, sum dy (x - mean)
  float* a = sums + 2 * p.c;
  float* b = a + p.c;
  float* d = b + p.c;
  cudaError_t e =
      ChannelSums(SumKind::kGrad, p.x, p.dy, p.mean, partial, sums, p.rows, p.c, 1.f, stream);
  if (e != cudaSuccess) return e;
  GradCoefficientsKernel<<<Blocks(p.c), kThreads, 0, stream>>>(p, sums, a, b, d);
  const int64_t n = p.rows * p.c;
  if (n > 0) GradKernel<<<Blocks(n), kThreads, 0, stream>>>(p.dy, p.x, a, b, d, p.dx, n, p.c);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace graphrun
