// graphrun train on Fashion-MNIST: accuracy locally and on a 2 PS + 2
// worker cluster (one process per task, and in-process; async and sync),
// resume after a kill, restore onto more PS tasks, a dying task.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/loop/saver.h"
#include "client/trainer/trainer.h"
#include "gtest/gtest.h"
#include "tools/train_command.h"
#include "util/json.h"

namespace graphrun {
namespace tools {

using client::trainer::Train;
namespace {

const char kData[] = "/usr/share/datasets/fashion-mnist";

std::string TempDir(const std::string& name) {
  std::string base = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/" + name + "_XXXXXX";
  return mkdtemp(dir.data());
}

bool HaveData() {
  return std::filesystem::exists(std::string(kData) + "/t10k-labels-idx1-ubyte.gz");
}

std::string Runfile(const std::string& rel) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/" + rel;
}

// The step of the newest checkpoint in `dir`; -1 when there is none.
int64_t LatestStep(const std::string& dir) {
  auto l = client::Saver::LatestCheckpoint(dir);
  return l.ok() ? client::Saver::StepOfPrefix(*l) : int64_t{-1};
}

// Distributed runs start one process per task from the graphrun binary.
TrainConfig Config(const std::string& dir) {
  TrainConfig c;
  c.data_dir = kData;
  c.checkpoint_dir = dir;
  c.log_every = 100;
  c.binary = Runfile("tools/graphrun");
  return c;
}

// 3 epochs of Adam at batch 256: > 0.85 on the test set.
TEST(TrainTest, LocalMlpReachesAccuracy) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainConfig c = Config(TempDir("local"));
  c.local = true;
  c.steps = 705;  // 3 epochs
  std::ostringstream log;
  auto r = Train(c, &log);
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << log.str() << TrainResultToJson(c, *r) << "\n";
  EXPECT_EQ(r->global_step, 705);
  EXPECT_FALSE(r->restored_from_step.has_value());
  ASSERT_TRUE(r->test_accuracy.has_value());
  EXPECT_GE(*r->test_accuracy, 0.85);
  EXPECT_EQ(client::Saver::StepOfPrefix(r->checkpoint), 705);
  EXPECT_NE(log.str().find("step    100"), std::string::npos) << log.str();
}

// 2 PS + 2 workers (in-process servers), async, balanced placement: same
// accuracy bar with global steps of 128 examples each (6 epochs: async
// staleness varies from run to run; under a loaded machine 4 epochs once
// ended at 0.844, and 5 epochs at 0.842 in a CI rehearsal), then a resumed
// run.
TEST(TrainTest, DistributedAsyncReachesAccuracyAndResumes) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainConfig c = Config(TempDir("dist"));
  c.in_process = true;
  c.steps = 2810;
  std::ostringstream log;
  auto r = Train(c, &log);
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << log.str() << TrainResultToJson(c, *r) << "\n";
  EXPECT_EQ(r->mode, "distributed");
  EXPECT_GE(r->global_step, 2810);
  EXPECT_LE(r->global_step, 2811);  // the other worker may add one in flight
  ASSERT_TRUE(r->test_accuracy.has_value());
  EXPECT_GE(*r->test_accuracy, 0.85);
  EXPECT_GT(r->examples_per_sec, 0);
  // Placement summary: both PS tasks hold variables.
  EXPECT_NE(log.str().find("/job:ps/task:0"), std::string::npos);
  EXPECT_NE(log.str().find("/job:ps/task:1"), std::string::npos);
  EXPECT_NE(log.str().find("dense/kernel/part_1 ["), std::string::npos) << log.str();

  TrainConfig again = c;
  again.steps = 2910;
  // One worker: an asynchronous second one could take all 100 steps
  // before the chief's first, leaving no chief loss to check.
  again.workers = 1;
  auto r2 = Train(again, nullptr);
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_TRUE(r2->restored_from_step.has_value());
  EXPECT_EQ(*r2->restored_from_step, r->global_step);
  EXPECT_GE(r2->global_step, 2910);
  ASSERT_TRUE(r2->first_loss.has_value());
  EXPECT_LT(*r2->first_loss, 1.0);  // a fresh model starts near ln(10) = 2.3
  EXPECT_GE(*r2->test_accuracy, 0.84);
}

// 2 PS + 2 workers (one process each), synchronous: every global step
// averages two batches of 128 (256 examples; 4 epochs); then a resumed
// run. (Not bit-reproducible: as in TensorFlow, the tokens of a step are
// not per worker, so a fast worker may take two and contribute both
// gradients of the next update.)
TEST(TrainTest, DistributedSyncReachesAccuracyAndResumes) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainConfig c = Config(TempDir("sync"));
  c.sync = true;
  c.steps = 940;  // 4 epochs
  std::ostringstream log;
  auto r = Train(c, &log);
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << log.str() << TrainResultToJson(c, *r) << "\n";
  EXPECT_EQ(r->global_step, 940);
  EXPECT_EQ(r->examples, 940 * 256);
  ASSERT_TRUE(r->test_accuracy.has_value());
  EXPECT_GE(*r->test_accuracy, 0.85);
  EXPECT_NE(TrainResultToJson(c, *r).find("\"sync\": true"), std::string::npos);
  EXPECT_NE(log.str().find("2 PS + 2 workers, sync"), std::string::npos) << log.str();

  // Resume: continues from step 940 with the restored weights.
  TrainConfig again = c;
  again.steps = 1040;
  auto r2 = Train(again, nullptr);
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_TRUE(r2->restored_from_step.has_value());
  EXPECT_EQ(*r2->restored_from_step, 940);
  EXPECT_EQ(r2->global_step, 1040);
  EXPECT_EQ(r2->examples, 100 * 256);
  ASSERT_TRUE(r2->first_loss.has_value());
  EXPECT_LT(*r2->first_loss, 1.0);
}

// balanced splits the big kernel (each part with its own Adam slots) and
// evens the PS bytes; a checkpoint written by 2 PS with whole variables
// restores onto 3 PS with the kernel in 3 parts (save-slice info).
TEST(TrainTest, BalancedSplitsAndRestoresOntoMorePs) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainConfig c = Config(TempDir("reshard"));
  c.strategy = "round_robin";
  c.steps = 60;
  std::ostringstream log1;
  auto r = Train(c, &log1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(log1.str().find("dense/kernel [784,256]"), std::string::npos) << log1.str();

  TrainConfig again = c;
  again.strategy = "balanced";
  again.ps = 3;
  again.steps = 120;
  // One worker, so the chief runs the steps whose first loss is checked
  // (an asynchronous second worker took 60 of 61 steps in one CI run of
  // trace_dir_test).
  again.workers = 1;
  std::ostringstream log2;
  auto r2 = Train(again, &log2);
  ASSERT_TRUE(r2.ok()) << r2.status();
  const std::string text = log2.str();
  EXPECT_NE(text.find("placement (balanced, split dense/kernel into 3)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("dense/kernel/part_2/Adam_1"), std::string::npos) << text;
  auto pos = text.find("imbalance (max/mean bytes over PS tasks): ");
  ASSERT_NE(pos, std::string::npos) << text;
  double imbalance = std::stod(text.substr(pos + 43));
  EXPECT_LT(imbalance, 1.05) << text;
  ASSERT_TRUE(r2->restored_from_step.has_value());
  EXPECT_EQ(*r2->restored_from_step, r->global_step);
  ASSERT_TRUE(r2->first_loss.has_value());
  EXPECT_LT(*r2->first_loss, 1.2);  // restored weights, not a fresh ln(10)
  EXPECT_GE(r2->global_step, 120);
}

TEST(TrainTest, SyncNeedsACluster) {
  auto c = ParseTrainFlags({"--sync", "--local"});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  auto ok = ParseTrainFlags({"--sync", "--ps=1", "--workers=4"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->sync);
}

// Runs graphrun with `args`, stdout to `out_file`; returns the pid.
pid_t Spawn(const std::vector<std::string>& args, const std::string& out_file) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = freopen(out_file.c_str(), "w", stdout);
    (void)f;
    std::vector<char*> argv;
    std::string bin = Runfile("tools/graphrun");
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Kill -9 mid-run, run again: continues from the last checkpoint with its
// weights (low first loss), up to the same --steps target.
TEST(TrainTest, ResumesAfterKill) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  std::string dir = TempDir("resume");
  std::string tmp = TempDir("resume_out");
  std::vector<std::string> args = {"train",
                                   "--local",
                                   "--steps=100000",
                                   "--save_checkpoint_steps=100",
                                   "--checkpoint_dir=" + dir,
                                   "--intra_op_threads=1",
                                   "--inter_op_threads=1"};
  pid_t pid = Spawn(args, tmp + "/first.txt");
  ASSERT_GT(pid, 0);
  // Wait (bounded) until the checkpoint of step 300 is the latest one
  // (its files are written before the state file names it), then kill
  // mid-run.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (LatestStep(dir) < 300 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << ReadFile(tmp + "/first.txt");
  auto latest = client::Saver::LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  int64_t saved = client::Saver::StepOfPrefix(*latest);
  ASSERT_GE(saved, 300);

  // The same command, bounded at saved + 50 steps so the test is short.
  args[2] = "--steps=" + std::to_string(saved + 50);
  args.push_back("--format=json");
  pid = Spawn(args, tmp + "/second.txt");
  waitpid(pid, &status, 0);
  std::string out = ReadFile(tmp + "/second.txt");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  auto json = ParseJson(out);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << out;
  EXPECT_NE(out.find("\"restored_from_step\": " + std::to_string(saved) + ","), std::string::npos)
      << out;
  EXPECT_NE(out.find("\"global_step\": " + std::to_string(saved + 50) + ","), std::string::npos)
      << out;
  auto first_loss_at = out.find("\"first_loss\": ");
  ASSERT_NE(first_loss_at, std::string::npos);
  double first_loss = std::atof(out.c_str() + first_loss_at + 14);
  EXPECT_LT(first_loss, 1.0) << out;  // restored weights, not a fresh model
}

// The pids of this process's children whose command line has `word`.
std::vector<pid_t> ChildrenRunning(const std::string& word) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    stat >> pid >> comm >> state >> ppid;
    if (ppid != getpid()) continue;
    std::string cmdline = ReadFile((e.path() / "cmdline").string());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(word) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

// Train(config) on a thread of its own. The destructor asks the run to
// stop (if it still runs) and joins it, so a test that fails early (an
// ASSERT) never leaves the thread joinable.
class BackgroundTrain {
 public:
  explicit BackgroundTrain(TrainConfig config) : config_(std::move(config)) {
    config_.stop = &stop_;
    thread_ = std::thread([this] {
      result_ = Train(config_, nullptr);
      done_ = true;
    });
  }
  ~BackgroundTrain() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool done() const { return done_.load(); }
  // Waits (bounded) for the run to end; true when it did.
  bool WaitFor(std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (done_ && thread_.joinable()) thread_.join();
    return done_;
  }
  // REQUIRES: WaitFor returned true.
  const absl::StatusOr<TrainResult>& result() const { return result_; }

 private:
  TrainConfig config_;
  std::atomic<bool> stop_{false}, done_{false};
  absl::StatusOr<TrainResult> result_ = absl::UnknownError("not run");
  std::thread thread_;
};

// Waits (up to 120 s) until `dir` holds a checkpoint of step `step` or
// later, or `run` ended.
void WaitForCheckpoint(const std::string& dir, int64_t step, const BackgroundTrain& run) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (LatestStep(dir) < step && !run.done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Synchronous training, one process per task: killing worker 1 ends the
// run quickly with Unavailable naming it (the chief is blocked waiting for
// worker 1's gradients when it dies).
TEST(TrainTest, DyingWorkerEndsTheRunNamingIt) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainConfig c = Config("");
  c.sync = true;
  c.steps = 1000000;
  BackgroundTrain run(c);
  // Worker 1 is the child running `graphrun train`; let it train a moment.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<pid_t> workers;
  while (workers.empty() && !run.done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    workers = ChildrenRunning(" train ");
  }
  ASSERT_EQ(workers.size(), 1u);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  auto killed_at = std::chrono::steady_clock::now();
  kill(workers[0], SIGKILL);
  ASSERT_TRUE(run.WaitFor(std::chrono::seconds(60)))
      << "the run did not end within 60 s of the kill";
  const absl::StatusOr<TrainResult>& r = run.result();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("/job:worker/replica:0/task:1"), std::string::npos)
      << r.status();
  EXPECT_LT(secs, 15.0);
  EXPECT_TRUE(ChildrenRunning("graphrun").empty());  // every task process stopped
}

// A PS process killed mid-run (one process per task), or stopped (SIGSTOP:
// it stays, silent, and the heartbeats find it): the command restarts the
// cluster from the last checkpoint and trains to the target, reporting one
// restart and the step it resumed from.
void RecoversFromAKilledPs(bool sync, int signal = SIGKILL) {
  const std::string dir =
      TempDir(absl::StrCat(sync ? "recover_sync" : "recover", signal == SIGSTOP ? "_stop" : ""));
  TrainConfig c = Config(dir);
  c.sync = sync;
  c.steps = 1500;
  c.save_checkpoint_steps = 100;
  BackgroundTrain run(c);
  WaitForCheckpoint(dir, 200, run);
  std::vector<pid_t> ps = ChildrenRunning(" server ");
  ASSERT_EQ(ps.size(), 2u) << "the run ended before its step-200 checkpoint";
  const int64_t saved_before_kill = LatestStep(dir);
  kill(ps[0], signal);
  ASSERT_TRUE(run.WaitFor(std::chrono::seconds(120)))
      << "the run did not end within 120 s of the kill";
  const absl::StatusOr<TrainResult>& r = run.result();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->restarts, 1);
  ASSERT_TRUE(r->restored_from_step.has_value());
  // The newest checkpoint when the cluster restarted: at least the one seen
  // before the kill, well before the end.
  EXPECT_GE(*r->restored_from_step, saved_before_kill);
  EXPECT_LT(*r->restored_from_step, 1500);
  EXPECT_GE(r->global_step, 1500);
  ASSERT_TRUE(r->test_accuracy.has_value());
  EXPECT_GT(*r->test_accuracy, 0.8);
  EXPECT_TRUE(ChildrenRunning("graphrun").empty());  // every task process stopped
}

TEST(TrainTest, DeadPsIsRecoveredFromTheLastCheckpoint) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RecoversFromAKilledPs(/*sync=*/false);
}

// A PS that stops answering without exiting (SIGSTOP): found by the
// heartbeats, killed, and the cluster restarted from the last checkpoint.
TEST(TrainTest, StoppedPsIsFoundByHeartbeatsAndRecovered) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RecoversFromAKilledPs(/*sync=*/false, SIGSTOP);
}

// The same in synchronous training: the new cluster's chief restores and
// re-creates the accumulators and the token queue.
TEST(TrainTest, DeadPsIsRecoveredInSyncTraining) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RecoversFromAKilledPs(/*sync=*/true);
}

// --distribution=mirrored: 2 in-graph replicas, 3 epochs of Adam at global
// batch 256 (128 per replica): the local run's accuracy bar; then a resumed
// run on 4 replicas (the copies come from the restored replica 0).
TEST(TrainTest, MirroredReachesAccuracyAndResumesOnMoreReplicas) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainConfig c = Config(TempDir("mirrored"));
  c.distribution = "mirrored";
  c.num_replicas = 2;
  c.steps = 705;  // 3 epochs
  std::ostringstream log;
  auto r = Train(c, &log);
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << log.str() << TrainResultToJson(c, *r) << "\n";
  EXPECT_EQ(r->global_step, 705);
  EXPECT_EQ(r->examples, 705 * 256);
  ASSERT_TRUE(r->test_accuracy.has_value());
  EXPECT_GE(*r->test_accuracy, 0.85);
  EXPECT_EQ(client::Saver::StepOfPrefix(r->checkpoint), 705);
  EXPECT_NE(
      log.str().find("all-reduce: 6 gradients in 1 pack (1.0 MiB) over 2 replicas, shared memory"),
      std::string::npos)
      << log.str();
  ASSERT_TRUE(r->allreduce.has_value());
  EXPECT_EQ(r->allreduce->packs, 1);
  // 784*256 + 256 + 256*256 + 256 + 256*10 + 10 floats.
  EXPECT_EQ(r->allreduce->bytes, (784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10) * 4);
  auto json = ParseJson(TrainResultToJson(c, *r));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->Find("distribution")->string_value(), "mirrored");
  EXPECT_EQ(json->Find("replicas")->number_text(), "2");
  EXPECT_TRUE(json->Find("strategy")->is_null());
  ASSERT_TRUE(json->Find("allreduce")->is_object());
  EXPECT_EQ(json->Find("allreduce")->Find("packs")->number_text(), "1");

  c.num_replicas = 4;
  c.steps = 800;
  c.allreduce_pack_bytes = 0;  // one collective per gradient
  auto resumed = Train(c, nullptr);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->restored_from_step, 705);
  EXPECT_EQ(resumed->global_step, 800);
  ASSERT_TRUE(resumed->first_loss.has_value());
  EXPECT_LT(*resumed->first_loss, 0.6);  // the trained weights, on every replica
  EXPECT_EQ(resumed->allreduce->packs, 6);
  ASSERT_TRUE(resumed->test_accuracy.has_value());
  EXPECT_GE(*resumed->test_accuracy, 0.85);
}

// --distribution=multi_worker_mirrored, one process per worker (2), no PS:
// worker 1 is killed with SIGKILL after the step-200 checkpoint; the
// chief's all-reduce fails naming it, the command restarts the job from
// the last checkpoint (every worker restores it) and trains to exactly
// the last step, at the accuracy bar.
void MultiWorkerRecovers(int signal) {
  const std::string dir = TempDir(signal == SIGSTOP ? "multi_worker_stop" : "multi_worker");
  TrainConfig c = Config(dir);
  c.distribution = "multi_worker_mirrored";
  c.ps = 0;
  c.workers = 2;
  c.steps = 1000;
  c.save_checkpoint_steps = 100;
  BackgroundTrain run(c);
  WaitForCheckpoint(dir, 200, run);
  std::vector<pid_t> workers = ChildrenRunning(" train ");
  ASSERT_EQ(workers.size(), 1u) << "the run ended before its step-200 checkpoint";
  const int64_t saved_before_kill = LatestStep(dir);
  kill(workers[0], signal);
  ASSERT_TRUE(run.WaitFor(std::chrono::seconds(120)))
      << "the run did not end within 120 s of the kill";
  const absl::StatusOr<TrainResult>& r = run.result();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->restarts, 1);
  ASSERT_TRUE(r->restored_from_step.has_value());
  EXPECT_GE(*r->restored_from_step, saved_before_kill);
  EXPECT_LT(*r->restored_from_step, 1000);
  EXPECT_EQ(r->global_step, 1000);  // lockstep: exactly the last step
  EXPECT_EQ(client::Saver::StepOfPrefix(r->checkpoint), 1000);
  ASSERT_TRUE(r->test_accuracy.has_value());
  EXPECT_GE(*r->test_accuracy, 0.85);
  ASSERT_TRUE(r->allreduce.has_value());
  EXPECT_EQ(r->allreduce->replicas, 2);
  EXPECT_EQ(r->allreduce->algorithm, "ring");        // one 1 MiB pack
  EXPECT_TRUE(ChildrenRunning("graphrun").empty());  // every task process stopped
}

TEST(TrainTest, MultiWorkerMirroredRecoversFromAKilledWorker) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  MultiWorkerRecovers(SIGKILL);
}

// A worker that stops answering (SIGSTOP) while the chief waits in an
// all-reduce: the chief's heartbeats find it, the all-reduce aborts naming
// it, the stopped worker is killed and the job restarts from the last
// checkpoint.
TEST(TrainTest, MultiWorkerMirroredRecoversFromAStoppedWorker) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  MultiWorkerRecovers(SIGSTOP);
}

// Without a checkpoint to restart from, a killed worker ends the run at
// once: Unavailable naming it (3 workers: the chief learns it through
// worker 2, whose all-reduce step fetches from the dead worker 1).
TEST(TrainTest, MultiWorkerMirroredDeadWorkerIsNamedWithoutCheckpoints) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainConfig c = Config("");
  c.distribution = "multi_worker_mirrored";
  c.ps = 0;
  c.workers = 3;
  c.batch_size = 255;
  c.steps = 1000000;
  BackgroundTrain run(c);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<pid_t> workers;
  while (workers.size() < 2 && !run.done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    workers = ChildrenRunning(" train ");
  }
  ASSERT_EQ(workers.size(), 2u);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  pid_t worker1 = 0;
  for (pid_t pid : workers) {
    // Its TF_CONFIG names it.
    if (ReadFile(absl::StrCat("/proc/", pid, "/environ")).find(R"("index": 1})") !=
        std::string::npos) {
      worker1 = pid;
    }
  }
  ASSERT_NE(worker1, 0);
  kill(worker1, SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(run.WaitFor(std::chrono::seconds(60)));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  const absl::StatusOr<TrainResult>& r = run.result();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("/job:worker/replica:0/task:1"), std::string::npos)
      << r.status();
  EXPECT_LT(secs, 10.0);  // the error itself is immediate: a closed connection
  EXPECT_TRUE(ChildrenRunning("graphrun").empty());
  // Why it did not restart, and where the tasks' logs stayed.
  EXPECT_NE(r.status().message().find("not restarted: no --checkpoint_dir to resume from"),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("/tmp/graphrun_train_tasks_"), std::string::npos)
      << r.status();
}

// A run whose loss turns NaN stops at that step, as an Estimator's
// NanTensorHook stops it, before any checkpoint of its diverged variables.
TEST(TrainTest, DivergingRunFailsOnANanLoss) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  const std::string dir = TempDir("nan_loss");
  TrainConfig c = Config(dir);
  c.local = true;
  c.learning_rate = 1e9;
  c.steps = 50;
  absl::StatusOr<TrainResult> r = Train(c, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("the loss is NaN at global step "), std::string::npos)
      << r.status();
  EXPECT_EQ(LatestStep(dir), -1);
}

TEST(TrainTest, MirroredFlagErrorsAreUsageErrors) {
  auto bad_batch = ParseTrainFlags({"--distribution=mirrored", "--num_replicas=3"});
  ASSERT_FALSE(bad_batch.ok());
  EXPECT_EQ(bad_batch.status().message(),
            "--batch_size: the global batch 256 does not divide evenly among 3 replicas");
  auto with_ps = ParseTrainFlags({"--distribution=mirrored", "--ps=2"});
  ASSERT_FALSE(with_ps.ok());
  EXPECT_EQ(with_ps.status().message(),
            "--ps: not with --distribution=mirrored (in-graph replicas in one process, no "
            "parameter servers)");
  EXPECT_FALSE(ParseTrainFlags({"--num_replicas=2"}).ok());
  EXPECT_FALSE(ParseTrainFlags({"--distribution=horovod"}).ok());
  auto mw_ps = ParseTrainFlags({"--distribution=multi_worker_mirrored", "--ps=1"});
  ASSERT_FALSE(mw_ps.ok());
  EXPECT_EQ(mw_ps.status().message(),
            "--ps: not with --distribution=multi_worker_mirrored (one process per worker, no "
            "parameter servers)");
  auto mw_batch = ParseTrainFlags({"--distribution=multi_worker_mirrored", "--workers=3"});
  ASSERT_FALSE(mw_batch.ok());
  EXPECT_EQ(mw_batch.status().message(),
            "--batch_size: the global batch 256 does not divide evenly among 3 workers");
  auto mw_replicas =
      ParseTrainFlags({"--distribution=multi_worker_mirrored", "--workers=2", "--num_replicas=3"});
  ASSERT_FALSE(mw_replicas.ok());
  EXPECT_EQ(mw_replicas.status().message(),
            "--batch_size: the global batch 256 does not divide evenly among 6 replicas (2 "
            "workers x 3)");
  // Sharding the one training file among workers: refused before any
  // task starts; one worker may.
  auto by_file = ParseTrainFlags(
      {"--distribution=multi_worker_mirrored", "--workers=2", "--auto_shard_policy=file"});
  ASSERT_FALSE(by_file.ok());
  EXPECT_EQ(by_file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(by_file.status().message(),
            "--auto_shard_policy=file: the training set is 1 file "
            "(/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte[.gz]) for 2 workers; "
            "sharding by file needs at least one file per worker (use data or auto)");
  EXPECT_TRUE(ParseTrainFlags({"--distribution=multi_worker_mirrored", "--workers=1",
                               "--auto_shard_policy=file"})
                  .ok());
  auto per_worker =
      ParseTrainFlags({"--distribution=multi_worker_mirrored", "--workers=2", "--num_replicas=4"});
  ASSERT_TRUE(per_worker.ok()) << per_worker.status();
  EXPECT_EQ(per_worker->replicas_per_worker, 4);
  EXPECT_EQ(per_worker->num_replicas, 2);  // mirrored's, untouched
  EXPECT_FALSE(ParseTrainFlags({"--auto_shard_policy=data"}).ok());
  EXPECT_FALSE(
      ParseTrainFlags({"--distribution=multi_worker_mirrored", "--auto_shard_policy=x"}).ok());
  auto mw = ParseTrainFlags(
      {"--distribution=multi_worker_mirrored", "--workers=4", "--auto_shard_policy=data"});
  ASSERT_TRUE(mw.ok()) << mw.status();
  EXPECT_EQ(mw->ps, 0);
  EXPECT_EQ(mw->workers, 4);
  EXPECT_EQ(mw->auto_shard_policy, "data");
  auto ok = ParseTrainFlags(
      {"--distribution=mirrored", "--num_replicas=4", "--allreduce_pack_bytes=65536"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->num_replicas, 4);
  EXPECT_EQ(ok->allreduce_pack_bytes, 65536);
  EXPECT_EQ(ok->replica_device_type, "CPU");
  auto gpus = ParseTrainFlags({"--distribution=mirrored", "--replica_device_type=GPU"});
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_EQ(gpus->replica_device_type, "GPU");
  auto heartbeats = ParseTrainFlags({"--heartbeat_interval_ms=250", "--heartbeat_misses=5"});
  ASSERT_TRUE(heartbeats.ok()) << heartbeats.status();
  EXPECT_EQ(heartbeats->heartbeat_interval_ms, 250);
  EXPECT_EQ(heartbeats->heartbeat_misses, 5);
  EXPECT_EQ(ok->heartbeat_interval_ms, 1000);
  EXPECT_EQ(ok->heartbeat_misses, 3);
  EXPECT_FALSE(ParseTrainFlags({"--heartbeat_misses=0"}).ok());
  auto workers_gpu =
      ParseTrainFlags({"--distribution=multi_worker_mirrored", "--replica_device_type=GPU"});
  ASSERT_TRUE(workers_gpu.ok()) << workers_gpu.status();
  EXPECT_EQ(workers_gpu->replica_device_type, "GPU");
  auto not_mirrored = ParseTrainFlags({"--replica_device_type=GPU"});
  EXPECT_EQ(not_mirrored.status().message(),
            "--replica_device_type: only with --distribution=mirrored or multi_worker_mirrored");
}

// Under srun the cluster comes from SLURM_* (the first --ps ranks are
// parameter servers, ports from --port_base); TF_CONFIG, when set, wins.
TEST(TrainTest, SlurmTfConfigAndFlagsPrecedence) {
  const char* vars[] = {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
                        "SLURM_STEP_TASKS_PER_NODE", "TF_CONFIG"};
  auto clear = [&] {
    for (const char* v : vars) unsetenv(v);
  };
  clear();
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_STEP_NUM_TASKS", "3", 1);
  setenv("SLURM_STEP_NODELIST", "n1", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "3", 1);
  auto slurm = ParseTrainFlags({});
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  EXPECT_EQ(slurm->tf_config,
            R"({"cluster": {"ps": ["n1:2222"], "worker": ["n1:2223", "n1:2224"]}, )"
            R"("task": {"type": "worker", "index": 0}})");
  // Exported for a ps task served as `graphrun server`.
  ASSERT_NE(std::getenv("TF_CONFIG"), nullptr);
  EXPECT_EQ(std::string(std::getenv("TF_CONFIG")), slurm->tf_config);
  unsetenv("TF_CONFIG");
  // Flags override what SLURM_* implies.
  auto flags = ParseTrainFlags({"--ps=2", "--port_base=4000"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->tf_config,
            R"({"cluster": {"ps": ["n1:4000", "n1:4001"], "worker": ["n1:4002"]}, )"
            R"("task": {"type": "ps", "index": 1}})");
  // TF_CONFIG wins over SLURM_*.
  const std::string own =
      R"({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 0}})";
  setenv("TF_CONFIG", own.c_str(), 1);
  auto tf = ParseTrainFlags({});
  ASSERT_TRUE(tf.ok()) << tf.status();
  EXPECT_EQ(tf->tf_config, own);
  clear();
}

TEST(TrainTest, FlagErrorsAreUsageErrors) {
  EXPECT_FALSE(ParseTrainFlags({"--model=resnet"}).ok());
  EXPECT_FALSE(ParseTrainFlags({"--epochs=1", "--steps=2"}).ok());
  EXPECT_FALSE(ParseTrainFlags({"--local", "--ps=3"}).ok());
  auto c = ParseTrainFlags({"--steps=5", "--format=json", "--optimizer=sgd"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->json_only);
  EXPECT_EQ(c->ps, 2);
  EXPECT_EQ(c->workers, 2);
  EXPECT_EQ(c->strategy, "balanced");
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
