#include "placement/replica_device_setter.h"

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/node_def_util.h"
#include "gtest/gtest.h"
#include "placement/device_function.h"
#include "placement/ps_strategy.h"

namespace graphrun {
namespace placement {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

NodeDef MakeNode(const std::string& name, const std::string& op, const std::string& device = "",
                 std::vector<int64_t> shape = {}) {
  NodeDef n;
  n.set_name(name);
  n.set_op(op);
  n.set_device(device);
  if (op == "VariableV2" || op == "VarHandleOp") {
    (*n.mutable_attr())["shape"] = MakeAttr(PartialShape(absl::MakeConstSpan(shape)));
    (*n.mutable_attr())["dtype"] = MakeAttr(DT_FLOAT);
  }
  return n;
}

DeviceFunction Setter(ReplicaDeviceSetterOptions o) {
  auto fn = ReplicaDeviceSetter(std::move(o));
  EXPECT_TRUE(fn.ok()) << fn.status();
  return fn.ok() ? *fn : DeviceFunction();
}

// tf.train.replica_device_setter(ps_tasks=3): in creation order the
// variables get tasks 0, 1, 2, 0, 1; other ops do not advance the counter.
TEST(ReplicaDeviceSetterTest, RoundRobinMatchesTensorFlowOrder) {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 3;
  DeviceFunction f = Setter(o);
  std::vector<std::string> got;
  for (const NodeDef& n :
       {MakeNode("w0", "VariableV2"), MakeNode("read", "Identity"), MakeNode("w1", "VariableV2"),
        MakeNode("h", "VarHandleOp"), MakeNode("mm", "MatMul"), MakeNode("w3", "Variable"),
        MakeNode("t", "MutableHashTable")}) {
    got.push_back(f(n));
  }
  EXPECT_THAT(got, ElementsAre("/job:ps/task:0", "/job:worker", "/job:ps/task:1", "/job:ps/task:2",
                               "/job:worker", "/job:ps/task:0", "/job:ps/task:1"));
}

TEST(ReplicaDeviceSetterTest, MergesWithTheNodesDevice) {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 2;
  o.worker_device = "/job:worker/task:3";
  DeviceFunction f = Setter(o);
  // The node's own fields win.
  EXPECT_EQ(f(MakeNode("a", "MatMul", "/device:GPU:1")), "/job:worker/task:3/device:GPU:1");
  EXPECT_EQ(f(MakeNode("b", "MatMul", "/job:chief")), "/job:chief/task:3");
  // Same job as ps_device: the strategy chooses, then the node's task wins
  // (and the counter still advanced, as in TensorFlow).
  EXPECT_EQ(f(MakeNode("v0", "VariableV2", "/job:ps/task:7")), "/job:ps/task:7");
  EXPECT_EQ(f(MakeNode("v1", "VariableV2")), "/job:ps/task:1");
  // Another job: the strategy is not consulted.
  EXPECT_EQ(f(MakeNode("v2", "VariableV2", "/job:local")), "/job:local");
  EXPECT_EQ(f(MakeNode("v3", "VariableV2")), "/job:ps/task:0");
  EXPECT_EQ(f(MakeNode("v4", "VariableV2", "/device:CPU:0")), "/job:ps/task:1/device:CPU:0");
}

TEST(ReplicaDeviceSetterTest, NoMergeKeepsExplicitDevices) {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 2;
  o.merge_devices = false;
  DeviceFunction f = Setter(o);
  EXPECT_EQ(f(MakeNode("a", "MatMul", "/device:GPU:1")), "/device:GPU:1");
  EXPECT_EQ(f(MakeNode("v", "VariableV2", "/job:x")), "/job:x");
  EXPECT_EQ(f(MakeNode("w", "VariableV2")), "/job:ps/task:0");
}

TEST(ReplicaDeviceSetterTest, NestedScopesThroughTheDeviceStack) {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 2;
  // with tf.device(replica_device_setter(...)): with tf.device("/gpu:0"):
  std::vector<DeviceStackEntry> stack = {{Setter(o)}, {FixedDevice("/device:GPU:0")}};
  auto d = ApplyDeviceFunctions(stack, MakeNode("mm", "MatMul"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, "/job:worker/device:GPU:0");
  auto v = ApplyDeviceFunctions(stack, MakeNode("v", "VariableV2"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "/job:ps/task:0/device:GPU:0");
}

TEST(ReplicaDeviceSetterTest, ClusterDecidesTaskCount) {
  ReplicaDeviceSetterOptions o;
  o.cluster = {{"ps", 2}, {"worker", 4}};
  EXPECT_EQ(*NumPsTasks(o), 2);
  DeviceFunction f = Setter(o);
  ASSERT_TRUE(f);
  f(MakeNode("a", "VariableV2"));
  EXPECT_EQ(f(MakeNode("b", "VariableV2")), "/job:ps/task:1");
  EXPECT_EQ(f(MakeNode("c", "VariableV2")), "/job:ps/task:0");
}

TEST(ReplicaDeviceSetterTest, NoPsJobMeansNoPlacement) {
  ReplicaDeviceSetterOptions o;
  o.cluster = {{"worker", 4}};
  EXPECT_FALSE(Setter(o));
  ReplicaDeviceSetterOptions none;
  EXPECT_FALSE(Setter(none));
}

TEST(ReplicaDeviceSetterTest, BadDeviceIsInvalidArgument) {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 1;
  o.ps_device = "/job:ps/task:x";
  auto fn = ReplicaDeviceSetter(o);
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fn.status().message(), HasSubstr("ps_device"));
}

// GreedyLoadBalancingStrategy(byte_size_load_fn): least loaded, first on ties.
TEST(PsStrategyTest, GreedyBytesPicksLeastLoaded) {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 2;
  o.ps_strategy = NewGreedyBytesStrategy(2);
  DeviceFunction f = Setter(o);
  EXPECT_EQ(f(MakeNode("a", "VariableV2", "", {25})), "/job:ps/task:0");    // 100 B
  EXPECT_EQ(f(MakeNode("b", "VariableV2", "", {2, 5})), "/job:ps/task:1");  // 40 B
  EXPECT_EQ(f(MakeNode("c", "VariableV2", "", {10})), "/job:ps/task:1");    // 40 B
  EXPECT_EQ(f(MakeNode("d", "VarHandleOp", "", {50})), "/job:ps/task:1");   // 80 < 100
  EXPECT_EQ(f(MakeNode("e", "VariableV2", "", {1})), "/job:ps/task:0");     // 100 < 280
}

// Shapes whose element or byte counts pass int64 have unknown bytes (-1),
// never a wrapped count (-4 for [INT64_MAX, 1], 0 for [2^31]^3).
TEST(PsStrategyTest, OverflowingSizesAreUnknown) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(GetVariableInfo(MakeNode("a", "VariableV2", "", {max, 1})).bytes, -1);
  const int64_t big = int64_t{1} << 31;
  EXPECT_EQ(GetVariableInfo(MakeNode("b", "VariableV2", "", {big, big, big})).bytes, -1);
  EXPECT_EQ(PartialShape({big, big, big}).num_elements(), -1);
  EXPECT_EQ(GetVariableInfo(MakeNode("c", "VariableV2", "", {1 << 20, 1 << 20})).bytes,
            int64_t{4} << 40);
}

class LastTaskStrategy : public PsStrategy {
 public:
  explicit LastTaskStrategy(int n) : n_(n) {}
  int Choose(const NodeDef&, const PartialShape&, DataType) override { return n_ - 1; }

 private:
  int n_;
};

TEST(PsStrategyRegistryTest, UserStrategiesPlugIn) {
  PsStrategyRegistry r;
  RegisterBuiltinPsStrategies(r);
  ASSERT_TRUE(r.Register("last", [](int n) { return std::make_unique<LastTaskStrategy>(n); }).ok());
  EXPECT_EQ(r.Register("last", [](int n) { return std::make_unique<LastTaskStrategy>(n); }).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(r.Names(), ElementsAre("balanced", "greedy_bytes", "last", "round_robin"));
  auto s = r.Create("last", 4);
  ASSERT_TRUE(s.ok());
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 4;
  o.ps_strategy = std::move(*s);
  EXPECT_EQ(Setter(o)(MakeNode("v", "VariableV2")), "/job:ps/task:3");

  auto unknown = r.Create("nope", 2);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("round_robin"));
  EXPECT_EQ(r.Create("balanced", 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.IsGraphStrategy("balanced"));
  EXPECT_TRUE(r.CreateGraphStrategy("balanced").ok());
  EXPECT_TRUE(PsStrategyRegistry::Default().Contains("greedy_bytes"));
}

}  // namespace
}  // namespace placement
}  // namespace graphrun
