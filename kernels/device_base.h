// What a kernel may know of the device it runs on. runtime/ implements it
// (runtime/device.h); kernels never see the runtime.
#ifndef GRAPHRUN_KERNELS_DEVICE_BASE_H_
#define GRAPHRUN_KERNELS_DEVICE_BASE_H_

#include <cstdint>
#include <string>

#include "kernels/resource_mgr.h"
#include "kernels/thread_pool.h"

namespace graphrun {

class FileAccessPolicy;

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
  // Files this device's kernels may touch (kernels/file_access.h); null:
  // any (an in-process session's).
  virtual const FileAccessPolicy* file_access() const { return nullptr; }
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_DEVICE_BASE_H_
