// Device types as objects: each type (CPU, GPU, a plugin's) registers a
// DeviceFactory in a DeviceFactoryRegistry, which DeviceMgr::NewLocal asks
// for a process's devices. Registration is explicit, as for kernels and PS
// strategies: RegisterDefaultDeviceFactories fills the default registry;
// tests build private registries (runtime/test_accel_device.h adds the
// test-only TEST_ACCEL type).
//
// Thread-safety: registration completes before devices are created;
// lookups are then read-only.
#ifndef GRAPHRUN_RUNTIME_DEVICE_FACTORY_H_
#define GRAPHRUN_RUNTIME_DEVICE_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace graphrun {

class DeviceFactory {
 public:
  virtual ~DeviceFactory() = default;
  // "CPU", "GPU", "TEST_ACCEL".
  virtual const std::string& device_type() const = 0;
  // The placer's preference among types that have kernels for a node:
  // higher first (TensorFlow's order: GPU before CPU).
  virtual int priority() const = 0;
  // Devices of this type the process can have: 0 when none is attached.
  // An error says why none can be used (a CUDA build without a driver);
  // the process then runs without this type.
  virtual absl::StatusOr<int> CountAvailable() const = 0;
  // Devices a process gets when its options name no count for this type
  // (CPU: 1; accelerators: every one available).
  virtual int DefaultCount() const = 0;
  // Creates `count` devices "/job:J/replica:R/task:T/device:TYPE:i".
  // REQUIRES: 1 <= count.
  virtual absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateDevices(
      const DeviceMgrOptions& options, int count) const = 0;
};

class DeviceFactoryRegistry {
 public:
  DeviceFactoryRegistry() = default;
  DeviceFactoryRegistry(const DeviceFactoryRegistry&) = delete;
  DeviceFactoryRegistry& operator=(const DeviceFactoryRegistry&) = delete;

  // AlreadyExists for a second factory of one type.
  absl::Status Register(std::unique_ptr<DeviceFactory> factory);
  // Null for an unknown type.
  const DeviceFactory* Find(const std::string& device_type) const;
  // Every factory, CPU first, then in registration order.
  std::vector<const DeviceFactory*> factories() const;
  // The type's placement priority; 0 for an unknown type.
  int Priority(const std::string& device_type) const;

 private:
  std::vector<std::unique_ptr<DeviceFactory>> factories_;
};

// The CPU factory: devices in host memory sharing one intra-op pool.
std::unique_ptr<DeviceFactory> NewCpuDeviceFactory();

// The GPU factory of --config=cuda builds (runtime/gpu_device.cc): one
// device per CUDA GPU; on a machine without a driver or GPU it prints
// "graphrun: no CUDA device: <the driver's error>; running on the CPU"
// once and offers none.
void RegisterGpuDeviceFactory(DeviceFactoryRegistry& registry);

// CPU, and whatever this build adds (GPU in --config=cuda builds).
void RegisterDefaultDeviceFactories(DeviceFactoryRegistry& registry);

// The process's registry, filled by RegisterDefaultDeviceFactories on
// first use.
const DeviceFactoryRegistry& DefaultDeviceFactoryRegistry();

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_DEVICE_FACTORY_H_
