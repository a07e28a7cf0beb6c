// The evaluator in every distribution: after parameter-server training
// (an in-process cluster of two PS and a worker) and after mirrored
// training, `RunEvaluator` (graphrun train --evaluator) restores the
// chief's final checkpoint, prints one JSON line marked final with the
// chief's own test accuracy, and writes it to results.jsonl and TensorBoard
// events under --summary_dir/eval, beside the chief's train events.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/loop/saver.h"
#include "client/trainer/trainer.h"
#include "gtest/gtest.h"
#include "util/json.h"

namespace graphrun {
namespace {

using client::trainer::TrainConfig;

const char kData[] = "/usr/share/datasets/fashion-mnist";

bool HaveData() {
  return std::filesystem::exists(std::string(kData) + "/t10k-labels-idx1-ubyte.gz");
}

std::string TempDir(const std::string& name) {
  std::string base = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/" + name + "_XXXXXX";
  return mkdtemp(dir.data());
}

// Whether `dir` holds a TensorBoard event file whose bytes name every tag.
bool HasEvents(const std::string& dir, const std::vector<std::string>& tags) {
  if (!std::filesystem::exists(dir)) return false;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << f.rdbuf();
    bool all = bytes.str().find("brain.Event:2") != std::string::npos;
    for (const std::string& t : tags) all &= bytes.str().find(t) != std::string::npos;
    if (all) return true;
  }
  return false;
}

void TrainThenEvaluate(const std::string& distribution) {
  const std::string dir = TempDir("evaluator_" + distribution);
  TrainConfig c;
  c.data_dir = kData;
  c.checkpoint_dir = dir + "/ckpt";
  c.summary_dir = dir + "/summaries";
  c.distribution = distribution;
  c.steps = 60;
  c.save_checkpoint_steps = 20;
  c.log_every = 0;
  if (distribution == "parameter_server") {
    c.in_process = true;
    c.ps = 2;
    c.workers = 1;
  }
  auto trained = client::trainer::Train(c, nullptr);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_TRUE(trained->test_accuracy.has_value());
  EXPECT_EQ(client::Saver::StepOfPrefix(trained->checkpoint), trained->global_step);
  EXPECT_TRUE(client::Saver::IsFinal(c.checkpoint_dir));

  std::ostringstream out;
  absl::Status s = client::trainer::RunEvaluator(c, out, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  std::istringstream lines(out.str());
  std::string line, last;
  while (std::getline(lines, line)) {
    if (line.rfind("{\"global_step\"", 0) == 0) last = line;
  }
  ASSERT_FALSE(last.empty()) << out.str();
  auto json = ParseJson(last);
  ASSERT_TRUE(json.ok()) << last;
  EXPECT_EQ(json->Find("global_step")->number_text(), absl::StrCat(trained->global_step));
  EXPECT_EQ(json->Find("checkpoint")->string_value(), trained->checkpoint);
  EXPECT_TRUE(json->Find("final")->bool_value()) << last;
  EXPECT_NEAR(std::stod(json->Find("test_accuracy")->number_text()), *trained->test_accuracy, 1e-6)
      << last;
  std::ifstream results(c.summary_dir + "/eval/results.jsonl");
  std::stringstream r;
  r << results.rdbuf();
  EXPECT_NE(r.str().find(last), std::string::npos) << r.str();
  EXPECT_TRUE(HasEvents(c.summary_dir + "/eval", {"accuracy", "loss"}));
  EXPECT_TRUE(HasEvents(c.summary_dir + "/train", {"loss"})) << distribution;
}

TEST(EvaluatorTest, AfterParameterServerTraining) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainThenEvaluate("parameter_server");
}

TEST(EvaluatorTest, AfterMirroredTraining) {
  if (!HaveData()) GTEST_SKIP() << "no " << kData;
  TrainThenEvaluate("mirrored");
}

}  // namespace
}  // namespace graphrun
