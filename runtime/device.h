// Devices of one process and the manager that owns them. A CPU device is a
// name, a resource manager (where variables live across steps) and an
// intra-op thread pool. Other types (accelerators, with memory and streams
// of their own) come from their DeviceFactory (runtime/device_factory.h).
//
// Thread-safety: devices are immutable after creation apart from their
// (thread-safe) resource managers; DeviceMgr is read-only after construction.
#ifndef GRAPHRUN_RUNTIME_DEVICE_H_
#define GRAPHRUN_RUNTIME_DEVICE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/framework/device_base.h"
#include "kernels/framework/file_access.h"
#include "runtime/session.h"

namespace graphrun {

class DeviceFactoryRegistry;

class Device : public DeviceBase {
 public:
  Device(DeviceAttributes attrs, std::shared_ptr<ThreadPool> intra_op_pool,
         std::shared_ptr<ResourceMgr> resource_mgr);
  const std::string& name() const override { return attrs_.name; }
  const std::string& device_type() const override { return attrs_.device_type; }
  ResourceMgr* resource_manager() override { return resource_mgr_.get(); }
  ThreadPool* intra_op_pool() override { return intra_op_pool_.get(); }
  uint64_t incarnation() const override { return attrs_.incarnation; }
  int intra_op_parallelism() const override { return intra_op_parallelism_; }
  void set_intra_op_parallelism(int n) { intra_op_parallelism_ = n; }
  const FileAccessPolicy* file_access() const override { return file_access_.get(); }
  void set_file_access(std::shared_ptr<const FileAccessPolicy> p) { file_access_ = std::move(p); }
  const DeviceAttributes& attributes() const { return attrs_; }

 private:
  int intra_op_parallelism_ = 0;
  DeviceAttributes attrs_;
  std::shared_ptr<ThreadPool> intra_op_pool_;
  std::shared_ptr<ResourceMgr> resource_mgr_;
  std::shared_ptr<const FileAccessPolicy> file_access_;  // null: any file
};

// A random 64-bit number, different in every process start.
uint64_t NewIncarnation();

struct DeviceMgrOptions {
  std::string job = "localhost";
  int replica = 0;
  int task = 0;
  int num_cpus = 1;
  // Devices of the other registered types ("TEST_ACCEL": 2); a type not
  // named gets its factory's default count (every device available).
  std::map<std::string, int> device_count;
  // Null: DefaultDeviceFactoryRegistry().
  const DeviceFactoryRegistry* device_factories = nullptr;
  // Accelerators' memory (ConfigProto.gpu_options): > 0, the fraction of
  // each device's memory held from the first allocation (or grown up to
  // with allow_growth); 0, grown as needed up to what was free at start.
  double accelerator_memory_fraction = 0;
  bool accelerator_allow_growth = false;
  int intra_op_threads = 0;  // 0 = number of cores
  // Files the devices' kernels may touch (kernels/framework/file_access.h); null:
  // any.
  std::shared_ptr<const FileAccessPolicy> file_access;
};

class DeviceMgr {
 public:
  // Creates `num_cpus` CPU devices "/job:J/replica:R/task:T/device:CPU:i",
  // sharing one intra-op pool, then the devices of every other registered
  // type (device_count). InvalidArgument for num_cpus < 1, a count for an
  // unregistered type, or more devices than the type has available.
  static absl::StatusOr<std::unique_ptr<DeviceMgr>> NewLocal(const DeviceMgrOptions& options);
  explicit DeviceMgr(std::vector<std::unique_ptr<Device>> devices);

  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  // Exact full-name lookup; NotFound naming the device.
  absl::StatusOr<Device*> Lookup(const std::string& name) const;
  std::vector<DeviceAttributes> ListDeviceAttributes() const;

 private:
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_DEVICE_H_
