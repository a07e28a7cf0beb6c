// Chaos tests of `graphrun train` tasks under TF_CONFIG (2 ps + chief +
// worker, each a process): a PS, the chief or a worker killed or stopped
// mid-run, asynchronous and synchronous (--sync) training recovering in
// place, and the run ending at its step count with a trained model.
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

// TF_CONFIG of `type`:`index` in a cluster of two ps, one chief and one
// worker at `ports` (ps0, ps1, chief, worker; 0 when the launcher sends
// them later).
std::string TfConfig2Ps(const std::string& type, int index, const std::vector<int>& ports) {
  return absl::StrCat(R"(TF_CONFIG={"cluster": {"chief": ["127.0.0.1:)", ports[2],
                      R"("], "worker": ["127.0.0.1:)", ports[3], R"("], "ps": ["127.0.0.1:)",
                      ports[0], R"(", "127.0.0.1:)", ports[1], R"("]}, "task": {"type": ")", type,
                      R"(", "index": )", index, "}}");
}

// The time `path` first holds `text`, waiting until `deadline`.
std::optional<std::chrono::steady_clock::time_point> WaitForText(
    const std::string& path, const std::string& text,
    std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    if (ReadFile(path).find(text) != std::string::npos) return std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// Chaos: asynchronous training on 2 ps + chief + worker; after the
// checkpoint of step >= 200, ps 1 is
//  - killed (SIGKILL) and started again on its port, as an orchestrator
//    restarts a pod: the chief restores ps 1's variables, and only those,
//    from the latest checkpoint, while the global step (on ps 0) goes on;
//  - or stopped (SIGSTOP) for 3 s, then continued: it kept its variables,
//    so nothing is restored.
// Either way the chief and the worker report the loss at once as
// `Unavailable: ...` naming the task, build new sessions, and the run ends
// at the step count asked for with a trained model.
// 2 ps + chief + worker (TfConfig2Ps), asynchronous with 3000 steps (or
// synchronous with 1500), a checkpoint every 100, started by the test as
// their launcher; `ports` of ps0, ps1, chief, worker once started.
struct ChaosCluster {
  std::string ckpt = TempDir("chaos_ckpt");
  std::string logs = TempDir("chaos_logs");
  Children children;
  size_t ps0 = 0, ps1 = 0, chief = 0, worker = 0;
  std::vector<int> ports;
  std::vector<std::string> ps_args = {"train", "--checkpoint_dir=" + ckpt};
  // Synchronous training: 1500 updates of both replicas' gradients.
  const bool sync;
  const int64_t steps;
  std::vector<std::string> args;

  explicit ChaosCluster(bool sync_replicas = false)
      : sync(sync_replicas),
        steps(sync_replicas ? 1500 : 3000),
        args({"train", "--data=" + std::string(kData), absl::StrCat("--steps=", steps),
              "--save_checkpoint_steps=100", "--strategy=round_robin",
              // One recovery in a row: the PS-kill run loses PS 1 twice,
              // with training between, and survives both.
              "--max_restarts=1", "--checkpoint_dir=" + ckpt, "--format=json"}) {
    if (sync) args.push_back("--sync");
  }

  void Start() {
    const std::vector<int> zeros = {0, 0, 0, 0};
    ps0 = children.Start("/job:ps/task:0", ps_args, {TfConfig2Ps("ps", 0, zeros)}, logs);
    ps1 = children.Start("/job:ps/task:1", ps_args, {TfConfig2Ps("ps", 1, zeros)}, logs);
    worker = children.Start("/job:worker/task:0", args, {TfConfig2Ps("worker", 0, zeros)}, logs);
    chief = children.Start("/job:chief/task:0", args, {TfConfig2Ps("chief", 0, zeros)}, logs);
    ASSERT_TRUE(CollectPorts({&children.all[ps0], &children.all[ps1], &children.all[chief],
                              &children.all[worker]},
                             60000)
                    .ok());
    ports = {children.all[ps0].port, children.all[ps1].port, children.all[chief].port,
             children.all[worker].port};
    distributed::ClusterSpec spec;
    spec.AddTask("chief", absl::StrCat("127.0.0.1:", ports[2]));
    spec.AddTask("worker", absl::StrCat("127.0.0.1:", ports[3]));
    spec.AddTask("ps", absl::StrCat("127.0.0.1:", ports[0]));
    spec.AddTask("ps", absl::StrCat("127.0.0.1:", ports[1]));
    for (size_t i : {ps0, ps1, worker, chief}) {
      ASSERT_TRUE(SendCluster(children.all[i], spec).ok());
    }
  }

  // Waits for the checkpoint of a step >= 200; its step.
  int64_t WaitForCheckpoint() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline && !Reap(children.all[chief])) {
      auto latest = client::Saver::LatestCheckpoint(ckpt);
      if (latest.ok() && client::Saver::StepOfPrefix(*latest) >= 200) {
        return client::Saver::StepOfPrefix(*latest);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  // The orchestrator's restart of `type`:`index`: the same task on its
  // port, with `task_args`.
  size_t Restart(const std::string& task, const std::string& type, int index,
                 const std::vector<std::string>& task_args) {
    return children.Start(task, task_args, {TfConfig2Ps(type, index, ports)}, logs,
                          /*linked=*/false);
  }
};

void RunPsChaos(bool kill_it, bool sync = false) {
  ChaosCluster cluster(sync);
  cluster.Start();
  if (testing::Test::HasFatalFailure()) return;
  Children& children = cluster.children;
  const size_t ps0 = cluster.ps0, ps1 = cluster.ps1, chief = cluster.chief, worker = cluster.worker;
  const int64_t seen_checkpoint = cluster.WaitForCheckpoint();
  ASSERT_GE(seen_checkpoint, 200) << ReadFile(children.all[chief].log_file);
  kill(children.all[ps1].pid, kill_it ? SIGKILL : SIGSTOP);
  const auto lost_at = std::chrono::steady_clock::now();
  // Gone (its port free) before anything restarts it.
  if (kill_it) {
    ASSERT_TRUE(WaitForExit(children.all[ps1], lost_at + std::chrono::seconds(10)));
  }
  const std::string lost = "Unavailable: ";
  auto chief_saw =
      WaitForText(children.all[chief].log_file, lost, lost_at + std::chrono::seconds(30));
  auto worker_saw =
      WaitForText(children.all[worker].log_file, lost, lost_at + std::chrono::seconds(30));
  if (!kill_it) {
    std::this_thread::sleep_for(std::chrono::seconds(3) -
                                (std::chrono::steady_clock::now() - lost_at));
    kill(children.all[ps1].pid, SIGCONT);
  }
  ASSERT_TRUE(chief_saw.has_value()) << ReadFile(children.all[chief].log_file);
  ASSERT_TRUE(worker_saw.has_value()) << ReadFile(children.all[worker].log_file);
  const double chief_ms = std::chrono::duration<double, std::milli>(*chief_saw - lost_at).count();
  const double worker_ms = std::chrono::duration<double, std::milli>(*worker_saw - lost_at).count();

  size_t serving = ps1;
  int64_t second_loss_after = -1;
  if (kill_it) {
    // The orchestrator's restart: the same task on the same port.
    serving = cluster.Restart("/job:ps/task:1", "ps", 1, cluster.ps_args);
    // A second, separate outage once training went on (a checkpoint 300
    // steps later): with --max_restarts=1 it is recovered too, as the
    // first was.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < until && !Reap(children.all[chief])) {
      auto latest = client::Saver::LatestCheckpoint(cluster.ckpt);
      if (latest.ok() && client::Saver::StepOfPrefix(*latest) >= seen_checkpoint + 300) {
        second_loss_after = client::Saver::StepOfPrefix(*latest);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GE(second_loss_after, seen_checkpoint + 300) << ReadFile(children.all[chief].log_file);
    kill(children.all[serving].pid, SIGKILL);
    ASSERT_TRUE(WaitForExit(children.all[serving],
                            std::chrono::steady_clock::now() + std::chrono::seconds(10)));
    // The chief saw the second loss before the restart.
    const auto seen_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto losses = [&] {
      const std::string log = ReadFile(children.all[chief].log_file);
      int n = 0;
      for (size_t at = log.find("goes on with new sessions"); at != std::string::npos;
           at = log.find("goes on with new sessions", at + 1)) {
        ++n;
      }
      return n;
    };
    while (losses() < 2 && std::chrono::steady_clock::now() < seen_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(losses(), 2) << ReadFile(children.all[chief].log_file);
    serving = cluster.Restart("/job:ps/task:1", "ps", 1, cluster.ps_args);
  }
  const auto back = std::chrono::steady_clock::now();
  const auto deadline = back + std::chrono::seconds(150);
  ASSERT_TRUE(WaitForExit(children.all[chief], deadline)) << ReadFile(children.all[chief].log_file);
  ASSERT_TRUE(WaitForExit(children.all[worker], deadline))
      << ReadFile(children.all[worker].log_file);
  const double run_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - back).count();
  const std::string chief_log = ReadFile(children.all[chief].log_file);
  const std::string worker_log = ReadFile(children.all[worker].log_file);
  ASSERT_TRUE(ExitedOk(children.all[chief])) << chief_log;
  ASSERT_TRUE(ExitedOk(children.all[worker])) << worker_log;
  EXPECT_FALSE(Reap(children.all[serving])) << ReadFile(children.all[serving].log_file);
  EXPECT_FALSE(Reap(children.all[ps0])) << ReadFile(children.all[ps0].log_file);
  std::cout << "ps 1 " << (kill_it ? "killed" : "stopped") << " after the checkpoint of step "
            << seen_checkpoint << "; Unavailable reported by the chief after " << chief_ms
            << " ms, the worker after " << worker_ms << " ms; training ended " << run_s
            << " s after ps 1 was back\n";

  // The error names the lost task.
  const std::string line = chief_log.substr(chief_log.find(lost));
  EXPECT_NE(line.substr(0, line.find('\n')).find("/job:ps/replica:0/task:1"), std::string::npos)
      << line.substr(0, line.find('\n'));
  const std::string once = "(recovery 1 of at most 1 in a row)";
  const size_t first = chief_log.find(once);
  EXPECT_NE(first, std::string::npos) << chief_log;
  auto result = ResultJson(chief_log);
  ASSERT_TRUE(result.ok()) << chief_log;
  const double step = Num(*result, "global_step");
  EXPECT_GE(step, cluster.steps) << result->Serialize();
  EXPECT_LE(step, cluster.steps + 1);
  const JsonValue* restored = result->Find("restored_devices");
  ASSERT_TRUE(restored != nullptr && restored->is_array()) << result->Serialize();
  if (kill_it) {
    // Two separate outages, each recovered as the first of its row.
    EXPECT_EQ(Num(*result, "restarts"), 2) << result->Serialize();
    EXPECT_NE(chief_log.find(once, first + 1), std::string::npos) << chief_log;
    // Only ps 1's variables came from the checkpoint, of a step no older
    // than the one seen before the kill.
    ASSERT_EQ(restored->items().size(), 1u) << result->Serialize();
    EXPECT_EQ(restored->items()[0].string_value(), "/job:ps/task:1");
    EXPECT_GE(Num(*result, "restored_from_step"), second_loss_after);
  } else {
    EXPECT_EQ(Num(*result, "restarts"), 1) << result->Serialize();
    EXPECT_TRUE(restored->items().empty()) << result->Serialize();
    EXPECT_TRUE(result->Find("restored_from_step")->is_null()) << result->Serialize();
  }
  EXPECT_GT(Num(*result, "test_accuracy"), 0.8) << result->Serialize();
  auto worker_result = ResultJson(worker_log);
  ASSERT_TRUE(worker_result.ok()) << worker_log;
  EXPECT_GE(Num(*worker_result, "global_step"), cluster.steps);
  if (sync) {
    // Synchronous to the end: every update took both replicas' gradients,
    // so no more updates than asked for, and the worker's last step saw
    // the chief's last update.
    EXPECT_EQ(step, cluster.steps) << result->Serialize();
    EXPECT_EQ(Num(*worker_result, "global_step"), cluster.steps) << worker_result->Serialize();
  }
  if (!kSanitized) {
    // Peer liveness: the loss is found within 5 s (heartbeat 1 s, 3
    // misses; at once when the connection resets), with a margin for a
    // loaded machine.
    EXPECT_LT(chief_ms, 8000);
    EXPECT_LT(worker_ms, 8000);
  }
}

// Chaos, a trainer killed: SIGKILL of the chief (or of the worker) after
// the checkpoint of step >= 200, then its restart on its port. The other
// trainer's steps need only the PS tasks: it goes on without an error. A
// restarted worker joins at the current step; a restarted chief restores
// the newest checkpoint, and the run ends at its step count.
void RunTrainerChaos(bool chief_dies, bool sync = false) {
  ChaosCluster cluster(sync);
  cluster.Start();
  if (testing::Test::HasFatalFailure()) return;
  Children& children = cluster.children;
  const size_t victim = chief_dies ? cluster.chief : cluster.worker;
  const size_t other = chief_dies ? cluster.worker : cluster.chief;
  const int64_t seen_checkpoint = cluster.WaitForCheckpoint();
  ASSERT_GE(seen_checkpoint, 200) << ReadFile(children.all[cluster.chief].log_file);
  kill(children.all[victim].pid, SIGKILL);
  // Gone (its port free) before the restart, as an orchestrator restarts
  // a container that exited.
  ASSERT_TRUE(WaitForExit(children.all[victim],
                          std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  const size_t again = chief_dies
                           ? cluster.Restart("/job:chief/task:0", "chief", 0, cluster.args)
                           : cluster.Restart("/job:worker/task:0", "worker", 0, cluster.args);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  ASSERT_TRUE(WaitForExit(children.all[again], deadline)) << ReadFile(children.all[again].log_file);
  ASSERT_TRUE(WaitForExit(children.all[other], deadline)) << ReadFile(children.all[other].log_file);
  const std::string again_log = ReadFile(children.all[again].log_file);
  const std::string other_log = ReadFile(children.all[other].log_file);
  ASSERT_TRUE(ExitedOk(children.all[again])) << again_log;
  ASSERT_TRUE(ExitedOk(children.all[other])) << other_log;
  EXPECT_EQ(other_log.find("Unavailable"), std::string::npos) << other_log;
  if (sync && chief_dies) {
    // The new chief dropped the synchronization state its predecessor
    // left; the worker, waiting on a token of the old queue, was told so
    // and joined the new state.
    EXPECT_NE(other_log.find("Aborted: "), std::string::npos) << other_log;
    EXPECT_NE(other_log.find("sync_token_q was reset"), std::string::npos) << other_log;
  }
  auto restarted = ResultJson(again_log);
  ASSERT_TRUE(restarted.ok()) << again_log;
  EXPECT_GE(Num(*restarted, "global_step"), cluster.steps) << restarted->Serialize();
  EXPECT_LE(Num(*restarted, "global_step"), cluster.steps + 1);
  if (chief_dies) {
    // A fresh chief restores the newest checkpoint whole, as TensorFlow's
    // SessionManager does (the global step goes back to it, no further).
    EXPECT_GE(Num(*restarted, "restored_from_step"), seen_checkpoint) << restarted->Serialize();
  } else {
    EXPECT_TRUE(restarted->Find("restored_from_step")->is_null()) << restarted->Serialize();
  }
  EXPECT_TRUE(restarted->Find("restored_devices")->items().empty());
  auto other_result = ResultJson(other_log);
  ASSERT_TRUE(other_result.ok()) << other_log;
  EXPECT_GE(Num(*other_result, "global_step"), cluster.steps) << other_result->Serialize();
  const JsonValue& chief_result = chief_dies ? *restarted : *other_result;
  EXPECT_GT(Num(chief_result, "test_accuracy"), 0.8) << chief_result.Serialize();
  std::cout << (chief_dies ? "chief" : "worker") << " killed after the checkpoint of step "
            << seen_checkpoint << " and restarted: " << again_log.substr(again_log.rfind('{'));
}

// Chaos, a trainer stopped: SIGSTOP of the chief (or of the worker) after
// the checkpoint of step >= 200, SIGCONT 5 s later (past the heartbeat's
// 3 misses of 1 s). The other trainer's steps need only the PS tasks: it
// goes on without an error. The PS tasks watch the master of each step
// they serve: they end the stopped trainer's step and report it
// (`Unavailable` naming it, within 5 s of the stop); the continued trainer
// finds its step ended, builds new sessions and goes on; the run ends at
// its step count, nothing restored.
void RunStoppedTrainer(bool chief_stops, bool sync = false) {
  ChaosCluster cluster(sync);
  cluster.Start();
  if (testing::Test::HasFatalFailure()) return;
  Children& children = cluster.children;
  const size_t victim = chief_stops ? cluster.chief : cluster.worker;
  const size_t other = chief_stops ? cluster.worker : cluster.chief;
  const std::string victim_task =
      chief_stops ? "/job:chief/replica:0/task:0" : "/job:worker/replica:0/task:0";
  const int64_t seen_checkpoint = cluster.WaitForCheckpoint();
  ASSERT_GE(seen_checkpoint, 200) << ReadFile(children.all[cluster.chief].log_file);
  const size_t before_other = ReadFile(children.all[other].log_file).size();
  kill(children.all[victim].pid, SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  // Some PS task reports the stopped trainer (the one whose step it was
  // serving first; both may).
  double reported_ms = -1;
  // 5 s (8 under a sanitizer, where everything is slower).
  const auto stop_for = std::chrono::seconds(kSanitized ? 8 : 5);
  while (reported_ms < 0 && std::chrono::steady_clock::now() < stopped + stop_for) {
    for (size_t ps : {cluster.ps0, cluster.ps1}) {
      const std::string log = ReadFile(children.all[ps].log_file);
      for (size_t at = log.find("Unavailable: "); at != std::string::npos && reported_ms < 0;
           at = log.find("Unavailable: ", at + 1)) {
        if (log.substr(at, log.find('\n', at) - at).find(victim_task) != std::string::npos) {
          reported_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - stopped)
                  .count();
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_until(stopped + stop_for);
  kill(children.all[victim].pid, SIGCONT);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(kSanitized ? 600 : 150);
  ASSERT_TRUE(WaitForExit(children.all[victim], deadline))
      << ReadFile(children.all[victim].log_file);
  ASSERT_TRUE(WaitForExit(children.all[other], deadline)) << ReadFile(children.all[other].log_file);
  const std::string victim_log = ReadFile(children.all[victim].log_file);
  const std::string other_log = ReadFile(children.all[other].log_file);
  ASSERT_TRUE(ExitedOk(children.all[victim])) << victim_log;
  ASSERT_TRUE(ExitedOk(children.all[other])) << other_log;
  EXPECT_EQ(other_log.find("Unavailable", before_other), std::string::npos) << other_log;
  auto victim_result = ResultJson(victim_log);
  auto other_result = ResultJson(other_log);
  ASSERT_TRUE(victim_result.ok()) << victim_log;
  ASSERT_TRUE(other_result.ok()) << other_log;
  for (const JsonValue* r : {&*victim_result, &*other_result}) {
    EXPECT_GE(Num(*r, "global_step"), cluster.steps) << r->Serialize();
    EXPECT_LE(Num(*r, "global_step"), cluster.steps + 1) << r->Serialize();
    EXPECT_TRUE(r->Find("restored_devices")->items().empty()) << r->Serialize();
  }
  const JsonValue& chief_result = chief_stops ? *victim_result : *other_result;
  EXPECT_GT(Num(chief_result, "test_accuracy"), 0.8) << chief_result.Serialize();
  // Every checkpoint the run committed is whole (it restores).
  auto latest = client::Saver::LatestCheckpoint(cluster.ckpt);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_GE(client::Saver::StepOfPrefix(*latest), cluster.steps - 100);
  // A stop mid-step (most stops: the PS tasks serve the trainer's steps
  // back to back) leaves partitions on the PS tasks waiting for the
  // trainer: they end them and report it, and the trainer starts over with
  // new sessions. A stop between two steps leaves nothing waiting: nothing
  // to report, nothing restarted.
  if (Num(*victim_result, "restarts") >= 1) {
    EXPECT_GE(reported_ms, 0) << ReadFile(children.all[cluster.ps0].log_file)
                              << ReadFile(children.all[cluster.ps1].log_file);
    if (!kSanitized) {
      EXPECT_LT(reported_ms, 5000);
    }
  } else {
    std::cout << "the stop fell between two steps of the trainer\n";
  }
  // The other trainer's errors since the stop: only a --sync worker's
  // step waiting on a token may end, Aborted, when the continued chief
  // drops the token queue (if it was waiting then); nothing else.
  for (size_t at = other_log.find("Aborted: ", before_other); at != std::string::npos;
       at = other_log.find("Aborted: ", at + 1)) {
    const std::string line = other_log.substr(at, other_log.find('\n', at) - at);
    std::cout << "the other trainer: " << line << "\n";
    EXPECT_TRUE(sync && chief_stops) << line;
    EXPECT_NE(line.find("sync_token_q was reset"), std::string::npos) << line;
  }
  std::cout << (chief_stops ? "chief" : "worker") << " stopped for " << stop_for.count()
            << " s after the checkpoint of step " << seen_checkpoint << "; a PS reported it after "
            << reported_ms << " ms; stopped trainer: " << victim_log.substr(victim_log.rfind('{'));
}

TEST(TfConfigTest, AsyncTrainingOutlivesAStoppedChief) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunStoppedTrainer(/*chief_stops=*/true);
}

TEST(TfConfigTest, AsyncTrainingOutlivesAStoppedWorker) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunStoppedTrainer(/*chief_stops=*/false);
}

TEST(TfConfigTest, SyncTrainingOutlivesAStoppedWorker) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunStoppedTrainer(/*chief_stops=*/false, /*sync=*/true);
}

TEST(TfConfigTest, SyncTrainingOutlivesAStoppedChief) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunStoppedTrainer(/*chief_stops=*/true, /*sync=*/true);
}

TEST(TfConfigTest, AsyncTrainingOutlivesAChiefRestart) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunTrainerChaos(/*chief_dies=*/true);
}

TEST(TfConfigTest, AsyncTrainingOutlivesAWorkerRestart) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunTrainerChaos(/*chief_dies=*/false);
}

TEST(TfConfigTest, AsyncTrainingOutlivesAPsRestart) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunPsChaos(/*kill_it=*/true);
}

TEST(TfConfigTest, AsyncTrainingOutlivesAStoppedPs) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunPsChaos(/*kill_it=*/false);
}

// --sync, the chief killed and restarted: the new chief process finds the
// token queue and accumulators its predecessor left (tokens, partial sums)
// and drops them before it makes the state anew.
TEST(TfConfigTest, SyncTrainingOutlivesAChiefRestart) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunTrainerChaos(/*chief_dies=*/true, /*sync=*/true);
}

// The same with --sync (SyncReplicasOptimizer): the token queue (on ps 0)
// and the accumulators of ps 1's variables do not survive the loss as
// they were (a queue the failing steps closed, ps 1's accumulators gone,
// ps 0's holding part of a step), so the chief drops and remakes the
// whole synchronization state before it restores, and the worker waits
// for that new state before it steps again.
TEST(TfConfigTest, SyncTrainingOutlivesAPsRestart) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  RunPsChaos(/*kill_it=*/true, /*sync=*/true);
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
