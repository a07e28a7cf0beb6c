#include "runtime/collective_local.h"

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "kernels/framework/thread_pool.h"
#include "runtime/session.h"
#include "tests/sanitizers.h"
#include "util/notification.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

std::string Cpu(int i) { return "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i); }

// One member's outcome.
struct Result {
  Notification done;
  absl::StatusOr<Tensor> value = absl::UnknownError("not run");
};

CollectiveArgs Args(CollectiveType type, int device, int group_size = 2, int32_t group = 1,
                    int32_t instance = 1) {
  CollectiveArgs a;
  a.type = type;
  a.group_size = group_size;
  a.group_key = group;
  a.instance_key = instance;
  a.dtype = DT_FLOAT;
  a.device = Cpu(device);
  a.node = "op" + std::to_string(device);
  return a;
}

void Start(InProcessCollectives& c, const CollectiveArgs& a, const Tensor& in, Result* r,
           CancellationManager* cm = nullptr) {
  c.Run(a, in, cm, [r](absl::StatusOr<Tensor> v) {
    r->value = std::move(v);
    r->done.Notify();
  });
}

bool Wait(Result& r) { return r.done.WaitForNotificationWithTimeout(absl::Seconds(30)); }

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.base<float>(), t.base<float>() + t.NumElements());
}

class CollectiveLocalTest : public ::testing::Test {
 protected:
  ThreadPool pool_{"test", 4};
  InProcessCollectives c_{[this](std::function<void()> fn) { pool_.Schedule(std::move(fn)); }};
};

// 4 members reduce 1M random floats in parallel chunks, arriving from
// 4 threads: every member gets the same bytes, equal to rank-ordered
// (device-name-ordered) summation, then the mean.
TEST_F(CollectiveLocalTest, ReduceMeanIsBitIdenticalOnEveryMember) {
  constexpr int kMembers = 4;
  constexpr int64_t kN = 1 << 20;
  c_.set_chunk_elements(kN / 7);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  std::vector<Tensor> inputs;
  for (int i = 0; i < kMembers; ++i) {
    Tensor t(DT_FLOAT, TensorShape({kN}));
    for (int64_t k = 0; k < kN; ++k) t.base<float>()[k] = dist(rng);
    inputs.push_back(t);
  }
  Result r[kMembers];
  std::vector<std::thread> threads;
  for (int i = kMembers - 1; i >= 0; --i) {
    threads.emplace_back([&, i] {
      CollectiveArgs a = Args(CollectiveType::kReduce, i, kMembers);
      a.final_op = CollectiveFinal::kDiv;
      Start(c_, a, inputs[i], &r[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kMembers; ++i) {
    ASSERT_TRUE(Wait(r[i]));
    ASSERT_TRUE(r[i].value.ok()) << r[i].value.status();
    ASSERT_EQ(r[i].value->shape(), TensorShape({kN}));
    EXPECT_EQ(std::memcmp(r[i].value->raw_data(), r[0].value->raw_data(), kN * sizeof(float)), 0)
        << "member " << i;
    EXPECT_FALSE(r[i].value->SharesBufferWith(inputs[i]));
    if (i > 0) {
      EXPECT_FALSE(r[i].value->SharesBufferWith(*r[0].value));
    }
  }
  for (int64_t k = 0; k < kN; k += 4099) {
    float expect = inputs[0].base<float>()[k];
    for (int i = 1; i < kMembers; ++i) expect += inputs[i].base<float>()[k];
    expect /= kMembers;
    ASSERT_EQ(r[2].value->base<float>()[k], expect) << "element " << k;
  }
}

TEST_F(CollectiveLocalTest, MergeOpsOnInt32) {
  const std::vector<std::pair<CollectiveMerge, std::vector<int32_t>>> cases = {
      {CollectiveMerge::kAdd, {5, -1, 9}},
      {CollectiveMerge::kMul, {6, -2, 20}},
      {CollectiveMerge::kMin, {2, -2, 4}},
      {CollectiveMerge::kMax, {3, 1, 5}}};
  int instance = 0;
  for (const auto& [op, expect] : cases) {
    Result r[2];
    CollectiveArgs a0 = Args(CollectiveType::kReduce, 0, 2, 1, ++instance);
    CollectiveArgs a1 = Args(CollectiveType::kReduce, 1, 2, 1, instance);
    a0.dtype = a1.dtype = DT_INT32;
    a0.merge_op = a1.merge_op = op;
    Start(c_, a0, Tensor::FromVector<int32_t>({2, -2, 4}), &r[0]);
    Start(c_, a1, Tensor::FromVector<int32_t>({3, 1, 5}), &r[1]);
    for (Result& x : r) {
      ASSERT_TRUE(Wait(x));
      ASSERT_TRUE(x.value.ok()) << x.value.status();
      EXPECT_EQ(std::vector<int32_t>(x.value->base<int32_t>(), x.value->base<int32_t>() + 3),
                expect);
    }
  }
  // Div truncates for integers, as TensorFlow's.
  Result r[2];
  CollectiveArgs a0 = Args(CollectiveType::kReduce, 0, 2, 1, 99);
  CollectiveArgs a1 = Args(CollectiveType::kReduce, 1, 2, 1, 99);
  a0.dtype = a1.dtype = DT_INT32;
  a0.final_op = a1.final_op = CollectiveFinal::kDiv;
  Start(c_, a0, Tensor::FromVector<int32_t>({3}), &r[0]);
  Start(c_, a1, Tensor::FromVector<int32_t>({4}), &r[1]);
  ASSERT_TRUE(Wait(r[1]));
  ASSERT_TRUE(r[1].value.ok());
  EXPECT_EQ(r[1].value->base<int32_t>()[0], 3);
}

// The n-th run of an instance on each device meets the n-th on the others.
TEST_F(CollectiveLocalTest, RepeatedRunsOfOneInstanceMeetInOrder) {
  Result r0[3], r1[3];
  for (int run = 0; run < 3; ++run) {
    Start(c_, Args(CollectiveType::kReduce, 0), Tensor::FromVector<float>({1.0f * run}), &r0[run]);
  }
  for (int run = 0; run < 3; ++run) {
    Start(c_, Args(CollectiveType::kReduce, 1), Tensor::FromVector<float>({10.0f * run}), &r1[run]);
  }
  for (int run = 0; run < 3; ++run) {
    ASSERT_TRUE(Wait(r0[run]) && Wait(r1[run]));
    ASSERT_TRUE(r0[run].value.ok() && r1[run].value.ok());
    EXPECT_EQ(Values(*r0[run].value), std::vector<float>{11.0f * run});
    EXPECT_EQ(Values(*r1[run].value), std::vector<float>{11.0f * run});
  }
}

// A step in which only one member ran (its other replica failed before
// its collective) does not shift the pairing of the next step's runs.
TEST_F(CollectiveLocalTest, AFailedStepDoesNotShiftTheNextOne) {
  CancellationManager step1;
  Result lone;
  CollectiveArgs a = Args(CollectiveType::kReduce, 0, 2, 11);
  a.step_id = 1;
  Start(c_, a, Tensor::FromVector<float>({100}), &lone, &step1);
  step1.StartCancel();
  ASSERT_TRUE(Wait(lone));
  EXPECT_EQ(lone.value.status().code(), absl::StatusCode::kCancelled);
  Result r0, r1;
  CollectiveArgs b0 = Args(CollectiveType::kReduce, 0, 2, 11);
  CollectiveArgs b1 = Args(CollectiveType::kReduce, 1, 2, 11);
  b0.step_id = b1.step_id = 2;
  Start(c_, b0, Tensor::FromVector<float>({1}), &r0);
  Start(c_, b1, Tensor::FromVector<float>({2}), &r1);
  ASSERT_TRUE(Wait(r0) && Wait(r1));
  ASSERT_TRUE(r0.value.ok() && r1.value.ok()) << r0.value.status() << " " << r1.value.status();
  EXPECT_EQ(Values(*r0.value), std::vector<float>{3});
  EXPECT_EQ(Values(*r1.value), std::vector<float>{3});
}

// Gather concatenates in device-name order, whatever the arrival order.
TEST_F(CollectiveLocalTest, GatherConcatenatesInRankOrder) {
  Result r[3];
  Start(c_, Args(CollectiveType::kGather, 2, 3),
        Tensor::FromVector<float>({20, 21}, TensorShape({1, 2})), &r[2]);
  Start(c_, Args(CollectiveType::kGather, 0, 3),
        Tensor::FromVector<float>({0, 1, 2, 3}, TensorShape({2, 2})), &r[0]);
  Start(c_, Args(CollectiveType::kGather, 1, 3),
        Tensor::FromVector<float>({10, 11}, TensorShape({1, 2})), &r[1]);
  for (Result& x : r) {
    ASSERT_TRUE(Wait(x));
    ASSERT_TRUE(x.value.ok()) << x.value.status();
    EXPECT_EQ(x.value->shape(), TensorShape({4, 2}));
    EXPECT_EQ(Values(*x.value), (std::vector<float>{0, 1, 2, 3, 10, 11, 20, 21}));
  }
}

TEST_F(CollectiveLocalTest, BroadcastReachesEveryReceiver) {
  Result r[3];
  CollectiveArgs recv1 = Args(CollectiveType::kBroadcastRecv, 1, 3);
  CollectiveArgs recv2 = Args(CollectiveType::kBroadcastRecv, 2, 3);
  recv1.shape = recv2.shape = TensorShape({2});
  Start(c_, recv1, Tensor(), &r[1]);
  Start(c_, recv2, Tensor(), &r[2]);
  Start(c_, Args(CollectiveType::kBroadcastSend, 0, 3), Tensor::FromVector<float>({4, 5}), &r[0]);
  for (Result& x : r) {
    ASSERT_TRUE(Wait(x));
    ASSERT_TRUE(x.value.ok()) << x.value.status();
    EXPECT_EQ(Values(*x.value), (std::vector<float>{4, 5}));
  }
}

TEST_F(CollectiveLocalTest, WrongGroupSizeIsInvalidArgumentNamingTheNode) {
  Result r0, r1;
  Start(c_, Args(CollectiveType::kReduce, 0, 2, 5), Tensor::FromVector<float>({1}), &r0);
  Start(c_, Args(CollectiveType::kReduce, 1, 3, 5), Tensor::FromVector<float>({1}), &r1);
  ASSERT_TRUE(Wait(r1));
  EXPECT_EQ(r1.value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r1.value.status().message()),
              HasSubstr("(node 'op1' on " + Cpu(1) +
                        "): group 5 has group_size 2 (set by its first member) but this member "
                        "says 3"));
  // A right member completes the run (nothing may stay pending past the test).
  Result r2;
  Start(c_, Args(CollectiveType::kReduce, 1, 2, 5), Tensor::FromVector<float>({2}), &r2);
  ASSERT_TRUE(Wait(r0) && Wait(r2));
  ASSERT_TRUE(r0.value.ok()) << r0.value.status();
  EXPECT_EQ(Values(*r0.value), std::vector<float>{3});
}

TEST_F(CollectiveLocalTest, DeviceBeyondACompleteGroupIsInvalidArgument) {
  Result r0, r1, r2;
  Start(c_, Args(CollectiveType::kReduce, 0, 2, 6), Tensor::FromVector<float>({1}), &r0);
  Start(c_, Args(CollectiveType::kReduce, 1, 2, 6), Tensor::FromVector<float>({1}), &r1);
  ASSERT_TRUE(Wait(r0) && Wait(r1));
  Start(c_, Args(CollectiveType::kReduce, 2, 2, 6), Tensor::FromVector<float>({1}), &r2);
  ASSERT_TRUE(Wait(r2));
  EXPECT_EQ(r2.value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r2.value.status().message()),
              HasSubstr("device " + Cpu(2) +
                        " is not a member of group 6, which is complete "
                        "with 2 devices"));
}

TEST_F(CollectiveLocalTest, MembersThatDisagreeAllFailNamingBoth) {
  Result r0, r1;
  CollectiveArgs a1 = Args(CollectiveType::kReduce, 1, 2, 7);
  a1.dtype = DT_INT32;
  Start(c_, Args(CollectiveType::kReduce, 0, 2, 7), Tensor::FromVector<float>({1}), &r0);
  Start(c_, a1, Tensor::FromVector<int32_t>({1}), &r1);
  for (Result* x : {&r0, &r1}) {
    ASSERT_TRUE(Wait(*x));
    EXPECT_EQ(x->value.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(x->value.status().message()),
                HasSubstr("(node 'op1' on " + Cpu(1) +
                          "): its dtype int32 differs from node "
                          "'op0' on " +
                          Cpu(0) + "'s float"));
  }
  Result s0, s1;
  Start(c_, Args(CollectiveType::kReduce, 0, 2, 8), Tensor::FromVector<float>({1, 2}), &s0);
  Start(c_, Args(CollectiveType::kReduce, 1, 2, 8), Tensor::FromVector<float>({1}), &s1);
  ASSERT_TRUE(Wait(s0));
  EXPECT_EQ(s0.value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s0.value.status().message()), HasSubstr("its shape [1] differs"));
}

TEST_F(CollectiveLocalTest, MissingMemberTimesOutNamingWhoArrived) {
  Result r0;
  CollectiveArgs a = Args(CollectiveType::kReduce, 0, 2, 9);
  a.timeout_seconds = 0.2;
  const auto start = std::chrono::steady_clock::now();
  Start(c_, a, Tensor::FromVector<float>({1}), &r0);
  ASSERT_TRUE(Wait(r0));
  if (!kSanitized) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  }
  EXPECT_EQ(r0.value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(r0.value.status().message()),
              HasSubstr("collective reduce of group 9 instance 1 (node 'op0' on " + Cpu(0) +
                        "): timed out after 0.2 s with 1 of 2 members arrived (" + Cpu(0) + ")"));
  // The late member learns the same.
  Result r1;
  Start(c_, Args(CollectiveType::kReduce, 1, 2, 9), Tensor::FromVector<float>({1}), &r1);
  ASSERT_TRUE(Wait(r1));
  EXPECT_EQ(r1.value.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(CollectiveLocalTest, CancelledStepFailsThePendingMember) {
  CancellationManager cm;
  Result r0;
  Start(c_, Args(CollectiveType::kReduce, 0, 2, 10), Tensor::FromVector<float>({1}), &r0, &cm);
  cm.StartCancel();
  ASSERT_TRUE(Wait(r0));
  EXPECT_EQ(r0.value.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(r0.value.status().message()),
              HasSubstr("cancelled with 1 of 2 members arrived"));
}

// The ops through a session: two CPU devices each all-reduce their own
// constant; both fetches are the mean.
TEST(CollectiveOpsSessionTest, CollectiveReduceV2AcrossTwoDevices) {
  auto member = [](int d, float v) {
    const std::string i = std::to_string(d);
    return absl::StrCat(
        R"(node { name: "x)", i, R"(" op: "Const" device: "/device:CPU:)", i,
        R"(" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor {
           dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: )",
        v, " float_val: ", v * 2,
        R"( } } } }
        node { name: "r)",
        i, R"(" op: "CollectiveReduceV2" device: "/device:CPU:)", i, R"(" input: "x)", i,
        R"(" input: "size" input: "key" input: "instance"
           attr { key: "T" value { type: DT_FLOAT } }
           attr { key: "merge_op" value { s: "Add" } } attr { key: "final_op" value { s: "Div" } }
           attr { key: "timeout_seconds" value { f: 30 } } })");
  };
  const std::string graph = absl::StrCat(
      R"(node { name: "size" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
             attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 2 } } } }
         node { name: "key" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
             attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
         node { name: "instance" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
             attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 3 } } } })",
      member(0, 1.0f), member(1, 3.0f));
  SessionOptions opts;
  (*opts.config.mutable_device_count())["CPU"] = 2;
  auto s = NewSession(opts);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Create(test::ParseGraph(graph)).ok());
  for (int step = 0; step < 3; ++step) {
    auto out = (*s)->Run({}, {"r0", "r1"}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values((*out)[0]), (std::vector<float>{2, 4}));
    EXPECT_EQ(Values((*out)[1]), (std::vector<float>{2, 4}));
  }
}

}  // namespace
}  // namespace graphrun
