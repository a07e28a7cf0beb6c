#include "client/variables.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/op_builder.h"
#include "client/ops.h"

namespace graphrun {
namespace client {
namespace {

// The initial value for a variable of `shape`, or a null Output with the
// error recorded.
Output InitialValue(const Scope& var_scope, const PartialShape& shape, DataType dtype,
                    const Initializer& initializer) {
  if (!var_scope.ok()) return Output();
  if (!shape.fully_defined()) {
    var_scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("variable '", var_scope.name_prefix(),
                     "': an initializer needs a fully defined shape, not ", shape.DebugString())));
    return Output();
  }
  return initializer(var_scope.NewSubScope("Initializer"), shape.ToTensorShape(), dtype);
}

}  // namespace

std::string SaveSliceInfo::Spec() const {
  std::vector<std::string> slices;
  for (size_t d = 0; d < var_offset.size() && d < var_shape.size(); ++d) {
    slices.push_back(absl::StrCat(var_offset[d], ",", var_shape[d]));
  }
  return absl::StrCat(absl::StrJoin(full_shape.dim_sizes(), " "), " ", absl::StrJoin(slices, ":"));
}

absl::Status SaveSliceInfo::Validate() const {
  const size_t rank = static_cast<size_t>(full_shape.dims());
  if (full_name.empty()) return absl::InvalidArgumentError("save slice info without a full name");
  if (rank == 0 || var_offset.size() != rank || var_shape.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable '", full_name, "': save slice info needs one offset and one length per ",
        "dimension of the full shape ", full_shape.DebugString()));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (var_offset[d] < 0 || var_shape[d] < 0 ||
        var_offset[d] + var_shape[d] > full_shape.dim_size(static_cast<int>(d))) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", full_name, "': slice ", Spec(), " leaves the full shape"));
    }
  }
  return absl::OkStatus();
}

Variable::Variable(const Scope& scope, const PartialShape& shape, DataType dtype)
    : scope_(scope), shape_(shape), dtype_(dtype) {
  Operation op = internal::OpBuilder(scope, "VarHandleOp", "Variable")
                     .Attr("dtype", internal::AttrType(dtype))
                     .Attr("shape", internal::AttrShape(shape))
                     .Finalize();
  if (op.node() == nullptr) return;
  (*op.node()->mutable_def()->mutable_attr())["shared_name"] = internal::AttrString(op.name());
  handle_ = Output(op, 0);
  scope_ = scope.WithNameScope(op.name()).WithNoControlDependencies().ColocateWith(op);
}

Variable::Variable(const Scope& scope, const PartialShape& shape, DataType dtype,
                   const Initializer& initializer)
    : Variable(scope, shape, dtype) {
  if (handle_.node() == nullptr) return;
  initial_value_ = InitialValue(scope_, shape, dtype, initializer);
  if (initial_value_.node() == nullptr) return;
  initializer_ = Update(scope_, "AssignVariableOp", "Assign", initial_value_);
  scope_.AddInitializer(initializer_);
}

void Variable::SetSaveSliceInfo(SaveSliceInfo info) {
  if (handle_.node() == nullptr) return;
  absl::Status st = info.Validate();
  if (st.ok() && !(shape_ == PartialShape(absl::MakeConstSpan(info.var_shape)))) {
    st = absl::InvalidArgumentError(
        absl::StrCat("variable '", name(), "': slice ", info.Spec(), " of '", info.full_name,
                     "' does not have the variable's shape ", shape_.DebugString()));
  }
  if (!st.ok()) {
    scope_.UpdateStatus(st);
    return;
  }
  // "<full name> <full shape> <slices>": placement::SaveSliceSpec's form.
  (*handle_.node()->mutable_def()->mutable_attr())["_save_slice_info"] =
      internal::AttrString(absl::StrCat(info.full_name, " ", info.Spec()));
  save_slice_info_ = std::make_shared<const SaveSliceInfo>(std::move(info));
}

Input Variable::Converted(const Scope& scope, const Input& value) const {
  if (!value.is_literal() || !value.status().ok()) return value;
  auto t = internal::CastLiteral(value.tensor(), dtype_);
  if (!t.ok()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("variable '", name(), "': ", t.status().message())));
    return value;
  }
  return Input(*t);
}

Operation Variable::Update(const Scope& scope, const char* op, const char* name,
                           const Input& value) const {
  if (handle_.node() == nullptr) return Operation();
  Scope s = scope.ColocateWith(handle_.op());
  return internal::OpBuilder(s, op, name).Input(handle_).Input(Converted(scope, value)).Finalize();
}

Operation Variable::Assign(const Scope& scope, const Input& value) const {
  return Update(scope, "AssignVariableOp", "Assign", value);
}
Operation Variable::AssignAdd(const Scope& scope, const Input& value) const {
  return Update(scope, "AssignAddVariableOp", "AssignAdd", value);
}
Operation Variable::AssignSub(const Scope& scope, const Input& value) const {
  return Update(scope, "AssignSubVariableOp", "AssignSub", value);
}

Output Variable::Read(const Scope& scope) const {
  if (handle_.node() == nullptr) return Output();
  // Colocated with this variable only, whatever `scope` is colocated with
  // (TensorFlow reads under colocate_with(ignore_existing=True)): reading
  // variable A inside B's update scope must not tie A and B to one device.
  Output v =
      ops::ReadVariableOp(scope.ClearColocation().ColocateWith(handle_.op()), handle_, dtype_);
  if (v.node() != nullptr) v.node()->set_output_shape(0, shape_);
  return v;
}

Output Variable::Read() const {
  return Read(scope_.NewSubScope("Read").WithOpName("ReadVariableOp"));
}

Output Variable::InitializedValue() const {
  if (initializer_.node() == nullptr) {
    scope_.UpdateStatus(absl::FailedPreconditionError(absl::StrCat(
        "variable '", name(), "': InitializedValue() of a variable without an initializer")));
    return Output();
  }
  const Operation deps[] = {initializer_};
  return Read(
      scope_.NewSubScope("Initialized").WithControlDependencies(deps).WithOpName("ReadVariableOp"));
}

RefVariable::RefVariable(const Scope& scope, const PartialShape& shape, DataType dtype)
    : scope_(scope), dtype_(dtype) {
  Operation op = internal::OpBuilder(scope, "VariableV2", "Variable")
                     .Attr("dtype", internal::AttrType(dtype))
                     .Attr("shape", internal::AttrShape(shape))
                     .Finalize();
  if (op.node() == nullptr) return;
  ref_ = Output(op, 0);
  scope_ = scope.WithNameScope(op.name()).WithNoControlDependencies().ColocateWith(op);
  value_ = ops::Identity(scope_.WithOpName("read"), ref_);
}

RefVariable::RefVariable(const Scope& scope, const PartialShape& shape, DataType dtype,
                         const Initializer& initializer)
    : RefVariable(scope, shape, dtype) {
  if (ref_.node() == nullptr) return;
  initial_value_ = InitialValue(scope_, shape, dtype, initializer);
  if (initial_value_.node() == nullptr) return;
  Output assign = Update("Assign", initial_value_);
  initializer_ = assign.op();
  scope_.AddInitializer(initializer_);
}

Output RefVariable::Update(const char* op, const Input& value) const {
  if (ref_.node() == nullptr) return Output();
  Input v = value;
  if (value.is_literal() && value.status().ok()) {
    auto t = internal::CastLiteral(value.tensor(), dtype_);
    if (t.ok()) v = Input(*t);
  }
  return internal::SingleOutput(internal::OpBuilder(scope_, op).Input(ref_).Input(v).Finalize(),
                                "output_ref");
}

Output RefVariable::Assign(const Input& value) const { return Update("Assign", value); }
Output RefVariable::AssignAdd(const Input& value) const { return Update("AssignAdd", value); }
Output RefVariable::AssignSub(const Input& value) const { return Update("AssignSub", value); }

Operation GlobalVariablesInitializer(const Scope& scope) {
  std::vector<Operation> inits = scope.initializers();
  return internal::OpBuilder(scope.WithControlDependencies(inits), "NoOp", "init").Finalize();
}

}  // namespace client
}  // namespace graphrun
