// The TEST_ACCEL device (kernels/core/test_accel_kernels.h says why it exists):
// an accelerator in ordinary memory with its own allocator (a memory limit,
// bytes in use and peak), a compute stream, host-to-device and
// device-to-host streams (one thread each, running work in order), and
// copy functions that encode and decode its memory. Tests register its
// factory in a private DeviceFactoryRegistry; the environment variable
// GRAPHRUN_TEST_ACCEL_DEVICES=N adds it to the default registry, so the
// command-line tools can be tested with it too.
#ifndef GRAPHRUN_RUNTIME_TEST_ACCEL_DEVICE_H_
#define GRAPHRUN_RUNTIME_TEST_ACCEL_DEVICE_H_

#include <cstdint>
#include <memory>

#include "runtime/device_factory.h"

namespace graphrun {

struct TestAccelOptions {
  int available = 2;                        // devices the "machine" has
  int64_t memory_limit = int64_t{1} << 30;  // bytes per device
  // The devices' Accelerator::collective_backend (not owned; outlives
  // them): null, and collectives go through host memory, as without NCCL.
  DeviceCollectiveBackend* collective_backend = nullptr;
};

// What a TEST_ACCEL device's allocator has seen.
struct TestAccelMemoryStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t allocations = 0;
  int64_t host_to_device_copies = 0;
  int64_t device_to_host_copies = 0;
  int64_t kernels_run = 0;  // work items run on the compute stream
};

std::unique_ptr<DeviceFactory> NewTestAccelDeviceFactory(const TestAccelOptions& options = {});

// The statistics of `device`; NotFound if it is no TEST_ACCEL device.
absl::StatusOr<TestAccelMemoryStats> GetTestAccelStats(Device* device);

// GRAPHRUN_TEST_ACCEL_DEVICES as a device count: 0 when unset or empty;
// InvalidArgument naming the variable for anything but 0..16.
absl::StatusOr<int> TestAccelDevicesFromEnv();

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_TEST_ACCEL_DEVICE_H_
