// The process's tensor memory budget. Every tensor buffer is counted
// while it lives; a checked allocation (Tensor::Allocate, which kernels'
// outputs, decoded TensorProtos and fed tensors go through) fails with
// ResourceExhausted, never std::bad_alloc or an abort, when
//   * one buffer would exceed the per-allocation cap, or
//   * the buffers alive would exceed the process's limit.
// The defaults: a limit of 80% of physical memory and a per-allocation
// cap of half the limit. Commands set them with --memory_limit and
// --max_allocation_bytes (SetMemoryLimits).
#ifndef GRAPHRUN_GRAPH_MEMORY_BUDGET_H_
#define GRAPHRUN_GRAPH_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace graphrun {

struct MemoryLimits {
  int64_t limit_bytes = 0;           // all tensor buffers alive
  int64_t max_allocation_bytes = 0;  // one buffer
};

// Physical memory of this machine (bytes).
int64_t PhysicalMemoryBytes();
// 80% of physical memory, and half of that for one allocation.
MemoryLimits DefaultMemoryLimits();
// Process-wide. A value <= 0 keeps that limit's default (for the cap: half
// the limit given). Thread-safe.
void SetMemoryLimits(int64_t limit_bytes, int64_t max_allocation_bytes);
MemoryLimits GetMemoryLimits();

// Bytes of tensor buffers alive now, and the most there were.
int64_t TensorBytesInUse();
int64_t PeakTensorBytes();
// Tensor buffers alive now.
int64_t TensorsInUse();

// "2147483648", "512M", "8G", "1.5GiB", "64k" (powers of 1024), or
// "50%" (of physical memory). InvalidArgument naming `flag` otherwise.
absl::StatusOr<int64_t> ParseMemorySize(absl::string_view text, absl::string_view flag);
// "1.5 GiB"-style.
std::string HumanBytes(int64_t bytes);

namespace memory_internal {
// Counts `bytes` in; ResourceExhausted (naming what for) when `checked`
// and a limit would be passed, in which case nothing is counted.
absl::Status Reserve(int64_t bytes, bool checked, absl::string_view what);
void Release(int64_t bytes);
// The same for memory a tensor holds beyond its buffer (string contents):
// bytes only, not a tensor. Always checked; the per-allocation cap holds
// for `tensor_bytes`, all the tensor would hold with them.
absl::Status ReserveMore(int64_t bytes, int64_t tensor_bytes, absl::string_view what);
void ReleaseMore(int64_t bytes);
}  // namespace memory_internal

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_MEMORY_BUDGET_H_
