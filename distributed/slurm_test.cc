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
  for (const char* bad : {"", "node[3-1]", "node[1-", "node]1[", "n[x]"}) {
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
