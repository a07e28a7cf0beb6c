// Optimizers: TensorFlow 1.x's tf.train optimizers over resource variables.
//
// Minimize(loss, var_list) = ComputeGradients + ApplyGradients. Every
// update op (Resource*Apply*, ResourceScatter*, slot and accumulator
// updates) is built colocated with its variable (Scope::ColocateWith), so
// when the variable lives on a parameter server the update runs there and
// only the gradient crosses the network. Slot variables (Adam's m and v,
// Momentum's accumulator, …) are created colocated with their variable and
// named as TensorFlow names them: "<var>/Adam", "<var>/Adam_1",
// "<var>/Momentum", "<var>/Adagrad", "<var>/RMSProp", "<var>/RMSProp_1";
// Adam's "beta1_power"/"beta2_power" live with the first variable.
//
// Sparse gradients (IndexedSlices from gathers) use sparse updates:
// GradientDescent a ResourceScatterAdd of -lr * values, Momentum, Adagrad
// and RMSProp their ResourceSparseApply* ops, which touch only the named
// rows of the variable and its slots (after Deduplicate: a repeated index
// is one update with the summed rows, as in TensorFlow). Adam (which, as TensorFlow 1.x's
// does for m and v, updates every row of its slots anyway) densifies the
// slices with an UnsortedSegmentSum colocated with the variable, so the
// rows still travel sparse.
//
// The returned train op, when run, applies one step; with a global_step it
// is the AssignAddVariableOp incrementing it after every update.
//
// Errors building ops are recorded on the scope and returned. An optimizer
// object keeps its slots, so ApplyGradients may be called once per object
// for a given variable set. Same thread-safety as Scope.
#ifndef GRAPHRUN_CLIENT_TRAIN_OPTIMIZERS_H_
#define GRAPHRUN_CLIENT_TRAIN_OPTIMIZERS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/operation.h"
#include "client/scope.h"
#include "client/train/gradients.h"
#include "client/variables.h"

namespace graphrun {
namespace client {
namespace train {

struct GradAndVar {
  Gradient grad;  // null: the variable is left unchanged
  Variable var;
};

// The int64 scalar resource variable "global_step" (initialised to 0),
// built at the root name scope of `scope`'s graph with `scope`'s devices.
Variable CreateGlobalStep(const Scope& scope);

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Gradients of `loss` for every variable (null where not connected).
  absl::StatusOr<std::vector<GradAndVar>> ComputeGradients(const Scope& scope, const Output& loss,
                                                           const std::vector<Variable>& var_list);
  // Builds one update per variable with a gradient, and returns the train
  // op: a NoOp named after the optimizer grouping them, or, with
  // `global_step`, the increment of global_step that runs after them.
  // InvalidArgument when no variable has a gradient.
  absl::StatusOr<Operation> ApplyGradients(const Scope& scope,
                                           const std::vector<GradAndVar>& grads_and_vars,
                                           const Variable* global_step = nullptr);
  absl::StatusOr<Operation> Minimize(const Scope& scope, const Output& loss,
                                     const std::vector<Variable>& var_list,
                                     const Variable* global_step = nullptr);

  // The slot variable `slot` (0 = first, 1 = second) of `var`; null
  // handle when none was made.
  Variable* GetSlot(const Variable& var, int slot);
  const std::string& name() const { return name_; }
  // The absolute name scope of the state that is not a slot (Adam's beta
  // powers); default the root. One optimizer per mirrored replica gives
  // each copy its own ("replica_1/beta1_power").
  void set_state_name_scope(std::string scope) { state_name_scope_ = std::move(scope); }
  // Every variable the optimizer created: slots (by variable name, then
  // slot index), then non-slot state such as Adam's beta powers
  // (TensorFlow's Optimizer.variables()); what a Saver must also save.
  std::vector<Variable> variables() const;

 protected:
  Optimizer(std::string name, Input learning_rate)
      : name_(std::move(name)), learning_rate_(std::move(learning_rate)) {}

  // Before any update: create slots (default none).
  virtual absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars);
  // One update, built in `s` (colocated with the variable).
  virtual Operation ApplyDense(const Scope& s, const Output& grad, const Variable& var) = 0;
  // Default: densify (in `s`) and ApplyDense.
  virtual Operation ApplySparse(const Scope& s, const IndexedSlices& grad, const Variable& var);
  // One row per distinct index, repeated indices' rows summed (Unique +
  // UnsortedSegmentSum, TensorFlow's _deduplicate_indexed_slices): what
  // the sparse updates of Momentum, Adagrad and RMSProp apply, so a row
  // gathered twice gets one update with its summed gradient, as the dense
  // update would.
  static IndexedSlices Deduplicate(const Scope& s, const IndexedSlices& grad);
  // After the updates (built with control dependencies on them): default a
  // NoOp grouping them.
  virtual Operation Finish(const Scope& s, const std::vector<Operation>& updates);
  // Variables that are not slots (default none).
  virtual std::vector<Variable> NonSlotVariables() const { return {}; }

  // Creates slot `index` of `var`: "<var>/<name><_index>" initialised to
  // `value` (a scalar filled to the variable's shape).
  Variable& MakeSlot(const Variable& var, int index, double value);
  // The learning rate for a variable of `dtype` (a literal converts).
  Input LearningRate(const Scope& s, DataType dtype) const;
  // A scalar constant of `dtype` built in `s`.
  static Output Scalar(const Scope& s, double v, DataType dtype);
  // An initializer filling `value` converted to `dtype`.
  static Initializer ScalarInit(double value, DataType dtype);

  std::string name_;
  Input learning_rate_;
  std::map<std::pair<std::string, int>, Variable> slots_;
  std::string state_name_scope_;
  // Root name scope, no control dependencies: where slots are created.
  std::optional<Scope> slot_scope_;
};

class GradientDescentOptimizer : public Optimizer {
 public:
  explicit GradientDescentOptimizer(Input learning_rate)
      : Optimizer("GradientDescent", std::move(learning_rate)) {}

 protected:
  Operation ApplyDense(const Scope& s, const Output& grad, const Variable& var) override;
  Operation ApplySparse(const Scope& s, const IndexedSlices& grad, const Variable& var) override;
};

class MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(Input learning_rate, double momentum, bool use_nesterov = false)
      : Optimizer("Momentum", std::move(learning_rate)),
        momentum_(momentum),
        use_nesterov_(use_nesterov) {}

 protected:
  absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) override;
  Operation ApplyDense(const Scope& s, const Output& grad, const Variable& var) override;
  Operation ApplySparse(const Scope& s, const IndexedSlices& grad, const Variable& var) override;

 private:
  double momentum_;
  bool use_nesterov_;
};

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

class AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(Input learning_rate = 0.001, AdamOptions options = {})
      : Optimizer("Adam", std::move(learning_rate)), options_(options) {}

 protected:
  absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) override;
  Operation ApplyDense(const Scope& s, const Output& grad, const Variable& var) override;
  Operation Finish(const Scope& s, const std::vector<Operation>& updates) override;
  std::vector<Variable> NonSlotVariables() const override { return beta_powers_; }

 private:
  AdamOptions options_;
  std::vector<Variable> beta_powers_;  // beta1_power, beta2_power
};

class AdagradOptimizer : public Optimizer {
 public:
  explicit AdagradOptimizer(Input learning_rate, double initial_accumulator_value = 0.1)
      : Optimizer("Adagrad", std::move(learning_rate)), initial_(initial_accumulator_value) {}

 protected:
  absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) override;
  Operation ApplyDense(const Scope& s, const Output& grad, const Variable& var) override;
  Operation ApplySparse(const Scope& s, const IndexedSlices& grad, const Variable& var) override;

 private:
  double initial_;
};

struct RMSPropOptions {
  double decay = 0.9;  // rho
  double momentum = 0.0;
  double epsilon = 1e-10;
};

class RMSPropOptimizer : public Optimizer {
 public:
  explicit RMSPropOptimizer(Input learning_rate, RMSPropOptions options = {})
      : Optimizer("RMSProp", std::move(learning_rate)), options_(options) {}

 protected:
  // Slot 0 "rms" starts at ones (TensorFlow 1.x), slot 1 "momentum" at 0.
  absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) override;
  Operation ApplyDense(const Scope& s, const Output& grad, const Variable& var) override;
  Operation ApplySparse(const Scope& s, const IndexedSlices& grad, const Variable& var) override;

 private:
  RMSPropOptions options_;
};

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_OPTIMIZERS_H_
