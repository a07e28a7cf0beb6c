// Collectives in device memory (the path NCCL takes between GPUs), driven
// by TEST_ACCEL with a device backend of the test's own: the collective
// kernels hand their device tensors to the session's in-process executor,
// which meets the members, validates them and runs the round through the
// backend; a group that mixes such members with host-memory ones is
// InvalidArgument, and communication_hint='ring' sends every member
// through host memory instead.
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "kernels/framework/collective.h"
#include "runtime/device_factory.h"
#include "runtime/direct_session.h"
#include "runtime/test_accel_device.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

// Runs float Add/Div reductions as a device transport would, through the
// accelerators' own copies: every input to the host, the sum in rank
// order (then the mean), and the result into a new tensor in each
// member's device memory.
class CopyingBackend : public DeviceCollectiveBackend {
 public:
  const std::string& name() const override { return name_; }

  void RunRound(std::vector<Member> members) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++rounds_;
      for (const Member& m : members) {
        devices_.push_back(m.args->device);
        if (m.input->memory_space() == nullptr) ++host_inputs_;
      }
    }
    const CollectiveArgs& a = *members[0].args;
    if (a.type != CollectiveType::kReduce || a.dtype != DT_FLOAT ||
        a.merge_op != CollectiveMerge::kAdd) {
      for (Member& m : members) m.done(absl::UnimplementedError("only float Add reductions"));
      return;
    }
    struct State {
      std::mutex mu;
      std::vector<Member> members;
      std::vector<Tensor> host;
      int pending;
      absl::Status status;
    };
    auto st = std::make_shared<State>();
    st->pending = static_cast<int>(members.size());
    for (const Member& m : members) st->host.emplace_back(DT_FLOAT, m.input->shape());
    st->members = std::move(members);
    for (size_t i = 0; i < st->members.size(); ++i) {
      const Member& m = st->members[i];
      m.args->accelerator->CopyDeviceToHost(*m.input, st->host[i], [st](const absl::Status& s) {
        {
          std::lock_guard<std::mutex> l(st->mu);
          if (!s.ok() && st->status.ok()) st->status = s;
          if (--st->pending > 0) return;
        }
        Finish(st);
      });
    }
  }

  int rounds() {
    std::lock_guard<std::mutex> l(mu_);
    return rounds_;
  }
  int host_inputs() {
    std::lock_guard<std::mutex> l(mu_);
    return host_inputs_;
  }
  std::vector<std::string> devices() {
    std::lock_guard<std::mutex> l(mu_);
    return devices_;
  }

 private:
  template <typename State>
  static void Finish(std::shared_ptr<State> st) {
    if (!st->status.ok()) {
      for (Member& m : st->members) m.done(st->status);
      return;
    }
    Tensor sum(DT_FLOAT, st->host[0].shape());
    const int64_t n = sum.NumElements();
    for (int64_t j = 0; j < n; ++j) {
      float v = 0;
      for (const Tensor& h : st->host) v += h.flat<float>()[j];
      if (st->members[0].args->final_op == CollectiveFinal::kDiv) {
        v /= static_cast<float>(st->host.size());
      }
      sum.flat<float>()[j] = v;
    }
    for (Member& m : st->members) {
      Accelerator* acc = m.args->accelerator;
      absl::StatusOr<Tensor> out = acc->AllocateDevice(DT_FLOAT, sum.shape(), "");
      if (!out.ok()) {
        m.done(out.status());
        continue;
      }
      acc->CopyHostToDevice(sum, *out,
                            [done = std::move(m.done), out = *out, sum](const absl::Status& s) {
                              if (s.ok()) {
                                done(out);
                              } else {
                                done(s);
                              }
                            });
    }
  }

  const std::string name_ = "copying";
  std::mutex mu_;
  int rounds_ = 0;
  int host_inputs_ = 0;
  std::vector<std::string> devices_;
};

// Members on DEV0 and DEV1 each all-reduce (mean) a constant of their own
// device, with communication_hint HINT.
std::string Graph(const std::string& dev0, const std::string& dev1, const std::string& hint) {
  auto member = [&](int i, const std::string& device, float v) {
    const std::string k = std::to_string(i);
    return absl::StrCat(
        R"(node { name: "x)", k, R"(" op: "Const" device: ")", device,
        R"(" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor {
           dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: )",
        v, " float_val: ", v * 2, R"( } } } }
        node { name: "r)",
        k, R"(" op: "CollectiveReduceV2" device: ")", device, R"(" input: "x)", k,
        R"(" input: "size" input: "key" input: "instance"
           attr { key: "T" value { type: DT_FLOAT } }
           attr { key: "communication_hint" value { s: ")",
        hint, R"(" } }
           attr { key: "merge_op" value { s: "Add" } } attr { key: "final_op" value { s: "Div" } }
           attr { key: "timeout_seconds" value { f: 30 } } })");
  };
  auto scalar = [](const std::string& name, int v) {
    return absl::StrCat(
        R"(node { name: ")", name,
        R"(" op: "Const" device: "/device:CPU:0" attr { key: "dtype" value { type: DT_INT32 } }
             attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: )",
        v, " } } } }\n");
  };
  return absl::StrCat(scalar("size", 2), scalar("key", 1), scalar("instance", 3),
                      member(0, dev0, 1.0f), member(1, dev1, 3.0f));
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.base<float>(), t.base<float>() + t.NumElements());
}

class TestAccelCollectiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestAccelOptions o;
    o.collective_backend = &backend_;
    ASSERT_TRUE(registry_.Register(NewCpuDeviceFactory()).ok());
    ASSERT_TRUE(registry_.Register(NewTestAccelDeviceFactory(o)).ok());
  }

  std::unique_ptr<DirectSession> Session(const std::string& graph) {
    SessionOptions o;
    o.device_factories = &registry_;
    (*o.config.mutable_device_count())["TEST_ACCEL"] = 2;
    auto s = DirectSession::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return nullptr;
    absl::Status c = (*s)->Create(test::ParseGraph(graph));
    EXPECT_TRUE(c.ok()) << c;
    return c.ok() ? std::move(*s) : nullptr;
  }

  // The backend outlives the registry's devices.
  CopyingBackend backend_;
  DeviceFactoryRegistry registry_;
};

const char kAccel0[] = "/device:TEST_ACCEL:0";
const char kAccel1[] = "/device:TEST_ACCEL:1";
const char kFullAccel0[] = "/job:localhost/replica:0/task:0/device:TEST_ACCEL:0";
const char kFullAccel1[] = "/job:localhost/replica:0/task:0/device:TEST_ACCEL:1";

TEST_F(TestAccelCollectiveTest, AcceleratorMembersRunThroughTheDeviceBackend) {
  for (const std::string hint : {"auto", "copying"}) {
    const int before = backend_.rounds();
    auto s = Session(Graph(kAccel0, kAccel1, hint));
    ASSERT_NE(s, nullptr);
    for (int step = 0; step < 3; ++step) {
      auto out = s->Run({}, {"r0", "r1"}, {});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Values((*out)[0]), (std::vector<float>{2, 4})) << hint;
      EXPECT_EQ(Values((*out)[1]), (std::vector<float>{2, 4})) << hint;
    }
    // One round a step, its members in rank order, their inputs in device
    // memory.
    EXPECT_EQ(backend_.rounds() - before, 3) << hint;
  }
  EXPECT_EQ(backend_.host_inputs(), 0);
  const std::vector<std::string> devices = backend_.devices();
  ASSERT_EQ(devices.size(), 12u);
  for (size_t i = 0; i < devices.size(); i += 2) {
    EXPECT_EQ(devices[i], kFullAccel0);
    EXPECT_EQ(devices[i + 1], kFullAccel1);
  }
}

// communication_hint='ring' keeps the members in host memory (the
// kernels stage their data through the host), and the backend sees
// nothing.
TEST_F(TestAccelCollectiveTest, ARingHintGoesThroughHostMemory) {
  auto s = Session(Graph(kAccel0, kAccel1, "ring"));
  ASSERT_NE(s, nullptr);
  auto out = s->Run({}, {"r0", "r1"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<float>{2, 4}));
  EXPECT_EQ(Values((*out)[1]), (std::vector<float>{2, 4}));
  EXPECT_EQ(backend_.rounds(), 0);
}

// A CPU member and an accelerator member that would run through the
// backend cannot meet: InvalidArgument naming both and the way out, for
// both members; with 'ring' on both they meet in host memory.
TEST_F(TestAccelCollectiveTest, AGroupMixingBackendAndHostMembersIsInvalidArgument) {
  auto s = Session(Graph("/device:CPU:0", kAccel0, "auto"));
  ASSERT_NE(s, nullptr);
  auto out = s->Run({}, {"r0", "r1"}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(
      out.status().message(),
      HasSubstr(absl::StrCat("collective reduce of group 1 instance 3 (node 'r1' on ", kFullAccel0,
                             "): it runs through copying in device memory but node 'r0' "
                             "on /job:localhost/replica:0/task:0/device:CPU:0 runs "
                             "through host memory; put every member on one kind of "
                             "device, or give every member communication_hint='ring'")));
  EXPECT_EQ(backend_.rounds(), 0);

  auto ring = Session(Graph("/device:CPU:0", kAccel0, "ring"));
  ASSERT_NE(ring, nullptr);
  out = ring->Run({}, {"r0", "r1"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<float>{2, 4}));
  EXPECT_EQ(Values((*out)[1]), (std::vector<float>{2, 4}));
}

// The backend's errors reach every member's step.
TEST_F(TestAccelCollectiveTest, TheBackendsErrorsFailTheStep) {
  const std::string graph =
      absl::StrReplaceAll(Graph(kAccel0, kAccel1, "auto"), {{R"(s: "Add")", R"(s: "Max")"}});
  auto s = Session(graph);
  ASSERT_NE(s, nullptr);
  auto out = s->Run({}, {"r0", "r1"}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("only float Add reductions"));
}

}  // namespace
}  // namespace graphrun
