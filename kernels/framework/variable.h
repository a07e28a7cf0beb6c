// A variable: a tensor that lives across steps in a ResourceMgr. Used both
// by ref variables (VariableV2: the op's ref output points here) and by
// resource variables (VarHandleOp: a DT_RESOURCE handle names it).
//
// Thread-safety: `mu` guards `tensor` and `initialized`. Writers replace or
// update the tensor under `mu`; readers copy the Tensor (sharing the buffer)
// under `mu`. An update in place is only done when no reader holds the
// buffer (Tensor::RefCountIsOne), so a value read earlier is a stable
// snapshot.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_VARIABLE_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_VARIABLE_H_

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/tensor.h"
#include "kernels/framework/resource_mgr.h"

namespace graphrun {

class Var : public ResourceBase {
 public:
  Var(std::string name, DataType dtype, PartialShape shape)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)) {}

  const std::string& name() const { return name_; }
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }

  std::string DebugString() const override {
    return absl::StrCat("Var ", name_, " ", DataTypeString(dtype_), " ", shape_.DebugString());
  }

  // The current value; FailedPrecondition naming the variable when it has
  // never been assigned.
  absl::StatusOr<Tensor> Read() {
    std::lock_guard<std::mutex> l(mu);
    if (!initialized) return UninitializedError();
    return tensor;
  }
  absl::Status UninitializedError() const {
    return absl::FailedPreconditionError(
        absl::StrCat("attempting to use uninitialized value ", name_));
  }

  std::mutex mu;
  Tensor tensor;
  bool initialized = false;

 private:
  std::string name_;
  DataType dtype_;
  PartialShape shape_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_VARIABLE_H_
