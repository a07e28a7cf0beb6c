// TrainingLoop: TensorFlow 1.x's MonitoredTrainingSession for the C++ API.
//
// The caller builds the model (train op, global_step, input iterator,
// variables) and describes it in a TrainingGraph; the loop then
//   1. prepares the variables:
//        chief     restores the newest checkpoint of `checkpoint_dir` (the
//                  summary's restored_from_step), else runs init_op; while
//                  a task it needs is Unavailable (not up yet), retries
//                  until init_timeout. With keep_initialized_variables
//                  (a replica rebuilt after a task was lost), variables
//                  that still hold values are kept: when all do, nothing
//                  is restored; when some do (one parameter server
//                  restarted), only the saver shards holding the others
//                  are restored (restored_devices), and without a
//                  checkpoint that is FailedPrecondition naming them;
//        non-chief polls VarIsInitializedOp on every variable until all are
//                  initialized (DeadlineExceeded after init_timeout);
//   2. runs iterator_init, then steps: train_op plus the metrics and the
//      global step read after the update. OutOfRange from a step (the
//      iterator's end of sequence) ends an epoch: the loop stops after
//      max_epochs, else re-runs iterator_init and goes on; OutOfRange from
//      the first step of a re-initialized epoch fails the run (an empty
//      input, or a step that cannot run such as a dequeue from a closed
//      queue);
//   3. stops when the global step reaches last_step (global: in
//      between-graph replication every worker stops once any update made it
//      reach last_step), after max_epochs, or when `stop` is set;
//   4. on the chief, saves a checkpoint every save_checkpoint_steps global
//      steps and/or save_checkpoint_secs seconds, and at the end;
//   5. calls each hook after every step and at the end, and returns the
//      throughput summary.
//
// Who is chief is the caller's decision (ChiefOf(): TensorFlow's rule).
//
// Thread-safety: Create() builds ops and must not run concurrently with
// other building on the scope's graph; Run() of different loops (one per
// worker, each with its own session) may run concurrently.
#ifndef GRAPHRUN_CLIENT_LOOP_TRAINING_LOOP_H_
#define GRAPHRUN_CLIENT_LOOP_TRAINING_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/client_session.h"
#include "client/loop/saver.h"
#include "client/operation.h"
#include "client/scope.h"
#include "client/variables.h"

namespace graphrun {
namespace client {

// What the loop runs. Null outputs/operations are allowed where noted.
struct TrainingGraph {
  Operation train_op;                     // one update; required
  Variable* global_step = nullptr;        // int64 scalar; required
  std::vector<Output> metrics;            // float scalars fetched every step
  std::vector<std::string> metric_names;  // same length as `metrics`
  Operation init_op;                      // initializes every variable; required
  Operation iterator_init;                // (re)starts the input; null: none
  std::vector<Variable> variables;        // saved and checked for init
};

// After each step.
struct StepInfo {
  int64_t local_step = 0;   // steps run by this loop, from 1
  int64_t global_step = 0;  // after this step's update
  int64_t epoch = 0;        // completed epochs of this loop's input
  std::vector<float> metrics;
  int64_t examples = 0;  // processed by this loop so far
  double seconds = 0;    // since the first step started
};

struct TrainingSummary {
  std::optional<int64_t> restored_from_step;  // chief only
  int64_t initial_global_step = 0;
  int64_t global_step = 0;
  int64_t local_steps = 0;
  int64_t epochs_completed = 0;
  int64_t examples = 0;
  double seconds = 0;
  double examples_per_sec = 0;  // this loop's
  std::vector<float> last_metrics;
  std::string last_checkpoint;  // chief: the newest prefix written
  // Chief: the devices whose variables alone were restored (the others
  // kept theirs); empty after a whole restore or none.
  std::vector<std::string> restored_devices;
};

// Called by TrainingLoop::Run, in this order: AfterInit once the
// variables are ready (chief: initialized or restored; others: seen
// initialized); AfterStep after every step; AfterLoop when the steps end,
// before the final checkpoint; End with the summary. OnError instead of
// the rest when Run fails after AfterInit was called.
class TrainingHook {
 public:
  virtual ~TrainingHook() = default;
  // An error fails the run.
  virtual absl::Status AfterInit(const ClientSession& session, bool is_chief) {
    (void)session;
    (void)is_chief;
    return absl::OkStatus();
  }
  virtual void AfterStep(const StepInfo& step, const std::vector<std::string>& metric_names) = 0;
  // An error fails the run.
  virtual absl::Status AfterLoop(const ClientSession& session) {
    (void)session;
    return absl::OkStatus();
  }
  virtual void End(const TrainingSummary& summary) { (void)summary; }
  virtual void OnError(const ClientSession& session, const absl::Status& status) {
    (void)session;
    (void)status;
  }
};

// Logs every `every_n_steps` local steps one line
//   "[prefix]step 1200 (epoch 3): loss=0.3012 accuracy=0.8906 examples/s=12345"
// with examples/s over the interval, through `sink`.
class LoggingHook : public TrainingHook {
 public:
  LoggingHook(int64_t every_n_steps, std::function<void(const std::string&)> sink,
              std::string prefix = "");
  void AfterStep(const StepInfo& step, const std::vector<std::string>& metric_names) override;

 private:
  int64_t every_;
  std::function<void(const std::string&)> sink_;
  std::string prefix_;
  int64_t last_examples_ = 0;
  double last_seconds_ = 0;
};

struct TrainingLoopOptions {
  bool is_chief = true;
  // A worker that is not the chief still initializes its variables, or
  // restores them from the latest checkpoint, itself (it holds its own
  // copy, as MultiWorkerMirroredStrategy's workers do); only the chief
  // saves.
  bool initializes_own_variables = false;
  // Checkpoints (chief only); empty: none, and no restore.
  std::string checkpoint_dir;
  int64_t save_checkpoint_steps = 0;  // 0: not by steps
  double save_checkpoint_secs = 0;    // 0: not by time
  bool save_at_end = true;
  SaverOptions saver;
  int64_t last_step = -1;         // stop once global_step >= last_step; -1: never
  int64_t max_epochs = -1;        // stop after this many OutOfRange; -1: never
  int64_t examples_per_step = 0;  // this loop's batch, for examples/s
  absl::Duration init_timeout = absl::Seconds(120);
  absl::Duration init_poll_interval = absl::Milliseconds(50);
  std::vector<std::shared_ptr<TrainingHook>> hooks;
  // Deadline of each training step (0: none); a step past it fails the
  // run with DeadlineExceeded (e.g. a synchronous step whose peers died).
  int64_t step_timeout_ms = 0;
  // Set by another thread to stop after the current step; may be null.
  const std::atomic<bool>* stop = nullptr;
  // Tracing: once trace_after_steps local steps ran (-1: never), the next
  // trace_steps run with FULL_TRACE (the first also with
  // output_partition_graphs), and their RunMetadata, every task's step
  // stats, go to on_trace together (fewer when training ends first).
  int64_t trace_after_steps = -1;
  // The chief keeps the values variables still hold and restores only the
  // lost ones (see step 1 above). Off, as TensorFlow's SessionManager: a
  // checkpoint is restored whole, else init_op runs.
  bool keep_initialized_variables = false;
  // A step whose metric named "loss" is NaN or infinite fails the run
  // (FailedPrecondition naming the global step), before any checkpoint of
  // that step, as TensorFlow's NanTensorHook (an Estimator's default) does.
  bool fail_on_nan_loss = false;
  int trace_steps = 3;
  std::function<void(std::vector<tensorflow::RunMetadata>)> on_trace;
};

// The start of the chief's error when a task it needs never answered
// within init_timeout.
inline constexpr char kTaskNotUpMessage[] = "TrainingLoop: a task the chief needs did not come up";

class TrainingLoop {
 public:
  // Builds the ops the loop needs (saver on the chief with a checkpoint
  // dir, initialization checks, global-step reads) in `scope`.
  // InvalidArgument when a required field of `graph` is missing, metric
  // names do not match, or neither last_step nor max_epochs bounds the
  // loop; errors building ops.
  static absl::StatusOr<std::unique_ptr<TrainingLoop>> Create(const Scope& scope,
                                                              TrainingGraph graph,
                                                              TrainingLoopOptions options);

  // Prepares the variables and trains (see the file comment). Returns the
  // first failing step's status (anything but OutOfRange), a restore
  // error, or DeadlineExceeded when a non-chief waited too long.
  absl::StatusOr<TrainingSummary> Run(const ClientSession& session);

  // Saves a checkpoint of the current variables at the current global
  // step. FailedPrecondition without a saver (not chief, or no dir).
  absl::StatusOr<std::string> Save(const ClientSession& session);

  // The current global step.
  absl::StatusOr<int64_t> ReadGlobalStep(const ClientSession& session) const;

 private:
  TrainingLoop() = default;
  absl::StatusOr<TrainingSummary> RunSteps(const ClientSession& session, bool* hooks_started);
  absl::StatusOr<std::optional<int64_t>> PrepareVariables(const ClientSession& session);
  // The chief's restore-or-init, once.
  absl::StatusOr<std::optional<int64_t>> InitializeOrRestore(const ClientSession& session);
  absl::StatusOr<bool> AllInitialized(const ClientSession& session) const;
  // Per variable of graph_.variables: whether it holds a value.
  absl::StatusOr<std::vector<bool>> InitializedFlags(const ClientSession& session) const;

  TrainingGraph graph_;
  TrainingLoopOptions options_;
  std::optional<Saver> saver_;
  std::vector<Output> is_initialized_;
  std::vector<std::string> restored_devices_;  // of the last partial restore
  Output global_step_now_;                     // read, no ordering
  Output global_step_after_;                   // read after train_op
};

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_LOOP_TRAINING_LOOP_H_
