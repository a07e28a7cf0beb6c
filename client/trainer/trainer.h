// The model-zoo trainer: trains a model of client/train/models.h on IDX
// files (MNIST / Fashion-MNIST format) with the TrainingLoop, in every
// distribution graphrun has. `graphrun train` is this library with flags
// (tools/train_command.h); a program can call it directly.
//
// Distributions (TrainConfig::distribution):
//  * parameter_server (default): between-graph replication, variables on
//    PS tasks (client/train/parameter_server_strategy.h).
//      - local: one process, one in-process (Direct) session;
//      - default: an embedded cluster of `ps` PS and `workers` worker tasks
//        on loopback, one process per task (`graphrun server` for a PS,
//        `graphrun train` with TF_CONFIG for workers 1..M-1; worker 0, the
//        chief, is this process; `binary` names the graphrun binary). Each
//        worker builds the same model under ReplicaDeviceSetter, reads its
//        shard of the training data and applies asynchronous updates
//        (sync: SyncReplicasOptimizer). A task that dies ends the run with
//        Unavailable naming it; with a checkpoint the cluster restarts from
//        it (max_restarts).
//      - in_process: the same with every task a gRPC server here;
//  * mirrored: num_replicas in-graph replicas on the CPU devices of one
//    process, gradients all-reduced (client/train/mirrored_strategy.h);
//  * multi_worker_mirrored: one process per worker, no PS, gradients
//    all-reduced across workers (client/train/multi_worker_mirrored_strategy.h);
//    the embedded cluster starts `workers` of them.
//  * tf_config set: this process is that one task of an external cluster
//    (a chief or worker trains; an evaluator evaluates).
//  * evaluator: waits for each new checkpoint of the chief and evaluates it.
//
// steps counts global steps (the run stops when global_step reaches it,
// so a resumed run continues up to the same target); epochs E becomes
// E passes of the training set in global steps. The test set (t10k files)
// is evaluated at the end by the chief.
#ifndef GRAPHRUN_CLIENT_TRAINER_TRAINER_H_
#define GRAPHRUN_CLIENT_TRAINER_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/train/mirrored_strategy.h"
#include "graph/proto/config.pb.h"

namespace graphrun {
namespace client {
namespace trainer {

struct TrainConfig {
  std::string model = "mlp";  // mlp | cnn
  // How training replicates: parameter_server (between-graph, the
  // embedded cluster or TF_CONFIG), mirrored (in-graph, one process).
  std::string distribution = "parameter_server";
  // multi_worker_mirrored: one process per worker (the embedded cluster's
  // --workers, or TF_CONFIG), no PS.
  int num_replicas = 2;  // mirrored
  // multi_worker_mirrored: replicas per worker, one device each; 0: one
  // per device of replica_device_type on the worker (one on the CPU).
  // On GPUs, the embedded cluster's processes split the host's GPUs among
  // the workers (docs/distribute.md) and set this process's
  // CUDA_VISIBLE_DEVICES to the chief's share.
  int replicas_per_worker = 0;
  std::string replica_device_type = "CPU";          // mirrored: CPU, GPU, ...
  int64_t allreduce_pack_bytes = int64_t{4} << 20;  // all-reduce distributions
  std::string auto_shard_policy = "auto";           // multi_worker_mirrored: auto|data|file|off
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  bool local = false;
  // The embedded cluster's tasks as servers in this process instead of one
  // process per task.
  bool in_process = false;
  // The graphrun binary the task processes run; empty: this process's own
  // executable, which must then be graphrun.
  std::string binary;
  int ps = 2;
  int workers = 2;
  bool sync = false;
  int64_t epochs = -1;                                 // -1: unset
  int64_t steps = -1;                                  // -1: unset (then 5 epochs)
  int64_t batch_size = 256;                            // global
  std::string optimizer = "adam";                      // sgd | momentum | adam
  double learning_rate = -1;                           // -1: the optimizer's default
  std::string checkpoint_dir = "/tmp/graphrun_train";  // "" : no checkpoints
  int64_t save_checkpoint_steps = 500;
  double save_checkpoint_secs = 0;
  std::string strategy = "balanced";
  std::string export_graph;  // "" : none (needs checkpoint_dir)
  // "" : none. Without checkpoint_dir, the run checkpoints to a private
  // temporary directory for the export (graphrun train does this).
  std::string export_saved_model;
  // TensorBoard event files: the chief's under DIR/train, an evaluator's
  // under DIR/eval. "": none (an evaluator then writes under the
  // checkpoint directory).
  std::string summary_dir;
  // Run as the evaluator of c.checkpoint_dir instead of training.
  bool evaluator = false;
  double eval_timeout_secs = 0;  // evaluator: 0 = wait for ever
  // Embedded cluster, one process per task: when a task dies and a
  // checkpoint exists, restart the cluster from it, at most this often.
  int max_restarts = 3;
  bool json_only = false;
  int64_t log_every = 100;  // chief's local steps between progress lines
  int64_t seed = 1;
  int intra_op_threads = 0;  // --local: 0 = cores; per task: 0 = 1
  int inter_op_threads = 0;  // --local: 0 = cores; per task: 0 = 2
  int64_t shuffle_buffer = 10000;
  // TF_CONFIG's JSON: this process is that task of an external cluster
  // ("": the distributions above). `graphrun train` takes it from the
  // environment.
  std::string tf_config;
  // Under a tf_config with a sparseCluster (TFJob's enableDynamicWorker):
  // the job's training tasks, chief and workers, which it does not say
  // (`--workers`). 0: each worker trains on its own (asynchronous only).
  int cluster_replicas = 0;
  // Under tf_config: the host this task listens on ("": its cluster
  // entry's if that is this machine's, else 0.0.0.0), and whether it may
  // listen beyond loopback without credentials.
  std::string bind_host;
  bool insecure = false;
  // Under tf_config: the file holding the cluster token ("": the
  // GRAPHRUN_AUTH_TOKEN environment variable, if set), and the mutual TLS
  // files ("": GRAPHRUN_TLS_CA, _CERT, _KEY). Tasks of a local cluster get
  // the TLS files too; without TLS they share a random token per run.
  std::string auth_token_file;
  std::string tls_ca_file, tls_cert_file, tls_key_file;
  // Under tf_config: Prometheus metrics of this task's server at
  // http://HOST:PORT/metrics (-1: none; 0: any free port).
  int metrics_port = -1;
  // This process's task servers: heartbeats to the peers in use every
  // heartbeat_interval_ms (0: none); a peer is dead after heartbeat_misses
  // unanswered (distributed/rpc/grpc_server.h).
  int64_t heartbeat_interval_ms = 1000;
  int heartbeat_misses = 3;
  // Set by another thread to stop training early (tests).
  const std::atomic<bool>* stop = nullptr;
  // Where notices go that a run must not swallow whatever the log is
  // (a task died and the cluster restarts): stderr in `graphrun train`.
  // Null: the log.
  std::ostream* notices = nullptr;
  // The chief traces trace_steps steps after trace_warmup_steps of its own
  // and hands their RunMetadata (every task of each step) to on_trace
  // (`graphrun train --trace_dir`). Null: no trace.
  std::function<void(std::vector<tensorflow::RunMetadata>)> on_trace;
  // Set by the in-place recovery of a TF_CONFIG task for the runs after a
  // loss (TrainingLoopOptions::keep_initialized_variables).
  bool keep_initialized_variables = false;
  // Counts the steps of this process's replicas when set (the in-place
  // recovery tells a loss after progress from one in a row).
  std::atomic<int64_t>* steps_done = nullptr;
  // Set by the in-place recovery of a synchronous (--sync) TF_CONFIG task:
  // the generation of the synchronization state it last ran with
  // (SyncReplicasHook::set_recovery).
  std::atomic<int64_t>* sync_generation = nullptr;
  int trace_steps = 3;
  int64_t trace_warmup_steps = 20;
};

struct TrainResult {
  std::string mode;  // "local", "distributed", "tf_config"
  std::string strategy_used;
  int num_ps = 0, num_workers = 1;  // of the cluster trained on
  // Replicas of the model (all-reduce: every worker's devices); 0: one per
  // worker.
  int num_replicas = 0;
  std::optional<int64_t> restored_from_step;
  int64_t global_step = 0;
  int64_t initial_global_step = 0;
  int64_t examples = 0;  // whole cluster, this run
  double seconds = 0;
  double examples_per_sec = 0;                     // whole cluster
  std::optional<double> test_accuracy, test_loss;  // chief only
  std::optional<double> first_loss, last_loss;     // chief's batches
  std::string checkpoint;
  std::string exported_graph;        // chief, with --export_graph
  std::string exported_saved_model;  // chief, with --export_saved_model
  // Embedded cluster: restarts of the cluster after a task died; a task
  // of an orchestrated (TF_CONFIG) cluster: its in-place recoveries.
  int restarts = 0;
  // Chief: the devices whose variables alone were restored from a
  // checkpoint after their task restarted (the others kept theirs).
  std::vector<std::string> restored_devices;
  // All-reduce distributions: what one step's all-reduce does.
  std::optional<client::train::AllReducePlan> allreduce;
};

// The directories a task's graphs may touch on its server (--allowed_dirs):
// the data and checkpoint directories.
std::vector<std::string> TaskAllowedDirs(const TrainConfig& c);

// Trains as configured; progress and the placement summary go to `log`
// (may be null); with export_graph, the chief then writes the frozen
// inference graph. Errors: InvalidArgument for a configuration that cannot
// run, NotFound for missing data files, the training loop's, the
// cluster's (Unavailable naming a task that died) and the export's.
absl::StatusOr<TrainResult> Train(const TrainConfig& config, std::ostream* log);

// The evaluator (config.evaluator, or a TF_CONFIG task of type
// evaluator): waits for each new checkpoint in config.checkpoint_dir,
// evaluates it on the test set and prints one JSON line per checkpoint to
// `out` ({"global_step", "checkpoint", "test_accuracy", "test_loss",
// "final"}), also appended to <summaries>/eval/results.jsonl and written as
// TensorBoard scalars under <summaries>/eval (summaries: summary_dir, else
// the checkpoint dir). Returns after the checkpoint the chief marked
// final; DeadlineExceeded when eval_timeout_secs pass without a new one.
absl::Status RunEvaluator(const TrainConfig& config, std::ostream& out, std::ostream* log);

// Whether config.tf_config names a task of this type ("ps", "evaluator").
bool TfConfigTaskIs(const TrainConfig& config, const std::string& task_type);

// InvalidArgument unless `name` is a PS strategy the trainer can place
// variables with.
absl::Status CheckTrainStrategy(const std::string& name);

// Writes the frozen inference graph of config.model with the weights of
// `checkpoint` (a prefix) to `path` (text format if it ends in .pbtxt,
// else binary): feed "images" (uint8 [N, 28, 28], the IDX bytes), fetch
// "predictions" (int64 [N]) and "probabilities" (float [N, 10]).
absl::Status ExportInferenceGraph(const TrainConfig& config, const std::string& checkpoint,
                                  const std::string& path);

// Writes a SavedModel of config.model with the weights of `checkpoint` to
// `dir` (replacing an earlier SavedModel there): tag "serve", signature
// "serving_default" taking "images" (uint8 [N, 28, 28]) and returning
// "probabilities" (float [N, 10]) and "classes" (int64 [N]); the variables
// in dir/variables/variables (TensorFlow's checkpoint format), restored
// through the MetaGraphDef's SaverDef.
absl::Status ExportSavedModel(const TrainConfig& config, const std::string& checkpoint,
                              const std::string& dir);

// Whether the run could write its exports (--export_graph and
// --export_saved_model): each one's directory exists and is writable, and
// an existing --export_saved_model is a SavedModel (which is replaced).
// FailedPrecondition naming the flag and why; Train checks it before
// training, not after.
absl::Status CheckExportTargets(const TrainConfig& config);

}  // namespace trainer
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAINER_TRAINER_H_
