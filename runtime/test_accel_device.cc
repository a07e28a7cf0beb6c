#include "runtime/test_accel_device.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kernels/core/test_accel_kernels.h"

namespace graphrun {
namespace {

// The device's memory: ordinary heap blocks, counted against a limit.
class TestAccelMemory : public DeviceMemorySpace {
 public:
  TestAccelMemory(std::string device_name, int64_t limit)
      : device_name_(std::move(device_name)), limit_(limit) {}
  const std::string& device_name() const override { return device_name_; }

  // Null when over the limit (the caller reports it).
  void* Allocate(int64_t bytes) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (bytes > limit_ - in_use_) return nullptr;
      in_use_ += bytes;
      peak_ = std::max(peak_, in_use_);
      ++allocations_;
    }
    size_t size = (static_cast<size_t>(bytes) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, size == 0 ? 64 : size);
    if (p == nullptr) Free(nullptr, bytes);
    return p;
  }
  void Free(void* p, int64_t bytes) {
    std::free(p);
    std::lock_guard<std::mutex> l(mu_);
    in_use_ -= bytes;
  }
  int64_t limit() const { return limit_; }
  void Stats(TestAccelMemoryStats* s) {
    std::lock_guard<std::mutex> l(mu_);
    s->bytes_in_use = in_use_;
    s->peak_bytes_in_use = peak_;
    s->allocations = allocations_;
  }

 private:
  const std::string device_name_;
  const int64_t limit_;
  std::mutex mu_;
  int64_t in_use_ = 0;
  int64_t peak_ = 0;
  int64_t allocations_ = 0;
};

class TestAccelDevice : public Device, public Accelerator {
 public:
  TestAccelDevice(DeviceAttributes attrs, std::shared_ptr<ThreadPool> pool,
                  std::shared_ptr<ResourceMgr> rm, DeviceCollectiveBackend* backend)
      : Device(attrs, std::move(pool), std::move(rm)),
        backend_(backend),
        memory_(std::make_shared<TestAccelMemory>(attrs.name, attrs.memory_limit)),
        compute_(std::make_unique<ThreadPool>("test_accel_compute", 1, 1)),
        host_to_device_(std::make_unique<ThreadPool>("test_accel_h2d", 1, 1)),
        device_to_host_(std::make_unique<ThreadPool>("test_accel_d2h", 1, 1)) {}

  Accelerator* accelerator() override { return this; }
  DeviceCollectiveBackend* collective_backend() override { return backend_; }

  const DeviceMemorySpace* memory_space() const override { return memory_.get(); }

  bool CanHold(DataType dtype) const override { return FixedSizeDeviceType(dtype); }

  absl::StatusOr<Tensor> AllocateDevice(DataType dtype, const TensorShape& shape,
                                        absl::string_view context) override {
    if (!CanHold(dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, DataTypeString(dtype), " cannot live in the memory of ", name()));
    }
    const int64_t n = shape.num_elements();
    const int64_t size = DataTypeSize(dtype);
    if (n < 0 || (n > 0 && size > memory_->limit() / n)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          context, "out of memory on ", name(), ": ", DataTypeString(dtype), " ",
          shape.DebugString(), " is more than the device's ", memory_->limit(), " bytes"));
    }
    const int64_t bytes = n * size;
    void* p = memory_->Allocate(bytes);
    if (p == nullptr) {
      TestAccelMemoryStats s;
      memory_->Stats(&s);
      return absl::ResourceExhaustedError(
          absl::StrCat(context, "out of memory on ", name(), ": ", DataTypeString(dtype), " ",
                       shape.DebugString(), " needs ", bytes, " bytes; ", s.bytes_in_use, " of ",
                       memory_->limit(), " are in use"));
    }
    std::shared_ptr<TestAccelMemory> memory = memory_;
    auto buffer = std::make_shared<TensorBuffer>(
        p, static_cast<size_t>(bytes), [memory, p, bytes] { memory->Free(p, bytes); },
        memory_.get());
    return Tensor(dtype, shape, buffer, static_cast<char*>(p));
  }

  void CopyHostToDevice(const Tensor& host, const Tensor& device, StatusCallback done) override {
    absl::Status s = CheckCopy(host, device, /*to_device=*/true);
    if (!s.ok()) {
      done(s);
      return;
    }
    host_to_device_->Schedule([this, h = host, d = device, done = std::move(done)]() mutable {
      TestAccelTransform(h.raw_data(), d.raw_data(), static_cast<size_t>(h.TotalBytes()));
      h2d_.fetch_add(1);
      // The copy holds no buffer once the caller hears of it.
      h = d = Tensor();
      done(absl::OkStatus());
    });
  }

  void CopyDeviceToHost(const Tensor& device, const Tensor& host, StatusCallback done) override {
    absl::Status s = CheckCopy(host, device, /*to_device=*/false);
    if (!s.ok()) {
      done(s);
      return;
    }
    device_to_host_->Schedule([this, h = host, d = device, done = std::move(done)]() mutable {
      TestAccelTransform(d.raw_data(), h.raw_data(), static_cast<size_t>(h.TotalBytes()));
      d2h_.fetch_add(1);
      h = d = Tensor();
      done(absl::OkStatus());
    });
  }

  void EnqueueCompute(std::function<void()> fn) override {
    compute_->Schedule([this, fn = std::move(fn)] {
      kernels_.fetch_add(1);
      fn();
    });
  }

  TestAccelMemoryStats Stats() {
    TestAccelMemoryStats s;
    memory_->Stats(&s);
    s.host_to_device_copies = h2d_.load();
    s.device_to_host_copies = d2h_.load();
    s.kernels_run = kernels_.load();
    return s;
  }

 private:
  absl::Status CheckCopy(const Tensor& host, const Tensor& device, bool to_device) const {
    const char* what = to_device ? "host-to-device" : "device-to-host";
    if (host.memory_space() != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(what, " copy on ", name(),
                                                     ": the host tensor lies in the memory of ",
                                                     host.memory_space()->device_name()));
    }
    if (device.memory_space() != memory_.get()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " copy on ", name(), ": the device tensor is not in its memory"));
    }
    if (host.dtype() != device.dtype() || host.TotalBytes() != device.TotalBytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " copy on ", name(), ": ", host.DebugString(0), " and ",
                       device.DebugString(0), " differ in type or size"));
    }
    return absl::OkStatus();
  }

  DeviceCollectiveBackend* const backend_;
  std::shared_ptr<TestAccelMemory> memory_;
  std::atomic<int64_t> h2d_{0}, d2h_{0}, kernels_{0};
  // Declared last: destroyed first, so queued work finishes while the
  // memory and counters still exist.
  std::unique_ptr<ThreadPool> compute_, host_to_device_, device_to_host_;
};

class TestAccelDeviceFactory : public DeviceFactory {
 public:
  explicit TestAccelDeviceFactory(const TestAccelOptions& o) : options_(o) {}
  const std::string& device_type() const override { return type_; }
  int priority() const override { return 100; }
  absl::StatusOr<int> CountAvailable() const override { return options_.available; }
  int DefaultCount() const override { return options_.available; }

  absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateDevices(const DeviceMgrOptions& o,
                                                                     int count) const override {
    int threads = o.intra_op_threads > 0
                      ? o.intra_op_threads
                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    auto pool =
        std::make_shared<ThreadPool>("test_accel_intra_op", std::max(1, threads - 1), threads);
    std::vector<std::unique_ptr<Device>> devices;
    for (int i = 0; i < count; ++i) {
      DeviceAttributes a;
      a.name = absl::StrCat("/job:", o.job, "/replica:", o.replica, "/task:", o.task,
                            "/device:", kDeviceTestAccel, ":", i);
      a.device_type = kDeviceTestAccel;
      a.memory_limit = options_.memory_limit;
      a.incarnation = NewIncarnation();
      auto d = std::make_unique<TestAccelDevice>(a, pool, std::make_shared<ResourceMgr>(o.job),
                                                 options_.collective_backend);
      d->set_intra_op_parallelism(threads);
      d->set_file_access(o.file_access);
      devices.push_back(std::move(d));
    }
    return devices;
  }

 private:
  TestAccelOptions options_;
  std::string type_ = kDeviceTestAccel;
};

}  // namespace

std::unique_ptr<DeviceFactory> NewTestAccelDeviceFactory(const TestAccelOptions& options) {
  return std::make_unique<TestAccelDeviceFactory>(options);
}

absl::StatusOr<TestAccelMemoryStats> GetTestAccelStats(Device* device) {
  auto* d = dynamic_cast<TestAccelDevice*>(device);
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat(device->name(), " is no TEST_ACCEL device"));
  }
  return d->Stats();
}

absl::StatusOr<int> TestAccelDevicesFromEnv() {
  const char* v = std::getenv("GRAPHRUN_TEST_ACCEL_DEVICES");
  if (v == nullptr || *v == '\0') return 0;
  int n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 0 || n > 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GRAPHRUN_TEST_ACCEL_DEVICES must be a device count in [0, 16], got '", v, "'"));
  }
  return n;
}

}  // namespace graphrun
