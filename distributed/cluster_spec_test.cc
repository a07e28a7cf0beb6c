#include "distributed/cluster_spec.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void ExpectInvalid(const absl::Status& s, const std::string& substr) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(substr));
}

TEST(ClusterSpecTest, ParsesTensorFlowJson) {
  auto spec = ClusterSpec::FromJson(
      R"({"ps": ["localhost:2222", "localhost:2223"], "worker": ["h1:1", "h2:2", "h3:3"]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->num_tasks("ps"), 2);
  EXPECT_EQ(spec->num_tasks("worker"), 3);
  EXPECT_EQ(*spec->Address("worker", 2), "h3:3");
  EXPECT_EQ(*spec->AddressOfTask("/job:ps/replica:0/task:1"), "localhost:2223");
  EXPECT_THAT(spec->TaskNames(),
              ElementsAre("/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1",
                          "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1",
                          "/job:worker/replica:0/task:2"));
  EXPECT_EQ(spec->Address("worker", 3).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(spec->Address("chief", 0).status().code(), absl::StatusCode::kNotFound);
}

TEST(ClusterSpecTest, RoundTripsThroughJson) {
  ClusterSpec spec;
  spec.AddTask("worker", "127.0.0.1:5");
  spec.AddTask("ps", "127.0.0.1:6");
  spec.AddTask("worker", "127.0.0.1:7");
  EXPECT_EQ(spec.ToJson(), R"({"ps": ["127.0.0.1:6"], "worker": ["127.0.0.1:5", "127.0.0.1:7"]})");
  auto back = ClusterSpec::FromJson(spec.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->jobs(), spec.jobs());
}

TEST(ClusterSpecTest, AcceptsDenseIndexObjects) {
  auto spec = ClusterSpec::FromJson(R"({"worker": {"1": "b:2", "0": "a:1"}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec->Address("worker", 0), "a:1");
  ExpectInvalid(ClusterSpec::FromJson(R"({"worker": {"0": "a:1", "2": "b:2"}})").status(),
                "task 1 is missing");
}

TEST(ClusterSpecTest, ErrorsNameTheField) {
  ExpectInvalid(ClusterSpec::FromJson("[1]").status(), "expected an object of jobs");
  ExpectInvalid(ClusterSpec::FromJson(R"({"ps": "a:1"})").status(), "job 'ps'");
  ExpectInvalid(ClusterSpec::FromJson(R"({"ps": ["a:1", 7]})").status(), "job 'ps' task 1");
  ExpectInvalid(ClusterSpec::FromJson(R"({"ps": ["nohost"]})").status(),
                "'nohost' is not host:port");
  ExpectInvalid(ClusterSpec::FromJson(R"({"ps": ["a:99999"]})").status(), "host:port");
  ExpectInvalid(ClusterSpec::FromJson(R"({"ps": []})").status(), "has no tasks");
  ExpectInvalid(ClusterSpec::FromJson(R"({"p s": ["a:1"]})").status(), "job 'p s'");
  ExpectInvalid(ClusterSpec::FromJson(R"({"ps": ["a:1"],)").status(), "malformed JSON");
  ExpectInvalid(ClusterSpec::FromJson(R"({"ps": ["a:1"], "ps": ["b:2"]})").status(), "duplicate");
}

// host:port exactly: a printable host without spaces, a port of 1 to 5
// digits up to 65535 (a NUL in the host made gRPC listen on port 443;
// "+0" and " 5" were taken as ports).
TEST(ClusterSpecTest, HostPortIsStrict) {
  int port = -1;
  EXPECT_TRUE(ParseHostPort("127.0.0.1:0", &port));
  EXPECT_EQ(port, 0);
  EXPECT_TRUE(ParseHostPort("[::1]:65535", &port));
  EXPECT_EQ(port, 65535);
  EXPECT_TRUE(ParseHostPort("node-7.cluster:2222", &port));
  for (const std::string& bad :
       {std::string("127.0.0.1\0:0", 12), std::string("127.0.0.1: 5"), std::string("a:+0"),
        std::string("a:65536"), std::string("a:112037"), std::string("a:"), std::string(":1"),
        std::string("a b:1"), std::string("a:1x"), std::string("a:000001"),
        std::string("h\xc3\xa9:1")}) {
    EXPECT_FALSE(ParseHostPort(bad, &port)) << bad;
  }
  ExpectInvalid(ClusterSpec::FromJson(std::string("{\"ps\": [\"127.0.0.1\\u0000:0\"]}")).status(),
                "is not host:port");
}

// Equal keys: TensorFlow (Python's json) keeps the last, this reader kept
// the first; both are refused.
TEST(ClusterSpecTest, TfConfigDuplicateKeysAreRefused) {
  auto twice =
      ParseTfConfig(R"({"cluster": {"ps": ["a:1"], "worker": ["b:1"]}, "task": {"type": "ps"},)"
                    R"( "task": {"type": "worker"}})");
  ExpectInvalid(twice.status(), "TF_CONFIG: duplicate key 'task'");
  auto index = ParseTfConfig(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0,)"
      R"( "index": 1}})");
  ExpectInvalid(index.status(), "TF_CONFIG: task: duplicate key 'index'");
}

TEST(ClusterSpecTest, FromFlagReadsFiles) {
  std::string path = ::testing::TempDir() + "/cluster.json";
  {
    std::ofstream out(path);
    out << R"({"worker": ["127.0.0.1:1234"]})";
  }
  auto spec = ClusterSpec::FromFlag("@" + path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec->Address("worker", 0), "127.0.0.1:1234");
  EXPECT_EQ(ClusterSpec::FromFlag("@/no/such/file.json").status().code(),
            absl::StatusCode::kNotFound);
  auto inline_spec = ClusterSpec::FromFlag(R"({"ps": ["x:1"]})");
  ASSERT_TRUE(inline_spec.ok());
  std::remove(path.c_str());
}

TEST(ClusterSpecTest, ParsesTfConfig) {
  auto cfg = ParseTfConfig(R"({"cluster": {"chief": ["c:1"], "worker": ["w:1", "w:2"],
                              "ps": ["p:1"]}, "task": {"type": "worker", "index": 1}})");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->task_type, "worker");
  EXPECT_EQ(cfg->task_index, 1);
  EXPECT_EQ(*cfg->cluster.Address("chief", 0), "c:1");
  // An evaluator need not be part of the cluster.
  auto eval = ParseTfConfig(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "evaluator"}})");
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->task_index, 0);
}

// As Kubeflow's TFJob writes it (master, environment) and SageMaker's PS
// layout (master + ps + worker): master is the chief, for every task.
TEST(ClusterSpecTest, TfJobAndSageMakerTfConfig) {
  const std::string cluster =
      R"("cluster": {"master": ["job-master-0:2222"], "ps": ["job-ps-0:2222"],
                     "worker": ["job-worker-0:2222", "job-worker-1:2222"]})";
  auto master = ParseTfConfig(absl::StrCat(
      "{", cluster, R"(, "task": {"type": "master", "index": 0}, "environment": "cloud"})"));
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_EQ(master->task_type, "chief");
  EXPECT_EQ(master->task_index, 0);
  EXPECT_EQ(master->environment, "cloud");
  EXPECT_EQ(*master->cluster.Address("chief", 0), "job-master-0:2222");
  EXPECT_EQ(master->cluster.num_tasks("master"), 0);
  auto worker =
      ParseTfConfig(absl::StrCat("{", cluster, R"(, "task": {"type": "worker", "index": 1}})"));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->task_type, "worker");
  EXPECT_EQ(worker->cluster.ToJson(), master->cluster.ToJson());
  auto evaluator = ParseTfConfig(absl::StrCat(
      "{", cluster, R"(, "task": {"type": "evaluator", "index": 0}, "environment": "cloud"})"));
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  EXPECT_EQ(evaluator->task_type, "evaluator");
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"master": ["m:1"], "chief": ["c:1"]},
                                  "task": {"type": "chief"}})")
                    .status(),
                "both a 'chief' and a 'master'");
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker"},
                                  "environment": 3})")
                    .status(),
                "environment must be a string");
}

// As Kubeflow's TFJob writes TF_CONFIG with enableDynamicWorker: each
// task sees only the tasks it talks to. A PS gets its own address alone
// (at list position 0 whatever its index), a worker every PS and itself,
// the chief and evaluator nothing.
TEST(ClusterSpecTest, TfJobSparseCluster) {
  auto w1 = ParseTfConfig(R"({"sparseCluster": {"worker": {"1": "job-worker-1:2222"},
                               "ps": ["job-ps-0:2222", "job-ps-1:2222"]},
                              "task": {"type": "worker", "index": 1}})");
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_TRUE(w1->sparse);
  EXPECT_TRUE(w1->cluster.sparse());
  EXPECT_EQ(*w1->cluster.Address("worker", 1), "job-worker-1:2222");
  EXPECT_EQ(*w1->cluster.Address("ps", 1), "job-ps-1:2222");
  absl::Status hole = w1->cluster.Address("worker", 0).status();
  EXPECT_EQ(hole.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(hole.message()), HasSubstr("job 'worker' task 0 is not in this sparse"));
  EXPECT_EQ(w1->cluster.num_tasks("worker"), 2);
  EXPECT_THAT(w1->cluster.TaskNames(),
              ElementsAre("/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1",
                          "/job:worker/replica:0/task:1"));
  EXPECT_EQ(w1->cluster.ToJson(),
            R"({"ps": ["job-ps-0:2222", "job-ps-1:2222"], "worker": {"1": "job-worker-1:2222"}})");

  auto ps1 = ParseTfConfig(R"({"sparseCluster": {"worker": {}, "ps": ["job-ps-1:2222"]},
                               "task": {"type": "ps", "index": 1}})");
  ASSERT_TRUE(ps1.ok()) << ps1.status();
  EXPECT_EQ(*ps1->cluster.Address("ps", 1), "job-ps-1:2222");
  EXPECT_EQ(ps1->cluster.Address("ps", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ps1->cluster.TaskNames(), ElementsAre("/job:ps/replica:0/task:1"));
  auto ps0 = ParseTfConfig(R"({"sparseCluster": {"worker": {}, "ps": ["job-ps-0:2222"]},
                               "task": {"type": "ps", "index": 0}})");
  ASSERT_TRUE(ps0.ok()) << ps0.status();
  EXPECT_EQ(*ps0->cluster.Address("ps", 0), "job-ps-0:2222");
  EXPECT_TRUE(ps0->cluster.sparse());  // no holes, and still not the whole job

  // The evaluator needs no address; the chief has none to run with.
  auto eval = ParseTfConfig(R"({"sparseCluster": {"worker": {}, "ps": []},
                                "task": {"type": "evaluator", "index": 0}})");
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_TRUE(eval->cluster.empty());
  ExpectInvalid(ParseTfConfig(R"({"sparseCluster": {"worker": {}, "ps": []},
                                  "task": {"type": "chief", "index": 0}})")
                    .status(),
                "task {type: 'chief', index: 0} has no address in the sparseCluster");
  ExpectInvalid(ParseTfConfig(R"({"sparseCluster": {"worker": {"1": "w:1"}, "ps": ["p:1"]},
                                  "task": {"type": "worker", "index": 0}})")
                    .status(),
                "has no address in the sparseCluster");
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"worker": ["w:1"]},
                                  "sparseCluster": {"worker": {"0": "w:1"}},
                                  "task": {"type": "worker", "index": 0}})")
                    .status(),
                "both 'cluster' and 'sparseCluster'");
  ExpectInvalid(
      ParseTfConfig(R"({"sparseCluster": {"worker": {"x": "w:1"}},
                                  "task": {"type": "worker", "index": 0}})")
          .status(),
      "TF_CONFIG: sparseCluster: job 'worker': task index 'x' is not a number in 0..100000");
  ExpectInvalid(ParseTfConfig(R"({"sparseCluster": {"worker": {"0": "nohost"}},
                                  "task": {"type": "worker", "index": 0}})")
                    .status(),
                "'nohost' is not host:port");

  // A launcher's full cluster, seen through a sparse view: that view's
  // tasks at the launcher's addresses.
  ClusterSpec full;
  full.AddTask("ps", "127.0.0.1:5");
  full.AddTask("ps", "127.0.0.1:6");
  full.AddTask("worker", "127.0.0.1:7");
  full.AddTask("worker", "127.0.0.1:8");
  ClusterSpec seen = full.KnownTo(w1->cluster);
  EXPECT_TRUE(seen.sparse());
  EXPECT_EQ(seen.ToJson(),
            R"({"ps": ["127.0.0.1:5", "127.0.0.1:6"], "worker": {"1": "127.0.0.1:8"}})");
  EXPECT_EQ(full.KnownTo(full).ToJson(), full.ToJson());
}

TEST(ClusterSpecTest, TfConfigErrorsNameTheField) {
  ExpectInvalid(ParseTfConfig(R"({"task": {"type": "worker"}})").status(), "'cluster'");
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"worker": ["w:1"]}})").status(), "'task'");
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"worker": ["w:1"]}, "task": {"index": 0}})").status(),
                "task.type");
  ExpectInvalid(
      ParseTfConfig(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": -1}})")
          .status(),
      "task.index");
  ExpectInvalid(
      ParseTfConfig(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 1.5}})")
          .status(),
      "task.index");
  ExpectInvalid(
      ParseTfConfig(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "ps", "index": 0}})")
          .status(),
      "not in the cluster");
  ExpectInvalid(
      ParseTfConfig(R"({"cluster": {"worker": [1]}, "task": {"type": "worker"}})").status(),
      "TF_CONFIG: cluster: job 'worker' task 0");
}

TEST(ClusterSpecTest, TaskNames) {
  auto id = ParseTaskName("/job:ps/replica:0/task:3/device:CPU:0");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->job, "ps");
  EXPECT_EQ(id->task, 3);
  EXPECT_FALSE(ParseTaskName("/job:ps").ok());
  EXPECT_EQ(TaskOfDevice("/job:ps/replica:0/task:1/device:CPU:0"), "/job:ps/replica:0/task:1");
  EXPECT_EQ(TaskName("worker", 2), "/job:worker/replica:0/task:2");
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
