// `graphrun train --trace_dir`: a 1 PS + 1 worker run traces 3 chief steps
// after 10 (one worker: asynchronous peers could take the chief's steps); DIR/trace.json is one
// Chrome trace with a process per task and a flow arrow per transfer, DIR/run_metadata.pb the
// steps' stats of every task, and `placeviz --run_metadata` on it reports the measured bytes
// between the PS and the chief.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "distributed/process_util.h"
#include "gmock/gmock.h"
#include "graph/proto/config.pb.h"
#include "gtest/gtest.h"
#include "util/json.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;
constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Runfile(const std::string& p) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/graphrun/" + p;
}

// Runs to completion, bounded; the exit code (-1: killed at the bound).
int RunTool(const std::string& binary, const std::vector<std::string>& args, const std::string& log,
            int seconds, const std::vector<std::string>& env = {}) {
  auto pid = distributed::SpawnProcess(binary, args, env, log);
  if (!pid.ok()) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (waitpid(*pid, &st, WNOHANG) == *pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(*pid, SIGKILL);
  waitpid(*pid, nullptr, 0);
  return -1;
}

TEST(TraceDirTest, TracesEveryTaskOfThreeStepsWithFlowArrows) {
  if (!std::filesystem::exists(kData)) GTEST_SKIP() << "no " << kData;
  const std::string tmp = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string dir = tmp + "/trace_dir";
  std::filesystem::remove_all(dir);
  const std::string log = tmp + "/trace_train.log";
  ASSERT_EQ(RunTool(Runfile("tools/graphrun"),
                    {"train", "--ps=1", "--workers=1", "--steps=60", "--data=" + std::string(kData),
                     "--checkpoint_dir=" + tmp + "/trace_ckpt", "--trace_dir=" + dir,
                     "--trace_steps=3", "--trace_warmup_steps=10", "--format=json"},
                    log, 300),
            0)
      << ReadAll(log);
  EXPECT_THAT(ReadAll(log), HasSubstr("traced 3 steps of every task into " + dir));

  auto trace = ParseJson(ReadAll(dir + "/trace.json"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::set<std::string> processes;
  int flow_starts = 0, flow_ends = 0, ops = 0;
  for (const JsonValue& e : trace->Find("traceEvents")->items()) {
    const std::string ph = e.Find("ph")->string_value();
    if (e.Find("name")->string_value() == "process_name") {
      processes.insert(e.Find("args")->Find("name")->string_value());
    }
    flow_starts += ph == "s";
    flow_ends += ph == "f";
    ops += ph == "X";
  }
  EXPECT_TRUE(processes.count("/job:ps/task:0")) << ReadAll(dir + "/trace.json").substr(0, 2000);
  EXPECT_TRUE(processes.count("/job:worker/task:0"));
  EXPECT_GT(ops, 30);
  // Variables cross from the PS and gradients back, every step.
  EXPECT_GE(flow_starts, 3 * 2);
  EXPECT_EQ(flow_starts, flow_ends);

  tensorflow::RunMetadata metadata;
  ASSERT_TRUE(metadata.ParseFromString(ReadAll(dir + "/run_metadata.pb")));
  std::set<std::string> devices;
  for (const auto& d : metadata.step_stats().dev_stats()) devices.insert(d.device());
  EXPECT_TRUE(devices.count("/job:ps/replica:0/task:0/device:CPU:0"));
  EXPECT_TRUE(devices.count("/job:worker/replica:0/task:0/device:CPU:0"));
  EXPECT_GT(metadata.partition_graphs_size(), 0);

  const std::string report = tmp + "/trace_placeviz.txt";
  ASSERT_EQ(RunTool(Runfile("tools/placeviz"), {"--run_metadata=" + dir + "/run_metadata.pb"},
                    report, 60),
            0)
      << ReadAll(report);
  std::cout << ReadAll(report);
  EXPECT_THAT(ReadAll(report),
              HasSubstr("measured traffic per step (mean of 3 steps), 2 tasks (1 PS)"));
  // The MLP's weights go out to the chief and their gradients come back,
  // each ~1.04 MiB a step (784x256 + 256x256 + 256x10 floats and biases).
  EXPECT_THAT(ReadAll(report), HasSubstr("100.0%    21     110      1.0 MiB      1.0 MiB\n"));
  EXPECT_THAT(ReadAll(report), HasSubstr("/job:worker/task:0     -> /job:ps/task:0         "
                                         "gradients/dense/MatMul_grad/MatMul_1:0      784.0 KiB"));
  EXPECT_THAT(ReadAll(report), HasSubstr("/job:ps/task:0         -> /job:worker/task:0     "
                                         "dense/ReadVariableOp:0                      784.0 KiB"
                                         "  (dense/kernel)"));
  // Per variable: the kernel's value out and its gradient back; Adam's
  // slots never leave the PS.
  EXPECT_THAT(ReadAll(report),
              HasSubstr("dense/kernel                         [784,256]      "
                        "DT_FLOAT      784.0 KiB  read  784.0 KiB  update  784.0 KiB"));
  EXPECT_THAT(ReadAll(report),
              HasSubstr("dense/kernel/Adam                    [784,256]      "
                        "DT_FLOAT      784.0 KiB  read        0 B  update        0 B"));
  EXPECT_THAT(ReadAll(report), HasSubstr("task pairs (bytes per step):\n"
                                         "  /job:ps/task:0         -> /job:worker/task:0          "
                                         "1.0 MiB  15 edges\n"
                                         "  /job:worker/task:0     -> /job:ps/task:0              "
                                         "1.0 MiB  7 edges\n"));
}

// Training that ends inside the traced window writes the steps it traced;
// one that ends before it says that nothing was traced, and succeeds.
TEST(TraceDirTest, ShortRunsTraceWhatTheyReachedAndSaySo) {
  if (!std::filesystem::exists(kData)) GTEST_SKIP() << "no " << kData;
  const std::string tmp = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string dir = tmp + "/short_trace";
  std::filesystem::remove_all(dir);
  const std::string log = tmp + "/short_trace.log";
  ASSERT_EQ(RunTool(Runfile("tools/graphrun"),
                    {"train", "--local", "--steps=12", "--data=" + std::string(kData),
                     "--checkpoint_dir=" + tmp + "/short_ckpt", "--trace_dir=" + dir,
                     "--trace_steps=3", "--trace_warmup_steps=10", "--format=json"},
                    log, 300),
            0)
      << ReadAll(log);
  EXPECT_THAT(ReadAll(log), HasSubstr("traced 2 steps of every task into " + dir));
  ASSERT_TRUE(std::filesystem::exists(dir + "/run_metadata.pb"));
  tensorflow::RunMetadata metadata;
  ASSERT_TRUE(metadata.ParseFromString(ReadAll(dir + "/run_metadata.pb")));
  EXPECT_GT(metadata.step_stats().dev_stats_size(), 0);

  const std::string none = tmp + "/no_trace";
  ASSERT_EQ(RunTool(Runfile("tools/graphrun"),
                    {"train", "--local", "--steps=5", "--data=" + std::string(kData),
                     "--checkpoint_dir=" + tmp + "/no_trace_ckpt", "--trace_dir=" + none,
                     "--trace_warmup_steps=10", "--format=json"},
                    log, 300),
            0)
      << ReadAll(log);
  EXPECT_THAT(ReadAll(log), HasSubstr("--trace_dir: nothing traced: training ended before the "
                                      "chief ran 10 steps (--trace_warmup_steps)"));
  EXPECT_FALSE(std::filesystem::exists(none + "/trace.json"));
}

// With GRAPHRUN_TEST_ACCEL_DEVICES=1 every task has a TEST_ACCEL device:
// the worker's forward and backward passes run on it (the trace has its
// device and its MatMuls), the variables stay on the PS's CPU, and the
// losses are the CPU-only run's.
TEST(TraceDirTest, TestAccelWorkerTrainsAsTheCpuAndIsTraced) {
  if (!std::filesystem::exists(kData)) GTEST_SKIP() << "no " << kData;
  const std::string tmp = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::map<std::string, JsonValue> results;
  for (const std::string kind : {"cpu", "accel"}) {
    const std::string log = tmp + "/test_accel_" + kind + ".log";
    std::vector<std::string> env;
    if (kind == "accel") env.push_back("GRAPHRUN_TEST_ACCEL_DEVICES=1");
    ASSERT_EQ(RunTool(Runfile("tools/graphrun"),
                      {"train", "--ps=1", "--workers=1", "--steps=30",
                       "--data=" + std::string(kData), "--checkpoint_dir=" + tmp + "/ta_" + kind,
                       "--trace_dir=" + tmp + "/ta_trace_" + kind, "--trace_steps=2",
                       "--trace_warmup_steps=5", "--format=json"},
                      log, 300, env),
              0)
        << ReadAll(log);
    const std::string text = ReadAll(log);
    auto json = ParseJson(text.substr(text.rfind("\n{") + 1));
    ASSERT_TRUE(json.ok()) << json.status() << text;
    results[kind] = *json;
  }
  for (const char* key : {"first_loss", "last_loss", "test_loss"}) {
    const double c = std::stod(results["cpu"].Find(key)->number_text());
    EXPECT_NEAR(std::stod(results["accel"].Find(key)->number_text()), c, 1e-4 * c) << key;
  }

  tensorflow::RunMetadata metadata;
  ASSERT_TRUE(metadata.ParseFromString(ReadAll(tmp + "/ta_trace_accel/run_metadata.pb")));
  std::map<std::string, int> matmuls;  // per device
  for (const auto& d : metadata.step_stats().dev_stats()) {
    for (const auto& n : d.node_stats()) {
      if (n.timeline_label().find(" = MatMul(") != std::string::npos) ++matmuls[d.device()];
    }
  }
  // Two traced steps of the MLP: 3 forward MatMuls, 3 for the kernels'
  // gradients and 2 for the hidden layers' inputs.
  EXPECT_EQ(matmuls["/job:worker/replica:0/task:0/device:TEST_ACCEL:0"], 2 * 8);
  EXPECT_EQ(matmuls["/job:worker/replica:0/task:0/device:CPU:0"], 0);
  EXPECT_THAT(ReadAll(tmp + "/ta_trace_accel/trace.json"),
              HasSubstr("/job:worker/replica:0/task:0/device:TEST_ACCEL:0"));
}

}  // namespace
}  // namespace graphrun
