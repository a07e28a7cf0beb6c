#include "runtime/device.h"

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/status.h"
#include "runtime/device_factory.h"

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
  const DeviceFactoryRegistry& registry =
      o.device_factories != nullptr ? *o.device_factories : DefaultDeviceFactoryRegistry();
  for (const auto& [type, count] : o.device_count) {
    if (type == kDeviceCpu) continue;
    if (count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("device count for ", type, " must not be negative, got ", count));
    }
    if (count > 0 && registry.Find(type) == nullptr) {
      std::vector<std::string> types;
      for (const DeviceFactory* f : registry.factories()) types.push_back(f->device_type());
      return absl::InvalidArgumentError(absl::StrCat(
          "device count asks for ", count, " ", type, " device(s), but this build has no ", type,
          " device type (registered: ", absl::StrJoin(types, ", "), ")"));
    }
  }
  std::vector<std::unique_ptr<Device>> devices;
  for (const DeviceFactory* f : registry.factories()) {
    const std::string& type = f->device_type();
    int count = f->DefaultCount();
    auto it = o.device_count.find(type);
    const bool asked = type == kDeviceCpu || it != o.device_count.end();
    if (type == kDeviceCpu) {
      count = o.num_cpus;
    } else if (it != o.device_count.end()) {
      count = it->second;
    }
    if (count == 0) continue;
    absl::StatusOr<int> available = f->CountAvailable();
    if (!available.ok()) {
      if (!asked) continue;  // the factory said why, once
      return absl::Status(available.status().code(),
                          absl::StrCat("no ", type, " device: ", available.status().message()));
    }
    if (count > *available) {
      if (asked) {
        return absl::InvalidArgumentError(absl::StrCat("device count asks for ", count, " ", type,
                                                       " device(s); ", *available, " available"));
      }
      count = *available;
    }
    if (count == 0) continue;
    GR_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Device>> made, f->CreateDevices(o, count));
    for (auto& d : made) devices.push_back(std::move(d));
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

}  // namespace graphrun
