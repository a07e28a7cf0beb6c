// The Slurm resolver on the variables srun sets: hostlists, tasks per
// node, ports per local rank, ps ranks first, and the errors.
#include "distributed/slurm.h"

#include <map>
#include <string>

#include "distributed/cluster_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace distributed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SlurmTest, ExpandsHostlists) {
  EXPECT_THAT(*ExpandHostlist("node[01-03,7],gpu5"),
              ElementsAre("node01", "node02", "node03", "node7", "gpu5"));
  EXPECT_THAT(*ExpandHostlist("vm"), ElementsAre("vm"));
  EXPECT_THAT(*ExpandHostlist("a[9-11]b"), ElementsAre("a9b", "a10b", "a11b"));
  // Names that are not host names (they went into TF_CONFIG's JSON as
  // they were) are malformed.
  for (const char* bad :
       {"", "node[3-1]", "node[1-", "node]1[", "n[x]", "local\"host", "a b", "n[1-2]\\"}) {
    EXPECT_EQ(ExpandHostlist(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(*ExpandTasksPerNode("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(*ExpandTasksPerNode("3"), ElementsAre(3));
  EXPECT_EQ(ExpandTasksPerNode("2(x").status().code(), absl::StatusCode::kInvalidArgument);
}

struct Env {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> fn() const {
    return [this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

// Short lists that would expand to billions of entries are refused before
// they are built (they ran out of memory: std::bad_alloc, an abort).
TEST(SlurmTest, ExpansionsAreBounded) {
  std::string many = "n[0-99999]";
  for (int i = 0; i < 20; ++i) many += ",m" + std::to_string(i) + "[0-99999]";
  auto hosts = ExpandHostlist(many);
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hosts.status().message(), "Slurm: the hostlist names more than 1048576 entries");
  std::string repeats = "1(x100000)";
  for (int i = 0; i < 20; ++i) repeats += ",1(x100000)";
  EXPECT_THAT(std::string(ExpandTasksPerNode(repeats).status().message()),
              HasSubstr("tasks per node names more than 1048576 entries"));
  EXPECT_EQ(ExpandTasksPerNode("70000").status().code(), absl::StatusCode::kInvalidArgument);
  // 60000 tasks on each of 100000 nodes, for a step of 2 tasks: refused at
  // the first node past the count, not after building 6e9 addresses.
  Env env{{{"SLURM_PROCID", "0"},
           {"SLURM_STEP_NUM_TASKS", "2"},
           {"SLURM_STEP_NODELIST", "n[0-99999]"},
           {"SLURM_STEP_TASKS_PER_NODE", "60000(x100000)"}}};
  auto s = TfConfigFromSlurm(env.fn(), {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("2 tasks but 60000(x100000) per node"));
}

TEST(SlurmTest, TwoNodesTwoTasksEachPsFirst) {
  Env env{{{"SLURM_PROCID", "3"},
           {"SLURM_STEP_NUM_TASKS", "4"},
           {"SLURM_STEP_NODELIST", "n[1-2]"},
           {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}}};
  auto json = TfConfigFromSlurm(env.fn(), {1, 3000});
  ASSERT_TRUE(json.ok()) << json.status();
  auto cfg = ParseTfConfig(*json);
  ASSERT_TRUE(cfg.ok()) << cfg.status() << " " << *json;
  EXPECT_EQ(cfg->cluster.ToJson(),
            R"({"ps": ["n1:3000"], "worker": ["n1:3001", "n2:3000", "n2:3001"]})");
  EXPECT_EQ(cfg->task_type, "worker");
  EXPECT_EQ(cfg->task_index, 2);
  env.vars["SLURM_PROCID"] = "0";
  cfg = ParseTfConfig(*TfConfigFromSlurm(env.fn(), {1, 3000}));
  EXPECT_EQ(cfg->task_type, "ps");
  EXPECT_EQ(cfg->task_index, 0);
  // No PS (all-reduce): every rank a worker.
  cfg = ParseTfConfig(*TfConfigFromSlurm(env.fn(), {0, 3000}));
  EXPECT_EQ(cfg->cluster.num_tasks("ps"), 0);
  EXPECT_EQ(cfg->cluster.num_tasks("worker"), 4);
}

TEST(SlurmTest, ErrorsNameTheVariable) {
  Env env{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "3"}, {"SLURM_JOB_NODELIST", "vm"}}};
  auto s = TfConfigFromSlurm(env.fn(), {});
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("SLURM_STEP_TASKS_PER_NODE"));
  env.vars["SLURM_TASKS_PER_NODE"] = "2";
  s = TfConfigFromSlurm(env.fn(), {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("3 tasks"));
  env.vars["SLURM_TASKS_PER_NODE"] = "3";
  EXPECT_TRUE(TfConfigFromSlurm(env.fn(), {}).ok());
  s = TfConfigFromSlurm(env.fn(), {3, 2222});
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("leave no worker"));
  EXPECT_FALSE(UnderSlurm(Env{}.fn()));
  EXPECT_TRUE(UnderSlurm(env.fn()));
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
