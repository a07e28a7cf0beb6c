// MirroredStrategy: synchronous in-graph data parallelism on the devices
// of one process, as TensorFlow's tf.distribute.MirroredStrategy.
//
//   * one replica per device ("/device:CPU:0" .. "/device:CPU:N-1", or
//     N devices of another type: "/device:GPU:0" .. ; their collectives
//     go through host memory, kernels/core/collective_kernels.cc);
//     replica 0's ops and variables keep their plain names (what a
//     checkpoint and an exported graph see), replica k's live under the
//     name scope "replica_k";
//   * the global batch is split evenly (a batch that does not divide is
//     InvalidArgument);
//   * every replica computes gradients on its slice; they are all-reduced
//     (mean) with CollectiveReduceV2, fused into packs of at most
//     `pack_bytes`, so every replica applies bit-identical gradients to
//     its own copy of each variable, and the copies stay identical;
//   * replica 0 saves; after initialization or a restore the copies take
//     replica 0's values (BuildMirrorSync).
//
// AllReduceMean is also the gradient aggregation of multi-worker training:
// the collective ops run on whichever CollectiveExecutor the session has.
#ifndef GRAPHRUN_CLIENT_TRAIN_MIRRORED_STRATEGY_H_
#define GRAPHRUN_CLIENT_TRAIN_MIRRORED_STRATEGY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/operation.h"
#include "client/scope.h"
#include "client/train/distribution_strategy.h"
#include "client/train/optimizers.h"
#include "client/variables.h"
#include "runtime/session.h"

namespace graphrun {
namespace client {
namespace train {

struct AllReduceOptions {
  // Gradients fused into one collective up to this many bytes (a larger
  // tensor goes alone); 0: one collective per tensor.
  int64_t pack_bytes = int64_t{4} << 20;
  // CollectiveReduceV2's communication_hint: "auto", "ring",
  // "recursive_doubling".
  std::string communication_hint = "auto";
  float timeout_seconds = 0;  // 0: none
  int32_t group_key = 1;
  int32_t first_instance_key = 1;
};

// All-reduce (mean) of per_replica[k][j], replica k's j-th tensor, built on
// devices[k]; shapes[j] is tensor j's shape (fully defined shapes pack;
// others go alone). Returns the means, out[k][j] on devices[k].
// `group_size` > 0: the group has that many members, of which these
// devices are some (between-graph replication builds only its own);
// 0: exactly these devices. InvalidArgument for ragged inputs.
absl::StatusOr<std::vector<std::vector<Output>>> AllReduceMean(
    const Scope& scope, const std::vector<std::string>& devices,
    const std::vector<std::vector<Output>>& per_replica, const std::vector<PartialShape>& shapes,
    const AllReduceOptions& options, AllReducePlan* plan = nullptr, int group_size = 0);

// The replicas a process builds: replica k in scopes[k] (its device and
// name scope), on devices[k], with its slices of the batch inputs[k].
struct LocalReplicas {
  std::vector<Scope> scopes;
  std::vector<std::string> devices;
  std::vector<std::vector<Output>> inputs;
};

// The synchronous all-reduce training step over `local` replicas, members
// of a group of `group_size` (all of them in-graph for MirroredStrategy;
// this worker's one for MultiWorkerMirroredStrategy): model_fn per replica,
// gradients all-reduced (mean), one optimizer per replica applying them,
// `global_step` (may be null) incremented once, on local.devices[0].
// Its after_restore is left to the caller (MirroredStrategy: the mirror
// sync; MultiWorkerMirroredStrategy: the chief's values first).
absl::StatusOr<TrainStep> BuildAllReduceTrainStep(const Scope& root, const LocalReplicas& local,
                                                  int group_size, const AllReduceOptions& options,
                                                  const ModelFn& model_fn,
                                                  const OptimizerFn& optimizer_fn,
                                                  const Variable* global_step);

// Replica k's scope on `device`: the name scope "replica_k", none for
// replica 0 (whose names a checkpoint and an exported graph see).
Scope ReplicaScopeOn(const Scope& root, const std::string& device, int k);
// Rows [k * per_replica, (k + 1) * per_replica) of `batch`, k < n.
std::vector<Output> SplitBatchAmong(const Scope& scope, const Output& batch, int64_t per_replica,
                                    int n);

// Every replica's copies of a step's variables and optimizer state:
// copies[k] is replica k's, in the same order for every k (what
// BuildMirrorSync takes; copies[0] is what is saved).
std::vector<std::vector<Variable>> ReplicaCopies(const TrainStep& step);

// Assigns copies[k][j] := copies[0][j] on devices[k], k >= 1.
absl::StatusOr<Operation> BuildMirrorSync(const Scope& scope,
                                          const std::vector<std::string>& devices,
                                          const std::vector<std::vector<Variable>>& copies);

class MirroredStrategy : public DistributionStrategy {
 public:
  // `num_replicas` devices of `device_type` ("CPU", "GPU", "TEST_ACCEL")
  // of this process. InvalidArgument unless 1 <= num_replicas <= 256 and
  // the type is a device type name; a session without that many devices
  // of the type fails when it is created.
  static absl::StatusOr<MirroredStrategy> Create(int num_replicas,
                                                 AllReduceOptions options = AllReduceOptions(),
                                                 const std::string& device_type = "CPU");

  std::string name() const override { return "mirrored"; }
  int num_replicas() const override { return static_cast<int>(devices_.size()); }
  int num_local_replicas() const override { return num_replicas(); }
  int replica_index() const override { return 0; }
  bool is_chief() const override { return true; }
  bool initializes_own_variables() const override { return true; }
  const std::vector<std::string>& devices() const { return devices_; }
  const AllReduceOptions& all_reduce_options() const { return options_; }

  // The session's thread pools (0: the defaults).
  void set_session_threads(int intra_op_threads, int inter_op_threads) {
    intra_ = intra_op_threads;
    inter_ = inter_op_threads;
  }
  // A local session (`target` must be "") with one device per replica; on
  // accelerators also one CPU device, and soft placement (ops without a
  // kernel for the type, and variables whose optimizer has none, run on
  // the CPU).
  SessionOptions session_options(const std::string& target = "") const override;

  // Replica k's scope: its device, and the name scope "replica_k" (none
  // for replica 0).
  Scope ReplicaScope(const Scope& root, int k) const;
  Scope ReplicaScope(const Scope& root) const override { return ReplicaScope(root, 0); }
  // Rows [k * per_replica, (k + 1) * per_replica) of a global batch, one
  // piece per replica.
  std::vector<Output> SplitBatch(const Scope& scope, const Output& batch,
                                 int64_t per_replica) const;
  // Mean of one scalar per replica (losses, accuracies), on replica 0.
  Output MeanOfReplicas(const Scope& scope, const std::vector<Output>& values) const;
  // The gradients' all-reduce (AllReduceMean over devices()).
  absl::StatusOr<std::vector<std::vector<Output>>> AllReduce(
      const Scope& scope, const std::vector<std::vector<Output>>& per_replica,
      const std::vector<PartialShape>& shapes, AllReducePlan* plan = nullptr) const;
  // Assigns copies[k][j] := copies[0][j] for k >= 1 (replica 0 holds the
  // primaries); run after initialization and after a restore.
  absl::StatusOr<Operation> BuildMirrorSync(const Scope& scope,
                                            const std::vector<std::vector<Variable>>& copies) const;
  // Replica 0 writes checkpoints, summaries and exports.
  bool ShouldSave(int replica) const { return replica == 0; }
  using DistributionStrategy::PerReplicaBatch;

  // The whole step: `global_inputs` (tensors whose dimension 0 is the
  // global batch of `global_batch` rows) split per replica, `model_fn` per
  // replica, gradients all-reduced, one optimizer per replica applying
  // them to its copies, `global_step` (on replica 0; may be null)
  // incremented once (sparse gradients are all-reduced dense).
  // InvalidArgument for a batch that does not divide, replicas whose
  // variables differ, a variable without a gradient.
  // (The after_restore op is BuildMirrorSync over every replica's
  // variables and optimizer state.)
  absl::StatusOr<TrainStep> BuildTrainStep(const Scope& root,
                                           const std::vector<Output>& global_inputs,
                                           int64_t global_batch, const ModelFn& model_fn,
                                           const OptimizerFn& optimizer_fn,
                                           const Variable* global_step) const override;

 private:
  std::vector<std::string> devices_;
  std::string device_type_ = "CPU";
  AllReduceOptions options_;
  int intra_ = 0, inter_ = 0;
};

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_MIRRORED_STRATEGY_H_
