#include "runtime/device.h"

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"

namespace graphrun {

Device::Device(DeviceAttributes attrs, std::shared_ptr<ThreadPool> pool,
               std::shared_ptr<ResourceMgr> rm)
    : attrs_(std::move(attrs)), intra_op_pool_(std::move(pool)), resource_mgr_(std::move(rm)) {}

uint64_t NewIncarnation() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return v == 0 ? 1 : v;
}

absl::StatusOr<std::unique_ptr<DeviceMgr>> DeviceMgr::NewLocal(const DeviceMgrOptions& o) {
  if (o.num_cpus < 1 || o.num_cpus > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU device count must be in [1, 1024], got ", o.num_cpus));
  }
  int threads = o.intra_op_threads > 0
                    ? o.intra_op_threads
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // The calling thread takes part in ParallelFor, so the pool needs one
  // fewer; with one thread, kernels run inline (the pool's one worker only
  // serves Schedule).
  auto pool = std::make_shared<ThreadPool>("intra_op", std::max(1, threads - 1), threads);
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < o.num_cpus; ++i) {
    DeviceAttributes a;
    a.name =
        absl::StrCat("/job:", o.job, "/replica:", o.replica, "/task:", o.task, "/device:CPU:", i);
    a.device_type = "CPU";
    a.memory_limit = int64_t{1} << 34;
    a.incarnation = NewIncarnation();
    devices.push_back(std::make_unique<Device>(a, pool, std::make_shared<ResourceMgr>(o.job)));
    devices.back()->set_intra_op_parallelism(threads);
    devices.back()->set_file_access(o.file_access);
  }
  return std::make_unique<DeviceMgr>(std::move(devices));
}

DeviceMgr::DeviceMgr(std::vector<std::unique_ptr<Device>> devices) : devices_(std::move(devices)) {}

absl::StatusOr<Device*> DeviceMgr::Lookup(const std::string& name) const {
  for (const auto& d : devices_) {
    if (d->name() == name) return d.get();
  }
  return absl::NotFoundError(absl::StrCat("unknown device '", name, "'"));
}

std::vector<DeviceAttributes> DeviceMgr::ListDeviceAttributes() const {
  std::vector<DeviceAttributes> out;
  for (const auto& d : devices_) out.push_back(d->attributes());
  return out;
}

absl::Status CheckGpuAvailable() {
  return absl::NotFoundError(
      "no GPU device is available: this graphrun build has no CUDA device "
      "support enabled, or no GPU is attached");
}

}  // namespace graphrun
