// TEST_ACCEL: a test-only accelerator in ordinary memory, so that the
// placer's device-type priority, soft placement, the partitioner's
// cross-device copies and the executor's asynchronous kernels run in CI
// without hardware. runtime/test_accel_device.h is the device (allocator,
// streams, copies); this file is what its kernels share with it.
//
// Its memory is ordinary memory holding every byte XOR kTestAccelKey, so
// host code that reads a TEST_ACCEL tensor without the device's copy
// functions sees wrong values, as it would see garbage (or fault) on a
// real accelerator. Its kernels run the op's CPU kernel on the device's
// compute stream: they decode their inputs, compute, and encode their
// outputs, except HostMemory args, which stay on the host.
#ifndef GRAPHRUN_KERNELS_CORE_TEST_ACCEL_KERNELS_H_
#define GRAPHRUN_KERNELS_CORE_TEST_ACCEL_KERNELS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/framework/kernel_registry.h"

namespace graphrun {

constexpr char kDeviceTestAccel[] = "TEST_ACCEL";
constexpr unsigned char kTestAccelKey = 0x5A;

// Host bytes to TEST_ACCEL memory and back (the same transformation).
inline void TestAccelTransform(const char* src, char* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<char>(src[i] ^ kTestAccelKey);
}

// The ops TEST_ACCEL has kernels for, wherever their CPU kernel serves the
// node's types: enough to compute an MLP's forward and backward passes.
const std::vector<std::string>& TestAccelOps();

// TEST_ACCEL's kernels (TestAccelOps, _Send, _Recv) over the CPU kernels of
// `r`; called by RegisterAllKernels (they are used only where a TEST_ACCEL
// device exists).
void RegisterTestAccelKernels(KernelRegistry& r);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_CORE_TEST_ACCEL_KERNELS_H_
