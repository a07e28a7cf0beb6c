// `graphrun train` through the command line, one process per task:
// tasks of an external cluster given by TF_CONFIG with a `chief` job (a
// ps, the chief and one worker), and --epochs on --local.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/loop/saver.h"
#include "distributed/cluster_spec.h"
#include "distributed/launcher_link.h"
#include "distributed/process_util.h"
#include "graph/status.h"
#include "gtest/gtest.h"
#include "tests/sanitizers.h"
#include "tests/train/tf_config_testlib.h"
#include "util/json.h"

namespace graphrun {
namespace tools {

namespace {

using namespace tf_config_testing;  // NOLINT: the shared helpers
// TF_CONFIG of `type`:`index` in a cluster of one ps, one chief and one
// worker whose ports their launcher (the test) sends them later.
std::string TfConfig(const std::string& type, int index) {
  return absl::StrCat(
      R"(TF_CONFIG={"cluster": {"chief": ["127.0.0.1:0"], "worker": ["127.0.0.1:0"], )",
      R"("ps": ["127.0.0.1:0"]}, "task": {"type": ")", type, R"(", "index": )", index, "}}");
}

struct TfConfigRun {
  ChildProcess ps, chief, worker;
  std::string ps_log, chief_log, worker_log;
};

// Starts the ps (`graphrun train` with a ps TF_CONFIG serves as a server),
// the worker and the chief with `train_args` (+ --checkpoint_dir=`ckpt`
// for both: only the chief saves), hands them their cluster, waits for the
// chief and the worker to exit within `timeout`, then stops the ps.
void RunTfConfigCluster(const std::vector<std::string>& train_args, const std::string& ckpt,
                        std::chrono::seconds timeout, TfConfigRun* out) {
  const std::string logs = TempDir("tf_config_logs");
  Children children;
  // The ps gets the checkpoint directory too: its SaveV2 writes there,
  // and a task touches only its own --checkpoint_dir and --data.
  const size_t ps = children.Start("/job:ps/task:0", {"train", "--checkpoint_dir=" + ckpt},
                                   {TfConfig("ps", 0)}, logs);
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), train_args.begin(), train_args.end());
  args.push_back("--checkpoint_dir=" + ckpt);
  args.push_back("--format=json");
  size_t worker = children.Start("/job:worker/task:0", args, {TfConfig("worker", 0)}, logs);
  size_t chief = children.Start("/job:chief/task:0", args, {TfConfig("chief", 0)}, logs);
  absl::StatusOr<distributed::ClusterSpec> spec = CollectCluster(children, ps, chief, worker);
  ASSERT_TRUE(spec.ok()) << spec.status();
  // The ps first, then the worker: it waits for the chief's
  // initialization, so it is ready before the chief's first step.
  for (size_t i : {ps, worker, chief}) {
    absl::Status sent = SendCluster(children.all[i], *spec);
    ASSERT_TRUE(sent.ok()) << sent;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool chief_done = WaitForExit(children.all[chief], deadline);
  bool worker_done = WaitForExit(children.all[worker], deadline);
  EXPECT_TRUE(Reap(children.all[ps]) == false)
      << "the ps exited: " << ReadFile(children.all[ps].log_file);
  StopProcesses(children.all, 5000);
  out->ps = children.all[ps];
  out->chief = children.all[chief];
  out->worker = children.all[worker];
  out->ps_log = ReadFile(out->ps.log_file);
  out->chief_log = ReadFile(out->chief.log_file);
  out->worker_log = ReadFile(out->worker.log_file);
  ASSERT_TRUE(chief_done) << "the chief did not exit within " << timeout.count() << " s:\n"
                          << out->chief_log;
  ASSERT_TRUE(worker_done) << "the worker did not exit within " << timeout.count() << " s:\n"
                           << out->worker_log;
}

// 1 ps + 1 chief + 1 worker, async, 60 steps on Fashion-MNIST. The chief
// (replica 0) and the worker (replica 1: worker indices follow the chief)
// make 2 replicas: a global batch of 256 is 128 per replica, so each
// update is 128 examples; the chief checkpoints and evaluates, the worker
// only trains.
TEST(TfConfigTest, ChiefWorkerAndPsTrainAsOneCluster) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  const std::string ckpt = TempDir("tf_config_ckpt");
  TfConfigRun run;
  RunTfConfigCluster({"--data=" + std::string(kData), "--steps=60"}, ckpt,
                     std::chrono::seconds(100), &run);
  if (HasFatalFailure()) return;
  EXPECT_NE(run.ps_log.find("TF_CONFIG names a ps task; serving it as `graphrun server`"),
            std::string::npos)
      << run.ps_log;
  ASSERT_TRUE(ExitedOk(run.chief)) << run.chief_log;
  ASSERT_TRUE(ExitedOk(run.worker)) << run.worker_log;

  auto chief = ResultJson(run.chief_log);
  ASSERT_TRUE(chief.ok()) << chief.status() << "\n" << run.chief_log;
  EXPECT_EQ(Str(*chief, "mode"), "tf_config");
  EXPECT_GT(Num(*chief, "test_accuracy"), 0.6) << chief->Serialize();
  const double step = Num(*chief, "global_step");
  EXPECT_GE(step, 60);
  EXPECT_LE(step, 61);                   // the worker may finish one step in flight
  EXPECT_EQ(Num(*chief, "workers"), 2);  // the chief counts as a replica
  EXPECT_EQ(Num(*chief, "ps"), 1);
  // Examples from the global step: 128 (= 256 / 2 replicas) per update.
  EXPECT_EQ(Num(*chief, "examples"), step * 128) << chief->Serialize();
  EXPECT_TRUE(chief->Find("restored_from_step")->is_null());
  const std::string checkpoint = Str(*chief, "checkpoint");
  EXPECT_EQ(checkpoint.rfind(ckpt + "/", 0), 0u) << checkpoint;
  EXPECT_EQ(client::Saver::StepOfPrefix(checkpoint), static_cast<int64_t>(step));
  auto latest = client::Saver::LatestCheckpoint(ckpt);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, checkpoint);
  EXPECT_TRUE(std::filesystem::exists(checkpoint + ".index"));

  auto worker = ResultJson(run.worker_log);
  ASSERT_TRUE(worker.ok()) << worker.status() << "\n" << run.worker_log;
  EXPECT_EQ(Str(*worker, "mode"), "tf_config");
  EXPECT_TRUE(worker->Find("test_accuracy")->is_null()) << worker->Serialize();
  EXPECT_TRUE(worker->Find("checkpoint")->is_null()) << worker->Serialize();
  EXPECT_TRUE(worker->Find("first_loss")->is_null()) << worker->Serialize();
  EXPECT_GE(Num(*worker, "global_step"), 60);
  EXPECT_LE(Num(*worker, "global_step"), 61);
  EXPECT_EQ(Num(*worker, "workers"), 2);
}

// TF_CONFIG with a sparseCluster `cluster` for `type`:`index`.
std::string SparseTfConfig(const std::string& cluster, const std::string& type, int index) {
  return absl::StrCat(R"(TF_CONFIG={"sparseCluster": )", cluster, R"(, "task": {"type": ")", type,
                      R"(", "index": )", index, "}}");
}

// As Kubeflow's TFJob starts a job with enableDynamicWorker: two PS tasks
// and two workers, each TF_CONFIG a sparseCluster of the tasks it talks to
// (a PS its own address alone, whatever its index; a worker every PS and
// itself). Worker 0 is the chief. Without --workers the job's size is not
// known: each worker trains on its own (the whole global batch of 256 per
// update, its own order of the whole training set), asynchronously, and
// --sync is refused before anything starts.
TEST(TfConfigTest, TfJobSparseClusterTrains) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  const std::string ckpt = TempDir("tf_config_sparse_ckpt");
  const std::string logs = TempDir("tf_config_sparse_logs");
  const std::string ps_list = R"("ps": ["127.0.0.1:0", "127.0.0.1:0"])";
  const auto worker_view = [&](int i) {
    return absl::StrCat(R"({"worker": {")", i, R"(": "127.0.0.1:0"}, )", ps_list, "}");
  };
  Children children;
  for (int i = 0; i < 2; ++i) {
    children.Start(absl::StrCat("/job:ps/task:", i), {"train", "--checkpoint_dir=" + ckpt},
                   {SparseTfConfig(R"({"worker": {}, "ps": ["127.0.0.1:0"]})", "ps", i)}, logs);
  }
  const std::vector<std::string> args = {"train", "--data=" + std::string(kData), "--steps=60",
                                         "--checkpoint_dir=" + ckpt, "--format=json"};
  for (int i = 0; i < 2; ++i) {
    children.Start(absl::StrCat("/job:worker/task:", i), args,
                   {SparseTfConfig(worker_view(i), "worker", i)}, logs);
  }
  absl::Status collected = CollectPorts(children.all, 60000);
  ASSERT_TRUE(collected.ok()) << collected;
  distributed::ClusterSpec spec;  // the launcher's: every task
  for (int i = 0; i < 4; ++i) {
    spec.AddTask(i < 2 ? "ps" : "worker", absl::StrCat("127.0.0.1:", children.all[i].port));
  }
  for (int i : {0, 1, 3, 2}) {  // the chief last, as a scheduler may
    absl::Status sent = SendCluster(children.all[i], spec);
    ASSERT_TRUE(sent.ok()) << sent;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(100);
  for (int i : {2, 3}) {
    ASSERT_TRUE(WaitForExit(children.all[i], deadline)) << ReadFile(children.all[i].log_file);
    ASSERT_TRUE(ExitedOk(children.all[i])) << ReadFile(children.all[i].log_file);
  }
  for (int i : {0, 1}) {
    EXPECT_FALSE(Reap(children.all[i])) << "ps " << i << " exited";
    // Each PS listens at its own address, which its view named alone.
    EXPECT_NE(ReadFile(children.all[i].log_file)
                  .find(absl::StrCat("listening on 127.0.0.1:", children.all[i].port)),
              std::string::npos)
        << ReadFile(children.all[i].log_file);
  }
  const std::string chief_log = ReadFile(children.all[2].log_file);
  auto chief = ResultJson(chief_log);
  ASSERT_TRUE(chief.ok()) << chief.status() << "\n" << chief_log;
  EXPECT_EQ(Str(*chief, "mode"), "tf_config");
  EXPECT_EQ(Num(*chief, "ps"), 2);
  EXPECT_EQ(Num(*chief, "workers"), 0) << chief->Serialize();  // not known
  const double step = Num(*chief, "global_step");
  EXPECT_GE(step, 60);
  EXPECT_LE(step, 61);
  EXPECT_EQ(Num(*chief, "examples"), step * 256) << chief->Serialize();
  EXPECT_GT(Num(*chief, "test_accuracy"), 0.6) << chief->Serialize();
  EXPECT_EQ(client::Saver::StepOfPrefix(Str(*chief, "checkpoint")), static_cast<int64_t>(step));
  const std::string worker_log = ReadFile(children.all[3].log_file);
  auto worker = ResultJson(worker_log);
  ASSERT_TRUE(worker.ok()) << worker.status() << "\n" << worker_log;
  EXPECT_TRUE(worker->Find("test_accuracy")->is_null()) << worker->Serialize();
  EXPECT_GE(Num(*worker, "global_step"), 60);

  // --sync needs the job's size, which a sparse cluster does not say.
  std::vector<std::string> sync = args;
  sync.push_back("--sync");
  const size_t refused = children.Start("/job:worker/task:1", sync,
                                        {SparseTfConfig(worker_view(1), "worker", 1)}, logs,
                                        /*linked=*/false);
  ASSERT_TRUE(WaitForExit(children.all[refused],
                          std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  EXPECT_FALSE(ExitedOk(children.all[refused]));
  EXPECT_NE(ReadFile(children.all[refused].log_file)
                .find("synchronous replicas need their number, which a sparse cluster does not "
                      "say (set num_replicas: `graphrun train --workers=N`)"),
            std::string::npos)
      << ReadFile(children.all[refused].log_file);
}

// Writes an IDX file of uint8 `data` with `dims`.
void WriteIdx(const std::string& path, const std::vector<uint32_t>& dims,
              const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary);
  const char magic[4] = {0, 0, 0x08, static_cast<char>(dims.size())};
  f.write(magic, 4);
  for (uint32_t d : dims) {
    const char be[4] = {static_cast<char>(d >> 24), static_cast<char>(d >> 16),
                        static_cast<char>(d >> 8), static_cast<char>(d)};
    f.write(be, 4);
  }
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// Which shard the worker reads: a data set whose odd records (shard 1 of
// 2) carry the invalid label 200 while the even ones (shard 0) are valid.
// The chief (replica 0) trains on shard 0 alone to the last step; the
// worker, replica 0 + 1 since a chief exists, fails on its first batch
// naming the label. (Without the offset the worker would read shard 0 and
// train; with it applied twice, ShardDataset would reject index 2.)
// Tasks of an external cluster start in any order: the chief trains with
// no worker up (its session sees only the PS and itself), and a worker that
// starts after the chief has finished finds the global step at its end and
// stops at once, rather than waiting on the departed chief.
TEST(TfConfigTest, ChiefAndWorkerDoNotWaitForEachOther) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  const std::string ckpt = TempDir("tf_config_order_ckpt");
  const std::string logs = TempDir("tf_config_order_logs");
  Children children;
  const std::vector<std::string> args = {"train", "--data=" + std::string(kData), "--steps=40",
                                         "--checkpoint_dir=" + ckpt, "--format=json"};
  // The ps gets the checkpoint directory too: its SaveV2 writes there,
  // and a task touches only its own --checkpoint_dir and --data.
  const size_t ps = children.Start("/job:ps/task:0", {"train", "--checkpoint_dir=" + ckpt},
                                   {TfConfig("ps", 0)}, logs);
  const size_t chief = children.Start("/job:chief/task:0", args, {TfConfig("chief", 0)}, logs);
  // The worker binds its port now but joins (gets its cluster) only after
  // the chief has finished.
  const size_t worker = children.Start("/job:worker/task:0", args, {TfConfig("worker", 0)}, logs);
  absl::StatusOr<distributed::ClusterSpec> spec = CollectCluster(children, ps, chief, worker);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(SendCluster(children.all[ps], *spec).ok());
  ASSERT_TRUE(SendCluster(children.all[chief], *spec).ok());
  ASSERT_TRUE(WaitForExit(children.all[chief],
                          std::chrono::steady_clock::now() + std::chrono::seconds(100)))
      << ReadFile(children.all[chief].log_file);
  const std::string chief_log = ReadFile(children.all[chief].log_file);
  ASSERT_TRUE(ExitedOk(children.all[chief])) << chief_log;
  auto chief_result = ResultJson(chief_log);
  ASSERT_TRUE(chief_result.ok()) << chief_log;
  EXPECT_EQ(Num(*chief_result, "global_step"), 40);  // the chief alone

  ASSERT_TRUE(SendCluster(children.all[worker], *spec).ok());
  ASSERT_TRUE(WaitForExit(children.all[worker],
                          std::chrono::steady_clock::now() + std::chrono::seconds(60)))
      << "the worker waited on the finished chief: " << ReadFile(children.all[worker].log_file);
  const std::string worker_log = ReadFile(children.all[worker].log_file);
  ASSERT_TRUE(ExitedOk(children.all[worker])) << worker_log;
  auto worker_result = ResultJson(worker_log);
  ASSERT_TRUE(worker_result.ok()) << worker_log;
  EXPECT_EQ(Num(*worker_result, "global_step"), 40);
  EXPECT_EQ(Num(*worker_result, "examples"), 0);
}

// A chief started before its PS waits for it (Unavailable is retried until
// the loop's init_timeout) and then trains.
TEST(TfConfigTest, ChiefWaitsForALatePs) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  const std::string ckpt = TempDir("tf_config_late_ckpt");
  const std::string logs = TempDir("tf_config_late_logs");
  Children children;
  const std::vector<std::string> args = {"train", "--data=" + std::string(kData), "--steps=20",
                                         "--checkpoint_dir=" + ckpt, "--format=json"};
  const size_t chief = children.Start("/job:chief/task:0", args, {TfConfig("chief", 0)}, logs);
  // The ps binds its port but answers Unavailable until it gets its
  // cluster, as a ps that is not up yet; the worker never joins.
  // The ps gets the checkpoint directory too: its SaveV2 writes there,
  // and a task touches only its own --checkpoint_dir and --data.
  const size_t ps = children.Start("/job:ps/task:0", {"train", "--checkpoint_dir=" + ckpt},
                                   {TfConfig("ps", 0)}, logs);
  const size_t worker = children.Start("/job:worker/task:0", args, {TfConfig("worker", 0)}, logs);
  absl::StatusOr<distributed::ClusterSpec> spec = CollectCluster(children, ps, chief, worker);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(SendCluster(children.all[chief], *spec).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(Reap(children.all[chief]))
      << "the chief did not wait: " << ReadFile(children.all[chief].log_file);
  ASSERT_TRUE(SendCluster(children.all[ps], *spec).ok());
  ASSERT_TRUE(WaitForExit(children.all[chief],
                          std::chrono::steady_clock::now() + std::chrono::seconds(100)))
      << ReadFile(children.all[chief].log_file);
  const std::string log = ReadFile(children.all[chief].log_file);
  ASSERT_TRUE(ExitedOk(children.all[chief])) << log;
  auto result = ResultJson(log);
  ASSERT_TRUE(result.ok()) << log;
  EXPECT_EQ(Num(*result, "global_step"), 20);
}

TEST(TfConfigTest, WorkerReadsTheShardAfterTheChiefs) {
  const std::string data = TempDir("tf_config_data");
  constexpr uint32_t kTrain = 512, kTest = 100;
  std::vector<uint8_t> labels(kTrain);
  for (uint32_t i = 0; i < kTrain; ++i) labels[i] = i % 2 == 0 ? i % 10 : 200;
  WriteIdx(data + "/train-images-idx3-ubyte", {kTrain, 28, 28},
           std::vector<uint8_t>(kTrain * 28 * 28, 0));
  WriteIdx(data + "/train-labels-idx1-ubyte", {kTrain}, labels);
  WriteIdx(data + "/t10k-images-idx3-ubyte", {kTest, 28, 28},
           std::vector<uint8_t>(kTest * 28 * 28, 0));
  WriteIdx(data + "/t10k-labels-idx1-ubyte", {kTest}, std::vector<uint8_t>(kTest, 0));
  const std::string ckpt = TempDir("tf_config_shard_ckpt");
  TfConfigRun run;
  // 1000 steps: the chief is still training (seconds) when the worker's
  // first step runs, so the worker cannot find the last step reached and
  // stop without reading a batch.
  RunTfConfigCluster({"--data=" + data, "--steps=1000"}, ckpt, std::chrono::seconds(60), &run);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(ExitedOk(run.chief)) << run.chief_log;
  EXPECT_TRUE(WIFEXITED(run.worker.exit_status) && WEXITSTATUS(run.worker.exit_status) == 1)
      << run.worker.exit_status << "\n"
      << run.worker_log;
  EXPECT_NE(run.worker_log.find("received a label value of 200"), std::string::npos)
      << run.worker_log;
  auto chief = ResultJson(run.chief_log);
  ASSERT_TRUE(chief.ok()) << chief.status() << "\n" << run.chief_log;
  // Only the chief made updates: exactly its 1000 steps of 128.
  EXPECT_EQ(Num(*chief, "global_step"), 1000);
  EXPECT_EQ(Num(*chief, "examples"), 1000 * 128);
  EXPECT_EQ(Num(*chief, "workers"), 2);
  EXPECT_EQ(client::Saver::StepOfPrefix(Str(*chief, "checkpoint")), 1000);
}

// Two workers of a TF_CONFIG cluster {"worker": [w0, w1]} with no PS,
// each `graphrun train --distribution=multi_worker_mirrored` as a user
// starts them, and an evaluator task: synchronous all-reduce training to 3
// epochs of the global batch; worker 0 is the chief (saves every 300
// steps, writes summaries, evaluates), worker 1 writes nothing; the
// evaluator prints one JSON line per checkpoint it saw and exits 0 after
// the final one, with the chief's own test accuracy.
TEST(TfConfigTest, MultiWorkerMirroredWorkersTrainTogether) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  const std::string ckpt = TempDir("tf_config_mwms_ckpt");
  const std::string logs = TempDir("tf_config_mwms_logs");
  const std::string summaries = TempDir("tf_config_mwms_summaries");
  auto tf_config = [](const std::string& type, int index) {
    return absl::StrCat(R"(TF_CONFIG={"cluster": {"worker": ["127.0.0.1:0", "127.0.0.1:0"]}, )",
                        R"("task": {"type": ")", type, R"(", "index": )", index, "}}");
  };
  const std::vector<std::string> args = {"train",
                                         "--distribution=multi_worker_mirrored",
                                         "--data=" + std::string(kData),
                                         "--epochs=3",
                                         "--checkpoint_dir=" + ckpt,
                                         "--save_checkpoint_steps=300",
                                         "--summary_dir=" + summaries,
                                         "--format=json"};
  Children children;
  const size_t evaluator = children.Start("/job:evaluator/task:0", args,
                                          {tf_config("evaluator", 0)}, logs, /*linked=*/false);
  const size_t w0 = children.Start("/job:worker/task:0", args, {tf_config("worker", 0)}, logs);
  const size_t w1 = children.Start("/job:worker/task:1", args, {tf_config("worker", 1)}, logs);
  ASSERT_TRUE(CollectPorts({&children.all[w0], &children.all[w1]}, 60000).ok());
  distributed::ClusterSpec spec;
  spec.AddTask("worker", absl::StrCat("127.0.0.1:", children.all[w0].port));
  spec.AddTask("worker", absl::StrCat("127.0.0.1:", children.all[w1].port));
  ASSERT_TRUE(SendCluster(children.all[w1], spec).ok());
  ASSERT_TRUE(SendCluster(children.all[w0], spec).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  ASSERT_TRUE(WaitForExit(children.all[w0], deadline)) << ReadFile(children.all[w0].log_file);
  ASSERT_TRUE(WaitForExit(children.all[w1], deadline)) << ReadFile(children.all[w1].log_file);
  const std::string chief_log = ReadFile(children.all[w0].log_file);
  const std::string worker_log = ReadFile(children.all[w1].log_file);
  ASSERT_TRUE(ExitedOk(children.all[w0])) << chief_log;
  ASSERT_TRUE(ExitedOk(children.all[w1])) << worker_log;
  auto chief = ResultJson(chief_log);
  ASSERT_TRUE(chief.ok()) << chief_log;
  EXPECT_EQ(Str(*chief, "mode"), "tf_config");
  EXPECT_EQ(Str(*chief, "distribution"), "multi_worker_mirrored");
  EXPECT_EQ(Num(*chief, "replicas"), 2);
  EXPECT_EQ(Num(*chief, "ps"), 0);
  // 60000 / 2 workers = 30000 examples each, 234 batches of 128: an epoch.
  EXPECT_EQ(Num(*chief, "global_step"), 3 * 234);
  EXPECT_EQ(Num(*chief, "examples"), 3 * 234 * 256);
  EXPECT_GE(Num(*chief, "test_accuracy"), 0.85);
  EXPECT_EQ(client::Saver::StepOfPrefix(Str(*chief, "checkpoint")), 3 * 234);
  auto worker = ResultJson(worker_log);
  ASSERT_TRUE(worker.ok()) << worker_log;
  EXPECT_TRUE(worker->Find("test_accuracy")->is_null()) << worker->Serialize();
  EXPECT_TRUE(worker->Find("checkpoint")->is_null()) << worker->Serialize();
  EXPECT_EQ(Num(*worker, "global_step"), 3 * 234);

  // The evaluator: one line per checkpoint it saw, steps increasing, the
  // last the final one (702) with the chief's accuracy; then exit 0.
  ASSERT_TRUE(WaitForExit(children.all[evaluator],
                          std::chrono::steady_clock::now() + std::chrono::seconds(60)))
      << ReadFile(children.all[evaluator].log_file);
  const std::string eval_log = ReadFile(children.all[evaluator].log_file);
  ASSERT_TRUE(ExitedOk(children.all[evaluator])) << eval_log;
  std::vector<JsonValue> evals;
  std::istringstream lines(eval_log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("{\"global_step\"", 0) != 0) continue;
    auto json = ParseJson(line);
    ASSERT_TRUE(json.ok()) << line;
    evals.push_back(*json);
  }
  ASSERT_GE(evals.size(), 1u) << eval_log;
  for (size_t i = 1; i < evals.size(); ++i) {
    // The one repeat allowed: the last checkpoint again, marked final,
    // when the chief marked it only after the evaluator had read it.
    const bool final_repeat = i + 1 == evals.size() && evals[i].Find("final")->bool_value() &&
                              !evals[i - 1].Find("final")->bool_value() &&
                              Num(evals[i], "global_step") == Num(evals[i - 1], "global_step");
    if (!final_repeat) {
      EXPECT_GT(Num(evals[i], "global_step"), Num(evals[i - 1], "global_step"));
    }
  }
  const JsonValue& last = evals.back();
  EXPECT_EQ(Num(last, "global_step"), 3 * 234);
  EXPECT_EQ(Str(last, "checkpoint"), Str(*chief, "checkpoint"));
  EXPECT_TRUE(last.Find("final")->is_bool() && last.Find("final")->bool_value());
  EXPECT_NEAR(Num(last, "test_accuracy"), Num(*chief, "test_accuracy"), 1e-6);
  // The same lines in results.jsonl; TensorBoard files for train and eval.
  const std::string results = ReadFile(summaries + "/eval/results.jsonl");
  EXPECT_NE(results.find(absl::StrCat("\"global_step\": ", 3 * 234)), std::string::npos) << results;
  for (const char* sub : {"/train", "/eval"}) {
    bool found = false;
    for (const auto& e : std::filesystem::directory_iterator(summaries + sub)) {
      found |=
          e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && e.file_size() > 100;
    }
    EXPECT_TRUE(found) << "no event file in " << summaries << sub;
  }
}

// Workers that do not share a checkpoint directory (as on two hosts): the
// chief resumes from its step-300 checkpoint, worker 1 finds none and
// initializes afresh; the broadcast from the chief after initialization
// gives worker 1 the chief's weights and global step, so both train
// steps 300..400 in lockstep and stop together.
TEST(TfConfigTest, MultiWorkerMirroredWorkersTakeTheChiefsState) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  const std::string chief_ckpt = TempDir("tf_config_sync_chief");
  const std::string logs = TempDir("tf_config_sync_logs");
  auto tf_config = [](int index) {
    return absl::StrCat(R"(TF_CONFIG={"cluster": {"worker": ["127.0.0.1:0", "127.0.0.1:0"]}, )",
                        R"("task": {"type": "worker", "index": )", index, "}}");
  };
  auto run = [&](int steps, const std::string& worker_ckpt, std::string* chief_log,
                 std::string* worker_log) {
    std::vector<std::string> args = {"train", "--distribution=multi_worker_mirrored",
                                     "--data=" + std::string(kData),
                                     absl::StrCat("--steps=", steps), "--format=json"};
    Children children;
    std::vector<std::string> a0 = args, a1 = args;
    a0.push_back("--checkpoint_dir=" + chief_ckpt);
    a1.push_back("--checkpoint_dir=" + worker_ckpt);
    const size_t w0 = children.Start("/job:worker/task:0", a0, {tf_config(0)}, logs);
    const size_t w1 = children.Start("/job:worker/task:1", a1, {tf_config(1)}, logs);
    ASSERT_TRUE(CollectPorts({&children.all[w0], &children.all[w1]}, 60000).ok());
    distributed::ClusterSpec spec;
    spec.AddTask("worker", absl::StrCat("127.0.0.1:", children.all[w0].port));
    spec.AddTask("worker", absl::StrCat("127.0.0.1:", children.all[w1].port));
    ASSERT_TRUE(SendCluster(children.all, spec).ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(100);
    ASSERT_TRUE(WaitForExit(children.all[w0], deadline)) << ReadFile(children.all[w0].log_file);
    ASSERT_TRUE(WaitForExit(children.all[w1], deadline)) << ReadFile(children.all[w1].log_file);
    *chief_log = ReadFile(children.all[w0].log_file);
    *worker_log = ReadFile(children.all[w1].log_file);
    ASSERT_TRUE(ExitedOk(children.all[w0])) << *chief_log;
    ASSERT_TRUE(ExitedOk(children.all[w1])) << *worker_log;
  };
  std::string chief_log, worker_log;
  run(300, TempDir("tf_config_sync_w1_first"), &chief_log, &worker_log);
  if (HasFatalFailure()) return;
  run(400, TempDir("tf_config_sync_w1_second"), &chief_log, &worker_log);
  if (HasFatalFailure()) return;
  auto chief = ResultJson(chief_log);
  auto worker = ResultJson(worker_log);
  ASSERT_TRUE(chief.ok() && worker.ok()) << chief_log << worker_log;
  EXPECT_EQ(Num(*chief, "restored_from_step"), 300);
  EXPECT_EQ(Num(*chief, "global_step"), 400);
  EXPECT_EQ(Num(*worker, "global_step"), 400);
  // The chief's restored weights reached worker 1: its first loss is a
  // trained model's, not ln 10.
  EXPECT_LT(Num(*chief, "first_loss"), 1.0);
  EXPECT_GE(Num(*chief, "test_accuracy"), 0.8);
}

// `graphrun train --local` with `args` (+ --format=json); its result line.
absl::StatusOr<JsonValue> TrainLocal(const std::vector<std::string>& args,
                                     std::chrono::seconds timeout) {
  const std::string logs = TempDir("local_logs");
  std::vector<std::string> all = {"train", "--local", "--format=json",
                                  "--data=" + std::string(kData)};
  all.insert(all.end(), args.begin(), args.end());
  Children children;
  size_t i = children.Start("/job:local/task:0", all, {}, logs, /*linked=*/false);
  ChildProcess& c = children.all[i];
  const std::string log_file = c.log_file;
  if (!WaitForExit(c, std::chrono::steady_clock::now() + timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("no exit within ", timeout.count(), " s: ", ReadFile(log_file)));
  }
  const std::string log = ReadFile(log_file);
  if (!ExitedOk(c)) {
    return absl::InternalError(absl::StrCat("exit status ", c.exit_status, ": ", log));
  }
  return ResultJson(log);
}

// --epochs=1 at batch 500: 60000 / 500 = 120 steps, exactly (the loop
// stops at global step epochs * steps per epoch); the end checkpoint is
// that step's.
TEST(TfConfigTest, OneEpochLocalStopsAtStepsPerEpoch) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  const std::string ckpt = TempDir("epoch_ckpt");
  auto r = TrainLocal({"--epochs=1", "--batch_size=500", "--checkpoint_dir=" + ckpt},
                      std::chrono::seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Str(*r, "mode"), "local");
  EXPECT_EQ(Num(*r, "global_step"), 120) << r->Serialize();
  EXPECT_EQ(Num(*r, "examples"), 60000);
  EXPECT_EQ(Num(*r, "batch_size"), 500);
  EXPECT_GT(Num(*r, "test_accuracy"), 0.7);
  EXPECT_EQ(client::Saver::StepOfPrefix(Str(*r, "checkpoint")), 120);
}

// Steps per epoch count full batches only (training drops the remainder):
// 60000 / 7000 = 8 (56000 examples), so 2 epochs stop at step 16. With
// --checkpoint_dir= (none): no checkpoint, and nothing restored (the
// default dir, /tmp/graphrun_train, would resume whatever is there).
TEST(TfConfigTest, EpochsCountFullBatchesOnly) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  auto r = TrainLocal({"--epochs=2", "--batch_size=7000", "--checkpoint_dir="},
                      std::chrono::seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Num(*r, "global_step"), 16) << r->Serialize();
  EXPECT_EQ(Num(*r, "examples"), 16 * 7000);
  EXPECT_TRUE(r->Find("checkpoint")->is_null());
  EXPECT_TRUE(r->Find("restored_from_step")->is_null());
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
