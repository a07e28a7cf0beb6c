// What the GPU kernels need of the GPU device (runtime/gpu_device.cc
// implements it): its CUDA compute stream and its cuBLAS and cuDNN handles. Kernels
// enqueue their work on the compute stream and return; stream order makes
// it visible to the kernels after them, and the device's copies wait for
// the compute stream before they read.
#ifndef GRAPHRUN_KERNELS_GPU_GPU_ACCELERATOR_H_
#define GRAPHRUN_KERNELS_GPU_GPU_ACCELERATOR_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <mutex>

#include "kernels/framework/device_base.h"

namespace graphrun {

class GpuAccelerator : public Accelerator {
 public:
  virtual int ordinal() const = 0;
  virtual cudaStream_t compute_stream() = 0;
  // Bound to the compute stream; hold cublas_mu() while using it.
  virtual cublasHandle_t cublas() = 0;
  virtual std::mutex& cublas_mu() = 0;
  // Bound to the compute stream; hold cudnn_mu() while using it.
  virtual cudnnHandle_t cudnn() = 0;
  virtual std::mutex& cudnn_mu() = 0;
};

// The kernels' GPU; null when `device` is not a GPU.
inline GpuAccelerator* AsGpu(DeviceBase* device) {
  return dynamic_cast<GpuAccelerator*>(device->accelerator());
}

void RegisterGpuKernels(class KernelRegistry& r);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_GPU_GPU_ACCELERATOR_H_
