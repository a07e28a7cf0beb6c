// Variables for the C++ API.
//
// Variable is a resource variable, TensorFlow 2's default: a VarHandleOp
// (shared_name = its node name) whose value lives in the device's resource
// manager; ReadVariableOp, AssignVariableOp and AssignAddVariableOp act on
// it. RefVariable is TensorFlow 1's VariableV2 with Assign / AssignAdd on
// its ref output and a "<name>/read" Identity, for graphs that must look
// like TF1's.
//
// Given an Initializer, both build the initial value under
// "<name>/Initializer" and an assign "<name>/Assign" registered with the
// graph; GlobalVariablesInitializer() groups every registered assign into
// one NoOp ("init"). Ops acting on a variable are colocated with it
// (`_class: loc:@<name>`), as TensorFlow does.
//
// A Variable may be one part of a partitioned variable
// (client/partitioned_variable.h): its SaveSliceInfo then says which slice
// of which full tensor it holds, and the Saver checkpoints it as that slice.
//
// Errors (a shape that is not fully defined with an initializer, a bad
// value type) are recorded on the scope; the variable's outputs are then
// null. Same thread-safety as Scope.
#ifndef GRAPHRUN_CLIENT_VARIABLES_H_
#define GRAPHRUN_CLIENT_VARIABLES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/initializers.h"
#include "client/operation.h"
#include "client/scope.h"

namespace graphrun {
namespace client {

// Where a variable sits in a larger tensor (TensorFlow's
// Variable.SaveSliceInfo): the variable holds the box `var_offset` /
// `var_shape` of the tensor `full_name` of shape `full_shape`.
struct SaveSliceInfo {
  std::string full_name;
  TensorShape full_shape;
  std::vector<int64_t> var_offset;  // one per dimension of full_shape
  std::vector<int64_t> var_shape;   // one per dimension of full_shape

  // SaveV2/RestoreV2's shape_and_slices entry: "10 4 0,5:0,4" (full shape,
  // then start,length per dimension).
  std::string Spec() const;
  // InvalidArgument naming full_name unless the box lies inside full_shape
  // (ranks equal, offsets >= 0, lengths >= 0).
  absl::Status Validate() const;
};

class Variable {
 public:
  // A VarHandleOp named by `scope` ("Variable" by default). Without an
  // initializer it must be assigned before it is read.
  Variable(const Scope& scope, const PartialShape& shape, DataType dtype);
  // Also builds its initial value and initializer. REQUIRES: `shape`
  // fully defined (else InvalidArgument on the scope).
  Variable(const Scope& scope, const PartialShape& shape, DataType dtype,
           const Initializer& initializer);

  // The DT_RESOURCE handle.
  Output handle() const { return handle_; }
  Operation op() const { return handle_.op(); }
  const std::string& name() const { return handle_.op().name(); }
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }
  // Null without an initializer.
  Output initial_value() const { return initial_value_; }
  Operation initializer() const { return initializer_; }

  // Null unless this variable is a slice of a larger (partitioned) one.
  const SaveSliceInfo* save_slice_info() const { return save_slice_info_.get(); }
  // Marks this variable (and the copies made from now on) as slice `info`;
  // also records "<full_name> <Spec()>" (placement::SaveSliceSpec's form)
  // in the handle's "_save_slice_info" attr, as placement/variable_sharding
  // does, so the GraphDef says it too. InvalidArgument (on the scope) for a bad `info`
  // or one whose slice shape is not this variable's shape.
  void SetSaveSliceInfo(SaveSliceInfo info);

  // The current value: a new ReadVariableOp "<name>/Read[_N]/ReadVariableOp"
  // colocated with the variable; with `scope`, built in it (its name scope,
  // control dependencies) instead.
  Output Read() const;
  Output Read(const Scope& scope) const;
  // The value read after the initializer ran (TensorFlow's
  // initialized_value()): usable in the same step as the initializer.
  Output InitializedValue() const;
  // Assign ops (AssignVariableOp / AssignAddVariableOp / AssignSubVariableOp)
  // colocated with the variable. A literal `value` converts to dtype().
  Operation Assign(const Input& value) const { return Assign(scope_, value); }
  Operation Assign(const Scope& scope, const Input& value) const;
  Operation AssignAdd(const Input& value) const { return AssignAdd(scope_, value); }
  Operation AssignAdd(const Scope& scope, const Input& value) const;
  Operation AssignSub(const Input& value) const { return AssignSub(scope_, value); }
  Operation AssignSub(const Scope& scope, const Input& value) const;

 private:
  Operation Update(const Scope& scope, const char* op, const char* name, const Input& value) const;
  Input Converted(const Scope& scope, const Input& value) const;

  Scope scope_;  // "<name>" name scope, colocated with the handle
  PartialShape shape_;
  DataType dtype_;
  Output handle_;
  Output initial_value_;
  Operation initializer_;
  std::shared_ptr<const SaveSliceInfo> save_slice_info_;
};

class RefVariable {
 public:
  // A VariableV2 named by `scope` ("Variable" by default) and its
  // "<name>/read" Identity.
  RefVariable(const Scope& scope, const PartialShape& shape, DataType dtype);
  RefVariable(const Scope& scope, const PartialShape& shape, DataType dtype,
              const Initializer& initializer);

  // The ref-typed output of the VariableV2.
  Output ref() const { return ref_; }
  Operation op() const { return ref_.op(); }
  const std::string& name() const { return ref_.op().name(); }
  // "<name>/read": the value as a plain tensor.
  Output value() const { return value_; }
  Output initial_value() const { return initial_value_; }
  Operation initializer() const { return initializer_; }

  // Assign / AssignAdd / AssignSub on the ref; outputs the updated ref.
  Output Assign(const Input& value) const;
  Output AssignAdd(const Input& value) const;
  Output AssignSub(const Input& value) const;

 private:
  Output Update(const char* op, const Input& value) const;

  Scope scope_;
  DataType dtype_;
  Output ref_;
  Output value_;
  Output initial_value_;
  Operation initializer_;
};

// A NoOp (named "init" unless the scope has WithOpName) with a control
// dependency on every initializer registered in the scope's graph so far.
Operation GlobalVariablesInitializer(const Scope& scope);

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_VARIABLES_H_
