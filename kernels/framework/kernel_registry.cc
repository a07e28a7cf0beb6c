#include "kernels/framework/kernel_registry.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "graph/node_def_util.h"
#include "graph/status.h"

namespace graphrun {

bool KernelDef::Matches(const tensorflow::NodeDef& def) const {
  for (const auto& [attr, allowed] : constraints_) {
    auto it = def.attr().find(attr);
    if (it == def.attr().end()) return false;
    const auto& v = it->second;
    if (v.value_case() == tensorflow::AttrValue::kType) {
      if (std::find(allowed.begin(), allowed.end(), v.type()) == allowed.end()) {
        return false;
      }
    } else if (v.value_case() == tensorflow::AttrValue::kList) {
      for (int t : v.list().type()) {
        if (std::find(allowed.begin(), allowed.end(), static_cast<DataType>(t)) == allowed.end()) {
          return false;
        }
      }
    } else {
      return false;
    }
  }
  return !predicate_ || predicate_(def);
}

void KernelRegistry::Add(KernelDef def, KernelFactory factory) {
  std::string op = def.op();
  kernels_.emplace(std::move(op), std::make_pair(std::move(def), std::move(factory)));
}

const std::pair<KernelDef, KernelFactory>* KernelRegistry::Find(
    const tensorflow::NodeDef& def, const std::string& device_type) const {
  auto range = kernels_.equal_range(def.op());
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.first.device() == device_type && it->second.first.Matches(def)) {
      return &it->second;
    }
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::CreateKernel(
    const tensorflow::NodeDef& def, const tensorflow::OpDef& op_def,
    const DataTypeVector& input_types, const DataTypeVector& output_types, DeviceBase* device,
    FunctionLibraryRuntime* functions) const {
  return CreateKernelForType(def, op_def, input_types, output_types, device, device->device_type(),
                             functions);
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::CreateKernelForType(
    const tensorflow::NodeDef& def, const tensorflow::OpDef& op_def,
    const DataTypeVector& input_types, const DataTypeVector& output_types, DeviceBase* device,
    const std::string& device_type, FunctionLibraryRuntime* functions) const {
  const auto* entry = Find(def, device_type);
  if (entry == nullptr) {
    std::vector<std::string> types;
    for (const auto& [k, v] : def.attr()) {
      if (v.value_case() == tensorflow::AttrValue::kType) {
        types.push_back(absl::StrCat(k, "=", DataTypeString(v.type())));
      }
    }
    return absl::NotFoundError(absl::StrCat(
        "node '", def.name(), "': no kernel for op ", def.op(), " on ", device_type, " device ",
        device->name(), types.empty() ? "" : absl::StrCat(" with ", absl::StrJoin(types, ", "))));
  }
  OpKernelConstruction ctx(def, op_def, input_types, output_types, device);
  ctx.set_function_library(functions);
  std::unique_ptr<OpKernel> k = entry->second(&ctx);
  if (!ctx.status().ok()) return ctx.status();
  return k;
}

absl::StatusOr<MemoryTypes> KernelRegistry::GetMemoryTypes(
    const tensorflow::NodeDef& def, const tensorflow::OpDef& op_def, const std::string& device_type,
    const std::function<bool(DataType)>& can_hold) const {
  const auto* entry = Find(def, device_type);
  if (entry == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("node '", def.name(), "': no kernel for op ", def.op(), " on ", device_type));
  }
  DataTypeVector in, out;
  GR_RETURN_IF_ERROR(InOutTypesForNode(def, op_def, &in, &out));
  MemoryTypes m;
  const bool cpu = device_type == kDeviceCpu;
  for (DataType t : in) m.input_on_host.push_back(cpu || !can_hold(BaseType(t)));
  for (DataType t : out) m.output_on_host.push_back(cpu || !can_hold(BaseType(t)));
  if (cpu) return m;
  for (const std::string& arg : entry->first.host_memory()) {
    std::pair<int, int> range;
    bool found = false;
    for (const auto& a : op_def.input_arg()) found |= a.name() == arg;
    if (found) {
      GR_RETURN_IF_ERROR(NameRangeForInput(def, op_def, arg, &range));
      for (int i = range.first; i < range.second; ++i) m.input_on_host[i] = true;
      continue;
    }
    for (const auto& a : op_def.output_arg()) found |= a.name() == arg;
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat("kernel for op ", def.op(), " on ",
                                                     device_type, ": HostMemory('", arg,
                                                     "') names no input or output of the op"));
    }
    GR_RETURN_IF_ERROR(NameRangeForOutput(def, op_def, arg, &range));
    for (int i = range.first; i < range.second; ++i) m.output_on_host[i] = true;
  }
  return m;
}

bool KernelRegistry::HasKernel(const tensorflow::NodeDef& def,
                               const std::string& device_type) const {
  return Find(def, device_type) != nullptr;
}

std::vector<std::string> KernelRegistry::SupportedDeviceTypes(
    const tensorflow::NodeDef& def) const {
  std::vector<std::string> out;
  auto range = kernels_.equal_range(def.op());
  for (auto it = range.first; it != range.second; ++it) {
    const std::string& d = it->second.first.device();
    if (it->second.first.Matches(def) && std::find(out.begin(), out.end(), d) == out.end()) {
      out.push_back(d);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> KernelRegistry::List() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [op, v] : kernels_) out.push_back({op, v.first.device()});
  return out;
}

}  // namespace graphrun
