// ParameterServerStrategy: replica numbering with and without a chief job,
// where the strategy's scope puts variables and ops, the batch split, the
// errors; and two workers of an in-process cluster that build the same
// single-machine code through it and update one variable on the PS.
#include "client/train/parameter_server_strategy.h"

#include "client/client_session.h"
#include "client/ops.h"
#include "client/variables.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using ::testing::HasSubstr;

distributed::ClusterSpec Spec(bool with_chief) {
  distributed::ClusterSpec c;
  c.AddTask("ps", "10.0.0.1:2222");
  c.AddTask("ps", "10.0.0.2:2222");
  if (with_chief) c.AddTask("chief", "10.0.0.3:2222");
  c.AddTask("worker", "10.0.0.4:2222");
  c.AddTask("worker", "10.0.0.5:2222");
  return c;
}

TEST(ParameterServerStrategyTest, ReplicasWithAndWithoutAChiefJob) {
  auto w1 = ParameterServerStrategy::Create(Spec(true), "worker", 1);
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_EQ(w1->num_ps_tasks(), 2);
  EXPECT_EQ(w1->num_replicas(), 3);
  EXPECT_EQ(w1->replica_index(), 2);
  EXPECT_FALSE(w1->is_chief());
  EXPECT_EQ(w1->worker_device(), "/job:worker/task:1");
  EXPECT_EQ(w1->session_options().target, "grpc://10.0.0.5:2222");
  // The session sees the PS tasks and this task only.
  EXPECT_THAT(w1->session_options().config.device_filters(),
              ::testing::ElementsAre("/job:ps", "/job:worker/task:1"));
  auto chief = ParameterServerStrategy::Create(Spec(true), "chief", 0);
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ(chief->replica_index(), 0);
  EXPECT_TRUE(chief->is_chief());

  auto w0 = ParameterServerStrategy::FromTfConfig(
      R"({"cluster": {"ps": ["a:1"], "worker": ["b:1", "c:1"]},
          "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(w0.ok()) << w0.status();
  EXPECT_EQ(w0->num_replicas(), 2);
  EXPECT_EQ(w0->replica_index(), 0);
  EXPECT_TRUE(w0->is_chief());
  EXPECT_EQ(w0->session_options().target, "grpc://b:1");
  EXPECT_EQ(*w0->PerReplicaBatchSize(512), 256);
  auto uneven = w0->PerReplicaBatchSize(255);
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParameterServerStrategyTest, VariablesOnPsTasksOpsOnTheWorker) {
  ParameterServerStrategyOptions o;
  o.ps_strategy = "round_robin";
  auto w1 = ParameterServerStrategy::Create(Spec(false), "worker", 1, o);
  ASSERT_TRUE(w1.ok()) << w1.status();
  Scope root = Scope::NewRootScope();
  Scope s = w1->ReplicaScope(root);
  Variable a(s.WithOpName("a"), {2}, DT_FLOAT, init::Constant({1.f, 2.f}));
  Variable b(s.WithOpName("b"), {2}, DT_FLOAT, init::Constant({3.f, 4.f}));
  ops::Add(s.WithOpName("sum"), a.Read(), b.Read());
  auto gd = root.ToGraphDef();
  ASSERT_TRUE(gd.ok()) << gd.status();
  std::map<std::string, std::string> device;
  for (const auto& n : gd->node()) device[n.name()] = n.device();
  EXPECT_EQ(device["a"], "/job:ps/task:0");
  EXPECT_EQ(device["b"], "/job:ps/task:1");
  EXPECT_EQ(device["sum"], "/job:worker/task:1");
}

TEST(ParameterServerStrategyTest, Errors) {
  distributed::ClusterSpec no_ps;
  no_ps.AddTask("worker", "a:1");
  auto s = ParameterServerStrategy::Create(no_ps, "worker", 0);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("no ps job"));
  s = ParameterServerStrategy::Create(Spec(false), "ps", 0);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("task type 'ps' does not train"));
  s = ParameterServerStrategy::Create(Spec(false), "worker", 7);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("worker"));
  ParameterServerStrategyOptions balanced;
  balanced.ps_strategy = "balanced";  // plans a whole graph: not per node
  s = ParameterServerStrategy::Create(Spec(false), "worker", 0, balanced);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("'balanced'"));
}

// A sparse cluster (TFJob's enableDynamicWorker) names the PS tasks and
// this worker only: without a count every replica trains on its own (the
// whole batch, asynchronous only); with options.num_replicas the batch and
// the input split as in a full cluster.
TEST(ParameterServerStrategyTest, SparseClusterReplicas) {
  const std::string tf_config =
      R"({"sparseCluster": {"worker": {"3": "w3:1"}, "ps": ["a:1", "b:1"]},
          "task": {"type": "worker", "index": 3}})";
  auto alone = ParameterServerStrategy::FromTfConfig(tf_config);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->num_ps_tasks(), 2);
  EXPECT_EQ(alone->num_replicas(), 1);
  EXPECT_EQ(alone->replica_index(), 3);
  EXPECT_FALSE(alone->is_chief());
  EXPECT_EQ(alone->session_options().target, "grpc://w3:1");
  EXPECT_EQ(*alone->PerReplicaBatchSize(256), 256);
  ParameterServerStrategyOptions sync;
  sync.sync_replicas = true;
  auto no_count = ParameterServerStrategy::FromTfConfig(tf_config, sync);
  EXPECT_EQ(no_count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_count.status().message()),
              HasSubstr("synchronous replicas need their number"));
  ParameterServerStrategyOptions four = sync;
  four.num_replicas = 4;
  auto counted = ParameterServerStrategy::FromTfConfig(tf_config, four);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(counted->num_replicas(), 4);
  EXPECT_EQ(counted->replica_index(), 3);
  EXPECT_EQ(*counted->PerReplicaBatchSize(256), 64);
  ParameterServerStrategyOptions three;
  three.num_replicas = 3;
  auto beyond = ParameterServerStrategy::FromTfConfig(tf_config, three);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(beyond.status().message()),
              HasSubstr("task worker:3 is replica 3, beyond the job's 3 training tasks"));
  // Worker 0 of a sparse cluster is the chief.
  auto w0 = ParameterServerStrategy::FromTfConfig(
      R"({"sparseCluster": {"worker": {"0": "w0:1"}, "ps": ["a:1"]},
          "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(w0.ok()) << w0.status();
  EXPECT_TRUE(w0->is_chief());
  EXPECT_EQ(w0->num_replicas(), 1);
}

// Between-graph replication: each worker builds the same graph in its own
// session on its own server; the chief initializes; both increment the
// one variable on the PS.
TEST(ParameterServerStrategyTest, TwoWorkersShareTheVariableOnThePs) {
  distributed::RegisterGrpcSession();
  distributed::LocalClusterOptions lo;
  lo.jobs = {{"ps", 1}, {"worker", 2}};
  auto cluster = distributed::LocalCluster::Start(lo);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  struct Replica {
    Scope root = Scope::NewRootScope();
    std::unique_ptr<Variable> v;
    Operation init, add;
    Output read;
    std::unique_ptr<ClientSession> session;
  };
  Replica replicas[2];
  for (int w = 0; w < 2; ++w) {
    auto strategy = ParameterServerStrategy::Create((*cluster)->cluster_spec(), "worker", w);
    ASSERT_TRUE(strategy.ok()) << strategy.status();
    EXPECT_EQ(strategy->is_chief(), w == 0);
    Replica& r = replicas[w];
    Scope s = strategy->ReplicaScope(r.root);
    r.v = std::make_unique<Variable>(s.WithOpName("counter"), PartialShape({}), DT_FLOAT,
                                     init::Constant(0.f));
    r.init = GlobalVariablesInitializer(s);
    r.add = r.v->AssignAdd(Tensor::Scalar<float>(w == 0 ? 1.f : 10.f));
    r.read = r.v->Read();
    ASSERT_TRUE(r.root.ok()) << r.root.status();
    r.session = std::make_unique<ClientSession>(r.root, strategy->session_options());
  }
  ASSERT_TRUE(replicas[0].session->Run({}, {}, {replicas[0].init}).ok());
  for (int step = 0; step < 3; ++step) {
    for (auto& r : replicas) ASSERT_TRUE(r.session->Run({}, {}, {r.add}).ok());
  }
  for (auto& r : replicas) {
    auto out = r.session->Run({r.read});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<float>(), 33.f);  // 3 x 1 + 3 x 10, one variable
  }
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
