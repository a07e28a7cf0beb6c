#include "client/train/mirrored_strategy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ops.h"
#include "graph/status.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

bool FullyDefined(const PartialShape& s) {
  if (!s.known_rank()) return false;
  for (int64_t d : s.dims()) {
    if (d < 0) return false;
  }
  return true;
}

// The mean of scalars (one per replica), built in `s`.
Output Mean(const Scope& s, const std::vector<Output>& values) {
  if (values.size() == 1) return ops::Identity(s, values[0]);
  std::vector<Input> in(values.begin(), values.end());
  return ops::RealDiv(s, ops::AddN(s, InputList(in)), static_cast<float>(values.size()));
}

int64_t NumElements(const PartialShape& s) {
  int64_t n = 1;
  for (int64_t d : s.dims()) n *= d;
  return n;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<Output>>> AllReduceMean(
    const Scope& scope, const std::vector<std::string>& devices,
    const std::vector<std::vector<Output>>& per_replica, const std::vector<PartialShape>& shapes,
    const AllReduceOptions& options, AllReducePlan* plan, int group_size) {
  const int n = static_cast<int>(devices.size());
  const int members = group_size > 0 ? group_size : n;
  if (n < 1 || static_cast<int>(per_replica.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("all-reduce: ", per_replica.size(), " replicas' tensors for ", n, " devices"));
  }
  const size_t count = shapes.size();
  for (int k = 0; k < n; ++k) {
    if (per_replica[k].size() != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "all-reduce: replica ", k, " has ", per_replica[k].size(), " tensors, expected ", count));
    }
  }
  if (count == 0) return per_replica;
  const DataType dtype = per_replica[0][0].type();
  for (size_t j = 0; j < count; ++j) {
    if (per_replica[0][j].type() != dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "all-reduce: tensor ", j, " (", per_replica[0][j].name(), ") is ",
          DataTypeString(per_replica[0][j].type()), ", the others ", DataTypeString(dtype)));
    }
  }
  const int64_t elem = DataTypeSize(dtype);
  // Packs: consecutive fully defined tensors up to pack_bytes.
  std::vector<std::vector<size_t>> packs;
  int64_t pack_bytes = 0;
  int64_t total_bytes = 0;
  for (size_t j = 0; j < count; ++j) {
    const bool known = FullyDefined(shapes[j]);
    const int64_t bytes = known ? NumElements(shapes[j]) * elem : 0;
    total_bytes += bytes;
    const bool fits = known && !packs.empty() && options.pack_bytes > 0 && pack_bytes > 0 &&
                      pack_bytes + bytes <= options.pack_bytes;
    if (fits) {
      packs.back().push_back(j);
      pack_bytes += bytes;
    } else {
      packs.push_back({j});
      pack_bytes = known ? bytes : 0;
    }
  }
  std::vector<std::vector<Output>> out(n, std::vector<Output>(count));
  auto attrs = ops::CollectiveReduceV2::CommunicationHint(options.communication_hint)
                   .TimeoutSeconds(options.timeout_seconds);
  for (int k = 0; k < n; ++k) {
    Scope s = scope.WithDevice(devices[k]).NewSubScope("allreduce");
    Output size = ops::Const(s.WithOpName("group_size"), int32_t{members});
    Output group_key = ops::Const(s.WithOpName("group_key"), options.group_key);
    for (size_t p = 0; p < packs.size(); ++p) {
      const std::vector<size_t>& pack = packs[p];
      Scope ps = s.NewSubScope(absl::StrCat("pack_", p));
      Output instance = ops::Const(ps.WithOpName("instance_key"),
                                   int32_t{options.first_instance_key + static_cast<int32_t>(p)});
      if (pack.size() == 1) {
        out[k][pack[0]] =
            ops::CollectiveReduceV2(ps, per_replica[k][pack[0]], size, group_key, instance,
                                    InputList(std::vector<Input>{}), "Add", "Div", attrs);
        continue;
      }
      std::vector<Input> flats;
      std::vector<int64_t> sizes;
      for (size_t j : pack) {
        flats.push_back(ops::Reshape(ps, per_replica[k][j], Tensor::FromVector<int32_t>({-1})));
        sizes.push_back(NumElements(shapes[j]));
      }
      Output packed = ops::ConcatV2(ps, InputList(flats), int32_t{0});
      Output reduced =
          ops::CollectiveReduceV2(ps, packed, size, group_key, instance,
                                  InputList(std::vector<Input>{}), "Add", "Div", attrs);
      auto parts = ops::SplitV(ps, reduced, Tensor::FromVector<int64_t>(sizes), int32_t{0},
                               static_cast<int64_t>(pack.size()));
      for (size_t i = 0; i < pack.size(); ++i) {
        const std::vector<int64_t> dims(shapes[pack[i]].dims().begin(),
                                        shapes[pack[i]].dims().end());
        std::vector<int64_t> shape(dims.begin(), dims.end());
        out[k][pack[i]] = ops::Reshape(
            ps, parts[i],
            Tensor::FromVector<int64_t>(shape, TensorShape({static_cast<int64_t>(shape.size())})));
      }
    }
  }
  GR_RETURN_IF_ERROR(scope.status());
  if (plan != nullptr) {
    plan->tensors = static_cast<int>(count);
    plan->packs = static_cast<int>(packs.size());
    plan->bytes = total_bytes;
    plan->replicas = members;
    plan->algorithm = options.communication_hint;
    plan->pack_bytes.clear();
    for (const std::vector<size_t>& pack : packs) {
      int64_t b = 0;
      for (size_t j : pack) b += FullyDefined(shapes[j]) ? NumElements(shapes[j]) * elem : 0;
      plan->pack_bytes.push_back(b);
    }
  }
  return out;
}

absl::StatusOr<MirroredStrategy> MirroredStrategy::Create(int num_replicas,
                                                          AllReduceOptions options,
                                                          const std::string& device_type) {
  if (num_replicas < 1 || num_replicas > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("mirrored: num_replicas must be in [1, 256], got ", num_replicas));
  }
  if (options.pack_bytes < 0) {
    return absl::InvalidArgumentError("mirrored: allreduce pack_bytes must be >= 0");
  }
  const bool type_ok =
      !device_type.empty() && std::all_of(device_type.begin(), device_type.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      });
  if (!type_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("mirrored: '", device_type, "' is not a device type (CPU, GPU, ...)"));
  }
  MirroredStrategy m;
  m.device_type_ = device_type;
  for (int k = 0; k < num_replicas; ++k) {
    m.devices_.push_back(absl::StrCat("/device:", device_type, ":", k));
  }
  m.options_ = std::move(options);
  return m;
}

SessionOptions MirroredStrategy::session_options(const std::string& target) const {
  SessionOptions so;
  so.target = target;
  if (device_type_ == "CPU") {
    (*so.config.mutable_device_count())["CPU"] = num_replicas();
  } else {
    (*so.config.mutable_device_count())["CPU"] = 1;
    (*so.config.mutable_device_count())[device_type_] = num_replicas();
    so.config.set_allow_soft_placement(true);
  }
  so.config.set_intra_op_parallelism_threads(intra_);
  so.config.set_inter_op_parallelism_threads(inter_);
  return so;
}

Scope ReplicaScopeOn(const Scope& root, const std::string& device, int k) {
  Scope s = root.WithDevice(device);
  return k == 0 ? s : s.NewSubScope(absl::StrCat("replica_", k));
}

std::vector<Output> SplitBatchAmong(const Scope& scope, const Output& batch, int64_t per_replica,
                                    int n) {
  if (n == 1) return {batch};
  std::vector<Output> pieces;
  Scope s = scope.NewSubScope("split_batch");
  auto parts = ops::SplitV(
      s, batch,
      Tensor::FromVector<int64_t>(std::vector<int64_t>(static_cast<size_t>(n), per_replica)),
      int32_t{0}, static_cast<int64_t>(n));
  for (int k = 0; k < n; ++k) pieces.push_back(parts[k]);
  return pieces;
}

Scope MirroredStrategy::ReplicaScope(const Scope& root, int k) const {
  return ReplicaScopeOn(root, devices_[k], k);
}

std::vector<Output> MirroredStrategy::SplitBatch(const Scope& scope, const Output& batch,
                                                 int64_t per_replica) const {
  return SplitBatchAmong(scope, batch, per_replica, num_replicas());
}

Output MirroredStrategy::MeanOfReplicas(const Scope& scope,
                                        const std::vector<Output>& values) const {
  return Mean(scope.WithDevice(devices_[0]), values);
}

absl::StatusOr<std::vector<std::vector<Output>>> MirroredStrategy::AllReduce(
    const Scope& scope, const std::vector<std::vector<Output>>& per_replica,
    const std::vector<PartialShape>& shapes, AllReducePlan* plan) const {
  return AllReduceMean(scope, devices_, per_replica, shapes, options_, plan);
}

absl::StatusOr<Operation> MirroredStrategy::BuildMirrorSync(
    const Scope& scope, const std::vector<std::vector<Variable>>& copies) const {
  return train::BuildMirrorSync(scope, devices_, copies);
}

absl::StatusOr<Operation> BuildMirrorSync(const Scope& scope,
                                          const std::vector<std::string>& devices,
                                          const std::vector<std::vector<Variable>>& copies) {
  if (copies.size() != devices.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mirrored: ", copies.size(), " replicas' variables for ", devices.size(), " replicas"));
  }
  Scope s = scope.NewSubScope("mirror_sync");
  std::vector<Operation> assigns;
  for (size_t k = 1; k < copies.size(); ++k) {
    if (copies[k].size() != copies[0].size()) {
      return absl::InvalidArgumentError(absl::StrCat("mirrored: replica ", k, " has ",
                                                     copies[k].size(), " variables, replica 0 ",
                                                     copies[0].size()));
    }
    for (size_t j = 0; j < copies[k].size(); ++j) {
      const Variable& primary = copies[0][j];
      const Variable& copy = copies[k][j];
      if (copy.dtype() != primary.dtype()) {
        return absl::InvalidArgumentError(
            absl::StrCat("mirrored: ", copy.name(), " is ", DataTypeString(copy.dtype()), " but ",
                         primary.name(), " is ", DataTypeString(primary.dtype())));
      }
      assigns.push_back(copy.Assign(s, primary.Read(s.WithDevice(devices[k]))));
    }
  }
  Operation done = ops::NoOp(s.WithOpName("done").WithControlDependencies(assigns));
  GR_RETURN_IF_ERROR(s.status());
  return done;
}

absl::StatusOr<TrainStep> MirroredStrategy::BuildTrainStep(
    const Scope& root, const std::vector<Output>& global_inputs, int64_t global_batch,
    const ModelFn& model_fn, const OptimizerFn& optimizer_fn, const Variable* global_step) const {
  GR_ASSIGN_OR_RETURN(int64_t per_replica, PerReplicaBatch(global_batch));
  const int n = num_replicas();
  LocalReplicas local;
  local.inputs.resize(n);
  Scope input_scope = root.WithDevice(devices_[0]);
  for (const Output& in : global_inputs) {
    std::vector<Output> pieces = SplitBatch(input_scope, in, per_replica);
    for (int k = 0; k < n; ++k) local.inputs[k].push_back(pieces[k]);
  }
  for (int k = 0; k < n; ++k) local.scopes.push_back(ReplicaScope(root, k));
  local.devices = devices_;
  GR_ASSIGN_OR_RETURN(TrainStep step, BuildAllReduceTrainStep(root, local, n, options_, model_fn,
                                                              optimizer_fn, global_step));
  GR_ASSIGN_OR_RETURN(step.after_restore,
                      train::BuildMirrorSync(root, local.devices, ReplicaCopies(step)));
  // The replicas meet in this process, whatever the hint: GPUs through
  // NCCL in device memory where it loads, other accelerators' data staged
  // through the host.
  if (device_type_ == "CPU") {
    step.plan.algorithm = "shared memory";
  } else if (device_type_ == "GPU") {
    step.plan.algorithm = "NCCL in GPU memory (through the host where NCCL does not load)";
  } else {
    step.plan.algorithm = absl::StrCat("shared memory (", device_type_, " through the host)");
  }
  return step;
}

absl::StatusOr<TrainStep> BuildAllReduceTrainStep(const Scope& root, const LocalReplicas& local,
                                                  int group_size, const AllReduceOptions& options,
                                                  const ModelFn& model_fn,
                                                  const OptimizerFn& optimizer_fn,
                                                  const Variable* global_step) {
  const int n = static_cast<int>(local.scopes.size());
  if (n < 1 || local.devices.size() != local.scopes.size() ||
      local.inputs.size() != local.scopes.size()) {
    return absl::InvalidArgumentError("all-reduce training: ragged local replicas");
  }
  TrainStep step;
  std::vector<std::vector<Output>> grads(n);
  std::vector<std::vector<Variable>> trainable(n);
  for (int k = 0; k < n; ++k) {
    const Scope& s = local.scopes[k];
    GR_ASSIGN_OR_RETURN(ReplicaModel m, model_fn(s, k, local.inputs[k]));
    if (k > 0 && (m.trainable.size() != step.replicas[0].trainable.size() ||
                  m.variables.size() != step.replicas[0].variables.size() ||
                  m.metrics.size() != step.replicas[0].metrics.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("mirrored: replica ", k, " built another model than replica 0 (variables ",
                       m.variables.size(), " vs ", step.replicas[0].variables.size(), ")"));
    }
    std::unique_ptr<Optimizer> opt = optimizer_fn();
    if (k > 0) opt->set_state_name_scope(absl::StrCat("replica_", k));
    GR_ASSIGN_OR_RETURN(std::vector<GradAndVar> gv, opt->ComputeGradients(s, m.loss, m.trainable));
    for (const GradAndVar& g : gv) {
      if (g.grad.is_null()) {
        return absl::InvalidArgumentError(
            absl::StrCat("mirrored: no gradient for variable ", g.var.name()));
      }
      // A sparse gradient (an embedding's) is all-reduced dense.
      grads[k].push_back(g.grad.is_sparse() ? ToDense(s, g.grad) : g.grad.dense);
    }
    trainable[k] = m.trainable;
    step.replicas.push_back(std::move(m));
    step.optimizers.push_back(std::move(opt));
  }
  std::vector<PartialShape> shapes;
  for (const Variable& v : trainable[0]) shapes.push_back(v.shape());
  GR_ASSIGN_OR_RETURN(
      std::vector<std::vector<Output>> reduced,
      AllReduceMean(root, local.devices, grads, shapes, options, &step.plan, group_size));
  std::vector<Operation> applies;
  for (int k = 0; k < n; ++k) {
    Scope s = local.scopes[k];
    if (!step.replicas[k].update_ops.empty()) {
      s = s.WithControlDependencies(step.replicas[k].update_ops);
    }
    std::vector<GradAndVar> gv;
    for (size_t j = 0; j < reduced[k].size(); ++j) {
      gv.push_back(GradAndVar{Gradient(reduced[k][j]), trainable[k][j]});
    }
    GR_ASSIGN_OR_RETURN(Operation apply, step.optimizers[k]->ApplyGradients(s, gv));
    applies.push_back(apply);
  }
  Scope s0 = root.WithDevice(local.devices[0]);
  if (global_step != nullptr) {
    Operation inc =
        global_step->AssignAdd(s0.WithControlDependencies(applies).WithOpName("step"), int64_t{1});
    step.train_op = ops::NoOp(s0.WithOpName("train").WithControlDependencies({inc}));
  } else {
    step.train_op = ops::NoOp(s0.WithOpName("train").WithControlDependencies(applies));
  }
  std::vector<Output> losses;
  for (const ReplicaModel& m : step.replicas) losses.push_back(m.loss);
  step.loss = Mean(s0.NewSubScope("loss"), losses);
  for (size_t i = 0; i < step.replicas[0].metrics.size(); ++i) {
    std::vector<Output> values;
    for (const ReplicaModel& m : step.replicas) values.push_back(m.metrics[i]);
    step.metrics.push_back(Mean(s0.NewSubScope(absl::StrCat("metric_", i)), values));
  }
  step.saved = ReplicaCopies(step)[0];
  GR_RETURN_IF_ERROR(root.status());
  return step;
}

std::vector<std::vector<Variable>> ReplicaCopies(const TrainStep& step) {
  std::vector<std::vector<Variable>> copies(step.replicas.size());
  for (size_t k = 0; k < copies.size(); ++k) {
    copies[k] = step.replicas[k].variables;
    for (const Variable& v : step.optimizers[k]->variables()) copies[k].push_back(v);
  }
  return copies;
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
