// The kernel registry: which OpKernel computes an op on a device type for
// given type attrs. Kernels are registered by plain functions that take the
// registry (kernels/all_kernels.h lists them), never by static initialisers.
//
// Thread-safety: registration completes before lookups start; lookups are
// then read-only and safe.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_KERNEL_REGISTRY_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_KERNEL_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {

using KernelFactory = std::function<std::unique_ptr<OpKernel>(OpKernelConstruction* ctx)>;

// Which nodes a kernel serves: op name, device type, allowed values of type
// attrs.
class KernelDef {
 public:
  explicit KernelDef(std::string op) : op_(std::move(op)) {}
  KernelDef& Device(std::string type) {
    device_ = std::move(type);
    return *this;
  }
  KernelDef& TypeConstraint(std::string attr, DataType t) {
    constraints_.push_back({std::move(attr), {t}});
    return *this;
  }
  KernelDef& TypeConstraint(std::string attr, std::vector<DataType> ts) {
    constraints_.push_back({std::move(attr), std::move(ts)});
    return *this;
  }
  template <typename T>
  KernelDef& TypeConstraint(std::string attr) {
    return TypeConstraint(std::move(attr), DataTypeToEnum<T>::value);
  }
  // The input or output arg `arg` of an accelerator's kernel is read or
  // written in host memory (shapes, axes, sizes), as TensorFlow's
  // HostMemory(). Meaningless for the CPU, whose memory is the host's.
  KernelDef& HostMemory(std::string arg) {
    host_memory_.push_back(std::move(arg));
    return *this;
  }

  // Serves only nodes for which `pred` also holds (an accelerator kernel
  // that runs the CPU kernel serves what the CPU kernel serves).
  KernelDef& Predicate(std::function<bool(const tensorflow::NodeDef&)> pred) {
    predicate_ = std::move(pred);
    return *this;
  }

  const std::string& op() const { return op_; }
  const std::string& device() const { return device_; }
  const std::vector<std::string>& host_memory() const { return host_memory_; }
  // True if the node's attrs satisfy every constraint.
  bool Matches(const tensorflow::NodeDef& def) const;

 private:
  std::string op_;
  std::string device_ = kDeviceCpu;
  std::vector<std::pair<std::string, std::vector<DataType>>> constraints_;
  std::vector<std::string> host_memory_;
  std::function<bool(const tensorflow::NodeDef&)> predicate_;
};

// Where a kernel reads each input and writes each output: true for host
// memory.
struct MemoryTypes {
  std::vector<bool> input_on_host;
  std::vector<bool> output_on_host;
};

template <typename K>
KernelFactory MakeKernel() {
  return [](OpKernelConstruction* ctx) -> std::unique_ptr<OpKernel> {
    return std::make_unique<K>(ctx);
  };
}

class KernelRegistry {
 public:
  KernelRegistry() = default;
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  void Add(KernelDef def, KernelFactory factory);

  // Instantiates the kernel for `def` on `device`. NotFound naming the node,
  // op, device type and types when no kernel matches; the constructor's
  // error otherwise. `functions`: the graph's function runtime (null when
  // the graph has no library).
  absl::StatusOr<std::unique_ptr<OpKernel>> CreateKernel(
      const tensorflow::NodeDef& def, const tensorflow::OpDef& op_def,
      const DataTypeVector& input_types, const DataTypeVector& output_types, DeviceBase* device,
      FunctionLibraryRuntime* functions = nullptr) const;
  // The same for the kernel of another device type than `device`'s (an
  // accelerator's kernel that runs the CPU kernel on its stream).
  absl::StatusOr<std::unique_ptr<OpKernel>> CreateKernelForType(
      const tensorflow::NodeDef& def, const tensorflow::OpDef& op_def,
      const DataTypeVector& input_types, const DataTypeVector& output_types, DeviceBase* device,
      const std::string& device_type, FunctionLibraryRuntime* functions = nullptr) const;
  // The memory types of the kernel serving `def` on `device_type`: every
  // arg on the host for the CPU; on other types the kernel's HostMemory
  // args, and every arg of a type the device cannot hold (`can_hold`,
  // e.g. strings and resources). NotFound without a kernel;
  // InvalidArgument for a HostMemory name the op does not have.
  absl::StatusOr<MemoryTypes> GetMemoryTypes(const tensorflow::NodeDef& def,
                                             const tensorflow::OpDef& op_def,
                                             const std::string& device_type,
                                             const std::function<bool(DataType)>& can_hold) const;
  // True if some kernel serves `def` on `device_type`.
  bool HasKernel(const tensorflow::NodeDef& def, const std::string& device_type) const;
  // Device types with a kernel for `def`, in registration order of types.
  std::vector<std::string> SupportedDeviceTypes(const tensorflow::NodeDef& def) const;
  // Every (op, device) pair registered.
  std::vector<std::pair<std::string, std::string>> List() const;

 private:
  const std::pair<KernelDef, KernelFactory>* Find(const tensorflow::NodeDef& def,
                                                  const std::string& device_type) const;
  std::multimap<std::string, std::pair<KernelDef, KernelFactory>> kernels_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_KERNEL_REGISTRY_H_
