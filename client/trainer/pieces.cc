#include "client/trainer/pieces.h"

#include <zlib.h>

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
#include "kernels/data/dataset_util.h"
#include "placement/balanced_strategy.h"
#include "placement/placement_report.h"
#include "placement/ps_strategy.h"
#include "placement/replica_device_setter.h"
#include "util/json.h"

namespace graphrun {
namespace client {
namespace trainer {
namespace internal {

static std::string DataFile(const TrainConfig& c, const std::string& stem) {
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

namespace {

// The dimensions of an IDX file of unsigned bytes (gzipped or not), from
// its header.
absl::StatusOr<std::vector<int64_t>> IdxDims(const std::string& file) {
  gzFile f = gzopen(file.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("train: cannot open ", file));
  }
  unsigned char head[4 + 4 * 3];
  const int n = gzread(f, head, sizeof(head));
  gzclose(f);
  if (n < 4 || head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] < 1 || head[3] > 3 ||
      n < 4 + 4 * head[3]) {
    return absl::InvalidArgumentError(
        absl::StrCat("train: ", file, " is not an IDX file of unsigned bytes"));
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < head[3]; ++d) {
    const unsigned char* b = head + 4 + 4 * d;
    dims.push_back(int64_t{b[0]} << 24 | int64_t{b[1]} << 16 | int64_t{b[2]} << 8 | b[3]);
  }
  return dims;
}

}  // namespace

absl::StatusOr<IdxPair> FindIdxPair(const TrainConfig& c, const std::string& set) {
  IdxPair p;
  GR_ASSIGN_OR_RETURN(p.images, FindIdx(c, set + "-images-idx3-ubyte"));
  GR_ASSIGN_OR_RETURN(p.labels, FindIdx(c, set + "-labels-idx1-ubyte"));
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> images, IdxDims(p.images));
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> labels, IdxDims(p.labels));
  auto shape = [](const std::vector<int64_t>& d) {
    return absl::StrCat("[", absl::StrJoin(d, ","), "]");
  };
  if (images.size() != 3 || images[1] != 28 || images[2] != 28) {
    return absl::InvalidArgumentError(absl::StrCat("train: ", p.images, " holds ", shape(images),
                                                   " bytes; images are [N,28,28]"));
  }
  if (labels.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("train: ", p.labels, " holds ", shape(labels), " bytes; labels are [N]"));
  }
  if (images[0] != labels[0]) {
    return absl::InvalidArgumentError(absl::StrCat("train: ", p.images, " holds ", images[0],
                                                   " images but ", p.labels, " ", labels[0],
                                                   " labels"));
  }
  return p;
}

// The (image, label) shapes of one element, or with `batch` (-1: unknown)
// of a batch.
static std::vector<PartialShape> ImageShapes(const TrainConfig& c,
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

train::Model BuildModel(const TrainConfig& c, train::Layers& layers, const Output& images,
                        const Output& labels, bool training) {
  if (c.model == "cnn") {
    train::CnnOptions o;
    o.training = training;
    return train::Cnn(layers, images, labels, o);
  }
  return train::Mlp(layers, images, labels);
}

// The evaluation tower over the test set, in `s`, on the variables of
// `trained`.
absl::Status BuildEvalTower(const TrainConfig& c, const Scope& s, const train::Layers& trained,
                            ReplicaGraph* g) {
  GR_ASSIGN_OR_RETURN(IdxPair test, FindIdxPair(c, "t10k"));
  Scope es = s.NewSubScope("eval");
  Input ein = BuildInput(es.NewSubScope("input"), c, test.images, test.labels, g->eval_batch, 0, 1,
                         /*shuffle=*/false);
  g->eval_layers = std::make_unique<train::Layers>(es, trained);
  train::Model em = BuildModel(c, *g->eval_layers, ein.images, ein.labels, /*training=*/false);
  g->eval_init = ein.make_iterator;
  g->eval_loss = em.loss;
  g->eval_accuracy = em.accuracy;
  g->eval_count = ops::Size(es, ein.labels);
  return es.status();
}

train::ModelFn ReplicaModelFn(const TrainConfig& c,
                              std::vector<std::unique_ptr<train::Layers>>* layers,
                              const std::map<std::string, std::vector<int64_t>>* partitions) {
  return [&c, layers, partitions](
             const Scope& s, int,
             const std::vector<Output>& inputs) -> absl::StatusOr<train::ReplicaModel> {
    train::LayersOptions lo;
    lo.seed = c.seed;
    if (partitions != nullptr && !partitions->empty()) {
      lo.part_sizes = train::PartSizesByName(*partitions);
    }
    layers->push_back(std::make_unique<train::Layers>(s, lo));
    train::Model m = BuildModel(c, *layers->back(), inputs[0], inputs[1], /*training=*/true);
    train::ReplicaModel r;
    r.loss = m.loss;
    r.metrics = {m.accuracy};
    r.trainable = layers->back()->trainable_variables();
    r.variables = layers->back()->variables();
    r.update_ops = layers->back()->update_ops();
    return r;
  };
}

absl::StatusOr<std::unique_ptr<ReplicaGraph>> BuildStrategyReplica(
    const TrainConfig& c, const train::DistributionStrategy& strategy, const ReplicaBuild& b,
    std::optional<client::TrainingLoopOptions> loop) {
  auto g = std::make_unique<ReplicaGraph>();
  g->root.SetGraphSeed(c.seed);
  // The input pipeline and global_step go where the first replica runs.
  Scope s = strategy.ReplicaScope(g->root);
  GR_ASSIGN_OR_RETURN(IdxPair train, FindIdxPair(c, "train"));
  g->global_step = std::make_unique<Variable>(train::CreateGlobalStep(s));
  Input in = BuildInput(s.NewSubScope("input"), c, train.images, train.labels, b.rows, b.shard,
                        b.num_shards, /*shuffle=*/true);
  train::ModelFn model_fn = ReplicaModelFn(c, &g->layers, b.partitions);
  GR_ASSIGN_OR_RETURN(g->step, strategy.BuildTrainStep(
                                   g->root, {in.images, in.labels}, b.rows, model_fn,
                                   [&c] { return MakeOptimizer(c); }, g->global_step.get()));
  g->train_op_name = g->step.train_op.name();
  if (strategy.is_chief()) GR_RETURN_IF_ERROR(BuildEvalTower(c, s, *g->layers[0], g.get()));
  client::TrainingGraph& t = g->training;
  t.train_op = g->step.train_op;
  t.global_step = g->global_step.get();
  t.metrics = {g->step.loss, g->step.metrics[0]};
  t.metric_names = {"loss", "accuracy"};
  t.iterator_init = in.make_iterator;
  t.variables = g->step.saved;
  t.variables.push_back(*g->global_step);
  t.init_op = client::GlobalVariablesInitializer(s);
  GR_RETURN_IF_ERROR(g->root.status());
  if (!loop.has_value()) return g;
  client::TrainingLoopOptions lo = std::move(*loop);
  lo.is_chief = strategy.is_chief();
  lo.initializes_own_variables = strategy.initializes_own_variables();
  if (lo.is_chief && c.on_trace && strategy.replica_index() == 0) {
    lo.trace_after_steps = c.trace_warmup_steps;
    lo.trace_steps = c.trace_steps;
    lo.on_trace = c.on_trace;
  }
  if (g->step.after_restore.node() != nullptr) {
    lo.hooks.insert(lo.hooks.begin(), std::make_shared<MirrorSyncHook>(g->step.after_restore));
  }
  if (g->step.sync != nullptr) {
    g->sync_hook = std::make_shared<client::SyncReplicasHook>(g->step.sync.get(), g->root,
                                                              strategy.session_options(b.target));
    g->sync_hook->set_wait_timeout(lo.init_timeout);
    g->sync_hook->set_stop(lo.stop);
    if (c.sync_generation != nullptr) g->sync_hook->set_recovery(c.sync_generation);
    lo.hooks.push_back(g->sync_hook);
    // A synchronous step waits for every replica: bound it, so a dead
    // peer fails the run instead of hanging it.
    lo.step_timeout_ms = 300000;
  }
  GR_ASSIGN_OR_RETURN(g->loop, client::TrainingLoop::Create(s, t, std::move(lo)));
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

client::TrainingLoopOptions LoopOptions(const TrainConfig& c, int64_t last_step,
                                        int64_t examples_per_step, std::atomic<bool>* stop) {
  client::TrainingLoopOptions o;
  o.checkpoint_dir = c.checkpoint_dir;
  o.save_checkpoint_steps = c.save_checkpoint_steps;
  o.save_checkpoint_secs = c.save_checkpoint_secs;
  o.last_step = last_step;
  o.examples_per_step = examples_per_step;
  o.stop = stop;
  o.keep_initialized_variables = c.keep_initialized_variables;
  o.fail_on_nan_loss = true;  // as an Estimator's NanTensorHook
  return o;
}

// Global steps of one epoch: each replica's shard in full batches.
absl::StatusOr<int64_t> StepsPerEpoch(const TrainConfig& c, int num_replicas, int64_t batch) {
  GR_ASSIGN_OR_RETURN(IdxPair train, FindIdxPair(c, "train"));
  GR_ASSIGN_OR_RETURN(int64_t n, CountRecords(train.labels));
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
  result->restored_devices = chief.restored_devices;
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

}  // namespace internal

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

}  // namespace trainer
}  // namespace client
}  // namespace graphrun
