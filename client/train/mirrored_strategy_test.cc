#include "client/train/mirrored_strategy.h"

#include <cmath>
#include <cstring>
#include <random>

#include "client/client_session.h"
#include "client/ops.h"
#include "client/train/layers.h"
#include "client/train/models.h"
#include "gmock/gmock.h"
#include "graph/status.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBatch = 48;
constexpr int kSteps = 12;

// A fixed data set: kSteps batches of 48 examples of 20 features, labels
// of 5 classes, the same for every run.
struct Data {
  std::vector<Tensor> x, y;
};

Data MakeData() {
  std::mt19937 rng(3);
  std::normal_distribution<float> feature(0.f, 1.f);
  std::uniform_int_distribution<int32_t> label(0, 4);
  Data d;
  for (int s = 0; s < kSteps; ++s) {
    Tensor x(DT_FLOAT, TensorShape({kBatch, 20}));
    for (int64_t i = 0; i < x.NumElements(); ++i) x.base<float>()[i] = feature(rng);
    Tensor y(DT_INT32, TensorShape({kBatch}));
    for (int64_t i = 0; i < kBatch; ++i) y.base<int32_t>()[i] = label(rng);
    d.x.push_back(x);
    d.y.push_back(y);
  }
  return d;
}

struct TrainRun {
  std::vector<float> losses;
  std::vector<std::vector<Tensor>> replica_values;  // [replica][variable]
  AllReducePlan plan;
  int64_t global_step = 0;
};

// Trains an MLP 20-16-5 with `optimizer` on `replicas` mirrored replicas,
// feeding the global batch; the mean loss of every step.
absl::StatusOr<TrainRun> Train(int replicas, const std::string& optimizer, int64_t pack_bytes,
                               const Data& data) {
  AllReduceOptions ao;
  ao.pack_bytes = pack_bytes;
  ao.timeout_seconds = 60;
  GR_ASSIGN_OR_RETURN(MirroredStrategy strategy, MirroredStrategy::Create(replicas, ao));
  Scope root = Scope::NewRootScope();
  root.SetGraphSeed(11);
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT,
                            ops::Placeholder::Shape(PartialShape({kBatch, 20})));
  auto y = ops::Placeholder(root.WithOpName("y"), DT_INT32,
                            ops::Placeholder::Shape(PartialShape({kBatch})));
  Variable global_step = CreateGlobalStep(root.WithDevice(strategy.devices()[0]));
  std::vector<std::unique_ptr<Layers>> layers;
  ModelFn model_fn = [&](const Scope& s, int k,
                         const std::vector<Output>& in) -> absl::StatusOr<ReplicaModel> {
    LayersOptions lo;
    lo.seed = 5;
    layers.push_back(std::make_unique<Layers>(s, lo));
    MlpOptions mo;
    mo.hidden = {16};
    mo.classes = 5;
    Model m = Mlp(*layers.back(), in[0], in[1], mo);
    ReplicaModel r;
    r.loss = m.loss;
    r.metrics = {m.accuracy};
    r.trainable = layers.back()->trainable_variables();
    r.variables = layers.back()->variables();
    return r;
  };
  OptimizerFn optimizer_fn = [&]() -> std::unique_ptr<Optimizer> {
    if (optimizer == "adam") return std::make_unique<AdamOptimizer>(0.01f);
    return std::make_unique<GradientDescentOptimizer>(0.5f);
  };
  GR_ASSIGN_OR_RETURN(TrainStep step, strategy.BuildTrainStep(root, {x, y}, kBatch, model_fn,
                                                              optimizer_fn, &global_step));
  Operation init = GlobalVariablesInitializer(root);
  GR_RETURN_IF_ERROR(root.status());
  ClientSession session(root, strategy.session_options());
  GR_RETURN_IF_ERROR(session.Run({}, {}, {init}).status());
  GR_RETURN_IF_ERROR(session.Run({}, {}, {step.after_restore}).status());
  TrainRun run;
  run.plan = step.plan;
  for (int s = 0; s < kSteps; ++s) {
    GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, session.Run({{x, data.x[s]}, {y, data.y[s]}},
                                                             {step.loss}, {step.train_op}));
    run.losses.push_back(out[0].scalar<float>());
  }
  for (int k = 0; k < replicas; ++k) {
    std::vector<Output> reads;
    for (const Variable& v : step.replicas[k].variables) reads.push_back(v.Read(root));
    for (const Variable& v : step.optimizers[k]->variables()) reads.push_back(v.Read(root));
    GR_RETURN_IF_ERROR(root.status());
    GR_ASSIGN_OR_RETURN(std::vector<Tensor> values, session.Run(reads));
    run.replica_values.push_back(values);
  }
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> gs, session.Run({global_step.Read(root)}));
  run.global_step = gs[0].scalar<int64_t>();
  return run;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

// The check: N replicas with global batch B follow the loss curve
// of one replica with batch B (same seed, same data order), to float
// tolerance; every copy of every variable and optimizer slot is the same
// bytes as replica 0's.
TEST(MirroredStrategyTest, ReplicasFollowTheSingleReplicaLossCurve) {
  const Data data = MakeData();
  for (const std::string opt : {"sgd", "adam"}) {
    absl::StatusOr<TrainRun> one = Train(1, opt, 4 << 20, data);
    ASSERT_TRUE(one.ok()) << one.status();
    EXPECT_EQ(one->global_step, kSteps);
    EXPECT_LT(one->losses.back(), one->losses.front()) << opt;
    for (int replicas : {2, 4}) {
      absl::StatusOr<TrainRun> many = Train(replicas, opt, 4 << 20, data);
      ASSERT_TRUE(many.ok()) << many.status();
      EXPECT_EQ(many->global_step, kSteps);
      for (int s = 0; s < kSteps; ++s) {
        EXPECT_NEAR(many->losses[s], one->losses[s], 2e-5 * std::max(1.f, one->losses[s]))
            << opt << " replicas " << replicas << " step " << s;
      }
      ASSERT_EQ(many->replica_values.size(), static_cast<size_t>(replicas));
      for (int k = 1; k < replicas; ++k) {
        ASSERT_EQ(many->replica_values[k].size(), many->replica_values[0].size());
        for (size_t v = 0; v < many->replica_values[k].size(); ++v) {
          EXPECT_TRUE(SameBytes(many->replica_values[k][v], many->replica_values[0][v]))
              << opt << " replica " << k << " variable " << v;
        }
      }
      // 4 gradients (2 kernels, 2 biases) of 20*16+16+16*5+5 floats.
      EXPECT_EQ(many->plan.tensors, 4);
      EXPECT_EQ(many->plan.packs, 1);
      EXPECT_EQ(many->plan.bytes, (20 * 16 + 16 + 16 * 5 + 5) * 4);
      EXPECT_EQ(many->plan.Summary(),
                absl::StrCat("all-reduce: 4 gradients in 1 pack (0.0 MiB) over ", replicas,
                             " replicas, shared memory"));
    }
  }
}

// Packs of at most 400 bytes over the gradients in order (kernel 1280 B,
// bias 64 B, kernel 320 B, bias 20 B): [kernel], [bias, kernel], [bias];
// the losses are those of one pack. Without packing: one per gradient.
TEST(MirroredStrategyTest, SmallPacksGiveTheSameResult) {
  const Data data = MakeData();
  absl::StatusOr<TrainRun> one_pack = Train(2, "sgd", 4 << 20, data);
  absl::StatusOr<TrainRun> small = Train(2, "sgd", 400, data);
  ASSERT_TRUE(one_pack.ok() && small.ok()) << small.status();
  EXPECT_EQ(small->plan.packs, 3);
  for (int s = 0; s < kSteps; ++s) EXPECT_FLOAT_EQ(small->losses[s], one_pack->losses[s]);
  absl::StatusOr<TrainRun> unpacked = Train(2, "sgd", 0, data);
  ASSERT_TRUE(unpacked.ok());
  EXPECT_EQ(unpacked->plan.packs, 4);
}

TEST(MirroredStrategyTest, BatchThatDoesNotDivideIsInvalidArgument) {
  auto m = MirroredStrategy::Create(3);
  ASSERT_TRUE(m.ok());
  auto b = m->PerReplicaBatch(256);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("the global batch 256 does not divide evenly among 3 replicas"));
  EXPECT_EQ(*m->PerReplicaBatch(255), 85);
  EXPECT_EQ(MirroredStrategy::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
