#include "client/train/multi_worker_mirrored_strategy.h"

#include "absl/strings/str_cat.h"
#include "client/ops.h"
#include "client/train/parameter_server_strategy.h"
#include "distributed/collective_remote.h"
#include "graph/status.h"

namespace graphrun {
namespace client {
namespace train {

absl::StatusOr<MultiWorkerMirroredStrategy> MultiWorkerMirroredStrategy::Create(
    const distributed::ClusterSpec& cluster, const std::string& task_type, int task_index,
    AllReduceOptions options, const std::string& device_type, int local_replicas) {
  if (cluster.num_tasks("ps") > 0) {
    return absl::InvalidArgumentError(
        "MultiWorkerMirroredStrategy: the cluster has a ps job; all-reduce training has no "
        "parameter servers (use parameter-server training for it)");
  }
  if (cluster.sparse()) {
    return absl::InvalidArgumentError(
        "MultiWorkerMirroredStrategy: a sparse cluster names only some workers; all-reduce "
        "needs every worker's address (give TF_CONFIG a full 'cluster')");
  }
  if (task_type != "chief" && task_type != "worker") {
    return absl::InvalidArgumentError(absl::StrCat("MultiWorkerMirroredStrategy: task type '",
                                                   task_type,
                                                   "' does not train (chief or worker)"));
  }
  if (task_index < 0 || task_index >= cluster.num_tasks(task_type)) {
    return absl::InvalidArgumentError(absl::StrCat("MultiWorkerMirroredStrategy: task ", task_type,
                                                   ":", task_index, " is not in the cluster ",
                                                   cluster.ToJson()));
  }
  if (options.pack_bytes < 0) {
    return absl::InvalidArgumentError(
        "MultiWorkerMirroredStrategy: allreduce pack_bytes must be >= 0");
  }
  if (device_type.empty() || device_type.find_first_of(":/") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("MultiWorkerMirroredStrategy: '", device_type,
                                                   "' is no device type (CPU, GPU, ...)"));
  }
  if (local_replicas < 1 || local_replicas > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("MultiWorkerMirroredStrategy: ", local_replicas,
                     " replicas per worker (1 to 256, one device each)"));
  }
  MultiWorkerMirroredStrategy s;
  s.device_type_ = device_type;
  s.local_replicas_ = local_replicas;
  const bool has_chief = cluster.num_tasks("chief") > 0;
  s.num_workers_ = cluster.num_tasks("worker") + (has_chief ? 1 : 0);
  s.worker_index_ = task_type == "chief" ? 0 : task_index + (has_chief ? 1 : 0);
  s.task_ = distributed::TaskName(task_type, task_index);
  s.options_ = std::move(options);
  return s;
}

SessionOptions MultiWorkerMirroredStrategy::session_options(const std::string& target) const {
  SessionOptions so = ReplicaSessionOptions(target, task_);
  if (device_type_ != "CPU") so.config.set_allow_soft_placement(true);
  return so;
}

absl::StatusOr<TrainStep> MultiWorkerMirroredStrategy::BuildTrainStep(
    const Scope& root, const std::vector<Output>& inputs, int64_t rows, const ModelFn& model_fn,
    const OptimizerFn& optimizer_fn, const Variable* global_step) const {
  const int k_local = local_replicas_;
  if (rows < k_local || rows % k_local != 0) {
    return absl::InvalidArgumentError(absl::StrCat("multi_worker_mirrored: a batch of ", rows,
                                                   " rows per worker does not divide "
                                                   "evenly among its ",
                                                   k_local, " replicas"));
  }
  LocalReplicas local;
  local.inputs.resize(k_local);
  Scope input_scope = root.WithDevice(device());
  for (const Output& in : inputs) {
    std::vector<Output> pieces = SplitBatchAmong(input_scope, in, rows / k_local, k_local);
    for (int k = 0; k < k_local; ++k) local.inputs[k].push_back(pieces[k]);
  }
  for (int k = 0; k < k_local; ++k) {
    local.scopes.push_back(ReplicaScopeOn(root, device(k), k));
    local.devices.push_back(device(k));
  }
  const int group = num_replicas();
  GR_ASSIGN_OR_RETURN(TrainStep step, BuildAllReduceTrainStep(root, local, group, options_,
                                                              model_fn, optimizer_fn, global_step));
  if (options_.communication_hint == "auto") {
    // As RemoteCollectives picks per pack: recursive doubling for small
    // packs on a power-of-two group, else the ring.
    const bool pow2 = (group & (group - 1)) == 0;
    bool ring = false, doubling = false;
    for (int64_t b : step.plan.pack_bytes) {
      (pow2 && b > 0 && b <= distributed::RemoteCollectives::kSmallBytes ? doubling : ring) = true;
    }
    step.plan.algorithm = ring && doubling ? "ring and recursive doubling"
                          : doubling       ? "recursive doubling"
                                           : "ring";
  }
  // GPUs meet through NCCL in their memory (the hint only picks the host
  // path's algorithm); other accelerators stage their data through the
  // host.
  if (device_type_ == "GPU") {
    step.plan.algorithm = absl::StrCat("NCCL in GPU memory across processes (", step.plan.algorithm,
                                       " through the host where NCCL does not load)");
  } else if (device_type_ != "CPU") {
    step.plan.algorithm =
        absl::StrCat(step.plan.algorithm, " (", device_type_, " through the host)");
  }
  // Every worker starts from the chief's values, whatever it restored;
  // then its other replicas take its first's.
  std::vector<Variable> synced = step.saved;
  if (global_step != nullptr) synced.push_back(*global_step);
  GR_ASSIGN_OR_RETURN(Operation from_chief, BuildSyncFromChief(root, synced));
  step.after_restore = from_chief;
  if (k_local > 1) {
    GR_ASSIGN_OR_RETURN(step.after_restore,
                        BuildMirrorSync(root.WithControlDependencies({from_chief}), local.devices,
                                        ReplicaCopies(step)));
  }
  return step;
}

absl::StatusOr<Operation> MultiWorkerMirroredStrategy::BuildSyncFromChief(
    const Scope& root, const std::vector<Variable>& variables) const {
  // Instance keys apart from the gradients' packs (1, 2, ...).
  constexpr int32_t kFirstInstance = 1 << 20;
  // On the task's CPU: with replicas on accelerators, soft placement
  // would put some broadcasts on the accelerator and some (those without
  // a kernel there, beside variables kept on the CPU) on the CPU, and a
  // group's members on a task are one device. So an accelerator's
  // broadcasts have a group of the tasks' CPUs of their own (key + 1).
  Scope s = root.WithDevice(task_ + "/device:CPU:0").NewSubScope("sync_from_chief");
  // (The gradients' group is the tasks' CPU:0s when the replicas are one
  // CPU per worker: the same group.)
  const bool same_group = device_type_ == "CPU" && local_replicas_ == 1;
  Output size = ops::Const(s.WithOpName("group_size"), int32_t{num_workers_});
  Output key = ops::Const(s.WithOpName("group_key"),
                          same_group ? options_.group_key : options_.group_key + 1);
  std::vector<Operation> ops_done;
  for (size_t j = 0; j < variables.size(); ++j) {
    const Variable& v = variables[j];
    std::vector<int64_t> dims;
    if (!v.shape().known_rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sync from chief: variable ", v.name(), " has no known shape"));
    }
    for (int64_t d : v.shape().dims()) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("sync from chief: variable ", v.name(),
                                                       " has shape ", v.shape().DebugString()));
      }
      dims.push_back(d);
    }
    Scope vs = s.NewSubScope(absl::StrCat("var_", j));
    Output instance =
        ops::Const(vs.WithOpName("instance_key"), kFirstInstance + static_cast<int32_t>(j));
    if (is_chief()) {
      auto sent = ops::CollectiveBcastSendV2(vs, v.Read(vs), size, key, instance);
      ops_done.push_back(sent.operation);
    } else {
      auto got = ops::CollectiveBcastRecvV2(
          vs, size, key, instance,
          Tensor::FromVector<int64_t>(dims, TensorShape({static_cast<int64_t>(dims.size())})),
          v.dtype());
      ops_done.push_back(v.Assign(vs, got));
    }
  }
  Operation done = ops::NoOp(s.WithOpName("done").WithControlDependencies(ops_done));
  GR_RETURN_IF_ERROR(s.status());
  return done;
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
