#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/client_session.h"
#include "client/loop/saver.h"
#include "client/loop/summary_writer.h"
#include "client/loop/sync_replicas_hook.h"
#include "client/loop/training_loop.h"
#include "client/ops.h"
#include "client/train/layers.h"
#include "client/train/mirrored_strategy.h"
#include "client/train/models.h"
#include "client/train/multi_worker_mirrored_strategy.h"
#include "client/train/optimizers.h"
#include "client/train/parameter_server_strategy.h"
#include "client/train/sync_replicas_optimizer.h"
#include "distributed/local_cluster.h"
#include "graph/status.h"
#include "kernels/dataset_util.h"
#include "placement/balanced_strategy.h"
#include "placement/placement_report.h"
#include "placement/ps_strategy.h"
#include "placement/replica_device_setter.h"
#include "tools/launcher_link.h"
#include "tools/train_internal.h"
#include "util/json.h"

namespace graphrun {
namespace tools {
namespace train_internal {
namespace {

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
  std::unique_ptr<train::Layers> layers, eval_layers;
  std::unique_ptr<train::Optimizer> optimizer;
  std::unique_ptr<train::SyncReplicasOptimizer> sync;  // --sync
  std::shared_ptr<client::SyncReplicasHook> sync_hook;
  std::unique_ptr<Variable> global_step;
  client::TrainingGraph training;
  Operation eval_init;
  Output eval_loss, eval_accuracy, eval_count;
  int64_t eval_batch = 500;
  std::string train_op_name;
  std::unique_ptr<client::TrainingLoop> loop;
};

struct Input {
  Operation make_iterator;
  Output images, labels;
};

std::string DataFile(const TrainConfig& c, const std::string& stem) {
  return absl::StrCat(c.data_dir, "/", stem);
}

// "train-images-idx3-ubyte" + ".gz" if only the gzipped file exists.
absl::StatusOr<std::string> FindIdx(const TrainConfig& c, const std::string& stem) {
  for (const char* ext : {"", ".gz"}) {
    std::string p = DataFile(c, stem + ext);
    if (std::filesystem::exists(p)) return p;
  }
  return absl::NotFoundError(absl::StrCat("train: no ", stem, "[.gz] in --data=", c.data_dir));
}

// The (image, label) shapes of one element, or with `batch` (-1: unknown)
// of a batch.
std::vector<PartialShape> ImageShapes(const TrainConfig& c,
                                      std::optional<int64_t> batch = std::nullopt) {
  PartialShape image = c.model == "cnn" ? PartialShape({28, 28, 1}) : PartialShape({784});
  if (!batch.has_value()) return {image, PartialShape({})};
  std::vector<int64_t> dims = {*batch};
  for (int64_t d : image.dims()) dims.push_back(d);
  return {PartialShape(dims), PartialShape({*batch})};
}

// IdxDataset x2 -> Zip -> [Shard] -> Map(cast, scale, reshape) -> [Shuffle]
// -> Batch -> Prefetch -> iterator. Training (`shuffle`) repeats and drops
// the remainder; evaluation reads each example once, the last batch
// possibly short.
Input BuildInput(const Scope& s, const TrainConfig& c, const std::string& images_file,
                 const std::string& labels_file, int64_t batch, int shard, int num_shards,
                 bool shuffle) {
  const std::vector<DataType> u8 = {DT_UINT8};
  auto images =
      ops::IdxDataset(s.WithOpName("images"), images_file,
                      ops::IdxDataset::OutputTypes(u8).OutputShapes({PartialShape({28, 28})}));
  auto labels = ops::IdxDataset(s.WithOpName("labels"), labels_file,
                                ops::IdxDataset::OutputTypes(u8).OutputShapes({PartialShape({})}));
  const std::vector<DataType> u8x2 = {DT_UINT8, DT_UINT8};
  const std::vector<PartialShape> raw = {PartialShape({28, 28}), PartialShape({})};
  Output ds = ops::ZipDataset(s, client::InputList({images, labels}), u8x2, raw);
  if (num_shards > 1) {
    ds = ops::ShardDataset(s, ds, int64_t{num_shards}, int64_t{shard}, u8x2, raw);
  }
  const std::vector<DataType> types = {DT_FLOAT, DT_INT32};
  std::string reshape = c.model == "cnn" ? "0=reshape:28,28,1" : "0=reshape:784";
  ds = ops::MapTransformDataset(
      s, ds, types, ImageShapes(c),
      {"0=cast:float", "0=scale:0.00392156862745098", reshape, "1=cast:int32"});
  if (shuffle) {
    ds =
        ops::ShuffleDataset(s, ds, c.shuffle_buffer, c.seed, int64_t{shard}, types, ImageShapes(c));
  }
  if (shuffle) {
    // Training repeats forever: the loop stops at a global step, and no
    // step ever ends in OutOfRange (whose error path across tasks is slow
    // and racy in the distributed runtime); each pass reshuffles.
    ds = ops::RepeatDataset(s, ds, int64_t{-1}, types, ImageShapes(c));
  }
  const std::vector<PartialShape> batched = ImageShapes(c, shuffle ? batch : -1);
  ds = ops::BatchDatasetV2(s, ds, batch, shuffle, types, batched);
  ds = ops::PrefetchDataset(s, ds, int64_t{4}, types, batched);
  auto it = ops::IteratorV2(s, types, batched);
  Input in;
  in.make_iterator = ops::MakeIterator(s, ds, it).operation;
  auto next = ops::IteratorGetNext(s, it, types, batched);
  in.images = next[0];
  in.labels = next[1];
  return in;
}

// --learning_rate, else the optimizer's default.
double LearningRate(const TrainConfig& c) {
  if (c.learning_rate > 0) return c.learning_rate;
  return c.optimizer == "sgd" ? 0.1 : c.optimizer == "momentum" ? 0.01 : 0.001;
}

std::unique_ptr<train::Optimizer> MakeOptimizer(const TrainConfig& c) {
  const float lr = static_cast<float>(LearningRate(c));
  if (c.optimizer == "sgd") return std::make_unique<train::GradientDescentOptimizer>(lr);
  if (c.optimizer == "momentum") return std::make_unique<train::MomentumOptimizer>(lr, 0.9);
  return std::make_unique<train::AdamOptimizer>(lr);
}

// --summary_dir: the chief's training scalars, as TensorBoard event files
// under DIR/train.
absl::Status AddSummaryHook(const TrainConfig& c, bool chief, client::TrainingLoopOptions* lo) {
  if (c.summary_dir.empty() || !chief) return absl::OkStatus();
  GR_ASSIGN_OR_RETURN(std::unique_ptr<client::EventFileWriter> writer,
                      client::EventFileWriter::Create(c.summary_dir + "/train"));
  lo->hooks.push_back(
      std::make_shared<client::SummaryHook>(std::move(writer), c.log_every, LearningRate(c)));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTrainStrategy(const std::string& name) {
  // Per-node strategies place each variable as it is built; of the
  // whole-graph ones only balanced, which train plans over the forward
  // graph, can.
  auto& registry = placement::PsStrategyRegistry::Default();
  if (!registry.Contains(name) || (registry.IsGraphStrategy(name) && name != "balanced")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy: '", name, "' is not one train can use (balanced, greedy_bytes, round_robin)"));
  }
  return absl::OkStatus();
}

train::Model BuildModel(const TrainConfig& c, train::Layers& layers, const Output& images,
                        const Output& labels, bool training) {
  if (c.model == "cnn") {
    train::CnnOptions o;
    o.training = training;
    return train::Cnn(layers, images, labels, o);
  }
  return train::Mlp(layers, images, labels);
}

namespace {

struct ReplicaSpec {
  int index = 0;  // shard of the training data
  int num_replicas = 1;
  int64_t batch = 256;  // per replica
  bool chief = true;
  placement::DeviceFunction device_fn;                     // empty: none
  std::string target;                                      // the replica's session target
  std::string worker_device;                               // "/job:worker/task:1"
  std::map<std::string, std::vector<int64_t>> partitions;  // variable -> part rows
};

// The evaluation tower over the test set, in `s`, on the variables of
// `trained`.
absl::Status BuildEvalTower(const TrainConfig& c, const Scope& s, const train::Layers& trained,
                            ReplicaGraph* g) {
  GR_ASSIGN_OR_RETURN(std::string test_images, FindIdx(c, "t10k-images-idx3-ubyte"));
  GR_ASSIGN_OR_RETURN(std::string test_labels, FindIdx(c, "t10k-labels-idx1-ubyte"));
  Scope es = s.NewSubScope("eval");
  Input ein = BuildInput(es.NewSubScope("input"), c, test_images, test_labels, g->eval_batch, 0, 1,
                         /*shuffle=*/false);
  g->eval_layers = std::make_unique<train::Layers>(es, trained);
  train::Model em = BuildModel(c, *g->eval_layers, ein.images, ein.labels, /*training=*/false);
  g->eval_init = ein.make_iterator;
  g->eval_loss = em.loss;
  g->eval_accuracy = em.accuracy;
  g->eval_count = ops::Size(es, ein.labels);
  return es.status();
}

// Builds replica `r`'s graph (and, on the chief, the evaluation tower).
absl::StatusOr<std::unique_ptr<ReplicaGraph>> BuildReplica(const TrainConfig& c,
                                                           const ReplicaSpec& r, bool with_loop,
                                                           client::TrainingLoopOptions loop_opts) {
  auto g = std::make_unique<ReplicaGraph>();
  Scope s = r.device_fn ? g->root.WithDeviceFunction(r.device_fn) : g->root;
  s.SetGraphSeed(c.seed);
  GR_ASSIGN_OR_RETURN(std::string train_images, FindIdx(c, "train-images-idx3-ubyte"));
  GR_ASSIGN_OR_RETURN(std::string train_labels, FindIdx(c, "train-labels-idx1-ubyte"));
  g->global_step = std::make_unique<Variable>(train::CreateGlobalStep(s));
  Input in = BuildInput(s.NewSubScope("input"), c, train_images, train_labels, r.batch, r.index,
                        r.num_replicas, /*shuffle=*/true);
  train::LayersOptions layer_options;
  layer_options.seed = c.seed;
  if (!r.partitions.empty()) layer_options.part_sizes = train::PartSizesByName(r.partitions);
  g->layers = std::make_unique<train::Layers>(s, layer_options);
  train::Model m = BuildModel(c, *g->layers, in.images, in.labels, /*training=*/true);
  g->optimizer = MakeOptimizer(c);
  Operation train_op;
  if (c.sync) {
    // Every update averages one batch of each replica.
    train::SyncReplicasOptions so;
    so.replicas_to_aggregate = r.num_replicas;
    so.total_num_replicas = r.num_replicas;
    g->sync = std::make_unique<train::SyncReplicasOptimizer>(g->optimizer.get(), so);
    const auto& updates = g->layers->update_ops();
    GR_ASSIGN_OR_RETURN(
        train_op,
        g->sync->Minimize(updates.empty() ? s : s.WithControlDependencies(updates), m.loss,
                          g->layers->trainable_variables(), g->global_step.get()));
  } else {
    GR_ASSIGN_OR_RETURN(train_op,
                        train::TrainOp(s, *g->layers, m.loss, *g->optimizer, g->global_step.get()));
  }
  g->train_op_name = train_op.name();
  if (r.chief) GR_RETURN_IF_ERROR(BuildEvalTower(c, s, *g->layers, g.get()));
  client::TrainingGraph& t = g->training;
  t.train_op = train_op;
  t.global_step = g->global_step.get();
  t.metrics = {m.loss, m.accuracy};
  t.metric_names = {"loss", "accuracy"};
  t.iterator_init = in.make_iterator;
  t.variables = g->layers->variables();
  for (const Variable& v : g->optimizer->variables()) t.variables.push_back(v);
  t.variables.push_back(*g->global_step);
  t.init_op = client::GlobalVariablesInitializer(s);
  GR_RETURN_IF_ERROR(s.status());
  if (with_loop) {
    loop_opts.is_chief = r.chief;
    if (g->sync != nullptr) {
      SessionOptions qr = train::ReplicaSessionOptions(r.target, r.worker_device);
      g->sync_hook = std::make_shared<client::SyncReplicasHook>(g->sync.get(), g->root, qr);
      loop_opts.hooks.push_back(g->sync_hook);
      // A synchronous step waits for every replica: bound it, so a dead
      // peer fails the run instead of hanging it.
      loop_opts.step_timeout_ms = 300000;
    }
    GR_ASSIGN_OR_RETURN(g->loop, client::TrainingLoop::Create(s, t, std::move(loop_opts)));
  }
  return g;
}

// Test-set loss and accuracy over every example (batch means weighted by
// the batch's size: the last batch may be short).
absl::Status Evaluate(const ReplicaGraph& g, const ClientSession& session, TrainResult* result) {
  GR_RETURN_IF_ERROR(session.Run({}, {}, {g.eval_init}).status());
  double loss = 0, right = 0;
  int64_t examples = 0;
  while (true) {
    auto out = session.Run({g.eval_loss, g.eval_accuracy, g.eval_count});
    if (absl::IsOutOfRange(out.status())) break;
    GR_RETURN_IF_ERROR(out.status());
    const int32_t n = (*out)[2].scalar<int32_t>();
    loss += static_cast<double>((*out)[0].scalar<float>()) * n;
    right += static_cast<double>((*out)[1].scalar<float>()) * n;
    examples += n;
  }
  if (examples == 0) return absl::InvalidArgumentError("train: the test set is empty");
  result->test_loss = loss / examples;
  result->test_accuracy = right / examples;
  return absl::OkStatus();
}

// Number of records of an IDX labels file (validates the data early).
absl::StatusOr<int64_t> CountRecords(const std::string& labels_file) {
  Scope s = Scope::NewRootScope();
  const std::vector<DataType> u8 = {DT_UINT8};
  auto ds = ops::IdxDataset(s, labels_file,
                            ops::IdxDataset::OutputTypes(u8).OutputShapes({PartialShape({})}));
  Output all = ops::BatchDatasetV2(s, ds, int64_t{1} << 40, false, u8, {PartialShape({-1})});
  auto it = ops::IteratorV2(s, u8, {PartialShape({-1})});
  auto make = ops::MakeIterator(s, all, it);
  auto next = ops::IteratorGetNext(s, it, u8, {PartialShape({-1})});
  ClientSession session(s);
  GR_RETURN_IF_ERROR(session.Run({}, {}, {make.operation}).status());
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, session.Run({next[0]}));
  return out[0].dim_size(0);
}

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
                 bar, done * 100, step.global_step, last_step_, step.global_step / steps_per_epoch_,
                 step.metrics[0], step.metrics[1], rate)
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

 private:
  ClusterProgress* progress_;
  bool chief_;
  const std::atomic<bool>* external_stop_;
  std::atomic<bool>* stop_;
};

void PrintPlacement(const ReplicaGraph& g, const TrainConfig& c, int num_ps, int num_workers,
                    const std::string& strategy, std::ostream& log) {
  auto def = g.root.ToGraphDef();
  if (!def.ok()) return;
  placement::ReportOptions o;
  o.strategy = strategy;
  o.num_ps_tasks = num_ps;
  o.num_worker_tasks = num_workers;
  o.batch_size = c.batch_size / num_workers;
  o.fetches = {g.train_op_name};
  auto report = placement::BuildPlacementReport(*def, o);
  if (!report.ok()) {
    log << "placement summary unavailable: " << report.status().message() << "\n";
    return;
  }
  log << "placement (" << strategy << "):\n";
  for (const placement::TaskReport& t : report->tasks) {
    if (!t.is_ps) continue;
    log << absl::StrFormat("  %s  %d bytes in %d variables, %d bytes/step sent\n", t.task, t.bytes,
                           t.variables.size(), t.send_bytes_per_step);
    for (const placement::VariableReport& v : t.variables) {
      log << "    " << v.name << " " << v.shape.DebugString() << " " << v.bytes << " bytes\n";
    }
  }
  log << absl::StrFormat("  imbalance (max/mean bytes over PS tasks): %.3f\n", report->imbalance);
}

// The model's forward graph alone (input, layers, loss; no optimizer and
// no devices): what `balanced` plans over, so that every model variable is
// splittable (an optimizer's Apply op ties a variable to its slots).
absl::StatusOr<tensorflow::GraphDef> ForwardGraph(const TrainConfig& c, int64_t batch) {
  Scope root = Scope::NewRootScope();
  root.SetGraphSeed(c.seed);
  GR_ASSIGN_OR_RETURN(std::string images, FindIdx(c, "train-images-idx3-ubyte"));
  GR_ASSIGN_OR_RETURN(std::string labels, FindIdx(c, "train-labels-idx1-ubyte"));
  Input in = BuildInput(root.NewSubScope("input"), c, images, labels, batch, 0, 1, true);
  train::Layers layers(root, c.seed);
  BuildModel(c, layers, in.images, in.labels, /*training=*/true);
  GR_RETURN_IF_ERROR(root.status());
  return root.ToGraphDef();
}

struct VariablePlan {
  std::function<std::shared_ptr<placement::PsStrategy>()> strategy;
  // Variables built as axis-0 parts "<name>/part_k" of these row counts
  // (balanced's shards).
  std::map<std::string, std::vector<int64_t>> partitions;
};

// The per-node PS strategy for `name`. `balanced` (a whole-graph strategy)
// is planned once over the model's forward graph: the variables it splits
// are built partitioned (each part with its own optimizer slots, on the
// task the plan gives that shard), the others go where the plan puts them.
absl::StatusOr<VariablePlan> PlanVariables(const TrainConfig& c, int num_ps, int num_workers) {
  GR_RETURN_IF_ERROR(CheckTrainStrategy(c.strategy));
  auto& registry = placement::PsStrategyRegistry::Default();
  VariablePlan out;
  if (!registry.IsGraphStrategy(c.strategy)) {
    std::string name = c.strategy;
    GR_RETURN_IF_ERROR(registry.Create(name, num_ps).status());
    out.strategy = [name, num_ps]() -> std::shared_ptr<placement::PsStrategy> {
      return std::shared_ptr<placement::PsStrategy>(
          *placement::PsStrategyRegistry::Default().Create(name, num_ps));
    };
    return out;
  }
  const int64_t batch = std::max<int64_t>(1, c.batch_size / num_workers);
  GR_ASSIGN_OR_RETURN(tensorflow::GraphDef def, ForwardGraph(c, batch));
  placement::GraphStrategyContext ctx;
  ctx.num_tasks = num_ps;
  ctx.ps_ops = placement::DefaultPsOps();
  ctx.batch_size = batch;
  GR_ASSIGN_OR_RETURN(placement::BalancedPlan plan, placement::PlanBalanced(def, ctx));
  for (const placement::ShardPlan& sp : plan.shards) out.partitions[sp.variable] = sp.sizes;
  auto tasks = plan.tasks;
  out.strategy = [tasks, num_ps]() -> std::shared_ptr<placement::PsStrategy> {
    return placement::NewFixedMapStrategy(tasks, num_ps);
  };
  return out;
}

client::TrainingLoopOptions LoopOptions(const TrainConfig& c, int64_t last_step,
                                        int64_t examples_per_step, std::atomic<bool>* stop) {
  client::TrainingLoopOptions o;
  o.checkpoint_dir = c.checkpoint_dir;
  o.save_checkpoint_steps = c.save_checkpoint_steps;
  o.save_checkpoint_secs = c.save_checkpoint_secs;
  o.last_step = last_step;
  o.examples_per_step = examples_per_step;
  o.stop = stop;
  return o;
}

// Global steps of one epoch: each replica's shard in full batches.
absl::StatusOr<int64_t> StepsPerEpoch(const TrainConfig& c, int num_replicas, int64_t batch) {
  GR_ASSIGN_OR_RETURN(std::string labels, FindIdx(c, "train-labels-idx1-ubyte"));
  GR_ASSIGN_OR_RETURN(int64_t n, CountRecords(labels));
  int64_t per_epoch = 0;
  for (int r = 0; r < num_replicas; ++r) {
    int64_t shard = n / num_replicas + (r < n % num_replicas ? 1 : 0);
    per_epoch += shard / batch;
  }
  if (per_epoch == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("train: ", n, " examples make no batch of ", batch, " per replica"));
  }
  return per_epoch;
}

// The global step to stop at: --steps, else --epochs (default 5) epochs.
int64_t LastStep(const TrainConfig& c, int64_t steps_per_epoch) {
  if (c.steps >= 0) return c.steps;
  return (c.epochs < 0 ? 5 : c.epochs) * steps_per_epoch;
}

struct ReplicaRun {
  absl::StatusOr<client::TrainingSummary> summary = absl::UnknownError("not run");
  std::shared_ptr<ProgressHook> hook;
};

// Runs every replica's loop on its own thread; stops the others when one
// fails. Fills `result` from the chief (replica 0) and the totals.
absl::Status RunReplicas(std::vector<std::unique_ptr<ReplicaGraph>>& graphs,
                         std::vector<std::unique_ptr<ClientSession>>& sessions,
                         std::vector<ReplicaRun>& runs, std::atomic<bool>& stop,
                         TrainResult* result) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < graphs.size(); ++i) {
    threads.emplace_back([&, i] {
      runs[i].summary = graphs[i]->loop->Run(*sessions[i]);
      if (!runs[i].summary.ok()) stop = true;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : graphs) {
    if (g->sync_hook != nullptr) GR_RETURN_IF_ERROR(g->sync_hook->status());
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const ReplicaRun& r : runs) {
    if (!r.summary.ok() && !absl::IsCancelled(r.summary.status())) return r.summary.status();
  }
  for (const ReplicaRun& r : runs) GR_RETURN_IF_ERROR(r.summary.status());
  const client::TrainingSummary& chief = *runs[0].summary;
  result->restored_from_step = chief.restored_from_step;
  result->initial_global_step = chief.initial_global_step;
  result->checkpoint = chief.last_checkpoint;
  double seconds = 0;
  for (const ReplicaRun& r : runs) {
    result->examples += r.summary->examples;
    seconds = std::max(seconds, r.summary->seconds);
  }
  result->seconds = seconds > 0 ? seconds : wall;
  result->examples_per_sec = result->seconds > 0 ? result->examples / result->seconds : 0;
  if (!chief.last_metrics.empty()) result->last_loss = chief.last_metrics[0];
  result->first_loss = runs[0].hook->first_loss;
  return absl::OkStatus();
}

// The chief, after all replicas stopped: a last checkpoint if other
// workers moved the global step past the chief's (marked final when the
// run reached `last_step`, for evaluators), then evaluation.
absl::Status FinishChief(const TrainConfig& c, ReplicaGraph& chief, const ClientSession& session,
                         int64_t last_step, TrainResult* result) {
  GR_ASSIGN_OR_RETURN(result->global_step, chief.loop->ReadGlobalStep(session));
  if (!c.checkpoint_dir.empty() &&
      client::Saver::StepOfPrefix(result->checkpoint) != result->global_step) {
    GR_ASSIGN_OR_RETURN(result->checkpoint, chief.loop->Save(session));
  }
  if (!c.checkpoint_dir.empty() && !result->checkpoint.empty() && last_step >= 0 &&
      result->global_step >= last_step) {
    GR_RETURN_IF_ERROR(client::Saver::MarkFinal(c.checkpoint_dir, result->checkpoint));
  }
  return Evaluate(chief, session, result);
}

}  // namespace

absl::StatusOr<TrainResult> TrainLocal(const TrainConfig& c, std::ostream* log) {
  TrainResult result;
  result.mode = "local";
  GR_ASSIGN_OR_RETURN(int64_t per_epoch, StepsPerEpoch(c, 1, c.batch_size));
  const int64_t last_step = LastStep(c, per_epoch);
  ClusterProgress progress(log, c.log_every, per_epoch, c.batch_size, last_step);
  std::atomic<bool> stop{false};
  ReplicaRun run;
  run.hook = std::make_shared<ProgressHook>(&progress, true, c.stop, &stop);
  client::TrainingLoopOptions lo = LoopOptions(c, last_step, c.batch_size, &stop);
  lo.hooks = {run.hook};
  GR_RETURN_IF_ERROR(AddSummaryHook(c, true, &lo));
  ReplicaSpec spec;
  spec.batch = c.batch_size;
  GR_ASSIGN_OR_RETURN(auto g, BuildReplica(c, spec, true, lo));
  SessionOptions so;
  so.config.set_intra_op_parallelism_threads(c.intra_op_threads);
  so.config.set_inter_op_parallelism_threads(c.inter_op_threads);
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  graphs.push_back(std::move(g));
  std::vector<std::unique_ptr<ClientSession>> sessions;
  sessions.push_back(std::make_unique<ClientSession>(graphs[0]->root, so));
  std::vector<ReplicaRun> runs = {run};
  GR_RETURN_IF_ERROR(RunReplicas(graphs, sessions, runs, stop, &result));
  GR_RETURN_IF_ERROR(FinishChief(c, *graphs[0], *sessions[0], last_step, &result));
  return result;
}

namespace {

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

}  // namespace

absl::StatusOr<TrainResult> TrainMirrored(const TrainConfig& c, std::ostream* log) {
  train::AllReduceOptions ao;
  ao.pack_bytes = c.allreduce_pack_bytes;
  GR_ASSIGN_OR_RETURN(train::MirroredStrategy strategy,
                      train::MirroredStrategy::Create(c.num_replicas, ao));
  GR_RETURN_IF_ERROR(strategy.PerReplicaBatch(c.batch_size).status());
  // One input pipeline of global batches, split among the replicas: the
  // same examples in the same order as one replica would train on.
  GR_ASSIGN_OR_RETURN(int64_t per_epoch, StepsPerEpoch(c, 1, c.batch_size));
  const int64_t last_step = LastStep(c, per_epoch);
  TrainResult result;
  result.mode = "local";
  result.num_ps = 0;
  result.num_workers = strategy.num_replicas();
  ClusterProgress progress(log, c.log_every, per_epoch, c.batch_size, last_step);
  std::atomic<bool> stop{false};
  std::vector<ReplicaRun> runs(1);
  runs[0].hook = std::make_shared<ProgressHook>(&progress, true, c.stop, &stop);

  auto g = std::make_unique<ReplicaGraph>();
  g->root.SetGraphSeed(c.seed);
  Scope s0 = g->root.WithDevice(strategy.devices()[0]);
  GR_ASSIGN_OR_RETURN(std::string train_images, FindIdx(c, "train-images-idx3-ubyte"));
  GR_ASSIGN_OR_RETURN(std::string train_labels, FindIdx(c, "train-labels-idx1-ubyte"));
  g->global_step = std::make_unique<Variable>(train::CreateGlobalStep(s0));
  Input in = BuildInput(s0.NewSubScope("input"), c, train_images, train_labels, c.batch_size, 0, 1,
                        /*shuffle=*/true);
  std::vector<std::unique_ptr<train::Layers>> layers;
  train::ModelFn model_fn =
      [&](const Scope& s, int,
          const std::vector<Output>& inputs) -> absl::StatusOr<train::ReplicaModel> {
    train::LayersOptions lo;
    lo.seed = c.seed;
    layers.push_back(std::make_unique<train::Layers>(s, lo));
    train::Model m = BuildModel(c, *layers.back(), inputs[0], inputs[1], /*training=*/true);
    train::ReplicaModel r;
    r.loss = m.loss;
    r.metrics = {m.accuracy};
    r.trainable = layers.back()->trainable_variables();
    r.variables = layers.back()->variables();
    r.update_ops = layers.back()->update_ops();
    return r;
  };
  GR_ASSIGN_OR_RETURN(train::MirroredTrainStep step,
                      strategy.BuildTrainStep(
                          g->root, {in.images, in.labels}, c.batch_size, model_fn,
                          [&c] { return MakeOptimizer(c); }, g->global_step.get()));
  GR_RETURN_IF_ERROR(BuildEvalTower(c, s0, *layers[0], g.get()));
  client::TrainingGraph& t = g->training;
  t.train_op = step.train_op;
  t.global_step = g->global_step.get();
  t.metrics = {step.loss, step.metrics[0]};
  t.metric_names = {"loss", "accuracy"};
  t.iterator_init = in.make_iterator;
  t.variables = step.saved;
  t.variables.push_back(*g->global_step);
  t.init_op = client::GlobalVariablesInitializer(g->root);
  GR_RETURN_IF_ERROR(g->root.status());
  client::TrainingLoopOptions lo = LoopOptions(c, last_step, c.batch_size, &stop);
  lo.hooks = {std::make_shared<MirrorSyncHook>(step.mirror_sync), runs[0].hook};
  GR_RETURN_IF_ERROR(AddSummaryHook(c, true, &lo));
  GR_ASSIGN_OR_RETURN(g->loop, client::TrainingLoop::Create(g->root, t, std::move(lo)));
  if (log != nullptr) *log << step.plan.Summary() << "\n";
  std::vector<std::unique_ptr<ClientSession>> sessions;
  sessions.push_back(std::make_unique<ClientSession>(
      g->root, strategy.session_options(c.intra_op_threads, c.inter_op_threads)));
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  graphs.push_back(std::move(g));
  GR_RETURN_IF_ERROR(RunReplicas(graphs, sessions, runs, stop, &result));
  GR_RETURN_IF_ERROR(FinishChief(c, *graphs[0], *sessions[0], last_step, &result));
  result.allreduce = step.plan;
  return result;
}

// Between-graph replication over `num_replicas` replicas, of which this
// process runs replica_index.size(): replica_index[i] with its ops on
// worker_devices[i] and its session on targets[i]. `chief_at` is the
// position of the chief among them (-1: not here).
absl::StatusOr<TrainResult> TrainReplicated(const TrainConfig& c, int num_ps, int num_replicas,
                                            const std::vector<std::string>& worker_devices,
                                            const std::vector<std::string>& targets,
                                            const std::vector<int>& replica_index, int chief_at,
                                            std::ostream* log, RunControl* control) {
  GR_ASSIGN_OR_RETURN(int64_t batch, data::PerReplicaBatchSize(c.batch_size, num_replicas));
  GR_ASSIGN_OR_RETURN(int64_t per_epoch, StepsPerEpoch(c, num_replicas, batch));
  const int64_t last_step = LastStep(c, per_epoch);
  GR_ASSIGN_OR_RETURN(VariablePlan plan, PlanVariables(c, num_ps, num_replicas));
  TrainResult result;
  result.num_ps = num_ps;
  result.num_workers = num_replicas;
  result.strategy_used = c.strategy;
  if (c.strategy == "balanced" && !plan.partitions.empty()) {
    std::vector<std::string> split;
    for (const auto& [name, rows] : plan.partitions) {
      split.push_back(absl::StrCat(name, " into ", rows.size()));
    }
    result.strategy_used = absl::StrCat("balanced, split ", absl::StrJoin(split, ", "));
  }
  ClusterProgress progress(log, c.log_every, per_epoch, c.sync ? batch * num_replicas : batch,
                           last_step);
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  std::vector<ReplicaRun> runs(replica_index.size());
  for (size_t i = 0; i < replica_index.size(); ++i) {
    placement::ReplicaDeviceSetterOptions rds;
    rds.ps_tasks = num_ps;
    rds.worker_device = worker_devices[i];
    rds.ps_strategy = plan.strategy();
    GR_ASSIGN_OR_RETURN(placement::DeviceFunction fn, placement::ReplicaDeviceSetter(rds));
    ReplicaSpec spec;
    spec.index = replica_index[i];
    spec.num_replicas = num_replicas;
    spec.batch = batch;
    spec.chief = static_cast<int>(i) == chief_at;
    spec.device_fn = fn;
    spec.target = targets[i];
    spec.worker_device = worker_devices[i];
    spec.partitions = plan.partitions;
    runs[i].hook = std::make_shared<ProgressHook>(
        &progress, spec.chief, control != nullptr ? control->stop() : c.stop, &stop);
    client::TrainingLoopOptions lo = LoopOptions(c, last_step, batch, &stop);
    lo.hooks = {runs[i].hook};
    GR_RETURN_IF_ERROR(AddSummaryHook(c, spec.chief, &lo));
    GR_ASSIGN_OR_RETURN(auto g, BuildReplica(c, spec, true, lo));
    graphs.push_back(std::move(g));
  }
  if (log != nullptr && chief_at >= 0) {
    PrintPlacement(*graphs[chief_at], c, num_ps, num_replicas, result.strategy_used, *log);
  }
  std::vector<std::unique_ptr<ClientSession>> sessions;
  for (size_t i = 0; i < graphs.size(); ++i) {
    // Each replica's session sees the PS tasks and its own task only, so
    // tasks of a cluster may start in any order.
    SessionOptions so = train::ReplicaSessionOptions(targets[i], worker_devices[i]);
    sessions.push_back(std::make_unique<ClientSession>(graphs[i]->root, so));
  }
  if (chief_at > 0) {  // RunReplicas reads the chief at index 0
    std::swap(graphs[0], graphs[chief_at]);
    std::swap(sessions[0], sessions[chief_at]);
    std::swap(runs[0], runs[chief_at]);
  }
  if (control != nullptr) {
    control->SetRelease([&graphs, &sessions, &stop] {
      stop = true;
      for (size_t i = 0; i < graphs.size(); ++i) {
        if (graphs[i]->sync_hook != nullptr) {
          graphs[i]->sync_hook->OnError(*sessions[i], absl::CancelledError("a task died"));
        }
      }
    });
  }
  absl::Status ran = RunReplicas(graphs, sessions, runs, stop, &result);
  if (control != nullptr) {
    control->SetRelease(nullptr);
    GR_RETURN_IF_ERROR(control->status());
  }
  GR_RETURN_IF_ERROR(ran);
  if (chief_at >= 0) {
    GR_RETURN_IF_ERROR(FinishChief(c, *graphs[0], *sessions[0], last_step, &result));
  } else {
    GR_ASSIGN_OR_RETURN(result.global_step, graphs[0]->loop->ReadGlobalStep(*sessions[0]));
    result.restored_from_step.reset();
  }
  if (static_cast<int>(replica_index.size()) < num_replicas) {
    // Other replicas run in other processes: the whole cluster's examples
    // follow from the global step (one replica batch per async update,
    // one batch of every replica per sync update).
    const int64_t per_update = c.sync ? batch * num_replicas : batch;
    result.examples = (result.global_step - result.initial_global_step) * per_update;
    result.examples_per_sec = result.seconds > 0 ? result.examples / result.seconds : 0;
  }
  return result;
}

absl::StatusOr<TrainResult> TrainInProcessCluster(const TrainConfig& c, std::ostream* log) {
  distributed::LocalClusterOptions lo;
  lo.jobs = {{"ps", c.ps}, {"worker", c.workers}};
  lo.server.intra_op_threads = c.intra_op_threads > 0 ? c.intra_op_threads : 1;
  lo.server.inter_op_threads = c.inter_op_threads > 0 ? c.inter_op_threads : 2;
  GR_ASSIGN_OR_RETURN(auto cluster, distributed::LocalCluster::Start(lo));
  if (log != nullptr) {
    *log << "cluster (in-process gRPC servers): " << cluster->cluster_spec().ToJson() << "\n";
  }
  std::vector<std::string> devices, targets;
  std::vector<int> index;
  for (int i = 0; i < c.workers; ++i) {
    devices.push_back(absl::StrCat("/job:worker/task:", i));
    targets.push_back(cluster->target("worker", i));
    index.push_back(i);
  }
  absl::StatusOr<TrainResult> r =
      TrainReplicated(c, c.ps, c.workers, devices, targets, index, 0, log, nullptr);
  cluster->StopAll();
  if (r.ok()) r->mode = "distributed";
  return r;
}

distributed::ServerOptions TaskServerOptions(const TrainConfig& c,
                                             const distributed::ClusterSpec& spec,
                                             const std::string& task_type, int task_index) {
  distributed::ServerOptions so;
  so.cluster = spec;
  so.job = task_type;
  so.task = task_index;
  so.intra_op_threads = c.intra_op_threads > 0 ? c.intra_op_threads : 1;
  so.inter_op_threads = c.inter_op_threads > 0 ? c.inter_op_threads : 2;
  return so;
}

absl::StatusOr<std::unique_ptr<distributed::GrpcServer>> StartTaskServer(
    const TrainConfig& c, const distributed::ClusterSpec& spec, const std::string& task_type,
    int task_index) {
  GR_ASSIGN_OR_RETURN(auto server, distributed::GrpcServer::Create(
                                       TaskServerOptions(c, spec, task_type, task_index)));
  GR_RETURN_IF_ERROR(server->Start());
  return server;
}

// Runs `task_type`:`task_index` of `spec` (chief or worker) in this
// process: its server (`server` if given, started), then its replica.
namespace {

// The data shard this replica reads, per tf.data's auto-shard policy; the
// line saying which policy applied and why goes to `why`.
struct ShardChoice {
  int index = 0, count = 1;
  std::string why;
};

absl::StatusOr<ShardChoice> ChooseShard(const TrainConfig& c, int replica, int replicas) {
  ShardChoice s;
  const std::string& p = c.auto_shard_policy;
  if (p == "off") {
    s.why = absl::StrCat(
        "auto-shard: OFF: every worker reads the whole training set (shuffled "
        "by its own seed)");
    s.index = replica;  // the shuffle seed offset
    s.count = 1;
    return s;
  }
  if (p == "file") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auto_shard_policy=file: the training set is 1 file (", c.data_dir,
        "/train-images-idx3-ubyte[.gz]) for ", replicas,
        " workers; sharding by file needs at least one file per worker (use data or auto)"));
  }
  s.index = replica;
  s.count = replicas;
  const std::string which = absl::StrCat("worker ", replica, " reads the examples i with i mod ",
                                         replicas, " = ", replica);
  s.why = p == "data" ? absl::StrCat("auto-shard: DATA: ", which)
                      : absl::StrCat("auto-shard: AUTO chose DATA (1 training file for ", replicas,
                                     " workers: FILE needs a file per worker); ", which);
  return s;
}

}  // namespace

absl::StatusOr<TrainResult> TrainMultiWorker(const TrainConfig& c,
                                             const distributed::ClusterSpec& spec,
                                             const std::string& task_type, int task_index,
                                             distributed::GrpcServer* server, std::ostream* log,
                                             RunControl* control) {
  const std::string target = server->target();
  train::AllReduceOptions ao;
  ao.pack_bytes = c.allreduce_pack_bytes;
  GR_ASSIGN_OR_RETURN(train::MultiWorkerMirroredStrategy strategy,
                      train::MultiWorkerMirroredStrategy::Create(spec, task_type, task_index, ao));
  GR_ASSIGN_OR_RETURN(int64_t batch, strategy.PerReplicaBatch(c.batch_size));
  GR_ASSIGN_OR_RETURN(ShardChoice shard,
                      ChooseShard(c, strategy.replica_index(), strategy.num_replicas()));
  // Every replica takes one batch of its shard per step, in lockstep: an
  // epoch is the smallest shard's full batches.
  GR_ASSIGN_OR_RETURN(std::string train_labels, FindIdx(c, "train-labels-idx1-ubyte"));
  GR_ASSIGN_OR_RETURN(int64_t records, CountRecords(train_labels));
  const int64_t per_epoch = std::max<int64_t>(1, records / shard.count / batch);
  const int64_t last_step = LastStep(c, per_epoch);
  TrainResult result;
  result.num_ps = 0;
  result.num_workers = strategy.num_replicas();
  if (log != nullptr && strategy.is_chief()) *log << shard.why << "\n";
  ClusterProgress progress(log, c.log_every, per_epoch, c.batch_size, last_step);
  std::atomic<bool> stop{false};
  std::vector<ReplicaRun> runs(1);
  runs[0].hook = std::make_shared<ProgressHook>(
      &progress, strategy.is_chief(), control != nullptr ? control->stop() : c.stop, &stop);

  auto g = std::make_unique<ReplicaGraph>();
  g->root.SetGraphSeed(c.seed);
  Scope s = strategy.ReplicaScope(g->root);
  GR_ASSIGN_OR_RETURN(std::string train_images, FindIdx(c, "train-images-idx3-ubyte"));
  g->global_step = std::make_unique<Variable>(train::CreateGlobalStep(s));
  Input in = BuildInput(s.NewSubScope("input"), c, train_images, train_labels, batch, shard.index,
                        shard.count, /*shuffle=*/true);
  std::vector<std::unique_ptr<train::Layers>> layers;
  train::ModelFn model_fn =
      [&](const Scope& rs, int,
          const std::vector<Output>& inputs) -> absl::StatusOr<train::ReplicaModel> {
    train::LayersOptions lo;
    lo.seed = c.seed;
    layers.push_back(std::make_unique<train::Layers>(rs, lo));
    train::Model m = BuildModel(c, *layers.back(), inputs[0], inputs[1], /*training=*/true);
    train::ReplicaModel r;
    r.loss = m.loss;
    r.metrics = {m.accuracy};
    r.trainable = layers.back()->trainable_variables();
    r.variables = layers.back()->variables();
    r.update_ops = layers.back()->update_ops();
    return r;
  };
  GR_ASSIGN_OR_RETURN(train::MirroredTrainStep step,
                      strategy.BuildTrainStep(
                          g->root, {in.images, in.labels}, model_fn,
                          [&c] { return MakeOptimizer(c); }, g->global_step.get()));
  if (strategy.is_chief()) GR_RETURN_IF_ERROR(BuildEvalTower(c, s, *layers[0], g.get()));
  client::TrainingGraph& t = g->training;
  t.train_op = step.train_op;
  t.global_step = g->global_step.get();
  t.metrics = {step.loss, step.metrics[0]};
  t.metric_names = {"loss", "accuracy"};
  t.iterator_init = in.make_iterator;
  t.variables = step.saved;
  t.variables.push_back(*g->global_step);
  t.init_op = client::GlobalVariablesInitializer(g->root);
  GR_RETURN_IF_ERROR(g->root.status());
  // Every worker starts from the chief's values, whatever it restored.
  std::vector<Variable> synced = t.variables;
  GR_ASSIGN_OR_RETURN(Operation sync, strategy.BuildSyncFromChief(g->root, synced));
  client::TrainingLoopOptions lo = LoopOptions(c, last_step, batch, &stop);
  lo.is_chief = strategy.is_chief();
  lo.initializes_own_variables = true;
  lo.hooks = {std::make_shared<MirrorSyncHook>(sync), runs[0].hook};
  GR_RETURN_IF_ERROR(AddSummaryHook(c, strategy.is_chief(), &lo));
  GR_ASSIGN_OR_RETURN(g->loop, client::TrainingLoop::Create(g->root, t, std::move(lo)));
  if (log != nullptr && strategy.is_chief()) {
    *log << step.plan.Summary() << "\n";
  }
  std::vector<std::unique_ptr<ClientSession>> sessions;
  sessions.push_back(std::make_unique<ClientSession>(g->root, strategy.session_options(target)));
  std::vector<std::unique_ptr<ReplicaGraph>> graphs;
  graphs.push_back(std::move(g));
  if (control != nullptr) {
    // A task of the job died (the launcher saw it): a step blocked in an
    // all-reduce, or in joining the group, fails at once.
    // (The run then ends with the control's status, which names the task.)
    control->SetRelease([&stop, server] {
      stop = true;
      server->collectives()->AbortAll(
          absl::UnavailableError("train: a task of the job died; this worker stops"));
    });
  }
  absl::Status ran = RunReplicas(graphs, sessions, runs, stop, &result);
  if (control != nullptr) {
    control->SetRelease(nullptr);
    GR_RETURN_IF_ERROR(control->status());
  }
  GR_RETURN_IF_ERROR(ran);
  if (strategy.is_chief()) {
    GR_RETURN_IF_ERROR(FinishChief(c, *graphs[0], *sessions[0], last_step, &result));
  } else {
    GR_ASSIGN_OR_RETURN(result.global_step, graphs[0]->loop->ReadGlobalStep(*sessions[0]));
    result.restored_from_step.reset();
    result.checkpoint.clear();
  }
  // Every replica processed one batch per step: the whole job's examples.
  result.examples = (result.global_step - result.initial_global_step) * c.batch_size;
  result.examples_per_sec = result.seconds > 0 ? result.examples / result.seconds : 0;
  result.allreduce = step.plan;
  return result;
}

absl::Status RunEvaluator(const TrainConfig& c, std::ostream& out, std::ostream* log) {
  if (c.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("evaluator: needs the chief's --checkpoint_dir");
  }
  // The model as the chief saves it, on the test set.
  ReplicaGraph g;
  g.root.SetGraphSeed(c.seed);
  const Scope& s = g.root;
  g.global_step = std::make_unique<Variable>(train::CreateGlobalStep(s));
  GR_ASSIGN_OR_RETURN(std::string test_images, FindIdx(c, "t10k-images-idx3-ubyte"));
  GR_ASSIGN_OR_RETURN(std::string test_labels, FindIdx(c, "t10k-labels-idx1-ubyte"));
  Input in = BuildInput(s.NewSubScope("eval_input"), c, test_images, test_labels, g.eval_batch, 0,
                        1, /*shuffle=*/false);
  train::LayersOptions lo;
  lo.seed = c.seed;
  g.layers = std::make_unique<train::Layers>(s, lo);
  train::Model m = BuildModel(c, *g.layers, in.images, in.labels, /*training=*/false);
  g.eval_init = in.make_iterator;
  g.eval_loss = m.loss;
  g.eval_accuracy = m.accuracy;
  g.eval_count = ops::Size(s, in.labels);
  std::vector<Variable> vars = g.layers->variables();
  vars.push_back(*g.global_step);
  GR_ASSIGN_OR_RETURN(client::Saver saver, client::Saver::Create(s, vars));
  Output step_now = g.global_step->Read(s);
  GR_RETURN_IF_ERROR(s.status());
  const std::string summary_dir =
      (c.summary_dir.empty() ? c.checkpoint_dir : c.summary_dir) + "/eval";
  GR_ASSIGN_OR_RETURN(std::unique_ptr<client::EventFileWriter> events,
                      client::EventFileWriter::Create(summary_dir));
  const std::string results_file = summary_dir + "/results.jsonl";
  SessionOptions so;
  so.config.set_intra_op_parallelism_threads(c.intra_op_threads);
  so.config.set_inter_op_parallelism_threads(c.inter_op_threads);
  ClientSession session(g.root, so);
  if (log != nullptr) {
    *log << "evaluator: waiting for checkpoints in " << c.checkpoint_dir << " (results in "
         << results_file << ", summaries in " << summary_dir << ")\n";
  }
  std::string evaluated;
  auto idle_since = std::chrono::steady_clock::now();
  while (true) {
    if (c.stop != nullptr && c.stop->load()) return absl::CancelledError("evaluator: stopped");
    // Final is read first: once set, the newest checkpoint is the run's
    // last, so the one read next is at least as new.
    const bool final = client::Saver::IsFinal(c.checkpoint_dir);
    absl::StatusOr<std::string> latest = client::Saver::LatestCheckpoint(c.checkpoint_dir);
    if (latest.ok() && *latest != evaluated) {
      absl::Status restored = saver.Restore(session, *latest);
      if (absl::IsNotFound(restored) && !final) {
        // The chief's rotation deleted it meanwhile: take the newest next.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      GR_RETURN_IF_ERROR(restored);
      GR_ASSIGN_OR_RETURN(std::vector<Tensor> step, session.Run({step_now}));
      TrainResult r;
      GR_RETURN_IF_ERROR(Evaluate(g, session, &r));
      const int64_t global_step = step[0].scalar<int64_t>();
      const std::string line =
          absl::StrCat("{\"global_step\": ", global_step, ", \"checkpoint\": ", JsonQuote(*latest),
                       ", \"test_accuracy\": ", FormatDoubleShortest(*r.test_accuracy),
                       ", \"test_loss\": ", FormatDoubleShortest(*r.test_loss), ", \"final\": ",
                       final && client::Saver::IsFinal(c.checkpoint_dir) ? "true" : "false", "}");
      out << line << std::endl;
      std::ofstream f(results_file, std::ios::app);
      f << line << "\n";
      if (!f) {
        return absl::FailedPreconditionError(
            absl::StrCat("evaluator: cannot append to ", results_file));
      }
      GR_RETURN_IF_ERROR(events->WriteScalars(
          global_step, {{"accuracy", *r.test_accuracy}, {"loss", *r.test_loss}}));
      GR_RETURN_IF_ERROR(events->Flush());
      evaluated = *latest;
      idle_since = std::chrono::steady_clock::now();
      if (final) return absl::OkStatus();
      continue;
    }
    if (latest.ok() && final) return absl::OkStatus();  // evaluated already
    if (!latest.ok() && !absl::IsNotFound(latest.status())) return latest.status();
    if (c.eval_timeout_secs > 0 && std::chrono::steady_clock::now() - idle_since >
                                       std::chrono::duration<double>(c.eval_timeout_secs)) {
      return absl::DeadlineExceededError(absl::StrCat("evaluator: no new checkpoint in ",
                                                      c.checkpoint_dir, " within ",
                                                      c.eval_timeout_secs, " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::StatusOr<TrainResult> TrainTask(const TrainConfig& c, const distributed::ClusterSpec& spec,
                                      const std::string& task_type, int task_index,
                                      std::ostream* log, RunControl* control,
                                      std::unique_ptr<distributed::GrpcServer> server) {
  if (c.distribution == "multi_worker_mirrored") {
    if (server == nullptr) {
      GR_ASSIGN_OR_RETURN(server, StartTaskServer(c, spec, task_type, task_index));
    }
    absl::StatusOr<TrainResult> r =
        TrainMultiWorker(c, spec, task_type, task_index, server.get(), log, control);
    server->Stop();
    return r;
  }
  // The replica numbering and the chief; train places variables with its
  // own plan (--strategy), so only those are taken from the strategy.
  GR_ASSIGN_OR_RETURN(train::ParameterServerStrategy strategy,
                      train::ParameterServerStrategy::Create(spec, task_type, task_index));
  if (server == nullptr) {
    GR_ASSIGN_OR_RETURN(server, StartTaskServer(c, spec, task_type, task_index));
  }
  absl::StatusOr<TrainResult> r = TrainReplicated(
      c, strategy.num_ps_tasks(), strategy.num_replicas(), {strategy.worker_device()},
      {server->target()}, {strategy.replica_index()}, strategy.is_chief() ? 0 : -1, log, control);
  server->Stop();
  return r;
}

absl::StatusOr<TrainResult> TrainTfConfigTask(const TrainConfig& c, const std::string& tf_config,
                                              std::ostream* log) {
  GR_ASSIGN_OR_RETURN(distributed::TfConfig cfg, distributed::ParseTfConfig(tf_config));
  std::unique_ptr<distributed::GrpcServer> server;
  if (const int launcher = TakeLauncherFd(); launcher >= 0) {
    // Started by a local launcher: the cluster's ports come from it.
    GR_ASSIGN_OR_RETURN(
        server,
        StartServerForLauncher(TaskServerOptions(c, cfg.cluster, cfg.task_type, cfg.task_index),
                               launcher, kLauncherWaitMs, &cfg.cluster));
  }
  absl::StatusOr<TrainResult> r =
      TrainTask(c, cfg.cluster, cfg.task_type, cfg.task_index, log, nullptr, std::move(server));
  if (r.ok()) r->mode = "tf_config";
  return r;
}

}  // namespace train_internal
}  // namespace tools
}  // namespace graphrun
