// OpTester: runs one kernel on a private CPU test device, for tests.
//
//   OpTester t("MatMul");
//   t.Attr("T", DT_FLOAT).Attr("transpose_b", true)
//    .Input(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}))
//    .Input(Tensor::FromVector<float>({1, 0, 0, 1}, {2, 2}));
//   ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
//
// Inputs may be refs to variables (InputRef). Run() builds the NodeDef,
// validates it against the default op registry, instantiates the kernel
// from the default kernel registry and computes once.
#ifndef GRAPHRUN_KERNELS_KERNEL_TEST_UTIL_H_
#define GRAPHRUN_KERNELS_KERNEL_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/node_def_util.h"
#include "graph/tensor.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {

// A CPU DeviceBase with its own resource manager and a 2-thread pool.
class TestCpuDevice : public DeviceBase {
 public:
  TestCpuDevice();
  const std::string& name() const override { return name_; }
  const std::string& device_type() const override { return type_; }
  ResourceMgr* resource_manager() override { return &rm_; }
  ThreadPool* intra_op_pool() override { return &pool_; }
  uint64_t incarnation() const override { return 1; }

 private:
  std::string name_ = "/job:localhost/replica:0/task:0/device:CPU:0";
  std::string type_ = "CPU";
  ResourceMgr rm_;
  ThreadPool pool_;
};

class OpTester {
 public:
  explicit OpTester(std::string op, std::string node_name = "test_node");
  template <typename T>
  OpTester& Attr(const std::string& name, const T& v) {
    (*def_.mutable_attr())[name] = MakeAttr(v);
    return *this;
  }
  OpTester& Attr(const std::string& name, const tensorflow::AttrValue& v) {
    (*def_.mutable_attr())[name] = v;
    return *this;
  }
  OpTester& Input(Tensor t);
  OpTester& InputRef(std::shared_ptr<Var> v);
  // A missing (dead) input, as Merge sees.
  OpTester& DeadInput(DataType dt);

  // Runs the kernel; the outputs (ref outputs as the variable's tensor).
  absl::StatusOr<std::vector<Tensor>> Run();
  // After Run(): the raw output values (refs kept).
  const std::vector<TensorValue>& output_values() const { return outputs_; }
  TestCpuDevice* device() { return device_.get(); }
  // Shares a device (and so a resource manager) across testers.
  OpTester& UseDevice(std::shared_ptr<TestCpuDevice> d) {
    device_ = std::move(d);
    return *this;
  }

 private:
  tensorflow::NodeDef def_;
  std::vector<TensorValue> inputs_;
  std::vector<TensorValue> outputs_;
  std::shared_ptr<TestCpuDevice> device_;
};

// Element-wise comparison helpers for tests; return a description of the
// first difference, or "" when equal.
std::string TensorDiff(const Tensor& expected, const Tensor& actual, double tolerance = 0);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_KERNEL_TEST_UTIL_H_
