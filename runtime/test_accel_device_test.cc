// TEST_ACCEL: the device registry and an accelerator without hardware.
// Unrequested nodes go to TEST_ACCEL before the CPU (type priority), the
// partitioner's _Send/_Recv copy between its memory and the host, its
// kernels complete asynchronously from its compute stream, and what the
// CPU kernels see is exactly what they compute on the CPU alone.
#include "runtime/test_accel_device.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "graph/ops/all_ops.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "kernels/core/test_accel_kernels.h"
#include "runtime/device_factory.h"
#include "runtime/direct_session.h"
#include "util/notification.h"

namespace graphrun {
namespace {

using test::ParseGraph;
using ::testing::HasSubstr;

std::unique_ptr<DeviceFactoryRegistry> Registry(const TestAccelOptions& o = {}) {
  auto r = std::make_unique<DeviceFactoryRegistry>();
  EXPECT_TRUE(r->Register(NewCpuDeviceFactory()).ok());
  EXPECT_TRUE(r->Register(NewTestAccelDeviceFactory(o)).ok());
  return r;
}

TEST(TestAccelDeviceTest, RegistryMakesTheDevicesAskedFor) {
  auto registry = Registry();
  EXPECT_EQ(registry->Register(NewTestAccelDeviceFactory()).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_GT(registry->Priority(kDeviceTestAccel), registry->Priority(kDeviceCpu));
  EXPECT_EQ(registry->Priority("NO_SUCH"), 0);

  DeviceMgrOptions o;
  o.device_factories = registry.get();
  auto mgr = DeviceMgr::NewLocal(o);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  std::vector<std::string> names;
  for (const auto& d : (*mgr)->devices()) names.push_back(d->name());
  EXPECT_THAT(names, ::testing::ElementsAre("/job:localhost/replica:0/task:0/device:CPU:0",
                                            "/job:localhost/replica:0/task:0/device:TEST_ACCEL:0",
                                            "/job:localhost/replica:0/task:0/device:TEST_ACCEL:1"));
  EXPECT_EQ((*mgr)->devices()[0]->accelerator(), nullptr);
  ASSERT_NE((*mgr)->devices()[1]->accelerator(), nullptr);
  EXPECT_NE((*mgr)->devices()[1]->accelerator()->memory_space(),
            (*mgr)->devices()[2]->accelerator()->memory_space());

  o.device_count["TEST_ACCEL"] = 1;
  o.device_count["GPU"] = 0;  // a type this build lacks, asked for none
  mgr = DeviceMgr::NewLocal(o);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  EXPECT_EQ((*mgr)->devices().size(), 2u);

  o.device_count["TEST_ACCEL"] = 3;
  mgr = DeviceMgr::NewLocal(o);
  EXPECT_EQ(mgr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mgr.status().message(), HasSubstr("asks for 3 TEST_ACCEL device(s); 2 available"));

  o.device_count["TEST_ACCEL"] = 0;
  o.device_count["GPU"] = 1;
  mgr = DeviceMgr::NewLocal(o);
  EXPECT_EQ(mgr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mgr.status().message(),
              HasSubstr("this build has no GPU device type (registered: CPU, TEST_ACCEL)"));
}

TEST(TestAccelDeviceTest, CopiesEncodeAndDecodeOnTheirStreams) {
  auto registry = Registry();
  DeviceMgrOptions o;
  o.device_factories = registry.get();
  auto mgr = DeviceMgr::NewLocal(o);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  Device* dev = (*mgr)->devices()[1].get();
  Accelerator* acc = dev->accelerator();
  Tensor host = Tensor::FromVector<float>({1.5f, -2, 3});
  auto d = acc->AllocateDevice(DT_FLOAT, host.shape(), "");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->memory_space(), acc->memory_space());
  Notification copied;
  absl::Status status;
  acc->CopyHostToDevice(host, *d, [&](const absl::Status& s) {
    status = s;
    copied.Notify();
  });
  copied.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status;
  // The device's bytes are not the host's.
  EXPECT_NE(std::memcmp(host.raw_data(), d->raw_data(), 12), 0);
  Tensor back(DT_FLOAT, host.shape());
  Notification returned;
  acc->CopyDeviceToHost(*d, back, [&](const absl::Status& s) {
    status = s;
    returned.Notify();
  });
  returned.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(back.flat<float>()[0], 1.5f);
  EXPECT_EQ(back.flat<float>()[1], -2.0f);
  EXPECT_EQ(back.flat<float>()[2], 3.0f);
  auto stats = GetTestAccelStats(dev);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->host_to_device_copies, 1);
  EXPECT_EQ(stats->device_to_host_copies, 1);
  EXPECT_EQ(stats->bytes_in_use, 12);
  *d = Tensor();
  EXPECT_EQ(GetTestAccelStats(dev)->bytes_in_use, 0);

  // Wrong-way and mismatched copies are errors, not corruption.
  acc->CopyHostToDevice(*acc->AllocateDevice(DT_FLOAT, host.shape(), ""), back,
                        [&](const absl::Status& s) { status = s; });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("the host tensor lies in the memory of " + dev->name()));
  EXPECT_EQ(acc->AllocateDevice(DT_STRING, TensorShape({1}), "node 'n': ").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetTestAccelStats((*mgr)->devices()[0].get()).status().code(),
            absl::StatusCode::kNotFound);
}

// y = Relu(x @ w); s = Sum(y); shape = Shape(y); str = a string Const.
const char kGraph[] = R"(
node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'w' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'value' value { tensor { dtype: DT_FLOAT
         tensor_shape { dim { size: 2 } dim { size: 2 } } float_val: 1 float_val: -2
         float_val: 0.5 float_val: 3 } } } }
node { name: 'mm' op: 'MatMul' input: 'x' input: 'w' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'y' op: 'Relu' input: 'mm' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'axes' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }
       attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }
         int_val: 0 int_val: 1 } } } }
node { name: 's' op: 'Sum' input: 'y' input: 'axes' attr { key: 'T' value { type: DT_FLOAT } }
       attr { key: 'Tidx' value { type: DT_INT32 } } }
node { name: 'shape' op: 'Shape' input: 'y' attr { key: 'T' value { type: DT_FLOAT } }
       attr { key: 'out_type' value { type: DT_INT32 } } }
node { name: 'str' op: 'Const' attr { key: 'dtype' value { type: DT_STRING } }
       attr { key: 'value' value { tensor { dtype: DT_STRING tensor_shape {} string_val: 'hi' } } } }
)";

struct Ran {
  std::vector<Tensor> out;
  std::map<std::string, std::string> device_of;  // node -> device, from the partitions
  int recvs_on_accel = 0;
  int sends_on_accel = 0;
};

Ran RunGraph(DirectSession* s, const std::string& extra = "") {
  Ran r;
  tensorflow::RunOptions ro;
  ro.set_output_partition_graphs(true);
  tensorflow::RunMetadata md;
  Tensor x = Tensor::FromVector<float>({1, 2, -3, 4}, TensorShape({2, 2}));
  auto out = s->Run(ro, {{"x", x}}, {"mm", "y", "s", "shape", "str"}, {}, &md);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return r;
  r.out = *out;
  for (const auto& g : md.partition_graphs()) {
    for (const auto& n : g.node()) {
      r.device_of[n.name()] = n.device();
      if (absl::StrContains(n.device(), "TEST_ACCEL")) {
        r.recvs_on_accel += n.op() == "_Recv";
        r.sends_on_accel += n.op() == "_Send";
      }
    }
  }
  return r;
}

std::unique_ptr<DirectSession> NewAccelSession(const DeviceFactoryRegistry* registry,
                                               int accel_devices,
                                               const std::string& graph = kGraph) {
  SessionOptions o;
  o.device_factories = registry;
  (*o.config.mutable_device_count())["TEST_ACCEL"] = accel_devices;
  auto s = DirectSession::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  absl::Status c = (*s)->Create(ParseGraph(graph));
  EXPECT_TRUE(c.ok()) << c;
  return std::move(*s);
}

TEST(TestAccelDeviceTest, UnrequestedNodesRunOnTheAcceleratorWithTheCpuResults) {
  auto registry = Registry();
  auto cpu = NewAccelSession(registry.get(), 0);
  auto accel = NewAccelSession(registry.get(), 2);
  ASSERT_TRUE(cpu && accel);
  Ran c = RunGraph(cpu.get());
  Ran a = RunGraph(accel.get());
  ASSERT_EQ(c.out.size(), 5u);
  ASSERT_EQ(a.out.size(), 5u);
  // x @ w = [[2, 4], [-1, 18]]; Relu; Sum = 24.
  EXPECT_EQ(c.out[1].flat<float>()[0], 2.0f);
  EXPECT_EQ(c.out[1].flat<float>()[2], 0.0f);
  EXPECT_EQ(c.out[2].scalar<float>(), 24.0f);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a.out[0].flat<float>()[i], c.out[0].flat<float>()[i]) << i;
    EXPECT_EQ(a.out[1].flat<float>()[i], c.out[1].flat<float>()[i]) << i;
  }
  EXPECT_EQ(a.out[2].scalar<float>(), 24.0f);
  EXPECT_EQ(a.out[3].flat<int32_t>()[0], 2);
  EXPECT_EQ(a.out[3].flat<int32_t>()[1], 2);
  EXPECT_EQ(a.out[4].scalar<std::string>(), "hi");
  for (const Tensor& t : a.out) EXPECT_EQ(t.memory_space(), nullptr);

  const std::string accel0 = "/job:localhost/replica:0/task:0/device:TEST_ACCEL:0";
  const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
  EXPECT_EQ(a.device_of["mm"], accel0);
  EXPECT_EQ(a.device_of["y"], accel0);
  EXPECT_EQ(a.device_of["s"], accel0);
  EXPECT_EQ(a.device_of["shape"], accel0);
  EXPECT_EQ(a.device_of["str"], cpu0);  // no string kernel on TEST_ACCEL
  EXPECT_EQ(c.device_of["mm"], cpu0);
  // x comes in; mm, y, s and shape go out to the fetches on the CPU.
  EXPECT_EQ(a.recvs_on_accel, 1);
  EXPECT_EQ(a.sends_on_accel, 4);

  Device* d0 = accel->device_mgr().devices()[1].get();
  auto st = GetTestAccelStats(d0);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->host_to_device_copies, 1);  // x
  EXPECT_EQ(st->device_to_host_copies, 3);  // mm, y, s (shape is HostMemory)
  EXPECT_EQ(st->kernels_run, 6);            // w, mm, y, axes, s, shape
  // Nothing outlives the step (the executors let go of their last
  // tensors just after the step's result is out).
  for (int i = 0; i < 500 && GetTestAccelStats(d0)->bytes_in_use != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(GetTestAccelStats(d0)->bytes_in_use, 0);
  EXPECT_GT(st->peak_bytes_in_use, 0);
  EXPECT_EQ(GetTestAccelStats(accel->device_mgr().devices()[2].get())->kernels_run, 0);
}

TEST(TestAccelDeviceTest, ExplicitDevicesAndSoftPlacement) {
  auto registry = Registry();
  // mm asks for the second accelerator; a string op asks for one too.
  std::string graph = kGraph;
  graph.replace(graph.find("input: 'x' input: 'w'"), 0, "device: '/device:TEST_ACCEL:1' ");
  graph.replace(graph.find("op: 'Const' attr { key: 'dtype' value { type: DT_STRING"), 0,
                "device: '/device:TEST_ACCEL:0' ");
  auto s = NewAccelSession(registry.get(), 2, graph);
  ASSERT_TRUE(s);
  tensorflow::RunOptions ro;
  auto out = s->Run(ro, {{"x", Tensor(DT_FLOAT, TensorShape({2, 2}))}}, {"str"}, {}, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("node 'str' (op Const): no kernel for device type TEST_ACCEL"));

  SessionOptions o;
  o.device_factories = registry.get();
  o.config.set_allow_soft_placement(true);
  o.config.set_log_device_placement(true);
  auto soft = DirectSession::Create(o);
  ASSERT_TRUE(soft.ok()) << soft.status();
  ASSERT_TRUE((*soft)->Create(ParseGraph(graph)).ok());
  testing::internal::CaptureStderr();
  Ran r = RunGraph(soft->get());
  std::string log = testing::internal::GetCapturedStderr();
  ASSERT_EQ(r.out.size(), 5u);
  EXPECT_EQ(r.out[2].scalar<float>(), 24.0f);
  EXPECT_EQ(r.device_of["mm"], "/job:localhost/replica:0/task:0/device:TEST_ACCEL:1");
  EXPECT_EQ(r.device_of["y"], "/job:localhost/replica:0/task:0/device:TEST_ACCEL:0");
  EXPECT_EQ(r.device_of["str"], "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_THAT(log, HasSubstr("mm (MatMul): /job:localhost/replica:0/task:0/device:TEST_ACCEL:1\n"));
  EXPECT_THAT(log, HasSubstr("str (Const): /job:localhost/replica:0/task:0/device:CPU:0 "
                             "(soft placement: node 'str' (op Const): no kernel for device type "
                             "TEST_ACCEL"));
}

TEST(TestAccelDeviceTest, OutOfDeviceMemoryNamesTheNodeAndDevice) {
  // x's _Recv and w need 16 bytes each, both at once (for mm), axes 8.
  for (int64_t limit : {12, 20}) {
    TestAccelOptions small;
    small.memory_limit = limit;
    auto registry = Registry(small);
    auto s = NewAccelSession(registry.get(), 1);
    ASSERT_TRUE(s);
    auto out = s->Run({{"x", Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}))}}, {"s"});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
    const std::string msg(out.status().message());
    EXPECT_THAT(msg, ::testing::StartsWith("node '"));
    EXPECT_THAT(
        msg, HasSubstr("out of memory on /job:localhost/replica:0/task:0/device:TEST_ACCEL:0: "));
    EXPECT_THAT(msg, HasSubstr(limit == 12 ? "float [2,2] is more than the device's 12 bytes"
                                           : " of 20 are in use"));
  }
}

TEST(TestAccelDeviceTest, ACpuKernelNeverReadsAcceleratorMemory) {
  // A tensor in TEST_ACCEL memory fed straight to a CPU kernel: the
  // executor reports the missing copy instead of computing on its bytes.
  auto registry = Registry();
  auto s = NewAccelSession(registry.get(), 1, R"(
node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'n' op: 'Neg' input: 'x' device: '/device:CPU:0' attr { key: 'T' value { type: DT_FLOAT } } }
)");
  ASSERT_TRUE(s);
  Accelerator* acc = s->device_mgr().devices()[1]->accelerator();
  auto d = acc->AllocateDevice(DT_FLOAT, TensorShape({2}), "");
  ASSERT_TRUE(d.ok());
  auto out = s->Run({{"x", *d}}, {"n"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(out.status().message(),
              HasSubstr("node 'n' (op Neg) on /job:localhost/replica:0/task:0/device:CPU:0: "
                        "input 0 lies in the memory of "
                        "/job:localhost/replica:0/task:0/device:TEST_ACCEL:0"));
}

// A value received for a HostMemory input (Sum's axes) stays on the host;
// the data goes into device memory.
TEST(TestAccelDeviceTest, HostMemoryInputsAreReceivedOnTheHost) {
  auto registry = Registry();
  auto s = NewAccelSession(registry.get(), 1, R"(
node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'axes' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }
node { name: 's' op: 'Sum' input: 'x' input: 'axes' attr { key: 'T' value { type: DT_FLOAT } }
       attr { key: 'Tidx' value { type: DT_INT32 } } }
)");
  ASSERT_TRUE(s);
  tensorflow::RunOptions ro;
  ro.set_output_partition_graphs(true);
  tensorflow::RunMetadata md;
  auto out = s->Run(ro,
                    {{"x", Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}))},
                     {"axes", Tensor::FromVector<int32_t>({1})}},
                    {"s"}, {}, &md);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].flat<float>()[0], 3.0f);
  EXPECT_EQ((*out)[0].flat<float>()[1], 7.0f);
  std::map<std::string, bool> recv_on_host;  // by the received tensor's name
  for (const auto& g : md.partition_graphs()) {
    for (const auto& n : g.node()) {
      if (n.op() != "_Recv" || !absl::StrContains(n.device(), "TEST_ACCEL")) continue;
      auto it = n.attr().find("_host_memory");
      recv_on_host[n.attr().at("tensor_name").s()] = it != n.attr().end() && it->second.b();
    }
  }
  ASSERT_EQ(recv_on_host.size(), 2u);
  int host = 0;
  for (const auto& [name, on_host] : recv_on_host) host += on_host;
  EXPECT_EQ(host, 1);
  EXPECT_EQ(GetTestAccelStats(s->device_mgr().devices()[1].get())->host_to_device_copies, 1);
}

// A resource variable on the accelerator: its handle and metadata on the
// host, its tensor in the device's memory across steps (a step that only
// reads it copies nothing to the device). A variable whose colocation
// group has an op without an accelerator kernel (here an update) stays on
// the CPU with the whole group.
TEST(TestAccelDeviceTest, VariablesLiveInAcceleratorMemory) {
  const std::string graph = R"(
node { name: 'v' op: 'VarHandleOp' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'shape' value { shape { dim { size: 2 } } } }
       attr { key: 'shared_name' value { s: 'v' } } }
node { name: 'init_value' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }
         float_val: 1.5 float_val: -2 } } } }
node { name: 'init' op: 'AssignVariableOp' input: 'v' input: 'init_value'
       attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'read' op: 'ReadVariableOp' input: 'v' attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'sq' op: 'Square' input: 'read' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'inited' op: 'VarIsInitializedOp' input: 'v' }
node { name: 'shape' op: 'VariableShape' input: 'v' attr { key: 'out_type' value { type: DT_INT32 } } }
)";
  const std::string accel0 = "/job:localhost/replica:0/task:0/device:TEST_ACCEL:0";
  const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
  auto registry = Registry();
  for (bool with_update : {false, true}) {
    SCOPED_TRACE(with_update ? "with an update op" : "assign and read only");
    const std::string g = graph + (with_update ? R"(
node { name: 'lr' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }
       attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 0.5 } } } }
node { name: 'update' op: 'ResourceApplyGradientDescent' input: 'v' input: 'lr' input: 'init_value'
       attr { key: 'T' value { type: DT_FLOAT } } }
)"
                                               : "");
    auto s = NewAccelSession(registry.get(), 1, g);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->Run({}, {}, {"init"}).ok());
    tensorflow::RunOptions ro;
    ro.set_output_partition_graphs(true);
    tensorflow::RunMetadata md;
    auto out = s->Run(ro, {}, {"sq", "inited", "shape"}, {}, &md);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].flat<float>()[0], 2.25f);
    EXPECT_EQ((*out)[0].flat<float>()[1], 4.0f);
    EXPECT_TRUE((*out)[1].scalar<bool>());
    EXPECT_EQ((*out)[2].flat<int32_t>()[0], 2);
    std::map<std::string, std::string> device_of;
    for (const auto& p : md.partition_graphs()) {
      for (const auto& n : p.node()) device_of[n.name()] = n.device();
    }
    const std::string& want = with_update ? cpu0 : accel0;
    for (const char* n : {"v", "read", "inited", "shape"}) EXPECT_EQ(device_of[n], want) << n;
    EXPECT_EQ(device_of["sq"], accel0);
    Device* accel = s->device_mgr().devices()[1].get();
    const TestAccelMemoryStats before = *GetTestAccelStats(accel);
    ASSERT_TRUE(s->Run({}, {"sq"}).ok());
    const TestAccelMemoryStats after = *GetTestAccelStats(accel);
    // Read on the device: nothing crosses to it. On the CPU: the read does.
    EXPECT_EQ(after.host_to_device_copies - before.host_to_device_copies, with_update ? 1 : 0);
    EXPECT_EQ(after.device_to_host_copies - before.device_to_host_copies, 1);  // sq
    if (with_update) {
      ASSERT_TRUE(s->Run({}, {}, {"update"}).ok());
      auto v = s->Run({}, {"read"});
      ASSERT_TRUE(v.ok()) << v.status();
      EXPECT_EQ(v->at(0).flat<float>()[0], 0.75f);  // 1.5 - 0.5 * 1.5
    } else {
      // The variable's bytes are held in the device's memory.
      EXPECT_GE(after.bytes_in_use, 8);
    }
  }
}

TEST(TestAccelDeviceTest, KernelsAndMemoryTypesFollowTheCpuKernels) {
  const KernelRegistry& kr = DefaultKernelRegistry();
  auto def = [](const std::string& op, DataType t) {
    tensorflow::NodeDef n;
    n.set_name("n");
    n.set_op(op);
    (*n.mutable_attr())["T"].set_type(t);
    return n;
  };
  EXPECT_TRUE(kr.HasKernel(def("MatMul", DT_FLOAT), kDeviceTestAccel));
  EXPECT_FALSE(kr.HasKernel(def("Identity", DT_STRING), kDeviceTestAccel));
  EXPECT_FALSE(kr.HasKernel(def("Pack", DT_FLOAT), kDeviceTestAccel));
  EXPECT_TRUE(kr.HasKernel(def("_Recv", DT_FLOAT), kDeviceTestAccel));
  tensorflow::NodeDef reshape = def("Reshape", DT_FLOAT);
  (*reshape.mutable_attr())["Tshape"].set_type(DT_INT32);
  const OpRegistrationData* reg = DefaultOpRegistry().LookUp("Reshape");
  ASSERT_NE(reg, nullptr);
  const tensorflow::OpDef* op = &reg->op_def;
  auto mt = kr.GetMemoryTypes(reshape, *op, kDeviceTestAccel, [](DataType) { return true; });
  ASSERT_TRUE(mt.ok()) << mt.status();
  EXPECT_THAT(mt->input_on_host, ::testing::ElementsAre(false, true));
  EXPECT_THAT(mt->output_on_host, ::testing::ElementsAre(false));
  mt = kr.GetMemoryTypes(reshape, *op, kDeviceCpu, [](DataType) { return true; });
  ASSERT_TRUE(mt.ok()) << mt.status();
  EXPECT_THAT(mt->input_on_host, ::testing::ElementsAre(true, true));
}

}  // namespace
}  // namespace graphrun
