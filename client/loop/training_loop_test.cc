#include "client/loop/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "client/op_builder.h"
#include "client/ops.h"
#include "client/train/optimizers.h"
#include "graph/status.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace {

std::string TempDir() {
  std::string base = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/training_loop_test_XXXXXX";
  return mkdtemp(dir.data());
}

// y = 3x fitted by w (init 0) from 8 examples, batches of 2: 4 steps/epoch.
struct Linear {
  Scope root = Scope::NewRootScope();
  std::unique_ptr<Variable> w, global_step;
  std::unique_ptr<train::GradientDescentOptimizer> opt;
  TrainingGraph graph;

  Linear() {
    w = std::make_unique<Variable>(root.WithOpName("w"), PartialShape({}), DT_FLOAT, init::Zeros());
    global_step = std::make_unique<Variable>(train::CreateGlobalStep(root));
    Tensor xs = Tensor::FromVector<float>({1, 2, 3, 4, -1, -2, 0.5f, 1.5f});
    auto ds = ops::TensorSliceDataset(root, InputList({Input(xs)}), {PartialShape({})});
    auto batched = ops::BatchDatasetV2(root, ds, int64_t{2}, true, {DT_FLOAT}, {PartialShape({2})});
    auto it = ops::IteratorV2(root, {DT_FLOAT}, {PartialShape({2})});
    auto make = ops::MakeIterator(root, batched, it);
    auto next = ops::IteratorGetNext(root, it, {DT_FLOAT}, {PartialShape({2})});
    Output x = next[0];
    Output err = ops::Sub(root, ops::Mul(root, w->Read(), x), ops::Mul(root, x, 3.0f));
    Output loss = ops::Mean(root, ops::Square(root, err), 0);
    opt = std::make_unique<train::GradientDescentOptimizer>(0.05f);
    auto train_op = opt->Minimize(root, loss, {*w}, global_step.get());
    EXPECT_TRUE(train_op.ok()) << train_op.status();
    graph.train_op = *train_op;
    graph.global_step = global_step.get();
    graph.metrics = {loss};
    graph.metric_names = {"loss"};
    graph.iterator_init = make.operation;
    graph.variables = {*w, *global_step};
    graph.init_op = GlobalVariablesInitializer(root);
  }
};

class CountingHook : public TrainingHook {
 public:
  void AfterStep(const StepInfo& step, const std::vector<std::string>&) override {
    ++steps;
    last_loss = step.metrics[0];
  }
  int steps = 0;
  float last_loss = -1;
};

TEST(TrainingLoopTest, EpochsEndOnOutOfRangeAndLossFalls) {
  Linear m;
  auto hook = std::make_shared<CountingHook>();
  std::vector<std::string> lines;
  TrainingLoopOptions o;
  o.max_epochs = 3;
  o.examples_per_step = 2;
  o.hooks = {hook,
             std::make_shared<LoggingHook>(4, [&](const std::string& l) { lines.push_back(l); })};
  auto loop = TrainingLoop::Create(m.root, m.graph, o);
  ASSERT_TRUE(loop.ok()) << loop.status();
  ClientSession s(m.root);
  auto sum = (*loop)->Run(s);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->local_steps, 12);
  EXPECT_EQ(sum->global_step, 12);
  EXPECT_EQ(sum->epochs_completed, 3);
  EXPECT_EQ(sum->examples, 24);
  EXPECT_FALSE(sum->restored_from_step.has_value());
  EXPECT_EQ(hook->steps, 12);
  EXPECT_LT(hook->last_loss, 0.5f);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("step 4 (epoch 0): loss="), std::string::npos) << lines[0];
}

TEST(TrainingLoopTest, StopsAtLastStepSavesAndResumes) {
  std::string dir = TempDir();
  float w_first = 0;
  {
    Linear m;
    TrainingLoopOptions o;
    o.checkpoint_dir = dir;
    o.last_step = 10;  // crosses epochs: iterator restarted
    o.save_checkpoint_steps = 4;
    auto loop = TrainingLoop::Create(m.root, m.graph, o);
    ASSERT_TRUE(loop.ok()) << loop.status();
    ClientSession s(m.root);
    auto sum = (*loop)->Run(s);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->global_step, 10);
    EXPECT_EQ(sum->epochs_completed, 2);
    EXPECT_EQ(Saver::StepOfPrefix(sum->last_checkpoint), 10);
    w_first = (*s.Run({m.w->Read()}))[0].scalar<float>();
  }
  Linear m;
  TrainingLoopOptions o;
  o.checkpoint_dir = dir;
  o.last_step = 12;
  auto loop = TrainingLoop::Create(m.root, m.graph, o);
  ASSERT_TRUE(loop.ok()) << loop.status();
  ClientSession s(m.root);
  // Before training: the restore alone gives the saved weights.
  auto sum = (*loop)->Run(s);
  ASSERT_TRUE(sum.ok()) << sum.status();
  ASSERT_TRUE(sum->restored_from_step.has_value());
  EXPECT_EQ(*sum->restored_from_step, 10);
  EXPECT_EQ(sum->initial_global_step, 10);
  EXPECT_EQ(sum->local_steps, 2);
  EXPECT_EQ(sum->global_step, 12);
  float w = (*s.Run({m.w->Read()}))[0].scalar<float>();
  EXPECT_NEAR(w, 3.0f, std::abs(3.0f - w_first) + 1e-3f);  // continued, not restarted
  EXPECT_GT(w, 2.0f);
}

SessionOptions TwoCpus() {
  SessionOptions o;
  (*o.config.mutable_device_count())["CPU"] = 2;
  return o;
}

// The chief of a cluster one of whose tasks restarted: w (on CPU:1) lost
// its value, global_step (CPU:0) kept it. A new loop on the same session
// with keep_initialized_variables restores CPU:1's shard alone from the
// checkpoint and goes on from the current step; when every variable holds
// a value it restores nothing; without a checkpoint it is
// FailedPrecondition naming the lost variable. Without the option the
// newest checkpoint is restored whole.
TEST(TrainingLoopTest, ChiefRestoresOnlyTheVariablesThatLostTheirValues) {
  std::string dir = TempDir();
  Scope root = Scope::NewRootScope();
  Variable w(root.WithOpName("w").WithDevice("/device:CPU:1"), PartialShape({}), DT_FLOAT,
             init::Zeros());
  Variable gs = train::CreateGlobalStep(root.WithDevice("/device:CPU:0"));
  Operation step = gs.AssignAdd(Tensor::Scalar<int64_t>(1));
  Operation train = w.AssignAdd(root.WithControlDependencies({step}), Tensor::Scalar<float>(1));
  Operation lose_w = internal::OpBuilder(root.WithOpName("lose_w"), "DestroyResourceOp")
                         .Input(w.handle())
                         .Finalize();
  TrainingGraph g;
  g.train_op = train;
  g.global_step = &gs;
  g.variables = {w, gs};
  g.init_op = GlobalVariablesInitializer(root);
  auto loop_to = [&](int64_t last_step, const std::string& ckpt, bool keep = true) {
    TrainingLoopOptions o;
    o.checkpoint_dir = ckpt;
    o.last_step = last_step;
    o.save_at_end = !ckpt.empty();
    o.keep_initialized_variables = keep;
    return TrainingLoop::Create(root, g, o);
  };
  auto first = loop_to(5, dir);
  ASSERT_TRUE(first.ok()) << first.status();
  ClientSession s(root, TwoCpus());
  auto sum = (*first)->Run(s);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Saver::StepOfPrefix(sum->last_checkpoint), 5);
  // Two more steps past the checkpoint, then CPU:1's task "restarts".
  ASSERT_TRUE(s.Run({}, {}, {train}).ok());
  ASSERT_TRUE(s.Run({}, {}, {train}).ok());
  ASSERT_TRUE(s.Run({}, {}, {lose_w}).ok());

  auto second = loop_to(9, dir);
  ASSERT_TRUE(second.ok()) << second.status();
  sum = (*second)->Run(s);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->restored_devices, std::vector<std::string>{"/device:CPU:1"});
  ASSERT_TRUE(sum->restored_from_step.has_value());
  EXPECT_EQ(*sum->restored_from_step, 5);
  EXPECT_EQ(sum->initial_global_step, 7);  // kept, not the checkpoint's 5
  EXPECT_EQ(sum->global_step, 9);
  auto r = s.Run({w.Read()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<float>(), 5 + 2);  // the checkpoint's 5, then 2 steps

  // Every variable holds a value: nothing is restored or reset.
  auto third = loop_to(10, dir);
  ASSERT_TRUE(third.ok()) << third.status();
  sum = (*third)->Run(s);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_FALSE(sum->restored_from_step.has_value());
  EXPECT_TRUE(sum->restored_devices.empty());
  EXPECT_EQ(sum->initial_global_step, 9);
  EXPECT_EQ((*s.Run({w.Read()}))[0].scalar<float>(), 8);

  // Lost again, with no checkpoint to restore from.
  ASSERT_TRUE(s.Run({}, {}, {lose_w}).ok());
  auto fourth = loop_to(12, "");
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  sum = (*fourth)->Run(s);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kFailedPrecondition) << sum.status();
  EXPECT_NE(std::string(sum.status().message()).find("1 of 2 variables lost their values"),
            std::string::npos)
      << sum.status();
  EXPECT_NE(std::string(sum.status().message()).find("'w'"), std::string::npos) << sum.status();
  EXPECT_EQ((*s.Run({gs.Read()}))[0].scalar<int64_t>(), 10);  // not reset by init_op

  // Without keep_initialized_variables (a fresh start, TensorFlow's
  // SessionManager): the newest checkpoint (step 10) is restored whole.
  auto fifth = loop_to(11, dir, /*keep=*/false);
  ASSERT_TRUE(fifth.ok()) << fifth.status();
  sum = (*fifth)->Run(s);
  ASSERT_TRUE(sum.ok()) << sum.status();
  ASSERT_TRUE(sum->restored_from_step.has_value());
  EXPECT_EQ(*sum->restored_from_step, 10);
  EXPECT_TRUE(sum->restored_devices.empty());
  EXPECT_EQ((*s.Run({w.Read()}))[0].scalar<float>(), 8 + 1);
}

TEST(TrainingLoopTest, NonChiefWaitsForInitThenTrains) {
  Linear m;
  TrainingLoopOptions o;
  o.is_chief = false;
  o.last_step = 3;
  o.init_timeout = absl::Milliseconds(200);
  auto loop = TrainingLoop::Create(m.root, m.graph, o);
  ASSERT_TRUE(loop.ok()) << loop.status();
  ClientSession s(m.root);
  auto sum = (*loop)->Run(s);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kDeadlineExceeded) << sum.status();
  ASSERT_TRUE(s.Run({}, {}, {m.graph.init_op}).ok());
  sum = (*loop)->Run(s);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->global_step, 3);
}

// The global steps of the checkpoints in `dir` (one per "<prefix>.index").
std::vector<int64_t> CheckpointSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const std::string suffix = ".index";
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      steps.push_back(Saver::StepOfPrefix(
          (e.path().parent_path() / name.substr(0, name.size() - suffix.size())).string()));
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// Sleeps after every step (the loop measures time after its hooks) and
// records the newest checkpoint visible then: the loop saves after the
// hooks, so at step k this is the checkpoint of a step < k, if any.
class SlowHook : public TrainingHook {
 public:
  SlowHook(std::string dir, std::chrono::milliseconds sleep)
      : dir_(std::move(dir)), sleep_(sleep) {}
  void AfterStep(const StepInfo& step, const std::vector<std::string>&) override {
    auto latest = Saver::LatestCheckpoint(dir_);
    latest_before.push_back(latest.ok() ? Saver::StepOfPrefix(*latest) : -1);
    global_steps.push_back(step.global_step);
    std::this_thread::sleep_for(sleep_);
  }
  void End(const TrainingSummary& summary) override { end_checkpoint = summary.last_checkpoint; }
  std::vector<int64_t> latest_before;  // per step
  std::vector<int64_t> global_steps;
  std::string end_checkpoint;

 private:
  std::string dir_;
  std::chrono::milliseconds sleep_;
};

// A loop to `last_step` whose steps `hook` slows, checkpointing every
// 0.5 s (not by steps) into `dir`.
absl::StatusOr<TrainingSummary> RunSavingByTime(const std::string& dir, int64_t last_step,
                                                std::shared_ptr<SlowHook> hook) {
  Linear m;
  TrainingLoopOptions o;
  o.checkpoint_dir = dir;
  o.save_checkpoint_steps = 0;
  o.save_checkpoint_secs = 0.5;
  o.last_step = last_step;
  o.hooks = {std::move(hook)};
  GR_ASSIGN_OR_RETURN(auto loop, TrainingLoop::Create(m.root, m.graph, o));
  ClientSession s(m.root);
  return loop->Run(s);
}

// save_checkpoint_secs alone: steps of >= 300 ms against a 0.5 s period
// save after every second step (one step is 0.3 s plus its own few ms: a
// step would have to run 200 ms late to save early; sleeps never run
// short), timed from the first step and then from each save. The last
// step's save by time is the end checkpoint.
TEST(TrainingLoopTest, SavesByTimeAlone) {
  std::string dir = TempDir();
  auto hook = std::make_shared<SlowHook>(dir, std::chrono::milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  auto sum = RunSavingByTime(dir, 10, hook);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_GE(secs, 3.0);
  EXPECT_LT(secs, 60.0);
  EXPECT_EQ(sum->global_step, 10);
  EXPECT_EQ(sum->local_steps, 10);
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{2, 4, 6, 8, 10}));
  EXPECT_EQ(Saver::StepOfPrefix(sum->last_checkpoint), 10);
  EXPECT_EQ(hook->end_checkpoint, sum->last_checkpoint);
  EXPECT_EQ(hook->global_steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  // Step k's hook sees the save of the step before it, not yet its own.
  EXPECT_EQ(hook->latest_before, (std::vector<int64_t>{-1, -1, 2, 2, 4, 4, 6, 6, 8, 8}));
}

// A save by time on the last step is not repeated at the end: the newest
// prefix is that step's and the directory holds it once.
TEST(TrainingLoopTest, SaveByTimeOnTheLastStepIsTheEndCheckpoint) {
  std::string dir = TempDir();
  auto sum =
      RunSavingByTime(dir, 6, std::make_shared<SlowHook>(dir, std::chrono::milliseconds(300)));
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->global_step, 6);
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(Saver::StepOfPrefix(sum->last_checkpoint), 6);
}

// Neither by steps nor by time: no checkpoint while training (each step's
// hook finds none, however slow the steps), one of the last step at the
// end; with save_at_end off, none at all.
TEST(TrainingLoopTest, WithoutPeriodicSavesOnlyTheEndSaves) {
  for (bool save_at_end : {true, false}) {
    SCOPED_TRACE(save_at_end ? "save_at_end" : "no save_at_end");
    std::string dir = TempDir();
    Linear m;
    auto hook = std::make_shared<SlowHook>(dir, std::chrono::milliseconds(50));
    TrainingLoopOptions o;
    o.checkpoint_dir = dir;
    o.save_checkpoint_steps = 0;
    o.save_checkpoint_secs = 0;
    o.save_at_end = save_at_end;
    o.last_step = 10;
    o.hooks = {hook};
    auto loop = TrainingLoop::Create(m.root, m.graph, o);
    ASSERT_TRUE(loop.ok()) << loop.status();
    ClientSession s(m.root);
    auto sum = (*loop)->Run(s);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->global_step, 10);
    EXPECT_EQ(hook->latest_before, std::vector<int64_t>(10, -1));
    if (save_at_end) {
      EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{10}));
      EXPECT_EQ(Saver::StepOfPrefix(sum->last_checkpoint), 10);
      EXPECT_EQ(hook->end_checkpoint, sum->last_checkpoint);
    } else {
      EXPECT_TRUE(CheckpointSteps(dir).empty());
      EXPECT_TRUE(sum->last_checkpoint.empty());
      EXPECT_TRUE(absl::IsNotFound(Saver::LatestCheckpoint(dir).status()));
    }
  }
}

TEST(TrainingLoopTest, UnboundedLoopIsInvalidArgument) {
  Linear m;
  auto loop = TrainingLoop::Create(m.root, m.graph, TrainingLoopOptions{});
  EXPECT_EQ(loop.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace client
}  // namespace graphrun
