#include "tools/run_args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace tools {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(RunArgsTest, FullRequest) {
  auto r = ParseRunArgs({"g.pbtxt",
                         "--fetch",
                         "y",
                         "--fetch=y:0",
                         "--fetch",
                         "z:2",
                         "--target_node",
                         "init",
                         "--feed",
                         "x=[1, 2]",
                         "--feed=a/b:1=@f.npy",
                         "--devices",
                         "CPU=2,GPU=0",
                         "--soft_placement",
                         "--log_device_placement=true",
                         "--inter_op_threads",
                         "3",
                         "--intra_op_threads=4",
                         "--timeout_ms",
                         "500",
                         "--format",
                         "json",
                         "--save_npy",
                         "out",
                         "--trace",
                         "t.json",
                         "--run_metadata",
                         "md.pbtxt",
                         "--target",
                         "grpc://h:1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph_path, "g.pbtxt");
  EXPECT_THAT(r->fetches, ElementsAre("y:0", "z:2"));  // "y" and "y:0" are one fetch
  EXPECT_THAT(r->targets, ElementsAre("init"));
  EXPECT_THAT(r->feeds, ElementsAre(Pair("x:0", "[1, 2]"), Pair("a/b:1", "@f.npy")));
  EXPECT_THAT(r->device_count, ElementsAre(Pair("CPU", 2), Pair("GPU", 0)));
  EXPECT_TRUE(r->soft_placement);
  EXPECT_TRUE(r->log_device_placement);
  EXPECT_EQ(r->inter_op_threads, 3);
  EXPECT_EQ(r->intra_op_threads, 4);
  EXPECT_EQ(r->timeout_ms, 500);
  EXPECT_EQ(r->format, OutputFormat::kJson);
  EXPECT_EQ(r->save_npy_dir, "out");
  EXPECT_EQ(r->trace_path, "t.json");
  EXPECT_EQ(r->run_metadata_path, "md.pbtxt");
  EXPECT_EQ(r->target, "grpc://h:1");
}

TEST(RunArgsTest, Defaults) {
  auto r = ParseRunArgs({"--fetch", "y", "g.pb"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->format, OutputFormat::kText);
  EXPECT_FALSE(r->soft_placement);
  EXPECT_TRUE(r->device_count.empty());
  EXPECT_EQ(r->timeout_ms, 0);
  EXPECT_EQ(r->target, "");
}

TEST(RunArgsTest, UsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--fetch", "y"}, "run: missing GRAPH file"},
      {{"a.pb", "b.pb", "--fetch", "y"}, "run: expected one GRAPH file, got extra argument 'b.pb'"},
      {{"g.pb"}, "run: nothing to do: give --fetch or --target_node"},
      {{"g.pb", "--fetch", "^y"}, "--fetch: '^y' is not a tensor name (want NAME or NAME:INDEX)"},
      {{"g.pb", "--fetch", "y:-1"}, "--fetch: tensor name 'y:-1' has a negative index"},
      {{"g.pb", "--target_node", "y:0"}, "--target_node: 'y:0' is not a node name"},
      {{"g.pb", "--fetch", "y", "--feed", "x"},
       "--feed: expected NAME=JSON or NAME=@FILE.npy, got 'x'"},
      {{"g.pb", "--fetch", "y", "--feed", "p=@"},
       "--feed: expected NAME=JSON or NAME=@FILE.npy, got 'p=@'"},
      {{"g.pb", "--fetch", "y", "--feed", "x=1", "--feed", "x:0=2"}, "--feed: 'x:0' is fed twice"},
      {{"g.pb", "--fetch", "y", "--devices", "CPU"},
       "--devices: expected TYPE=N[,TYPE=N], got 'CPU'"},
      {{"g.pb", "--fetch", "y", "--devices", "CPU=-1"},
       "--devices: expected TYPE=N[,TYPE=N], got 'CPU=-1'"},
      {{"g.pb", "--fetch", "y", "--devices", "CPU=0"},
       "--devices: CPU=0: the count of CPU devices must be in [1, 1024]"},
      {{"g.pb", "--fetch", "y", "--devices", "CPU=1,GPU=5000"},
       "--devices: GPU=5000: the count of GPU devices must be in [0, 1024]"},
      {{"g.pb", "--fetch", "y", "--batch_size", "5"},
       "--batch_size needs --ps_tasks or --cluster (it sizes the placement's traffic estimate)"},
      {{"g.pb", "--fetch", "y", "--device_filters", "/job:ps"},
       "--device_filters needs --target (it filters a cluster's devices; a local session has no "
       "others)"},
      {{"g.pb", "--fetch", "y", "--ps_tasks", "1024"},
       "--ps_tasks: 1024 PS tasks do not fit a local run (at most 1023, each on a CPU device of "
       "its own; give --target to run on a cluster)"},
      {{"g.pb", "--fetch", "y", "--devices", "CPU=2=3"},
       "--devices: expected TYPE=N[,TYPE=N], got 'CPU=2=3'"},
      {{"g.pb", "--fetch", "y", "--devices", "CPU=1 "},
       "--devices: expected TYPE=N[,TYPE=N], got 'CPU=1 '"},
      {{"g.pb", "--fetch", "y", "--devices", "CPU=1,CPU=2"},
       "--devices: CPU is given twice in 'CPU=1,CPU=2'"},
      {{"g.pb", "--fetch", "y", "--inter_op_threads", "x"},
       "--inter_op_threads: expected an integer, got 'x'"},
      {{"g.pb", "--fetch", "y", "--timeout_ms", "-5"},
       "--timeout_ms: -5 is out of range [0, 9223372036854775807]"},
      {{"g.pb", "--fetch", "y", "--format", "yaml"}, "--format: expected text or json, got 'yaml'"},
      {{"g.pb", "--fetch", "y", "--trace"}, "flag --trace needs a value"},
      {{"g.pb", "--fetch", "a/b", "--fetch", "a__b", "--save_npy", "out"},
       "--save_npy: fetches 'a/b:0' and 'a__b:0' would both be written to a__b_0.npy"},
  };
  for (const Case& c : cases) {
    auto r = ParseRunArgs(c.args);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(RunArgsTest, Names) {
  EXPECT_EQ(*CanonicalTensorName("y"), "y:0");
  EXPECT_EQ(*CanonicalTensorName("a/b:3"), "a/b:3");
  EXPECT_FALSE(CanonicalTensorName("").ok());
  EXPECT_EQ(NpyFileName("y:0"), "y_0.npy");
  EXPECT_EQ(NpyFileName("dense/kernel/read:1"), "dense__kernel__read_1.npy");
  // Signature keys hold any byte: none reaches a file name raw.
  EXPECT_EQ(NpyFileName(std::string("x\0y", 3)), "x%00y.npy");
  EXPECT_EQ(NpyFileName("a\nb"), "a%0ab.npy");
  EXPECT_EQ(NpyFileName(""), "_.npy");
  EXPECT_EQ(NpyFileName(".hidden"), "_.hidden.npy");
  EXPECT_EQ(NpyFileName("probabilities"), "probabilities.npy");
}

TEST(RunArgsTest, UsageListsEveryFlag) {
  const std::string usage = RunUsage();
  for (const char* flag :
       {"--fetch NAME[:i]", "--target_node NAME", "--feed", "--devices", "--soft_placement",
        "--log_device_placement", "--inter_op_threads", "--intra_op_threads", "--timeout_ms",
        "--format text|json", "--save_npy DIR", "--trace FILE", "--run_metadata FILE",
        "--target TARGET"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace tools
}  // namespace graphrun
