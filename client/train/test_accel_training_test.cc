// An MLP trained through the client API on a session with a TEST_ACCEL
// device: its forward and backward passes run on the accelerator (type
// priority), the variables and their updates stay on the CPU (no
// accelerator kernels for them), and every step's loss is the CPU-only
// session's.
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "client/client_session.h"
#include "client/train/models.h"
#include "client/train/ops_internal.h"
#include "gtest/gtest.h"
#include "kernels/core/test_accel_kernels.h"
#include "runtime/device_factory.h"
#include "runtime/direct_session.h"
#include "runtime/test_accel_device.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

Output Placeholder(const Scope& s, DataType dt, const PartialShape& shape) {
  return internal::Op(s, "Placeholder")
      .Attr("dtype", internal::AType(dt))
      .Attr("shape", client::internal::AttrShape(shape))
      .Out();
}

struct Trained {
  std::vector<float> losses;
  std::map<std::string, int> ops_on_accel;  // op -> nodes on TEST_ACCEL
  std::map<std::string, int> ops_on_cpu;
  int64_t accel_kernels = 0;
  int64_t host_to_device = 0;
};

Trained Train(const DeviceFactoryRegistry* registry, int accel_devices) {
  Trained t;
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DT_FLOAT, PartialShape({-1, 16}));
  Output labels = Placeholder(s, DT_INT32, PartialShape({-1}));
  Layers layers(s, 3);
  MlpOptions mo;
  mo.hidden = {32, 32};
  mo.classes = 4;
  Model m = Mlp(layers, x, labels, mo);
  Variable step = CreateGlobalStep(s);
  GradientDescentOptimizer sgd(0.5f);
  auto train = TrainOp(s, layers, m.loss, sgd, &step);
  EXPECT_TRUE(train.ok()) << train.status();
  if (!train.ok()) return t;

  SessionOptions so;
  so.device_factories = registry;
  (*so.config.mutable_device_count())["TEST_ACCEL"] = accel_devices;
  ClientSession session(s, so);
  absl::Status init = session.Run({}, {}, {GlobalVariablesInitializer(s)}).status();
  EXPECT_TRUE(init.ok()) << init;

  // Four separable classes: the label is the quadrant of (x0, x1).
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0, 1);
  Tensor xs(DT_FLOAT, TensorShape({64, 16}));
  Tensor ys(DT_INT32, TensorShape({64}));
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 16; ++j) xs.flat<float>()[i * 16 + j] = noise(rng);
    ys.flat<int32_t>()[i] =
        (xs.flat<float>()[i * 16] > 0 ? 1 : 0) + (xs.flat<float>()[i * 16 + 1] > 0 ? 2 : 0);
  }
  tensorflow::RunOptions ro;
  ro.set_output_partition_graphs(true);
  for (int i = 0; i < 30; ++i) {
    tensorflow::RunMetadata md;
    auto r = session.Run({{x, xs}, {labels, ys}}, {m.loss}, {*train}, ro, &md);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return t;
    t.losses.push_back((*r)[0].scalar<float>());
    if (i > 0) continue;
    for (const auto& g : md.partition_graphs()) {
      for (const auto& n : g.node()) {
        (absl::StrContains(n.device(), "TEST_ACCEL") ? t.ops_on_accel : t.ops_on_cpu)[n.op()]++;
      }
    }
  }
  auto* direct = dynamic_cast<DirectSession*>(session.session());
  EXPECT_NE(direct, nullptr);
  if (direct == nullptr) return t;
  for (const auto& d : direct->device_mgr().devices()) {
    auto st = GetTestAccelStats(d.get());
    if (!st.ok()) continue;
    t.accel_kernels += st->kernels_run;
    t.host_to_device += st->host_to_device_copies;
  }
  return t;
}

TEST(TestAccelTrainingTest, MlpTrainsOnTheAcceleratorAsOnTheCpu) {
  DeviceFactoryRegistry registry;
  ASSERT_TRUE(registry.Register(NewCpuDeviceFactory()).ok());
  ASSERT_TRUE(registry.Register(NewTestAccelDeviceFactory()).ok());
  Trained cpu = Train(&registry, 0);
  Trained accel = Train(&registry, 1);
  ASSERT_EQ(cpu.losses.size(), 30u);
  ASSERT_EQ(accel.losses.size(), 30u);
  for (int i = 0; i < 30; ++i) {
    EXPECT_NEAR(accel.losses[i], cpu.losses[i], 1e-5 * std::max(1.0f, cpu.losses[i])) << i;
  }
  EXPECT_LT(accel.losses.back(), 0.5f * accel.losses.front());

  EXPECT_TRUE(cpu.ops_on_accel.empty());
  // 3 forward, 3 kernel gradients, 2 input gradients (none for x).
  EXPECT_EQ(cpu.ops_on_cpu["MatMul"], 8);
  EXPECT_EQ(accel.ops_on_accel["MatMul"], 8);
  EXPECT_GE(accel.ops_on_accel["ReluGrad"], 2);
  EXPECT_EQ(accel.ops_on_accel["SparseSoftmaxCrossEntropyWithLogits"], 1);
  EXPECT_EQ(accel.ops_on_accel["ResourceApplyGradientDescent"], 0);
  EXPECT_EQ(accel.ops_on_cpu["ResourceApplyGradientDescent"], 6);
  EXPECT_EQ(accel.ops_on_cpu["ReadVariableOp"], cpu.ops_on_cpu["ReadVariableOp"]);
  EXPECT_GT(accel.ops_on_accel["_Recv"], 0);
  EXPECT_GT(accel.ops_on_accel["_Send"], 0);
  EXPECT_GT(accel.accel_kernels, 30 * 20);
  EXPECT_GT(accel.host_to_device, 30 * 6);  // at least the six variables' values per step
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
