// Symbolic gradients: builds, into the graph of a Scope, the ops computing
// d(sum of ys · grad_ys)/d(xs) by reverse-mode differentiation, the way
// TensorFlow's gradients do.
//
// The algorithm: the nodes that matter are those on a path from some x to
// some y along edges that carry a floating-point (or resource) value.
// Each such node waits for the gradients of all its consumers among them
// (a pending count per node); multiple gradients reaching one output are
// summed (AddN for dense ones; sparse ones are concatenated). When a node is
// ready its registered gradient function turns the gradients of its outputs
// into gradients of its inputs. Backprop starts at ys with `grad_ys` (ones
// when empty) and ends at xs.
//
// Gradients are Gradient values: dense (an Output), sparse (IndexedSlices,
// from gathers) or none. Gradient functions are looked up by op type in a
// GradientRegistry (DefaultGradientRegistry() holds the built-in ones;
// tests may build their own).
//
// An x that no y depends on gets no gradient: a null Output from
// AddSymbolicGradients (Python tf.gradients' None), or zeros when
// GradientOptions::unconnected_zeros is set (not for resource handles).
// Resource variables are differentiated through their handle: x = the
// VarHandleOp output, and ReadVariableOp / ResourceGather pass the gradient
// to it (dense, or IndexedSlices from ResourceGather).
//
// Conditionals built of Switch and Merge (tf.cond's ops) are differentiated
// (grad_control_flow.cc), and so are whole while loops, from their Exits to
// their Enters, with a backprop loop (grad_while.h: the limits are there).
// A stray Enter or Exit outside a recognisable loop has no gradient
// function: Unimplemented naming the node. Call frames (PartitionedCall /
// StatefulPartitionedCall of a `_noinline` function) are differentiated by
// recomputing their body inline (grad_call.cc: side-effect-free bodies). Thread-safety: as the
// Scope's (one thread per graph).
#ifndef GRAPHRUN_CLIENT_TRAIN_GRADIENTS_H_
#define GRAPHRUN_CLIENT_TRAIN_GRADIENTS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "client/operation.h"
#include "client/scope.h"
#include "client/train/indexed_slices.h"

namespace graphrun {
namespace client {
namespace train {

// The gradient flowing into one tensor: none, dense or sparse.
struct Gradient {
  Output dense;                         // set when dense
  std::optional<IndexedSlices> sparse;  // set when sparse

  Gradient() = default;
  Gradient(Output d) : dense(d) {}                     // NOLINT: a dense gradient
  Gradient(IndexedSlices s) : sparse(std::move(s)) {}  // NOLINT
  bool is_null() const { return !sparse.has_value() && dense.node() == nullptr; }
  bool is_sparse() const { return sparse.has_value(); }
};

// The dense form of `g` (null stays null).
Output ToDense(const Scope& scope, const Gradient& g);

// A gradient function: given the op and the gradients of its outputs
// (null where nothing flowed back), returns one Gradient per input of the
// op (null for inputs without a gradient). Ops are built in `scope`, a
// name scope "gradients/<op name>_grad". Errors name the op.
using GradFunc = std::function<absl::StatusOr<std::vector<Gradient>>(
    const Scope& scope, const Operation& op, const std::vector<Gradient>& dys)>;
// The common case: dense in, dense out (null Outputs mean none). Sparse
// gradients of the outputs are densified before the call.
using DenseGradFunc = std::function<absl::StatusOr<std::vector<Output>>(
    const Scope& scope, const Operation& op, const std::vector<Output>& dys)>;

// Gradient functions by op type. Not thread-safe for mutation; lookups on
// a registry nobody mutates are safe.
class GradientRegistry {
 public:
  // Registers `f` for `op`, replacing any earlier one.
  void Add(const std::string& op, GradFunc f);
  void AddDense(const std::string& op, DenseGradFunc f);
  // Declares `op` not differentiable: its inputs get no gradient.
  void AddNoGradient(const std::string& op);

  // Null when `op` has no entry; a no-gradient op gives a function
  // returning nulls.
  const GradFunc* Lookup(const std::string& op) const;
  bool Has(const std::string& op) const { return funcs_.contains(op); }

 private:
  absl::flat_hash_map<std::string, GradFunc> funcs_;
};

// Registration functions (no static initializers), one per family.
void RegisterMathGradients(GradientRegistry& r);         // grad_math.cc
void RegisterNnGradients(GradientRegistry& r);           // grad_nn.cc
void RegisterArrayGradients(GradientRegistry& r);        // grad_array.cc
void RegisterControlFlowGradients(GradientRegistry& r);  // grad_control_flow.cc
void RegisterCallGradients(GradientRegistry& r);         // grad_call.cc: call frames
void RegisterAllGradients(GradientRegistry& r);

// The registry with every built-in gradient, built on first use.
const GradientRegistry& DefaultGradientRegistry();

struct GradientOptions {
  // Zeros (ZerosLike(x)) instead of a null gradient for an x that no y
  // depends on. Never for resource handles (their gradient stays null).
  bool unconnected_zeros = false;
  // Build each gradient op colocated with the op it differentiates
  // (TensorFlow's colocate_gradients_with_ops).
  bool colocate_gradients_with_ops = false;
  // Null means DefaultGradientRegistry().
  const GradientRegistry* registry = nullptr;
};

// The gradients of ys (weighted by grad_ys, ones when empty) with respect
// to each x, possibly sparse. REQUIRES: grad_ys empty or one per y, of the
// y's type and shape. InvalidArgument for mismatched sizes or null inputs;
// Unimplemented naming the node for an op on the path with no gradient
// function; any error a gradient function returns.
absl::StatusOr<std::vector<Gradient>> ComputeGradients(const Scope& scope,
                                                       const std::vector<Output>& ys,
                                                       const std::vector<Output>& xs,
                                                       const std::vector<Output>& grad_ys,
                                                       const GradientOptions& options = {});

// As ComputeGradients, with every gradient made dense (sparse ones through
// IndexedSlicesToDense). Unconnected xs give null Outputs (see above).
absl::StatusOr<std::vector<Output>> AddSymbolicGradients(const Scope& scope,
                                                         const std::vector<Output>& ys,
                                                         const std::vector<Output>& xs,
                                                         const std::vector<Output>& grad_ys);

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_GRADIENTS_H_
