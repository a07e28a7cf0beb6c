#include "client/train/sync_replicas_optimizer.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/ops.h"
#include "client/train/indexed_slices.h"
#include "graph/status.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

// `x` as int64 (a Cast built in `scope` unless it already is).
Output ToInt64(const Scope& scope, const Output& x) {
  return x.type() == DT_INT64 ? x : Output(ops::Cast(scope, x, DT_INT64));
}

}  // namespace

SyncReplicasOptimizer::SyncReplicasOptimizer(Optimizer* optimizer, SyncReplicasOptions options)
    : optimizer_(optimizer), options_(options) {
  if (options_.total_num_replicas < 0) options_.total_num_replicas = options_.replicas_to_aggregate;
}

absl::StatusOr<Operation> SyncReplicasOptimizer::Minimize(const Scope& scope, const Output& loss,
                                                          const std::vector<Variable>& var_list,
                                                          const Variable* global_step) {
  GR_ASSIGN_OR_RETURN(std::vector<GradAndVar> gv, ComputeGradients(scope, loss, var_list));
  return ApplyGradients(scope, gv, global_step);
}

absl::StatusOr<Operation> SyncReplicasOptimizer::ApplyGradients(
    const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
    const Variable* global_step) {
  GR_RETURN_IF_ERROR(scope.status());
  if (global_step == nullptr) {
    return absl::InvalidArgumentError("SyncReplicasOptimizer: a global_step is required");
  }
  if (options_.replicas_to_aggregate < 1 || options_.total_num_replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SyncReplicasOptimizer: replicas_to_aggregate (", options_.replicas_to_aggregate,
        ") and total_num_replicas (", options_.total_num_replicas, ") must be >= 1"));
  }
  if (applied_) {
    return absl::FailedPreconditionError(
        "SyncReplicasOptimizer: ApplyGradients was already called on this object");
  }
  applied_ = true;
  const Scope root = scope.WithNameScope("").WithNoControlDependencies();
  const Scope sg = root.ColocateWith(global_step->op());

  // The worker's local step, kept on the worker: colocated with a NoOp
  // that takes the caller's device scope (a device function leaves it on
  // the worker). Not registered for the global initializer.
  Operation anchor = ops::NoOp(root.WithOpName("sync_rep_local_anchor")).operation;
  local_step_ = std::make_unique<Variable>(
      root.ColocateWith(anchor).WithOpName("sync_rep_local_step"), PartialShape({}), DT_INT64);
  auto queue = ops::FIFOQueueV2(sg.WithOpName("sync_token_q"), {DT_INT64},
                                ops::FIFOQueueV2::Shapes({PartialShape({})})
                                    .SharedName("sync_token_q")
                                    .Container(kSyncReplicasContainer));
  // Which chief_init_op made the synchronization state: a random number
  // per build of the graph (a chief rebuilds it after a loss).
  auto generation = ops::VarHandleOp(
      sg.WithOpName("sync_rep_generation"), DT_INT64, PartialShape({}),
      ops::VarHandleOp::SharedName("sync_rep_generation").Container(kSyncReplicasContainer));
  generation_ =
      ops::ReadVariableOp(sg.WithOpName("sync_rep_generation/read"), generation.resource, DT_INT64)
          .value;
  generation_ready_ =
      ops::VarIsInitializedOp(sg.WithOpName("sync_rep_generation/ready"), generation.resource)
          .is_initialized;

  Scope s = scope.NewSubScope("sync_replicas");
  Output local_step = local_step_->Read(s);
  std::vector<Operation> applies, takes, set_steps;
  // Every accumulator's handle, and whether it is the sparse (ref) kind.
  std::vector<std::pair<Output, bool>> accumulators;
  std::vector<GradAndVar> averaged;
  for (const GradAndVar& gv : grads_and_vars) {
    if (gv.grad.is_null()) continue;
    const Variable& var = gv.var;
    const std::string accum_name = absl::StrCat(var.name(), "/grad_accum");
    Scope sv = root.ColocateWith(var.op()).WithOpName(accum_name);
    Scope sa = s.NewSubScope(absl::StrCat("accumulate_", var.name())).ColocateWith(var.op());
    if (gv.grad.is_sparse()) {
      // Only the gradient's rows travel: indices, values and dense shape.
      const IndexedSlices& g = *gv.grad.sparse;
      auto accum = ops::SparseConditionalAccumulator(
          sv, var.dtype(), var.shape(),
          ops::SparseConditionalAccumulator::SharedName(accum_name)
              .Container(kSyncReplicasContainer));
      applies.push_back(ops::SparseAccumulatorApplyGradient(sa, accum.handle, local_step,
                                                            ToInt64(sa, g.indices), g.values,
                                                            ToInt64(sa, g.dense_shape),
                                                            /*has_known_shape=*/true)
                            .operation);
      auto take = ops::SparseAccumulatorTakeGradient(sa.WithOpName("take"), accum.handle,
                                                     options_.replicas_to_aggregate, var.dtype());
      takes.push_back(take.operation);
      averaged.push_back(
          {Gradient(IndexedSlices{take.values, take.indices, ops::Cast(sa, take.shape, DT_INT32)}),
           var});
      accumulators.emplace_back(accum.handle, true);
    } else {
      auto accum = ops::ResourceConditionalAccumulator(
          sv, var.dtype(), var.shape(),
          ops::ResourceConditionalAccumulator::SharedName(accum_name)
              .Container(kSyncReplicasContainer));
      applies.push_back(
          ops::ResourceAccumulatorApplyGradient(sa, accum, local_step, gv.grad.dense).operation);
      auto take = ops::ResourceAccumulatorTakeGradient(sa.WithOpName("take"), accum,
                                                       options_.replicas_to_aggregate, var.dtype());
      takes.push_back(take.operation);
      averaged.push_back({Gradient(take.average), var});
      accumulators.emplace_back(accum.handle, false);
    }
  }
  GR_RETURN_IF_ERROR(scope.status());
  if (applies.empty()) {
    return absl::InvalidArgumentError(
        "SyncReplicasOptimizer: no gradients provided for any variable");
  }

  // Worker: accumulate, then wait for the chief's token.
  auto token = ops::QueueDequeueV2(
      s.ColocateWith(global_step->op()).WithControlDependencies(applies), queue, {DT_INT64});
  Operation train_op = local_step_->Assign(s.WithOpName("train_op"), token[0]);

  // Chief: take every average, apply once, release the tokens.
  Scope chief = s.NewSubScope("chief").WithControlDependencies(takes);
  GR_ASSIGN_OR_RETURN(Operation update, optimizer_->ApplyGradients(chief, averaged, global_step));
  Output new_step =
      global_step->Read(chief.ColocateWith(global_step->op()).WithControlDependencies({update}));
  auto tokens = ops::Fill(chief.ColocateWith(global_step->op()),
                          ops::Const(chief, {options_.total_num_replicas}), new_step);
  chief_sync_ =
      ops::QueueEnqueueManyV2(sg.WithOpName("sync_replicas/chief_sync"), queue, {Output(tokens)})
          .operation;

  // Chief, after init or restore: accumulators at the current global step;
  // extra tokens when one update needs more gradients than workers.
  Scope init = s.NewSubScope("chief_init");
  Output current = global_step->Read(init.ColocateWith(global_step->op()));
  for (const auto& [accum, sparse] : accumulators) {
    Scope sa = init.ColocateWith(accum.op());
    set_steps.push_back(sparse
                            ? ops::AccumulatorSetGlobalStep(sa, accum, current).operation
                            : ops::ResourceAccumulatorSetGlobalStep(sa, accum, current).operation);
  }
  const int extra = options_.replicas_to_aggregate - options_.total_num_replicas;
  if (extra > 0) {
    auto init_tokens =
        ops::Fill(init.ColocateWith(global_step->op()), ops::Const(init, {extra}), current);
    set_steps.push_back(
        ops::QueueEnqueueManyV2(init.ColocateWith(global_step->op()), queue, {Output(init_tokens)})
            .operation);
  }
  // The generation last: a worker that sees it finds the rest ready.
  int64_t stamp = 0;
  std::random_device rd;
  while (stamp == 0) stamp = static_cast<int64_t>((uint64_t{rd()} << 32) | rd());
  chief_init_ = ops::AssignVariableOp(
                    sg.WithOpName("sync_replicas/chief_init_op").WithControlDependencies(set_steps),
                    generation.resource, ops::Const(sg, stamp))
                    .operation;
  local_step_init_ = local_step_->Assign(s.WithOpName("local_step_init_op"),
                                         global_step->Read(s.ColocateWith(global_step->op())));
  close_queue_ = ops::QueueCloseV2(sg.WithOpName("sync_replicas/close_token_queue"), queue,
                                   ops::QueueCloseV2::CancelPendingEnqueues(true))
                     .operation;
  GR_RETURN_IF_ERROR(scope.status());
  return train_op;
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
