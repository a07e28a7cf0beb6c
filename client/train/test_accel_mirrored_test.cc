// MirroredStrategy over accelerators: two replicas on two TEST_ACCEL
// devices train an MLP step for step as two CPU replicas do. Each
// replica's forward and backward passes and its all-reduce member run on
// its accelerator (the collective's data staged through the host); the
// variables, whose optimizer has no TEST_ACCEL kernel, stay on the CPU by
// soft placement, and the copies stay identical.
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/ops.h"
#include "client/train/layers.h"
#include "client/train/mirrored_strategy.h"
#include "client/train/models.h"
#include "gmock/gmock.h"
#include "graph/status.h"
#include "gtest/gtest.h"
#include "runtime/device_factory.h"
#include "runtime/direct_session.h"
#include "runtime/test_accel_device.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

constexpr int64_t kBatch = 32;
constexpr int kSteps = 8;

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<Tensor>> replica_values;  // [replica][variable]
  std::string plan;
  std::map<std::string, std::map<std::string, int>> ops_by_device;  // device -> op -> nodes
  std::vector<TestAccelMemoryStats> accel;                          // per TEST_ACCEL device
};

absl::StatusOr<Trained> Train(const DeviceFactoryRegistry* registry,
                              const std::string& device_type) {
  AllReduceOptions ao;
  ao.timeout_seconds = 60;
  GR_ASSIGN_OR_RETURN(MirroredStrategy strategy, MirroredStrategy::Create(2, ao, device_type));
  Scope root = Scope::NewRootScope();
  root.SetGraphSeed(11);
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT,
                            ops::Placeholder::Shape(PartialShape({kBatch, 12})));
  auto y = ops::Placeholder(root.WithOpName("y"), DT_INT32,
                            ops::Placeholder::Shape(PartialShape({kBatch})));
  std::vector<std::unique_ptr<Layers>> layers;
  ModelFn model_fn = [&](const Scope& s, int k,
                         const std::vector<Output>& in) -> absl::StatusOr<ReplicaModel> {
    LayersOptions lo;
    lo.seed = 5;
    layers.push_back(std::make_unique<Layers>(s, lo));
    MlpOptions mo;
    mo.hidden = {16};
    mo.classes = 4;
    Model m = Mlp(*layers.back(), in[0], in[1], mo);
    ReplicaModel r;
    r.loss = m.loss;
    r.trainable = layers.back()->trainable_variables();
    r.variables = layers.back()->variables();
    return r;
  };
  OptimizerFn optimizer_fn = [] { return std::make_unique<GradientDescentOptimizer>(0.5f); };
  GR_ASSIGN_OR_RETURN(TrainStep step, strategy.BuildTrainStep(root, {x, y}, kBatch, model_fn,
                                                              optimizer_fn, nullptr));
  Operation init = GlobalVariablesInitializer(root);
  GR_RETURN_IF_ERROR(root.status());
  SessionOptions so = strategy.session_options();
  so.device_factories = registry;
  ClientSession session(root, so);
  GR_RETURN_IF_ERROR(session.Run({}, {}, {init}).status());
  GR_RETURN_IF_ERROR(session.Run({}, {}, {step.after_restore}).status());
  // Four classes: the quadrant of (x0, x1).
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0, 1);
  Trained run;
  run.plan = step.plan.Summary();
  tensorflow::RunOptions ro;
  ro.set_output_partition_graphs(true);
  for (int s = 0; s < kSteps; ++s) {
    Tensor xs(DT_FLOAT, TensorShape({kBatch, 12}));
    Tensor ys(DT_INT32, TensorShape({kBatch}));
    for (int64_t i = 0; i < kBatch; ++i) {
      for (int j = 0; j < 12; ++j) xs.flat<float>()[i * 12 + j] = noise(rng);
      ys.flat<int32_t>()[i] =
          (xs.flat<float>()[i * 12] > 0 ? 1 : 0) + (xs.flat<float>()[i * 12 + 1] > 0 ? 2 : 0);
    }
    tensorflow::RunMetadata md;
    GR_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                        session.Run({{x, xs}, {y, ys}}, {step.loss}, {step.train_op}, ro, &md));
    run.losses.push_back(out[0].scalar<float>());
    if (s > 0) continue;
    for (const auto& g : md.partition_graphs()) {
      for (const auto& n : g.node()) ++run.ops_by_device[n.device()][n.op()];
    }
  }
  for (int k = 0; k < 2; ++k) {
    std::vector<Output> reads;
    for (const Variable& v : step.replicas[k].variables) reads.push_back(v.Read(root));
    GR_RETURN_IF_ERROR(root.status());
    GR_ASSIGN_OR_RETURN(std::vector<Tensor> values, session.Run(reads));
    run.replica_values.push_back(values);
  }
  auto* direct = dynamic_cast<DirectSession*>(session.session());
  if (direct == nullptr) return absl::InternalError("not a DirectSession");
  for (const auto& d : direct->device_mgr().devices()) {
    auto st = GetTestAccelStats(d.get());
    if (st.ok()) run.accel.push_back(*st);
  }
  return run;
}

TEST(TestAccelMirroredTest, ReplicasOnTwoAcceleratorsTrainAsOnTwoCpus) {
  DeviceFactoryRegistry registry;
  ASSERT_TRUE(registry.Register(NewCpuDeviceFactory()).ok());
  ASSERT_TRUE(registry.Register(NewTestAccelDeviceFactory()).ok());
  absl::StatusOr<Trained> cpu = Train(&registry, "CPU");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<Trained> accel = Train(&registry, "TEST_ACCEL");
  ASSERT_TRUE(accel.ok()) << accel.status();

  // The same math in the same order: the same losses, bit for bit.
  ASSERT_EQ(accel->losses.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) EXPECT_EQ(accel->losses[s], cpu->losses[s]) << s;
  EXPECT_LT(accel->losses.back(), accel->losses.front());
  for (size_t v = 0; v < accel->replica_values[0].size(); ++v) {
    const Tensor& a = accel->replica_values[0][v];
    const Tensor& b = accel->replica_values[1][v];
    const Tensor& c = cpu->replica_values[0][v];
    ASSERT_EQ(a.TotalBytes(), b.TotalBytes());
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()), 0) << v;
    EXPECT_EQ(std::memcmp(a.raw_data(), c.raw_data(), a.TotalBytes()), 0) << v;
  }
  EXPECT_EQ(cpu->plan,
            "all-reduce: 4 gradients in 1 pack (0.0 MiB) over 2 replicas, shared memory");
  EXPECT_EQ(accel->plan,
            "all-reduce: 4 gradients in 1 pack (0.0 MiB) over 2 replicas, shared memory "
            "(TEST_ACCEL through the host)");

  // Each accelerator runs its replica: 2 forward MatMuls, 2 kernel
  // gradients and 1 input gradient, and its all-reduce member.
  const std::string prefix = "/job:localhost/replica:0/task:0/device:";
  for (int k = 0; k < 2; ++k) {
    const auto& ops = accel->ops_by_device[absl::StrCat(prefix, "TEST_ACCEL:", k)];
    EXPECT_EQ(ops.count("MatMul") ? ops.at("MatMul") : 0, 5) << k;
    EXPECT_EQ(ops.count("CollectiveReduceV2") ? ops.at("CollectiveReduceV2") : 0, 1) << k;
  }
  const auto& cpu0 = accel->ops_by_device[prefix + "CPU:0"];
  EXPECT_EQ(cpu0.count("CollectiveReduceV2"), 0u);
  EXPECT_EQ(cpu0.at("ResourceApplyGradientDescent"), 8);  // 4 variables per replica
  ASSERT_EQ(accel->accel.size(), 2u);
  for (const TestAccelMemoryStats& st : accel->accel) {
    EXPECT_GT(st.kernels_run, kSteps * 10);
    // At least the pack's copy to the host and back, each step.
    EXPECT_GE(st.device_to_host_copies, kSteps);
    EXPECT_GE(st.host_to_device_copies, kSteps);
  }
}

TEST(TestAccelMirroredTest, DeviceTypesAreChecked) {
  auto bad = MirroredStrategy::Create(2, AllReduceOptions(), "gpu:0");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("is not a device type"));
  auto gpus = MirroredStrategy::Create(3, AllReduceOptions(), "GPU");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_THAT(gpus->devices(),
              ::testing::ElementsAre("/device:GPU:0", "/device:GPU:1", "/device:GPU:2"));
  SessionOptions so = gpus->session_options();
  EXPECT_EQ(so.config.device_count().at("GPU"), 3);
  EXPECT_EQ(so.config.device_count().at("CPU"), 1);
  EXPECT_TRUE(so.config.allow_soft_placement());
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
