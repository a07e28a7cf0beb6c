// The CUDA GPU device (--config=cuda builds): device memory from a BFC
// allocator over cudaMalloc regions, a compute stream and host-to-device
// and device-to-host streams (each copy waits for the compute stream's
// work enqueued before it), cuBLAS and cuDNN bound to the compute stream,
// and an event poller thread that runs completion callbacks once the GPU
// reached them (never inside a CUDA callback, so they may call CUDA again).
// Collectives among the GPUs of the process run through NCCL
// (kernels/gpu/nccl_backend.h). The host side of device-to-host copies
// (a _Send to the host, a collective staged through it) is page-locked
// memory from one pinned BFC allocator per process, so the copy is a DMA
// the driver need not stage.
//
// The CUDA runtime is linked statically: on a machine without a driver or
// a GPU the factory prints one line and the process runs on the CPU.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/memory_budget.h"
#include "graph/status.h"
#include "kernels/gpu/gpu_accelerator.h"
#include "kernels/gpu/nccl_backend.h"
#include "runtime/bfc_allocator.h"
#include "runtime/device_factory.h"

namespace graphrun {
namespace {

absl::Status CudaError(cudaError_t e, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

// Runs each callback after its event completed, in a thread of its own.
class EventPoller {
 public:
  explicit EventPoller(int ordinal) : ordinal_(ordinal), thread_([this] { Loop(); }) {}
  ~EventPoller() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Records an event on `stream` and runs `fn` once the stream reached it.
  absl::Status After(cudaStream_t stream, std::function<void(const absl::Status&)> fn) {
    // The event must belong to the stream's device.
    cudaError_t e = cudaSetDevice(ordinal_);
    cudaEvent_t ev;
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev, stream);
    if (e != cudaSuccess) return CudaError(e, "recording a CUDA event");
    {
      std::lock_guard<std::mutex> l(mu_);
      pending_.push_back({ev, std::move(fn)});
    }
    cv_.notify_all();
    return absl::OkStatus();
  }

 private:
  struct Item {
    cudaEvent_t event;
    std::function<void(const absl::Status&)> fn;
  };
  void Loop() {
    cudaSetDevice(ordinal_);
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [this] { return stop_ || !pending_.empty(); });
      if (pending_.empty() && stop_) return;
      std::vector<Item> ready;
      for (auto it = pending_.begin(); it != pending_.end();) {
        cudaError_t e = cudaEventQuery(it->event);
        if (e == cudaErrorNotReady) {
          ++it;
          continue;
        }
        ready.push_back(std::move(*it));
        it = pending_.erase(it);
      }
      l.unlock();
      for (Item& item : ready) {
        cudaError_t e = cudaEventQuery(item.event);
        cudaEventDestroy(item.event);
        item.fn(e == cudaSuccess ? absl::OkStatus() : CudaError(e, "GPU work failed"));
      }
      if (ready.empty()) std::this_thread::sleep_for(std::chrono::microseconds(20));
      l.lock();
    }
  }

  const int ordinal_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> pending_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the rest exists
};

class CudaSubAllocator : public SubAllocator {
 public:
  explicit CudaSubAllocator(int ordinal) : ordinal_(ordinal) {}
  // Both leave the thread's current device as they found it (NCCL's
  // rounds allocate on every member's GPU from one thread).
  void* Alloc(size_t bytes) override {
    int previous = -1;
    cudaGetDevice(&previous);
    cudaSetDevice(ordinal_);
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
    if (previous >= 0) cudaSetDevice(previous);
    return p;
  }
  void Free(void* p, size_t) override {
    int previous = -1;
    cudaGetDevice(&previous);
    cudaSetDevice(ordinal_);
    cudaFree(p);
    if (previous >= 0) cudaSetDevice(previous);
  }

 private:
  int ordinal_;
};

// Page-locked host memory (cudaHostAlloc, portable: every GPU may DMA to
// and from it), for the host side of copies.
class PinnedSubAllocator : public SubAllocator {
 public:
  void* Alloc(size_t bytes) override {
    void* p = nullptr;
    return cudaHostAlloc(&p, bytes, cudaHostAllocPortable) == cudaSuccess ? p : nullptr;
  }
  void Free(void* p, size_t) override { cudaFreeHost(p); }
};

// The process's pinned host memory: regions as needed, up to an eighth of
// physical memory (at most 8 GiB); beyond it copies use ordinary memory.
// Regions are kept once made (page-locking is slow), and only the bytes of
// live tensors count in the memory budget.
BfcAllocator& PinnedHostAllocator() {
  static BfcAllocator* const allocator = [] {
    BfcAllocatorOptions o;
    o.memory_limit = std::min<int64_t>(PhysicalMemoryBytes() / 8, int64_t{8} << 30);
    o.allow_growth = true;
    return new BfcAllocator(std::make_unique<PinnedSubAllocator>(), o);
  }();
  return *allocator;
}

class GpuMemory : public DeviceMemorySpace {
 public:
  GpuMemory(std::string name, std::unique_ptr<BfcAllocator> allocator)
      : name_(std::move(name)), allocator_(std::move(allocator)) {}
  const std::string& device_name() const override { return name_; }
  BfcAllocator& allocator() { return *allocator_; }

 private:
  std::string name_;
  std::unique_ptr<BfcAllocator> allocator_;
};

class GpuDevice : public Device, public GpuAccelerator {
 public:
  static absl::StatusOr<std::unique_ptr<GpuDevice>> Create(DeviceAttributes attrs, int ordinal,
                                                           std::shared_ptr<ThreadPool> pool,
                                                           std::shared_ptr<ResourceMgr> rm,
                                                           const DeviceMgrOptions& o) {
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess) return CudaError(e, absl::StrCat("selecting GPU ", ordinal));
    size_t free_bytes = 0, total_bytes = 0;
    e = cudaMemGetInfo(&free_bytes, &total_bytes);
    if (e != cudaSuccess) return CudaError(e, absl::StrCat("reading GPU ", ordinal, "'s memory"));
    BfcAllocatorOptions ao;
    if (o.accelerator_memory_fraction > 0) {
      ao.memory_limit = static_cast<int64_t>(o.accelerator_memory_fraction * total_bytes);
      ao.allow_growth = o.accelerator_allow_growth;
    } else {
      // Growth up to what was free, less a margin for cuBLAS and cuDNN.
      ao.memory_limit = static_cast<int64_t>(free_bytes) - (int64_t{512} << 20);
      ao.allow_growth = true;
    }
    attrs.memory_limit = ao.memory_limit;
    auto d =
        std::unique_ptr<GpuDevice>(new GpuDevice(attrs, ordinal, std::move(pool), std::move(rm)));
    d->memory_ = std::make_shared<GpuMemory>(
        attrs.name,
        std::make_unique<BfcAllocator>(std::make_unique<CudaSubAllocator>(ordinal), ao));
    for (cudaStream_t* s : {&d->compute_, &d->h2d_, &d->d2h_}) {
      e = cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
      if (e != cudaSuccess) return CudaError(e, "creating a CUDA stream");
    }
    cublasStatus_t cs = cublasCreate(&d->cublas_);
    if (cs != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat("cublasCreate: ", cublasGetStatusString(cs)));
    }
    cublasSetStream(d->cublas_, d->compute_);
    // TF32 only when asked: float32 MatMul gives float32 results.
    const char* tf32 = std::getenv("GRAPHRUN_GPU_ALLOW_TF32");
    cublasSetMathMode(d->cublas_, tf32 != nullptr && std::string(tf32) == "1"
                                      ? CUBLAS_TF32_TENSOR_OP_MATH
                                      : CUBLAS_DEFAULT_MATH);
    cudnnStatus_t ds = cudnnCreate(&d->cudnn_);
    if (ds != CUDNN_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat("cudnnCreate: ", cudnnGetErrorString(ds)));
    }
    cudnnSetStream(d->cudnn_, d->compute_);
    d->poller_ = std::make_unique<EventPoller>(ordinal);
    d->nccl_ = NcclCollectiveBackend();
    return d;
  }

  ~GpuDevice() override {
    cudaSetDevice(ordinal_);
    for (cudaStream_t s : {compute_, h2d_, d2h_}) {
      if (s != nullptr) cudaStreamSynchronize(s);
    }
    poller_.reset();
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
    for (cudaStream_t s : {compute_, h2d_, d2h_}) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
  }

  Accelerator* accelerator() override { return this; }
  DeviceCollectiveBackend* collective_backend() override { return nccl_; }
  const DeviceMemorySpace* memory_space() const override { return memory_.get(); }
  int ordinal() const override { return ordinal_; }
  cudaStream_t compute_stream() override { return compute_; }
  cublasHandle_t cublas() override { return cublas_; }
  std::mutex& cublas_mu() override { return cublas_mu_; }
  cudnnHandle_t cudnn() override { return cudnn_; }
  std::mutex& cudnn_mu() override { return cudnn_mu_; }

  bool CanHold(DataType dtype) const override { return FixedSizeDeviceType(dtype); }

  absl::StatusOr<Tensor> AllocateDevice(DataType dtype, const TensorShape& shape,
                                        absl::string_view context) override {
    if (!CanHold(dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, DataTypeString(dtype), " cannot live in the memory of ", name()));
    }
    const int64_t n = shape.num_elements();
    const int64_t size = DataTypeSize(dtype);
    if (n < 0 || (n > 0 && size > attributes().memory_limit / n)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          context, "out of memory on ", name(), ": ", DataTypeString(dtype), " ",
          shape.DebugString(), " is more than its ", attributes().memory_limit, " bytes"));
    }
    const size_t bytes = static_cast<size_t>(n * size);
    std::shared_ptr<GpuMemory> memory = memory_;
    void* p = memory->allocator().Allocate(bytes);
    if (p == nullptr) {
      BfcAllocatorStats s = memory->allocator().Stats();
      return absl::ResourceExhaustedError(
          absl::StrCat(context, "out of memory on ", name(), ": ", DataTypeString(dtype), " ",
                       shape.DebugString(), " needs ", bytes, " bytes; ", s.bytes_in_use, " of ",
                       attributes().memory_limit, " are in use (largest free chunk ",
                       s.largest_free_chunk, ")"));
    }
    auto buffer = std::make_shared<TensorBuffer>(
        p, bytes, [memory, p] { memory->allocator().Deallocate(p); }, memory.get());
    return Tensor(dtype, shape, buffer, static_cast<char*>(p));
  }

  // Pinned when the pinned allocator has room, ordinary memory otherwise;
  // counted in the process's memory budget either way.
  absl::StatusOr<Tensor> AllocateHostForCopy(DataType dtype, const TensorShape& shape,
                                             absl::string_view context) override {
    const int64_t n = shape.num_elements();
    const int64_t size = DataTypeSize(dtype);
    if (!FixedSizeDeviceType(dtype) || n <= 0 || size > (int64_t{1} << 62) / n) {
      return Tensor::Allocate(dtype, shape, context);
    }
    const int64_t bytes = n * size;
    const std::string what =
        absl::StrCat("a pinned ", DataTypeString(dtype), " tensor of shape ", shape.DebugString());
    absl::Status reserved = memory_internal::Reserve(bytes, true, what);
    if (!reserved.ok()) {
      return absl::Status(reserved.code(), absl::StrCat(context, reserved.message()));
    }
    void* p = PinnedHostAllocator().Allocate(static_cast<size_t>(bytes));
    if (p == nullptr) {
      memory_internal::Release(bytes);
      return Tensor::Allocate(dtype, shape, context);
    }
    auto buffer = std::make_shared<TensorBuffer>(p, static_cast<size_t>(bytes), [p, bytes] {
      PinnedHostAllocator().Deallocate(p);
      memory_internal::Release(bytes);
    });
    return Tensor(dtype, shape, buffer, static_cast<char*>(p));
  }

  void CopyHostToDevice(const Tensor& host, const Tensor& device, StatusCallback done) override {
    if (host.TotalBytes() != device.TotalBytes() || device.memory_space() != memory_.get()) {
      done(absl::InvalidArgumentError(
          absl::StrCat("host-to-device copy on ", name(), ": mismatched tensors")));
      return;
    }
    cudaSetDevice(ordinal_);
    // After the kernels enqueued so far: `device` may reuse memory that a
    // kernel still to run reads (freed once that kernel was enqueued).
    cudaEvent_t enqueued;
    cudaError_t e = cudaEventCreateWithFlags(&enqueued, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(enqueued, compute_);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(h2d_, enqueued, 0);
    cudaEventDestroy(enqueued);
    if (e == cudaSuccess) {
      e = cudaMemcpyAsync(device.raw_data(), host.raw_data(),
                          static_cast<size_t>(host.TotalBytes()), cudaMemcpyHostToDevice, h2d_);
    }
    if (e != cudaSuccess) {
      done(CudaError(e, absl::StrCat("host-to-device copy on ", name())));
      return;
    }
    // The compute stream's later kernels run after the copy.
    absl::Status s =
        poller_->After(h2d_, [host, device, done](const absl::Status& st) { done(st); });
    if (!s.ok()) done(s);
  }

  void CopyDeviceToHost(const Tensor& device, const Tensor& host, StatusCallback done) override {
    if (host.TotalBytes() != device.TotalBytes() || device.memory_space() != memory_.get()) {
      done(absl::InvalidArgumentError(
          absl::StrCat("device-to-host copy on ", name(), ": mismatched tensors")));
      return;
    }
    cudaSetDevice(ordinal_);
    // After the kernels that produced it.
    cudaEvent_t produced;
    cudaError_t e = cudaEventCreateWithFlags(&produced, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(produced, compute_);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(d2h_, produced, 0);
    cudaEventDestroy(produced);
    if (e == cudaSuccess) {
      e = cudaMemcpyAsync(host.raw_data(), device.raw_data(),
                          static_cast<size_t>(host.TotalBytes()), cudaMemcpyDeviceToHost, d2h_);
    }
    if (e != cudaSuccess) {
      done(CudaError(e, absl::StrCat("device-to-host copy on ", name())));
      return;
    }
    absl::Status s =
        poller_->After(d2h_, [host, device, done](const absl::Status& st) { done(st); });
    if (!s.ok()) done(s);
  }

  void EnqueueCompute(std::function<void()> fn) override {
    absl::Status s = poller_->After(compute_, [fn](const absl::Status&) { fn(); });
    if (!s.ok()) fn();
  }

 private:
  GpuDevice(DeviceAttributes attrs, int ordinal, std::shared_ptr<ThreadPool> pool,
            std::shared_ptr<ResourceMgr> rm)
      : Device(std::move(attrs), std::move(pool), std::move(rm)), ordinal_(ordinal) {}

  const int ordinal_;
  std::shared_ptr<GpuMemory> memory_;
  cudaStream_t compute_ = nullptr, h2d_ = nullptr, d2h_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::mutex cublas_mu_;
  cudnnHandle_t cudnn_ = nullptr;
  std::mutex cudnn_mu_;
  std::unique_ptr<EventPoller> poller_;
  DeviceCollectiveBackend* nccl_ = nullptr;  // the process's; null without NCCL
};

class GpuDeviceFactory : public DeviceFactory {
 public:
  const std::string& device_type() const override { return type_; }
  int priority() const override { return 210; }

  absl::StatusOr<int> CountAvailable() const override {
    std::call_once(probe_once_, [this] {
      int n = 0;
      cudaError_t e = cudaGetDeviceCount(&n);
      if (e != cudaSuccess) {
        probe_ = absl::FailedPreconditionError(cudaGetErrorString(e));
        std::fprintf(stderr, "graphrun: no CUDA device: %s; running on the CPU\n",
                     cudaGetErrorString(e));
      } else {
        probe_ = n;
      }
    });
    return probe_;
  }
  int DefaultCount() const override {
    absl::StatusOr<int> n = CountAvailable();
    return n.ok() ? *n : 0;
  }

  absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateDevices(const DeviceMgrOptions& o,
                                                                     int count) const override {
    // GPU kernels use the intra-op pool only for host-side work.
    auto pool = std::make_shared<ThreadPool>("gpu_host", 1, 1);
    std::vector<std::unique_ptr<Device>> devices;
    for (int i = 0; i < count; ++i) {
      DeviceAttributes a;
      a.name =
          absl::StrCat("/job:", o.job, "/replica:", o.replica, "/task:", o.task, "/device:GPU:", i);
      a.device_type = kDeviceGpu;
      a.incarnation = NewIncarnation();
      GR_ASSIGN_OR_RETURN(std::unique_ptr<GpuDevice> d,
                          GpuDevice::Create(a, i, pool, std::make_shared<ResourceMgr>(o.job), o));
      d->set_intra_op_parallelism(1);
      d->set_file_access(o.file_access);
      devices.push_back(std::move(d));
    }
    return devices;
  }

 private:
  std::string type_ = kDeviceGpu;
  mutable std::once_flag probe_once_;
  mutable absl::StatusOr<int> probe_ = 0;
};

}  // namespace

void RegisterGpuDeviceFactory(DeviceFactoryRegistry& registry) {
  registry.Register(std::make_unique<GpuDeviceFactory>()).IgnoreError();
}

}  // namespace graphrun
