// What a kernel may know of the device it runs on. runtime/ implements it
// (runtime/device.h); kernels never see the runtime.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_DEVICE_BASE_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_DEVICE_BASE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/tensor.h"
#include "kernels/framework/resource_mgr.h"
#include "kernels/framework/thread_pool.h"

namespace graphrun {

class DeviceCollectiveBackend;  // kernels/framework/collective.h
class FileAccessPolicy;

// Whether tensors of `dtype` can live in an accelerator's memory: numbers
// and bools; strings, resources and variants stay in host memory.
inline bool FixedSizeDeviceType(DataType dtype) {
  dtype = BaseType(dtype);
  return dtype != DT_STRING && dtype != DT_RESOURCE && dtype != DT_VARIANT &&
         DataTypeSize(dtype) > 0;
}

// What kernels may ask of an accelerator: a device with memory of its own
// (graph/tensor.h DeviceMemorySpace) and streams that run its work in
// order. The device's own kernels compute on its compute stream; _Send and
// _Recv move tensors through the copy streams. Every callback runs once,
// on a stream's thread, after the work completed.
class Accelerator {
 public:
  using StatusCallback = std::function<void(const absl::Status&)>;
  virtual ~Accelerator() = default;
  virtual const DeviceMemorySpace* memory_space() const = 0;
  // Whether a tensor of `dtype` can live in device memory (numbers and
  // bools; strings, resources and variants stay in host memory).
  virtual bool CanHold(DataType dtype) const = 0;
  // An uninitialised tensor in device memory. ResourceExhausted naming the
  // device, the request (after `context`) and the bytes in use when it is
  // over the device's memory limit; InvalidArgument when !CanHold(dtype).
  virtual absl::StatusOr<Tensor> AllocateDevice(DataType dtype, const TensorShape& shape,
                                                absl::string_view context) = 0;
  // A host-memory tensor to copy this device's tensors into (and back
  // from): page-locked memory where the device has it (a GPU's DMA then
  // needs no staging), ordinary memory otherwise. Counted in the process's
  // memory budget like Tensor::Allocate, and refused the same way.
  virtual absl::StatusOr<Tensor> AllocateHostForCopy(DataType dtype, const TensorShape& shape,
                                                     absl::string_view context) {
    return Tensor::Allocate(dtype, shape, context);
  }
  // Copies `host` into `device` (allocated here, same dtype and size) on
  // the host-to-device stream.
  virtual void CopyHostToDevice(const Tensor& host, const Tensor& device, StatusCallback done) = 0;
  // Copies `device` (in this device's memory) into `host` (same dtype and
  // size) on the device-to-host stream.
  virtual void CopyDeviceToHost(const Tensor& device, const Tensor& host, StatusCallback done) = 0;
  // Runs `fn` on the compute stream after the work enqueued before it.
  virtual void EnqueueCompute(std::function<void()> fn) = 0;
  // The transport that runs collectives among this kind of device in
  // device memory (NCCL for GPUs; kernels/framework/collective.h); null
  // when there is none, and the collectives go through host memory.
  virtual DeviceCollectiveBackend* collective_backend() { return nullptr; }
};

constexpr char kDeviceCpu[] = "CPU";
constexpr char kDeviceGpu[] = "GPU";

class DeviceBase {
 public:
  virtual ~DeviceBase() = default;
  // Full name: "/job:localhost/replica:0/task:0/device:CPU:0".
  virtual const std::string& name() const = 0;
  // "CPU", "GPU", …
  virtual const std::string& device_type() const = 0;
  // Where this device's variables and other resources live.
  virtual ResourceMgr* resource_manager() = 0;
  // Intra-op pool for sharding one kernel's work; never null.
  virtual ThreadPool* intra_op_pool() = 0;
  // Threads one kernel may use (the pool's workers plus the caller, as
  // configured); 0 when unknown. Libraries with their own thread teams
  // (oneDNN's OpenMP) are held to it.
  virtual int intra_op_parallelism() const { return 0; }
  // Random per process start; part of every rendezvous key this device
  // sends under, so a restarted task is detected.
  virtual uint64_t incarnation() const = 0;
  // Files this device's kernels may touch (kernels/framework/file_access.h); null:
  // any (an in-process session's).
  virtual const FileAccessPolicy* file_access() const { return nullptr; }
  // Accelerators' memory, streams and copies; null for the CPU, whose
  // kernels see host memory only.
  virtual Accelerator* accelerator() { return nullptr; }
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_DEVICE_BASE_H_
