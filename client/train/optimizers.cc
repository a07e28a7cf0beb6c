#include "client/train/optimizers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/train/ops_internal.h"
#include "graph/status.h"

namespace graphrun {
namespace client {
namespace train {

using internal::Op;

Variable CreateGlobalStep(const Scope& scope) {
  return Variable(scope.WithNameScope("").WithOpName("global_step"), PartialShape({}), DT_INT64,
                  init::Zeros());
}

Output Optimizer::Scalar(const Scope& s, double v, DataType dtype) {
  return internal::ScalarOf(s, v, dtype);
}

Input Optimizer::LearningRate(const Scope& s, DataType dtype) const {
  if (learning_rate_.is_literal()) return learning_rate_;
  Output lr = learning_rate_.output();
  if (lr.node() != nullptr && lr.type() != dtype) return internal::Cast(s, lr, dtype);
  return lr;
}

Variable* Optimizer::GetSlot(const Variable& var, int slot) {
  auto it = slots_.find({var.name(), slot});
  return it == slots_.end() ? nullptr : &it->second;
}

std::vector<Variable> Optimizer::variables() const {
  std::vector<Variable> out;
  for (const auto& [key, slot] : slots_) out.push_back(slot);
  for (const Variable& v : NonSlotVariables()) out.push_back(v);
  return out;
}

Initializer Optimizer::ScalarInit(double value, DataType dtype) {
  auto t = client::internal::CastLiteral(Tensor::Scalar<double>(value), dtype);
  return t.ok() ? init::Constant(*t) : init::Zeros();
}

Variable& Optimizer::MakeSlot(const Variable& var, int index, double value) {
  std::string name = index == 0 ? name_ : absl::StrCat(name_, "_", index);
  Scope s = slot_scope_->WithNameScope(var.name()).WithOpName(name).ColocateWith(var.op());
  auto it = slots_.emplace(std::make_pair(var.name(), index),
                           Variable(s, var.shape(), var.dtype(), ScalarInit(value, var.dtype())));
  return it.first->second;
}

absl::Status Optimizer::CreateSlots(const Scope&, const std::vector<Variable>&) {
  return absl::OkStatus();
}

Operation Optimizer::ApplySparse(const Scope& s, const IndexedSlices& grad, const Variable& var) {
  return ApplyDense(s, IndexedSlicesToDense(s, grad), var);
}

IndexedSlices Optimizer::Deduplicate(const Scope& s, const IndexedSlices& grad) {
  std::vector<Output> unique = Op(s.WithOpName("unique_indices"), "Unique").In(grad.indices).Outs();
  if (unique.size() != 2) return grad;  // the error is on the scope
  Output summed = Op(s.WithOpName("summed_values"), "UnsortedSegmentSum")
                      .In(grad.values)
                      .In(unique[1])
                      .In(internal::Size(s, unique[0]))
                      .Out();
  return IndexedSlices{summed, unique[0], grad.dense_shape};
}

Operation Optimizer::Finish(const Scope& s, const std::vector<Operation>& updates) {
  return Op(s.WithControlDependencies(updates).WithOpName(name_), "NoOp").Build();
}

absl::StatusOr<std::vector<GradAndVar>> Optimizer::ComputeGradients(
    const Scope& scope, const Output& loss, const std::vector<Variable>& var_list) {
  std::vector<Output> xs;
  for (const Variable& v : var_list) xs.push_back(v.handle());
  auto grads = train::ComputeGradients(scope, {loss}, xs, {});
  if (!grads.ok()) return grads.status();
  std::vector<GradAndVar> out;
  for (size_t i = 0; i < var_list.size(); ++i) out.push_back({(*grads)[i], var_list[i]});
  return out;
}

absl::StatusOr<Operation> Optimizer::ApplyGradients(const Scope& scope,
                                                    const std::vector<GradAndVar>& grads_and_vars,
                                                    const Variable* global_step) {
  if (!scope.ok()) return scope.status();
  std::vector<Variable> vars;
  for (const GradAndVar& gv : grads_and_vars) {
    if (!gv.grad.is_null()) vars.push_back(gv.var);
  }
  if (vars.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": no gradients provided for any variable"));
  }
  slot_scope_ = scope.WithNameScope(state_name_scope_).WithNoControlDependencies();
  GR_RETURN_IF_ERROR(CreateSlots(scope, vars));
  Scope outer = scope.NewSubScope(name_);
  std::vector<Operation> updates;
  for (const GradAndVar& gv : grads_and_vars) {
    if (gv.grad.is_null()) continue;
    Scope s = outer.NewSubScope(absl::StrCat("update_", gv.var.name())).ColocateWith(gv.var.op());
    updates.push_back(gv.grad.is_sparse() ? ApplySparse(s, *gv.grad.sparse, gv.var)
                                          : ApplyDense(s, gv.grad.dense, gv.var));
  }
  if (!scope.ok()) return scope.status();
  if (global_step == nullptr) {
    Operation done = Finish(scope, updates);
    if (!scope.ok()) return scope.status();
    return done;
  }
  Operation finish = Finish(outer, updates);
  Operation inc = global_step->AssignAdd(
      scope.WithControlDependencies({finish}).WithOpName(name_).ColocateWith(global_step->op()),
      int64_t{1});
  if (!scope.ok()) return scope.status();
  return inc;
}

absl::StatusOr<Operation> Optimizer::Minimize(const Scope& scope, const Output& loss,
                                              const std::vector<Variable>& var_list,
                                              const Variable* global_step) {
  auto gv = ComputeGradients(scope, loss, var_list);
  if (!gv.ok()) return gv.status();
  return ApplyGradients(scope, *gv, global_step);
}

// ---- GradientDescent ----

Operation GradientDescentOptimizer::ApplyDense(const Scope& s, const Output& grad,
                                               const Variable& var) {
  return Op(s, "ResourceApplyGradientDescent")
      .In(var.handle())
      .In(LearningRate(s, var.dtype()))
      .In(grad)
      .Build();
}

Operation GradientDescentOptimizer::ApplySparse(const Scope& s, const IndexedSlices& grad,
                                                const Variable& var) {
  Output lr = internal::Cast(s, LearningRate(s, var.dtype()), var.dtype());
  Output delta = internal::Mul(s, grad.values, internal::Neg(s, lr));
  return Op(s, "ResourceScatterAdd").In(var.handle()).In(grad.indices).In(delta).Build();
}

// ---- Momentum ----

absl::Status MomentumOptimizer::CreateSlots(const Scope&, const std::vector<Variable>& vars) {
  for (const Variable& v : vars) MakeSlot(v, 0, 0.0);
  return absl::OkStatus();
}

Operation MomentumOptimizer::ApplyDense(const Scope& s, const Output& grad, const Variable& var) {
  return Op(s, "ResourceApplyMomentum")
      .In(var.handle())
      .In(GetSlot(var, 0)->handle())
      .In(LearningRate(s, var.dtype()))
      .In(grad)
      .In(Scalar(s, momentum_, var.dtype()))
      .Attr("use_nesterov", internal::ABool(use_nesterov_))
      .Build();
}

Operation MomentumOptimizer::ApplySparse(const Scope& s, const IndexedSlices& grad,
                                         const Variable& var) {
  const IndexedSlices g = Deduplicate(s, grad);
  return Op(s, "ResourceSparseApplyMomentum")
      .In(var.handle())
      .In(GetSlot(var, 0)->handle())
      .In(LearningRate(s, var.dtype()))
      .In(g.values)
      .In(g.indices)
      .In(Scalar(s, momentum_, var.dtype()))
      .Attr("use_nesterov", internal::ABool(use_nesterov_))
      .Build();
}

// ---- Adam ----

absl::Status AdamOptimizer::CreateSlots(const Scope&, const std::vector<Variable>& vars) {
  // beta1_power / beta2_power live with the first variable by name, as in
  // TensorFlow.
  const Variable* first = &vars[0];
  for (const Variable& v : vars) {
    if (v.name() < first->name()) first = &v;
  }
  Scope s = slot_scope_->ColocateWith(first->op());
  beta_powers_.clear();
  beta_powers_.emplace_back(s.WithOpName("beta1_power"), PartialShape({}), first->dtype(),
                            ScalarInit(options_.beta1, first->dtype()));
  beta_powers_.emplace_back(s.WithOpName("beta2_power"), PartialShape({}), first->dtype(),
                            ScalarInit(options_.beta2, first->dtype()));
  for (const Variable& v : vars) {
    MakeSlot(v, 0, 0.0);
    MakeSlot(v, 1, 0.0);
  }
  return absl::OkStatus();
}

Operation AdamOptimizer::ApplyDense(const Scope& s, const Output& grad, const Variable& var) {
  const DataType t = var.dtype();
  Output b1p = beta_powers_[0].Read(s), b2p = beta_powers_[1].Read(s);
  if (beta_powers_[0].dtype() != t) {
    b1p = internal::Cast(s, b1p, t);
    b2p = internal::Cast(s, b2p, t);
  }
  return Op(s, "ResourceApplyAdam")
      .In(var.handle())
      .In(GetSlot(var, 0)->handle())
      .In(GetSlot(var, 1)->handle())
      .In(b1p)
      .In(b2p)
      .In(LearningRate(s, t))
      .In(Scalar(s, options_.beta1, t))
      .In(Scalar(s, options_.beta2, t))
      .In(Scalar(s, options_.epsilon, t))
      .In(grad)
      .Build();
}

Operation AdamOptimizer::Finish(const Scope& s, const std::vector<Operation>& updates) {
  Scope deps = s.WithControlDependencies(updates);
  std::vector<Operation> done = updates;
  const double betas[2] = {options_.beta1, options_.beta2};
  for (int i = 0; i < 2; ++i) {
    const Variable& p = beta_powers_[i];
    Scope ps = deps.ColocateWith(p.op());
    Output next = internal::Mul(ps, p.Read(ps), Scalar(ps, betas[i], p.dtype()));
    done.push_back(p.Assign(ps, next));
  }
  return Op(s.WithControlDependencies(done).WithOpName(name_), "NoOp").Build();
}

// ---- Adagrad ----

absl::Status AdagradOptimizer::CreateSlots(const Scope&, const std::vector<Variable>& vars) {
  for (const Variable& v : vars) MakeSlot(v, 0, initial_);
  return absl::OkStatus();
}

Operation AdagradOptimizer::ApplyDense(const Scope& s, const Output& grad, const Variable& var) {
  return Op(s, "ResourceApplyAdagrad")
      .In(var.handle())
      .In(GetSlot(var, 0)->handle())
      .In(LearningRate(s, var.dtype()))
      .In(grad)
      .Build();
}

Operation AdagradOptimizer::ApplySparse(const Scope& s, const IndexedSlices& grad,
                                        const Variable& var) {
  const IndexedSlices g = Deduplicate(s, grad);
  return Op(s, "ResourceSparseApplyAdagrad")
      .In(var.handle())
      .In(GetSlot(var, 0)->handle())
      .In(LearningRate(s, var.dtype()))
      .In(g.values)
      .In(g.indices)
      .Build();
}

// ---- RMSProp ----

absl::Status RMSPropOptimizer::CreateSlots(const Scope&, const std::vector<Variable>& vars) {
  for (const Variable& v : vars) {
    MakeSlot(v, 0, 1.0);
    MakeSlot(v, 1, 0.0);
  }
  return absl::OkStatus();
}

Operation RMSPropOptimizer::ApplyDense(const Scope& s, const Output& grad, const Variable& var) {
  const DataType t = var.dtype();
  return Op(s, "ResourceApplyRMSProp")
      .In(var.handle())
      .In(GetSlot(var, 0)->handle())
      .In(GetSlot(var, 1)->handle())
      .In(LearningRate(s, t))
      .In(Scalar(s, options_.decay, t))
      .In(Scalar(s, options_.momentum, t))
      .In(Scalar(s, options_.epsilon, t))
      .In(grad)
      .Build();
}

Operation RMSPropOptimizer::ApplySparse(const Scope& s, const IndexedSlices& grad,
                                        const Variable& var) {
  const IndexedSlices g = Deduplicate(s, grad);
  const DataType t = var.dtype();
  return Op(s, "ResourceSparseApplyRMSProp")
      .In(var.handle())
      .In(GetSlot(var, 0)->handle())
      .In(GetSlot(var, 1)->handle())
      .In(LearningRate(s, t))
      .In(Scalar(s, options_.decay, t))
      .In(Scalar(s, options_.momentum, t))
      .In(Scalar(s, options_.epsilon, t))
      .In(g.values)
      .In(g.indices)
      .Build();
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
