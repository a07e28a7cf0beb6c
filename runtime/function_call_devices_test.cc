// Call frames whose bodies ask for devices (runtime/function_call.h,
// FunctionRuntimeOptions): a `_noinline` function's nodes are placed over
// the task's devices, here the CPU and TEST_ACCEL, and the body runs
// partitioned per device inside the call.
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/ops/all_ops.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "runtime/device_factory.h"
#include "runtime/direct_session.h"
#include "runtime/test_accel_device.h"

namespace graphrun {
namespace {

using test::ParseGraph;
using ::testing::HasSubstr;

// mm(a) = (a @ a + a, a @ a), never inlined; its MatMul asks for the
// accelerator (DEVICE is replaced per test), the AddV2 asks for nothing.
// Called twice: `c` in the graph, and `d` in a second function's body.
const char kGraph[] = R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c" op: "mm" input: "x" }
node { name: "d" op: "twice" input: "x" }
library {
  function {
    signature { name: "mm" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "sum" type: DT_FLOAT } output_arg { name: "prod" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "m" op: "MatMul" input: "a" input: "a" device: "DEVICE"
               attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "s" op: "AddV2" input: "m:product:0" input: "a"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "sum" value: "s:z:0" } ret { key: "prod" value: "m:product:0" }
  }
  function {
    signature { name: "twice" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "r" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "inner" op: "mm" input: "a" }
    node_def { name: "n" op: "Neg" input: "inner:sum:0" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "r" value: "n:y:0" }
  }
}
)";

std::string GraphWithDevice(const std::string& device) {
  std::string g = kGraph;
  g.replace(g.find("DEVICE"), 6, device);
  return g;
}

std::unique_ptr<DeviceFactoryRegistry> Registry() {
  auto r = std::make_unique<DeviceFactoryRegistry>();
  EXPECT_TRUE(r->Register(NewCpuDeviceFactory()).ok());
  EXPECT_TRUE(r->Register(NewTestAccelDeviceFactory()).ok());
  return r;
}

absl::StatusOr<std::unique_ptr<DirectSession>> Session(const DeviceFactoryRegistry* registry,
                                                       int accel_devices, bool soft,
                                                       const std::string& graph) {
  SessionOptions o;
  o.device_factories = registry;
  (*o.config.mutable_device_count())["TEST_ACCEL"] = accel_devices;
  o.config.set_allow_soft_placement(soft);
  auto s = DirectSession::Create(o);
  if (!s.ok()) return s.status();
  GR_RETURN_IF_ERROR((*s)->Create(ParseGraph(graph)));
  return s;
}

const Tensor kX = Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}));

// x @ x = [[7, 10], [15, 22]]; + x = [[8, 12], [18, 26]].
void ExpectResults(const std::vector<Tensor>& out) {
  ASSERT_EQ(out.size(), 3u);
  const float prod[] = {7, 10, 15, 22}, sum[] = {8, 12, 18, 26};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[0].flat<float>()[i], sum[i]) << i;
    EXPECT_EQ(out[1].flat<float>()[i], prod[i]) << i;
    EXPECT_EQ(out[2].flat<float>()[i], -sum[i]) << i;
  }
  for (const Tensor& t : out) EXPECT_EQ(t.memory_space(), nullptr);
}

TEST(TestAccelCallFrameTest, BodyNodesRunOnTheTestAccelDeviceTheyAskFor) {
  auto registry = Registry();
  auto s = Session(registry.get(), 2, false, GraphWithDevice("/device:TEST_ACCEL:1"));
  ASSERT_TRUE(s.ok()) << s.status();
  const auto& devices = (*s)->device_mgr().devices();
  ASSERT_EQ(devices.size(), 3u);
  for (int run = 1; run <= 3; ++run) {
    auto out = (*s)->Run({{"x", kX}}, {"c:0", "c:1", "d"});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectResults(*out);
    // Each of the two calls of mm per run: `a` goes to TEST_ACCEL:1, the
    // MatMul runs there, its product comes back once (for the AddV2 and
    // the _Retval, both on the CPU).
    auto st = GetTestAccelStats(devices[2].get());
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->kernels_run, 2 * run);
    EXPECT_EQ(st->host_to_device_copies, 2 * run);
    EXPECT_EQ(st->device_to_host_copies, 2 * run);
    // The other accelerator is never asked for (call kernels and the
    // unconstrained body nodes stay on the caller's CPU).
    EXPECT_EQ(GetTestAccelStats(devices[1].get())->kernels_run, 0);
  }
  // A traced step names the body's nodes under their calls, whatever
  // device ran them.
  tensorflow::RunOptions ro;
  ro.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  tensorflow::RunMetadata md;
  auto out = (*s)->Run(ro, {{"x", kX}}, {"c:0", "c:1", "d"}, {}, &md);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectResults(*out);
  std::map<std::string, int> seen;
  for (const auto& ds : md.step_stats().dev_stats()) {
    for (const auto& ns : ds.node_stats()) ++seen[ns.node_name()];
  }
  for (const char* name : {"c/mm/m", "c/mm/s", "d/twice/inner/mm/m", "d/twice/n"}) {
    EXPECT_EQ(seen[name], 1) << name;
  }
}

TEST(TestAccelCallFrameTest, WithoutTheTestAccelDeviceSoftPlacementDecides) {
  auto registry = Registry();
  const std::string g = GraphWithDevice("/device:TEST_ACCEL:0");
  // No accelerator, no soft placement: an error naming the function, the
  // node and the device.
  auto hard = Session(registry.get(), 0, false, g);
  absl::Status st = hard.status();
  if (st.ok()) st = (*hard)->Run({{"x", kX}}, {"c:0"}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("function 'mm'"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("mm/m"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("TEST_ACCEL:0"));
  // With soft placement the body runs on the CPU.
  auto soft = Session(registry.get(), 0, true, g);
  ASSERT_TRUE(soft.ok()) << soft.status();
  auto out = (*soft)->Run({{"x", kX}}, {"c:0", "c:1", "d"});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectResults(*out);
  // A body asking for the CPU runs as one executor, as before.
  auto cpu = Session(registry.get(), 2, false, GraphWithDevice("/device:CPU:0"));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  out = (*cpu)->Run({{"x", kX}}, {"c:0", "c:1", "d"});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectResults(*out);
  for (int i = 1; i <= 2; ++i) {
    EXPECT_EQ(GetTestAccelStats((*cpu)->device_mgr().devices()[i].get())->kernels_run, 0);
  }
}

// A body that asks for another task cannot run as a call frame (it runs
// on its caller's task): such a `_noinline` function is inlined instead,
// and its node is placed as any other: here, with no such task, on a
// local device under soft placement, and an error naming the inlined node
// ("c/m": the call's name, then the body node's) without it.
TEST(TestAccelCallFrameTest, ABodyNodeOnAnotherTaskIsInlined) {
  auto registry = Registry();
  auto soft = Session(registry.get(), 1, true, GraphWithDevice("/job:ps/task:0"));
  ASSERT_TRUE(soft.ok()) << soft.status();
  auto out = (*soft)->Run({{"x", kX}}, {"c:0", "c:1", "d"});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectResults(*out);
  auto hard = Session(registry.get(), 1, false, GraphWithDevice("/job:ps/task:0"));
  absl::Status st = hard.status();
  if (st.ok()) st = (*hard)->Run({{"x", kX}}, {"c:0"}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("'/job:ps/task:0'")) << st;
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("node 'c/m' of function 'mm' (called by 'c') (op MatMul)"))
      << st;
}

// TensorFlow's function attrs that say where int32 arguments live
// (experimental_ints_on_device), and the argument attrs and shapes its
// exporter adds, are accepted: inlined (c) and as a call frame (d), with
// and without an accelerator.
TEST(TestAccelCallFrameTest, IntsOnDeviceAndArgAttrsAreAccepted) {
  const char kInts[] = R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
node { name: "c" op: "StatefulPartitionedCall" input: "x"
       attr { key: "f" value { func { name: "addone" } } }
       attr { key: "Tin" value { list { type: DT_INT32 } } }
       attr { key: "Tout" value { list { type: DT_INT32 } } }
       attr { key: "config_proto" value { s: "" } }
       attr { key: "executor_type" value { s: "" } } }
node { name: "d" op: "StatefulPartitionedCall" input: "x"
       attr { key: "f" value { func { name: "addone_frame" } } }
       attr { key: "Tin" value { list { type: DT_INT32 } } }
       attr { key: "Tout" value { list { type: DT_INT32 } } } }
library {
  function {
    signature { name: "addone" input_arg { name: "a" type: DT_INT32 } output_arg { name: "r" type: DT_INT32 } }
    attr { key: "experimental_ints_on_device" value { b: true } }
    attr { key: "_input_shapes" value { list { shape { } } } }
    arg_attr { key: 0 value { attr { key: "_output_shapes" value { list { shape { } } } } attr { key: "_user_specified_name" value { s: "a" } } } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
    node_def { name: "s" op: "AddV2" input: "a" input: "one:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "r" value: "s:z:0" }
  }
  function {
    signature { name: "addone_frame" input_arg { name: "a" type: DT_INT32 } output_arg { name: "r" type: DT_INT32 } }
    attr { key: "experimental_ints_on_device" value { b: true } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
    node_def { name: "s" op: "AddV2" input: "a" input: "one:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "r" value: "s:z:0" }
  }
}
)";
  auto registry = Registry();
  for (int accel : {0, 1}) {
    auto s = Session(registry.get(), accel, true, kInts);
    ASSERT_TRUE(s.ok()) << s.status();
    auto out = (*s)->Run({{"x", Tensor::Scalar<int32_t>(41)}}, {"c", "d"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), 42) << accel;
    EXPECT_EQ((*out)[1].scalar<int32_t>(), 42) << accel;
  }
}

}  // namespace
}  // namespace graphrun
