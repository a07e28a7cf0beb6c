// DistributionStrategy: one training program, written once against the
// interface, runs under OneDeviceStrategy, MirroredStrategy (2 replicas)
// and ParameterServerStrategy (a PS task and a worker of an in-process
// cluster) and follows the same loss curve; what each strategy says about
// itself (name, replicas, chief, who initializes), the batch split and
// its error, and the synchronous-replica wrapper of PS training.
#include "client/train/distribution_strategy.h"

#include <cmath>
#include <memory>
#include <random>

#include "client/client_session.h"
#include "client/ops.h"
#include "client/train/layers.h"
#include "client/train/mirrored_strategy.h"
#include "client/train/models.h"
#include "client/train/multi_worker_mirrored_strategy.h"
#include "client/train/parameter_server_strategy.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "graph/status.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBatch = 32;
constexpr int kSteps = 8;

struct Data {
  std::vector<Tensor> x, y;
};

Data MakeData() {
  std::mt19937 rng(7);
  std::normal_distribution<float> feature(0.f, 1.f);
  std::uniform_int_distribution<int32_t> label(0, 3);
  Data d;
  for (int s = 0; s < kSteps; ++s) {
    Tensor x(DT_FLOAT, TensorShape({kBatch, 12}));
    for (int64_t i = 0; i < x.NumElements(); ++i) x.base<float>()[i] = feature(rng);
    Tensor y(DT_INT32, TensorShape({kBatch}));
    for (int64_t i = 0; i < kBatch; ++i) y.base<int32_t>()[i] = label(rng);
    d.x.push_back(x);
    d.y.push_back(y);
  }
  return d;
}

// The training program: nothing in it names a strategy. It feeds this
// process's batch (every local replica's rows), initializes where the
// strategy says, runs after_restore, and returns the loss of every step.
absl::StatusOr<std::vector<float>> TrainWith(const DistributionStrategy& strategy,
                                             const std::string& target, const Data& data) {
  GR_ASSIGN_OR_RETURN(int64_t per_replica, strategy.PerReplicaBatch(kBatch));
  const int64_t rows = per_replica * strategy.num_local_replicas();
  Scope root = Scope::NewRootScope();
  root.SetGraphSeed(3);
  Scope s = strategy.ReplicaScope(root);
  auto x = ops::Placeholder(s.WithOpName("x"), DT_FLOAT,
                            ops::Placeholder::Shape(PartialShape({rows, 12})));
  auto y =
      ops::Placeholder(s.WithOpName("y"), DT_INT32, ops::Placeholder::Shape(PartialShape({rows})));
  Variable global_step = CreateGlobalStep(s);
  std::vector<std::unique_ptr<Layers>> layers;
  ModelFn model_fn = [&](const Scope& rs, int,
                         const std::vector<Output>& in) -> absl::StatusOr<ReplicaModel> {
    LayersOptions lo;
    lo.seed = 9;
    layers.push_back(std::make_unique<Layers>(rs, lo));
    MlpOptions mo;
    mo.hidden = {8};
    mo.classes = 4;
    Model m = Mlp(*layers.back(), in[0], in[1], mo);
    ReplicaModel r;
    r.loss = m.loss;
    r.metrics = {m.accuracy};
    r.trainable = layers.back()->trainable_variables();
    r.variables = layers.back()->variables();
    return r;
  };
  OptimizerFn optimizer_fn = [] { return std::make_unique<GradientDescentOptimizer>(0.3f); };
  GR_ASSIGN_OR_RETURN(TrainStep step, strategy.BuildTrainStep(root, {x, y}, rows, model_fn,
                                                              optimizer_fn, &global_step));
  Operation init = GlobalVariablesInitializer(s);
  GR_RETURN_IF_ERROR(root.status());
  ClientSession session(root, strategy.session_options(target));
  if (strategy.is_chief() || strategy.initializes_own_variables()) {
    GR_RETURN_IF_ERROR(session.Run({}, {}, {init}).status());
  }
  if (step.after_restore.node() != nullptr) {
    GR_RETURN_IF_ERROR(session.Run({}, {}, {step.after_restore}).status());
  }
  std::vector<float> losses;
  for (int i = 0; i < kSteps; ++i) {
    GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, session.Run({{x, data.x[i]}, {y, data.y[i]}},
                                                             {step.loss}, {step.train_op}));
    losses.push_back(out[0].scalar<float>());
  }
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> gs, session.Run({global_step.Read(s)}));
  if (gs[0].scalar<int64_t>() != kSteps) {
    return absl::InternalError(absl::StrCat("global_step ", gs[0].scalar<int64_t>()));
  }
  return losses;
}

void ExpectSameCurve(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-4 * std::max(1.f, std::fabs(a[i]))) << "step " << i;
  }
  EXPECT_LT(a.back(), a.front());  // it learned
}

TEST(DistributionStrategyTest, OneProgramUnderEveryStrategyFollowsOneLossCurve) {
  const Data data = MakeData();
  OneDeviceStrategy one;
  absl::StatusOr<std::vector<float>> base = TrainWith(one, "", data);
  ASSERT_TRUE(base.ok()) << base.status();

  // Two replicas of 16 rows: the mean of their gradients is the 32-row
  // batch's gradient.
  auto mirrored = MirroredStrategy::Create(2);
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();
  absl::StatusOr<std::vector<float>> two = TrainWith(*mirrored, "", data);
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectSameCurve(*base, *two);

  // Variables on a PS task, the step on the worker: the same arithmetic.
  distributed::RegisterGrpcSession();
  distributed::LocalClusterOptions lo;
  lo.jobs = {{"ps", 1}, {"worker", 1}};
  auto cluster = distributed::LocalCluster::Start(lo);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto ps = ParameterServerStrategy::Create((*cluster)->cluster_spec(), "worker", 0);
  ASSERT_TRUE(ps.ok()) << ps.status();
  absl::StatusOr<std::vector<float>> on_ps = TrainWith(*ps, "", data);
  ASSERT_TRUE(on_ps.ok()) << on_ps.status();
  ExpectSameCurve(*base, *on_ps);
}

TEST(DistributionStrategyTest, EachStrategySaysWhoItIs) {
  OneDeviceStrategy one("/device:CPU:0");
  EXPECT_EQ(one.name(), "one_device");
  EXPECT_EQ(one.num_replicas(), 1);
  EXPECT_TRUE(one.is_chief());
  EXPECT_TRUE(one.initializes_own_variables());

  auto mirrored = MirroredStrategy::Create(4);
  ASSERT_TRUE(mirrored.ok());
  const DistributionStrategy& m = *mirrored;
  EXPECT_EQ(m.name(), "mirrored");
  EXPECT_EQ(m.num_replicas(), 4);
  EXPECT_EQ(m.num_local_replicas(), 4);
  EXPECT_TRUE(m.is_chief());
  EXPECT_EQ(*m.PerReplicaBatch(256), 64);
  auto uneven = m.PerReplicaBatch(250);
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(uneven.status().message()),
              HasSubstr("mirrored: the global batch 250 does not divide evenly among 4 replicas"));

  distributed::ClusterSpec spec;
  spec.AddTask("ps", "10.0.0.1:2222");
  spec.AddTask("worker", "10.0.0.2:2222");
  spec.AddTask("worker", "10.0.0.3:2222");
  spec.AddTask("worker", "10.0.0.4:2222");
  auto w2 = ParameterServerStrategy::Create(spec, "worker", 2);
  ASSERT_TRUE(w2.ok());
  const DistributionStrategy& p = *w2;
  EXPECT_EQ(p.name(), "parameter_server");
  EXPECT_EQ(p.num_replicas(), 3);
  EXPECT_EQ(p.num_local_replicas(), 1);
  EXPECT_EQ(p.replica_index(), 2);
  EXPECT_FALSE(p.is_chief());
  EXPECT_FALSE(p.initializes_own_variables());  // the chief does, on the PS
  EXPECT_EQ(p.session_options("").target, "grpc://10.0.0.4:2222");
  EXPECT_THAT(std::string(p.PerReplicaBatch(256).status().message()),
              HasSubstr("parameter_server: the global batch 256 does not divide evenly among 3"));

  // Multi-worker mirrored with a chief: the chief is replica 0 and saves;
  // worker k is replica k + 1. Without one, worker 0 is the chief.
  distributed::ClusterSpec with_chief;
  with_chief.AddTask("chief", "10.0.0.1:2222");
  with_chief.AddTask("worker", "10.0.0.2:2222");
  with_chief.AddTask("worker", "10.0.0.3:2222");
  auto chief = MultiWorkerMirroredStrategy::Create(with_chief, "chief", 0);
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ(chief->name(), "multi_worker_mirrored");
  EXPECT_EQ(chief->num_replicas(), 3);
  EXPECT_EQ(chief->replica_index(), 0);
  EXPECT_TRUE(chief->is_chief());
  EXPECT_EQ(chief->device(), "/job:chief/replica:0/task:0/device:CPU:0");
  auto w1 = MultiWorkerMirroredStrategy::Create(with_chief, "worker", 1);
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_EQ(w1->replica_index(), 2);
  EXPECT_FALSE(w1->is_chief());
  distributed::ClusterSpec workers_only;
  workers_only.AddTask("worker", "10.0.0.2:2222");
  workers_only.AddTask("worker", "10.0.0.3:2222");
  auto w0 = MultiWorkerMirroredStrategy::Create(workers_only, "worker", 0);
  ASSERT_TRUE(w0.ok()) << w0.status();
  EXPECT_EQ(w0->num_replicas(), 2);
  EXPECT_TRUE(w0->is_chief());
  // Two GPUs per worker: worker w's replicas are 2w and 2w + 1, and the
  // global batch is split among all six.
  auto gpus =
      MultiWorkerMirroredStrategy::Create(with_chief, "worker", 1, AllReduceOptions(), "GPU", 2);
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_EQ(gpus->num_replicas(), 6);
  EXPECT_EQ(gpus->num_local_replicas(), 2);
  EXPECT_EQ(gpus->num_workers(), 3);
  EXPECT_EQ(gpus->worker_index(), 2);
  EXPECT_EQ(gpus->replica_index(), 4);
  EXPECT_FALSE(gpus->is_chief());
  EXPECT_EQ(gpus->device(1), "/job:worker/replica:0/task:1/device:GPU:1");
  EXPECT_EQ(*gpus->PerReplicaBatch(384), 64);
  EXPECT_THAT(std::string(MultiWorkerMirroredStrategy::Create(with_chief, "worker", 1,
                                                              AllReduceOptions(), "GPU", 0)
                              .status()
                              .message()),
              HasSubstr("0 replicas per worker (1 to 256, one device each)"));
  EXPECT_EQ(MultiWorkerMirroredStrategy::Create(with_chief, "evaluator", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MultiWorkerMirroredStrategy::Create(with_chief, "worker", 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(MultiWorkerMirroredStrategy::Create(spec, "worker", 0).status().message()),
      HasSubstr("the cluster has a ps job"));
}

// PS training with synchronous replicas: the step goes through a
// SyncReplicasOptimizer aggregating every replica's gradient.
TEST(DistributionStrategyTest, SynchronousParameterServerStepAggregatesEveryReplica) {
  distributed::ClusterSpec spec;
  spec.AddTask("ps", "10.0.0.1:2222");
  spec.AddTask("worker", "10.0.0.2:2222");
  spec.AddTask("worker", "10.0.0.3:2222");
  ParameterServerStrategyOptions so;
  so.sync_replicas = true;
  auto w0 = ParameterServerStrategy::Create(spec, "worker", 0, so);
  ASSERT_TRUE(w0.ok()) << w0.status();
  Scope root = Scope::NewRootScope();
  Scope s = w0->ReplicaScope(root);
  auto x =
      ops::Placeholder(s.WithOpName("x"), DT_FLOAT, ops::Placeholder::Shape(PartialShape({4, 12})));
  auto y =
      ops::Placeholder(s.WithOpName("y"), DT_INT32, ops::Placeholder::Shape(PartialShape({4})));
  Variable global_step = CreateGlobalStep(s);
  std::vector<std::unique_ptr<Layers>> layers;
  ModelFn model_fn = [&](const Scope& rs, int,
                         const std::vector<Output>& in) -> absl::StatusOr<ReplicaModel> {
    layers.push_back(std::make_unique<Layers>(rs));
    MlpOptions mo;
    mo.hidden = {8};
    mo.classes = 4;
    Model m = Mlp(*layers.back(), in[0], in[1], mo);
    return ReplicaModel{
        m.loss, {m.accuracy}, layers.back()->trainable_variables(), layers.back()->variables(), {}};
  };
  auto step = w0->BuildTrainStep(
      root, {x, y}, 4, model_fn, [] { return std::make_unique<GradientDescentOptimizer>(0.1f); },
      &global_step);
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_NE(step->sync, nullptr);
  EXPECT_EQ(step->sync->options().replicas_to_aggregate, 2);
  EXPECT_NE(step->sync->chief_init_op().node(), nullptr);
  EXPECT_EQ(step->after_restore.node(), nullptr);
  // The variables (and the gradient accumulators) live on the PS task.
  EXPECT_EQ(layers[0]->trainable_variables()[0].op().node()->requested_device(), "/job:ps/task:0");
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
