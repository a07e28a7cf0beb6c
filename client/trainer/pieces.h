// The pieces the trainer's distributions share (parameter_server.cc:
// parameter servers and local; allreduce.cc: mirrored and multi-worker;
// evaluator.cc: the evaluator): a replica's graph, the input pipeline,
// evaluation, progress, the loop's options, running and finishing the
// replicas. Defined in pieces.cc.
#ifndef GRAPHRUN_CLIENT_TRAINER_PIECES_H_
#define GRAPHRUN_CLIENT_TRAINER_PIECES_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "client/client_session.h"
#include "client/loop/sync_replicas_hook.h"
#include "client/loop/training_loop.h"
#include "client/ops.h"
#include "client/train/distribution_strategy.h"
#include "client/train/layers.h"
#include "client/train/mirrored_strategy.h"
#include "client/train/models.h"
#include "client/train/optimizers.h"
#include "client/train/sync_replicas_optimizer.h"
#include "client/trainer/trainer_internal.h"

namespace graphrun {
namespace client {
namespace trainer {
namespace internal {

using client::ClientSession;
using client::Operation;
using client::Output;
using client::Scope;
using client::Variable;
namespace ops = client::ops;
namespace train = client::train;

// ---- The model graph of one replica ----

struct ReplicaGraph {
  Scope root = Scope::NewRootScope();
  // The model's layers, one per local replica (replica 0's are trained
  // and evaluated), and the evaluation tower's.
  std::vector<std::unique_ptr<train::Layers>> layers;
  std::unique_ptr<train::Layers> eval_layers;
  train::TrainStep step;                                // as the strategy built it
  std::shared_ptr<client::SyncReplicasHook> sync_hook;  // step.sync
  std::unique_ptr<Variable> global_step;
  client::TrainingGraph training;
  Operation eval_init;
  Output eval_loss, eval_accuracy, eval_count;
  int64_t eval_batch = 500;
  std::string train_op_name;
  std::unique_ptr<client::TrainingLoop> loop;
};

// One input pipeline: its iterator's initializer and next batch.
struct Input {
  Operation make_iterator;
  Output images, labels;
};

// The training or test file `stem` ("train-images-idx3-ubyte") of c.data_dir,
// gzipped or not; NotFound naming it.
absl::StatusOr<std::string> FindIdx(const TrainConfig& c, const std::string& stem);
// The images and labels files of set `set` ("train" or "t10k"), checked by
// their IDX headers before anything reads them: images of [N, 28, 28]
// bytes, N labels. InvalidArgument naming the files otherwise (a zip of
// the two would silently stop at the shorter).
struct IdxPair {
  std::string images, labels;
};
absl::StatusOr<IdxPair> FindIdxPair(const TrainConfig& c, const std::string& set);
// IdxDataset x2 -> Zip -> [Shard] -> Map(cast, scale, reshape) -> [Shuffle,
// Repeat] -> Batch -> Prefetch -> iterator.
Input BuildInput(const Scope& s, const TrainConfig& c, const std::string& images_file,
                 const std::string& labels_file, int64_t batch, int shard, int num_shards,
                 bool shuffle);
// --learning_rate, else the optimizer's default; the optimizer.
double LearningRate(const TrainConfig& c);
std::unique_ptr<train::Optimizer> MakeOptimizer(const TrainConfig& c);
// --summary_dir: the chief's training scalars under DIR/train.
absl::Status AddSummaryHook(const TrainConfig& c, bool chief, client::TrainingLoopOptions* lo);
// The evaluation tower over the test set, in `s`, on `trained`'s variables.
absl::Status BuildEvalTower(const TrainConfig& c, const Scope& s, const train::Layers& trained,
                            ReplicaGraph* g);
// The zoo model of one replica, its layers kept in `layers` (which must
// outlive the graph's building); `partitions` (may be null): variables
// built as axis-0 parts of these row counts.
train::ModelFn ReplicaModelFn(const TrainConfig& c,
                              std::vector<std::unique_ptr<train::Layers>>* layers,
                              const std::map<std::string, std::vector<int64_t>>* partitions);

// This process's replicas of the training graph under `strategy`.
struct ReplicaBuild {
  int64_t rows = 0;               // this process's batch per step (every local replica's)
  int shard = 0, num_shards = 1;  // of the training set
  const std::map<std::string, std::vector<int64_t>>* partitions = nullptr;
  std::string target;  // this task's server ("": one process)
};
// The input pipeline, the model per replica, the strategy's step (the
// gradients aggregated its way), the evaluation tower on the chief, and,
// with `loop`, the training loop with the strategy's hooks (copies synced
// after a restore; the synchronous-replica queues).
absl::StatusOr<std::unique_ptr<ReplicaGraph>> BuildStrategyReplica(
    const TrainConfig& c, const train::DistributionStrategy& strategy, const ReplicaBuild& b,
    std::optional<client::TrainingLoopOptions> loop);
// Test-set loss and accuracy over every example.
absl::Status Evaluate(const ReplicaGraph& g, const ClientSession& session, TrainResult* result);
// Records of an IDX labels file.
absl::StatusOr<int64_t> CountRecords(const std::string& labels_file);

// Progress of the cluster: the chief prints a line every `every` of its
// steps with the cluster's rate, from the global step (`examples_per_update`
// per update), so replicas in other processes count too.
class ClusterProgress {
 public:
  ClusterProgress(std::ostream* log, int64_t every, int64_t steps_per_epoch,
                  int64_t examples_per_update, int64_t last_step)
      : log_(log),
        every_(every),
        last_step_(last_step),
        steps_per_epoch_(steps_per_epoch < 1 ? 1 : steps_per_epoch),
        examples_per_update_(examples_per_update) {}
  void Print(const client::StepInfo& step) {
    if (log_ == nullptr || step.local_step % every_ != 0) return;
    std::lock_guard<std::mutex> l(mu_);
    PrintLocked(step);
  }
  // The loop's last step, if its line was not printed (the run stopped
  // between two lines).
  void Finish(const client::TrainingSummary& summary) {
    if (log_ == nullptr || summary.local_steps == 0 || summary.local_steps % every_ == 0) return;
    client::StepInfo last;
    last.local_step = summary.local_steps;
    last.global_step = summary.global_step;
    last.epoch = summary.epochs_completed;
    last.metrics = summary.last_metrics;
    last.examples = summary.examples;
    last.seconds = summary.seconds;
    std::lock_guard<std::mutex> l(mu_);
    PrintLocked(last);
  }

 private:
  void PrintLocked(const client::StepInfo& step) {
    auto now = std::chrono::steady_clock::now();
    if (!started_) {
      // The first step's start, as the loop measured it.
      last_time_ = now - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(step.seconds));
      last_global_ = step.global_step - step.local_step;
      started_ = true;
    }
    double dt = std::chrono::duration<double>(now - last_time_).count();
    double rate = dt > 0 ? (step.global_step - last_global_) * examples_per_update_ / dt : 0;
    last_time_ = now;
    last_global_ = step.global_step;
    // A bar of the global steps done towards the last step.
    constexpr int kWidth = 20;
    const double done =
        last_step_ > 0 ? std::min(1.0, static_cast<double>(step.global_step) / last_step_) : 0;
    const int filled = static_cast<int>(done * kWidth);
    std::string bar = std::string(filled, '=') + (filled < kWidth ? ">" : "") +
                      std::string(std::max(0, kWidth - filled - 1), ' ');
    *log_ << absl::StrFormat(
                 "[%s] %3.0f%%  step %6d/%d  epoch %d  loss %.4f  accuracy %.4f  examples/s %.0f\n",
                 bar, done * 100, step.global_step, last_step_,
                 // steps 1..E are epoch 0
                 std::max<int64_t>(0, step.global_step - 1) / steps_per_epoch_, step.metrics[0],
                 step.metrics[1], rate)
          << std::flush;
  }

  std::ostream* log_;
  int64_t every_;
  int64_t last_step_;
  int64_t steps_per_epoch_;
  int64_t examples_per_update_;
  std::mutex mu_;
  bool started_ = false;
  std::chrono::steady_clock::time_point last_time_;
  int64_t last_global_ = 0;
};

class ProgressHook : public client::TrainingHook {
 public:
  ProgressHook(ClusterProgress* progress, bool chief, const std::atomic<bool>* external_stop,
               std::atomic<bool>* stop)
      : progress_(progress), chief_(chief), external_stop_(external_stop), stop_(stop) {}
  void AfterStep(const client::StepInfo& step, const std::vector<std::string>&) override {
    if (steps_done != nullptr) steps_done->fetch_add(1);
    if (external_stop_ != nullptr && external_stop_->load()) *stop_ = true;
    if (chief_) {
      if (!first_loss.has_value()) first_loss = step.metrics[0];
      progress_->Print(step);
    }
  }
  void End(const client::TrainingSummary& summary) override {
    if (chief_) progress_->Finish(summary);
  }
  std::optional<double> first_loss;
  // Counts this replica's steps when set (TrainConfig::steps_done).
  std::atomic<int64_t>* steps_done = nullptr;

 private:
  ClusterProgress* progress_;
  bool chief_;
  const std::atomic<bool>* external_stop_;
  std::atomic<bool>* stop_;
};

struct ReplicaRun {
  absl::StatusOr<client::TrainingSummary> summary = absl::UnknownError("not run");
  std::shared_ptr<ProgressHook> hook;
};

// Copies replica 0's variables to the other replicas once they are
// initialized or restored.
class MirrorSyncHook : public client::TrainingHook {
 public:
  explicit MirrorSyncHook(Operation sync) : sync_(sync) {}
  absl::Status AfterInit(const ClientSession& session, bool) override {
    return session.Run({}, {}, {sync_}).status();
  }
  void AfterStep(const client::StepInfo&, const std::vector<std::string>&) override {}

 private:
  Operation sync_;
};

client::TrainingLoopOptions LoopOptions(const TrainConfig& c, int64_t last_step,
                                        int64_t examples_per_step, std::atomic<bool>* stop);
// Global steps of one epoch: each replica's shard in full batches.
absl::StatusOr<int64_t> StepsPerEpoch(const TrainConfig& c, int num_replicas, int64_t batch);
// The global step to stop at: --steps, else --epochs (default 5) epochs.
int64_t LastStep(const TrainConfig& c, int64_t steps_per_epoch);
// Runs every replica's loop on its own thread; stops the others when one
// fails. Fills `result` from the chief (replica 0) and the totals.
absl::Status RunReplicas(std::vector<std::unique_ptr<ReplicaGraph>>& graphs,
                         std::vector<std::unique_ptr<ClientSession>>& sessions,
                         std::vector<ReplicaRun>& runs, std::atomic<bool>& stop,
                         TrainResult* result);
// The chief after all replicas stopped: a last checkpoint (final when
// `last_step` was reached), then evaluation.
absl::Status FinishChief(const TrainConfig& c, ReplicaGraph& chief, const ClientSession& session,
                         int64_t last_step, TrainResult* result);

}  // namespace internal
}  // namespace trainer
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAINER_PIECES_H_
