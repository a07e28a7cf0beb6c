#include "runtime/device_factory.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/test_accel_device.h"

namespace graphrun {
namespace {

class CpuDeviceFactory : public DeviceFactory {
 public:
  const std::string& device_type() const override { return type_; }
  int priority() const override { return 50; }
  absl::StatusOr<int> CountAvailable() const override { return 1024; }
  int DefaultCount() const override { return 1; }

  absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateDevices(const DeviceMgrOptions& o,
                                                                     int count) const override {
    int threads = o.intra_op_threads > 0
                      ? o.intra_op_threads
                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    // The calling thread takes part in ParallelFor, so the pool needs one
    // fewer; with one thread, kernels run inline (the pool's one worker
    // only serves Schedule).
    auto pool = std::make_shared<ThreadPool>("intra_op", std::max(1, threads - 1), threads);
    std::vector<std::unique_ptr<Device>> devices;
    for (int i = 0; i < count; ++i) {
      DeviceAttributes a;
      a.name =
          absl::StrCat("/job:", o.job, "/replica:", o.replica, "/task:", o.task, "/device:CPU:", i);
      a.device_type = kDeviceCpu;
      a.memory_limit = int64_t{1} << 34;
      a.incarnation = NewIncarnation();
      devices.push_back(std::make_unique<Device>(a, pool, std::make_shared<ResourceMgr>(o.job)));
      devices.back()->set_intra_op_parallelism(threads);
      devices.back()->set_file_access(o.file_access);
    }
    return devices;
  }

 private:
  std::string type_ = kDeviceCpu;
};

}  // namespace

absl::Status DeviceFactoryRegistry::Register(std::unique_ptr<DeviceFactory> factory) {
  if (Find(factory->device_type()) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("device type ", factory->device_type(), " is already registered"));
  }
  factories_.push_back(std::move(factory));
  return absl::OkStatus();
}

const DeviceFactory* DeviceFactoryRegistry::Find(const std::string& device_type) const {
  for (const auto& f : factories_) {
    if (f->device_type() == device_type) return f.get();
  }
  return nullptr;
}

std::vector<const DeviceFactory*> DeviceFactoryRegistry::factories() const {
  std::vector<const DeviceFactory*> out;
  for (const auto& f : factories_) {
    if (f->device_type() == kDeviceCpu) out.push_back(f.get());
  }
  for (const auto& f : factories_) {
    if (f->device_type() != kDeviceCpu) out.push_back(f.get());
  }
  return out;
}

int DeviceFactoryRegistry::Priority(const std::string& device_type) const {
  const DeviceFactory* f = Find(device_type);
  return f == nullptr ? 0 : f->priority();
}

std::unique_ptr<DeviceFactory> NewCpuDeviceFactory() {
  return std::make_unique<CpuDeviceFactory>();
}

void RegisterDefaultDeviceFactories(DeviceFactoryRegistry& registry) {
  registry.Register(NewCpuDeviceFactory()).IgnoreError();
#ifdef GRAPHRUN_CUDA
  RegisterGpuDeviceFactory(registry);
#endif
  absl::StatusOr<int> accel = TestAccelDevicesFromEnv();
  if (!accel.ok()) {
    std::fprintf(stderr, "graphrun: %s; no TEST_ACCEL devices\n",
                 std::string(accel.status().message()).c_str());
  } else if (*accel > 0) {
    TestAccelOptions o;
    o.available = *accel;
    registry.Register(NewTestAccelDeviceFactory(o)).IgnoreError();
  }
}

const DeviceFactoryRegistry& DefaultDeviceFactoryRegistry() {
  static const DeviceFactoryRegistry* registry = [] {
    auto* r = new DeviceFactoryRegistry();
    RegisterDefaultDeviceFactories(*r);
    return r;
  }();
  return *registry;
}

}  // namespace graphrun
