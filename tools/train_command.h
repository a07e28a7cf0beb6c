// `graphrun train`: trains a model of the zoo (client/train/models.h) on
// IDX files (MNIST / Fashion-MNIST format) with the TrainingLoop.
//
// Modes:
//  * --local: one process, one in-process (Direct) session.
//  * default: starts a cluster of --ps PS and --workers worker tasks on
//    loopback, one process per task (`graphrun server` for a PS, `graphrun
//    train` with TF_CONFIG for workers 1..M-1; worker 0, the chief, is this
//    process), and runs between-graph replication: every worker builds the
//    same model under ReplicaDeviceSetter (the only difference from
//    --local), reads shard `index` of the training data, and applies
//    asynchronous updates (--sync: synchronous, SyncReplicasOptimizer) to
//    the variables on the PS tasks. A task that dies ends the run with
//    Unavailable naming it. --in_process: the same with every task a gRPC
//    server in this process (one client thread per worker).
//  * TF_CONFIG set: runs as that one task of an external cluster (a PS task
//    serves until killed, as `graphrun server`; a chief/worker trains).
//
// --steps counts global steps (the run stops when global_step reaches it,
// so a resumed run continues up to the same target); --epochs E becomes
// E passes of the training set in global steps. The test set (t10k files)
// is evaluated at the end. The last output line is one JSON object
// (TrainResultToJson).
#ifndef GRAPHRUN_TOOLS_TRAIN_COMMAND_H_
#define GRAPHRUN_TOOLS_TRAIN_COMMAND_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/train/mirrored_strategy.h"

namespace graphrun {
namespace tools {

struct TrainConfig {
  std::string model = "mlp";  // mlp | cnn
  // How training replicates: parameter_server (between-graph, the
  // embedded cluster or TF_CONFIG), mirrored (in-graph, one process).
  std::string distribution = "parameter_server";
  // multi_worker_mirrored: one process per worker (the embedded cluster's
  // --workers, or TF_CONFIG), no PS.
  int num_replicas = 2;                             // mirrored
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
  // Set by another thread to stop training early (tests).
  const std::atomic<bool>* stop = nullptr;
};

struct TrainResult {
  std::string mode;  // "local", "distributed", "tf_config"
  std::string strategy_used;
  int num_ps = 0, num_workers = 1;  // of the cluster trained on
  std::optional<int64_t> restored_from_step;
  int64_t global_step = 0;
  int64_t initial_global_step = 0;
  int64_t examples = 0;  // whole cluster, this run
  double seconds = 0;
  double examples_per_sec = 0;                     // whole cluster
  std::optional<double> test_accuracy, test_loss;  // chief only
  std::optional<double> first_loss, last_loss;     // chief's batches
  std::string checkpoint;
  std::string exported_graph;  // chief, with --export_graph
  int restarts = 0;            // cluster restarts after a task died
  // All-reduce distributions: what one step's all-reduce does.
  std::optional<client::train::AllReducePlan> allreduce;
};

// Parses the flags. InvalidArgument (a usage error) naming the flag.
absl::StatusOr<TrainConfig> ParseTrainFlags(absl::Span<const std::string> args);

// Trains as configured; progress and the placement summary go to `log`
// (may be null); with export_graph, the chief then writes the frozen
// inference graph. Errors: NotFound for missing data files, the training
// loop's, the cluster's (Unavailable naming a task that died) and the
// export's.
absl::StatusOr<TrainResult> Train(const TrainConfig& config, std::ostream* log);

// One line: {"test_accuracy": …, "global_step": …, "examples_per_sec": …,
// "restored_from_step": null|N, …}.
std::string TrainResultToJson(const TrainConfig& config, const TrainResult& result);

int TrainCommand(absl::Span<const std::string> args, std::ostream& out, std::ostream& err);
std::string TrainUsage();

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_TRAIN_COMMAND_H_
