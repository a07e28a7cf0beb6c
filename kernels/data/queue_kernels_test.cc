// Queue and accumulator kernels: FIFO order, blocking satisfied by another
// thread, cancellation and timeouts of blocked ops, accumulator averaging
// and stale-gradient dropping, for the dense and the sparse accumulator. Step-level cancellation
// through sessions is in tests/distributed/sync_replicas_test.cc.
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "graph/ops/all_ops.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "kernels/kernel_test_util.h"
#include "tests/sanitizers.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

Tensor F(std::vector<float> v) { return Tensor::FromVector<float>(v); }
Tensor I32(int32_t v) { return Tensor::Scalar<int32_t>(v); }
Tensor I64(int64_t v) { return Tensor::Scalar<int64_t>(v); }

tensorflow::AttrValue Types(std::vector<DataType> ts) {
  tensorflow::AttrValue v;
  for (DataType t : ts) v.mutable_list()->add_type(t);
  return v;
}

// One async kernel invocation whose cancellation manager the test owns.
// Finished() tells whether `done` ran; Wait() blocks for it (bounded).
class AsyncRun {
 public:
  AsyncRun(std::shared_ptr<TestCpuDevice> device, tensorflow::NodeDef def,
           std::vector<Tensor> inputs)
      : device_(std::move(device)), def_(std::move(def)) {
    for (Tensor& t : inputs) inputs_.push_back(TensorValue{std::move(t), nullptr});
  }
  // Inputs that may be refs.
  AsyncRun(std::shared_ptr<TestCpuDevice> device, tensorflow::NodeDef def,
           std::vector<TensorValue> inputs)
      : device_(std::move(device)), def_(std::move(def)), inputs_(std::move(inputs)) {}
  ~AsyncRun() {
    if (started_ && !Finished()) {
      cm_.StartCancel();
      Wait();
    }
  }

  absl::Status Start() {
    const OpRegistry& ops = DefaultOpRegistry();
    GR_ASSIGN_OR_RETURN(const OpRegistrationData* reg, ops.LookUpOrError(def_.op()));
    AddDefaultsToNodeDef(reg->op_def, &def_);
    GR_RETURN_IF_ERROR(ValidateNodeDef(def_, reg->op_def));
    DataTypeVector in, out;
    GR_RETURN_IF_ERROR(InOutTypesForNode(def_, reg->op_def, &in, &out));
    GR_ASSIGN_OR_RETURN(
        kernel_, DefaultKernelRegistry().CreateKernel(def_, reg->op_def, in, out, device_.get()));
    if (kernel_->AsAsync() == nullptr) return absl::InternalError("not an async kernel");
    params_.device = device_.get();
    params_.op_kernel = kernel_.get();
    params_.inputs = inputs_.data();
    params_.num_inputs = static_cast<int>(inputs_.size());
    params_.cancellation_manager = &cm_;
    params_.runner = [](std::function<void()> fn) { fn(); };
    ctx_ = std::make_unique<OpKernelContext>(&params_);
    started_ = true;
    kernel_->AsAsync()->ComputeAsync(ctx_.get(), [this](absl::Status s) {
      status_ = std::move(s);
      done_.set_value();
    });
    return absl::OkStatus();
  }
  bool Finished() {
    return future_.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
  }
  // Waits up to 10 s; false on timeout.
  bool Wait() { return future_.wait_for(std::chrono::seconds(10)) == std::future_status::ready; }
  const absl::Status& status() const { return status_; }
  Tensor output(int i) { return (*ctx_->mutable_outputs())[i].tensor; }
  CancellationManager& cm() { return cm_; }

 private:
  std::shared_ptr<TestCpuDevice> device_;
  tensorflow::NodeDef def_;
  std::vector<TensorValue> inputs_;
  std::unique_ptr<OpKernel> kernel_;
  OpKernelContext::Params params_;
  std::unique_ptr<OpKernelContext> ctx_;
  CancellationManager cm_;
  std::promise<void> done_;
  std::future<void> future_ = done_.get_future();
  absl::Status status_;
  bool started_ = false;
};

class QueueTest : public ::testing::Test {
 protected:
  // FIFOQueueV2 "q" of (float, int32) with the given capacity.
  Tensor MakeQueue(int64_t capacity = -1, const std::string& name = "q",
                   std::vector<DataType> types = {DT_FLOAT, DT_INT32}) {
    OpTester t("FIFOQueueV2", name);
    t.UseDevice(device_).Attr("component_types", Types(types)).Attr("capacity", capacity);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0] : Tensor();
  }
  absl::Status Enqueue(const Tensor& h, Tensor a, int32_t b) {
    OpTester t("QueueEnqueueV2");
    t.UseDevice(device_).Attr("Tcomponents", Types({DT_FLOAT, DT_INT32}));
    t.Input(h).Input(std::move(a)).Input(I32(b));
    return t.Run().status();
  }
  absl::StatusOr<std::vector<Tensor>> Dequeue(const Tensor& h) {
    OpTester t("QueueDequeueV2");
    t.UseDevice(device_).Attr("component_types", Types({DT_FLOAT, DT_INT32})).Input(h);
    return t.Run();
  }
  int32_t Size(const Tensor& h) {
    OpTester t("QueueSizeV2");
    t.UseDevice(device_).Input(h);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0].scalar<int32_t>() : -1;
  }
  absl::Status Close(const Tensor& h, bool cancel_pending = false) {
    OpTester t("QueueCloseV2");
    t.UseDevice(device_).Attr("cancel_pending_enqueues", cancel_pending).Input(h);
    return t.Run().status();
  }
  tensorflow::NodeDef DequeueDef(int64_t timeout_ms = -1) {
    tensorflow::NodeDef d;
    d.set_name("dequeue");
    d.set_op("QueueDequeueV2");
    (*d.mutable_attr())["component_types"] = Types({DT_FLOAT, DT_INT32});
    (*d.mutable_attr())["timeout_ms"] = MakeAttr(timeout_ms);
    return d;
  }

  std::shared_ptr<TestCpuDevice> device_ = std::make_shared<TestCpuDevice>();
};

TEST_F(QueueTest, FifoOrderAndSize) {
  Tensor h = MakeQueue();
  EXPECT_EQ(h.scalar<ResourceHandle>().type_name, "FIFOQueue");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Enqueue(h, F({1.0f * i, -1.0f * i}), i).ok());
  EXPECT_EQ(Size(h), 5);
  for (int i = 0; i < 5; ++i) {
    auto r = Dequeue(h);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(TensorDiff(F({1.0f * i, -1.0f * i}), (*r)[0]), "");
    EXPECT_EQ((*r)[1].scalar<int32_t>(), i);
  }
  EXPECT_EQ(Size(h), 0);
}

TEST_F(QueueTest, EnqueueManyDequeueMany) {
  Tensor h = MakeQueue();
  OpTester em("QueueEnqueueManyV2");
  em.UseDevice(device_).Attr("Tcomponents", Types({DT_FLOAT, DT_INT32}));
  em.Input(h)
      .Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})))
      .Input(Tensor::FromVector<int32_t>({7, 8, 9}));
  ASSERT_TRUE(em.Run().ok());
  EXPECT_EQ(Size(h), 3);
  auto first = Dequeue(h);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(TensorDiff(F({1, 2}), (*first)[0]), "");
  OpTester dm("QueueDequeueManyV2");
  dm.UseDevice(device_).Attr("component_types", Types({DT_FLOAT, DT_INT32}));
  dm.Input(h).Input(I32(2));
  auto r = dm.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TensorDiff(Tensor::FromVector<float>({3, 4, 5, 6}, TensorShape({2, 2})), (*r)[0]), "");
  EXPECT_EQ(TensorDiff(Tensor::FromVector<int32_t>({8, 9}), (*r)[1]), "");
}

TEST_F(QueueTest, WrongTypesAndBadHandle) {
  Tensor h = MakeQueue();
  OpTester t("QueueEnqueueV2");
  t.UseDevice(device_).Attr("Tcomponents", Types({DT_FLOAT}));
  t.Input(h).Input(F({1}));
  auto r = t.Run();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("component types"));
  // A handle naming a queue that does not exist on this device.
  auto other = std::make_shared<TestCpuDevice>();
  OpTester d("QueueSizeV2");
  d.UseDevice(other).Input(h);
  EXPECT_EQ(d.Run().status().code(), absl::StatusCode::kNotFound);
  // Same shared name, other types.
  OpTester again("FIFOQueueV2", "q");
  again.UseDevice(device_).Attr("component_types", Types({DT_INT64}));
  EXPECT_EQ(again.Run().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(QueueTest, BlockedDequeueIsSatisfiedByLaterEnqueueFromAnotherThread) {
  Tensor h = MakeQueue();
  AsyncRun dq(device_, DequeueDef(), {h});
  ASSERT_TRUE(dq.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(dq.Finished());
  std::thread producer([&] { EXPECT_TRUE(Enqueue(h, F({4.5f}), 42).ok()); });
  ASSERT_TRUE(dq.Wait());
  producer.join();
  ASSERT_TRUE(dq.status().ok()) << dq.status();
  EXPECT_EQ(TensorDiff(F({4.5f}), dq.output(0)), "");
  EXPECT_EQ(dq.output(1).scalar<int32_t>(), 42);
  EXPECT_EQ(Size(h), 0);
}

TEST_F(QueueTest, BlockedDequeuesAreServedInOrder) {
  Tensor h = MakeQueue();
  AsyncRun a(device_, DequeueDef(), {h});
  ASSERT_TRUE(a.Start().ok());
  AsyncRun b(device_, DequeueDef(), {h});
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(Enqueue(h, F({1}), 1).ok());
  ASSERT_TRUE(a.Wait());
  EXPECT_FALSE(b.Finished());
  ASSERT_TRUE(Enqueue(h, F({2}), 2).ok());
  ASSERT_TRUE(b.Wait());
  EXPECT_EQ(a.output(1).scalar<int32_t>(), 1);
  EXPECT_EQ(b.output(1).scalar<int32_t>(), 2);
}

TEST_F(QueueTest, CancellingABlockedDequeueEndsItAndLeavesTheQueueUsable) {
  Tensor h = MakeQueue();
  AsyncRun dq(device_, DequeueDef(), {h});
  ASSERT_TRUE(dq.Start().ok());
  EXPECT_FALSE(dq.Finished());
  dq.cm().StartCancel();
  ASSERT_TRUE(dq.Wait());
  EXPECT_EQ(dq.status().code(), absl::StatusCode::kCancelled) << dq.status();
  EXPECT_THAT(std::string(dq.status().message()), HasSubstr("node 'dequeue'"));
  // The cancelled waiter took nothing.
  ASSERT_TRUE(Enqueue(h, F({1}), 1).ok());
  EXPECT_EQ(Size(h), 1);
  // Already cancelled before it starts: fails at once.
  AsyncRun late(device_, DequeueDef(), {MakeQueue(-1, "empty")});
  late.cm().StartCancel();
  ASSERT_TRUE(late.Start().ok());
  ASSERT_TRUE(late.Wait());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kCancelled);
}

// A session Reset drops the queue's container: a dequeue blocked on it
// could never be served, so it ends with Aborted naming the queue, and the
// queue op makes a new, empty queue under the same name.
TEST_F(QueueTest, DroppingTheContainerAbortsABlockedDequeue) {
  Tensor h = MakeQueue();
  ASSERT_TRUE(Enqueue(h, F({1}), 1).ok());
  ASSERT_TRUE(Dequeue(h).ok());
  AsyncRun dq(device_, DequeueDef(), {h});
  ASSERT_TRUE(dq.Start().ok());
  EXPECT_FALSE(dq.Finished());
  ASSERT_TRUE(Enqueue(h, F({2}), 2).ok());  // served: the queue is empty again
  ASSERT_TRUE(dq.Wait());
  ASSERT_TRUE(dq.status().ok()) << dq.status();
  AsyncRun blocked(device_, DequeueDef(), {h});
  ASSERT_TRUE(blocked.Start().ok());
  ASSERT_TRUE(Enqueue(MakeQueue(-1, "other"), F({3}), 3).ok());
  device_->resource_manager()->Cleanup("sync_replicas");  // another container
  EXPECT_FALSE(blocked.Finished());
  device_->resource_manager()->Cleanup("");  // the default one, the queues'
  ASSERT_TRUE(blocked.Wait());
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kAborted) << blocked.status();
  EXPECT_THAT(std::string(blocked.status().message()), HasSubstr("FIFOQueue q was reset"));
  EXPECT_THAT(std::string(blocked.status().message()), HasSubstr("node 'dequeue'"));
  // A handle made before the reset names a queue that was dropped: Aborted,
  // not NotFound, so a step that began before a Reset can tell.
  auto late = Dequeue(h);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted) << late.status();
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("was reset"));
  // Gone with its container: the op makes a new, empty one.
  EXPECT_EQ(Size(MakeQueue()), 0);
  EXPECT_EQ(Size(MakeQueue(-1, "other")), 0);
}

TEST_F(QueueTest, DequeueTimeoutMs) {
  Tensor h = MakeQueue();
  auto start = std::chrono::steady_clock::now();
  AsyncRun dq(device_, DequeueDef(/*timeout_ms=*/100), {h});
  ASSERT_TRUE(dq.Start().ok());
  ASSERT_TRUE(dq.Wait());
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  EXPECT_EQ(dq.status().code(), absl::StatusCode::kDeadlineExceeded) << dq.status();
  EXPECT_GE(ms, 90);
  if (!kSanitized) {
    EXPECT_LT(ms, 5000);
  }
}

TEST_F(QueueTest, FullQueueBlocksEnqueueUntilDequeue) {
  Tensor h = MakeQueue(/*capacity=*/1);
  ASSERT_TRUE(Enqueue(h, F({1}), 1).ok());
  tensorflow::NodeDef d;
  d.set_name("enqueue");
  d.set_op("QueueEnqueueV2");
  (*d.mutable_attr())["Tcomponents"] = Types({DT_FLOAT, DT_INT32});
  AsyncRun eq(device_, d, {h, F({2}), I32(2)});
  ASSERT_TRUE(eq.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(eq.Finished());
  auto r = Dequeue(h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[1].scalar<int32_t>(), 1);
  ASSERT_TRUE(eq.Wait());
  EXPECT_TRUE(eq.status().ok()) << eq.status();
  EXPECT_EQ(Size(h), 1);
}

TEST_F(QueueTest, CloseDrainsThenOutOfRangeAndWakesBlockedDequeue) {
  Tensor h = MakeQueue();
  ASSERT_TRUE(Enqueue(h, F({1}), 1).ok());
  AsyncRun many(device_,
                [&] {
                  tensorflow::NodeDef d = DequeueDef();
                  d.set_op("QueueDequeueManyV2");
                  return d;
                }(),
                {h, I32(3)});
  ASSERT_TRUE(many.Start().ok());
  EXPECT_FALSE(many.Finished());
  ASSERT_TRUE(Close(h).ok());
  ASSERT_TRUE(many.Wait());
  EXPECT_EQ(many.status().code(), absl::StatusCode::kOutOfRange) << many.status();
  // Enqueue on a closed queue fails; the remaining element drains.
  EXPECT_EQ(Enqueue(h, F({2}), 2).code(), absl::StatusCode::kCancelled);
  auto r = Dequeue(h);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[1].scalar<int32_t>(), 1);
  auto empty = Dequeue(h);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("closed"));
}

TEST_F(QueueTest, CloseCancelsPendingEnqueues) {
  Tensor h = MakeQueue(/*capacity=*/1);
  ASSERT_TRUE(Enqueue(h, F({1}), 1).ok());
  tensorflow::NodeDef d;
  d.set_name("enqueue");
  d.set_op("QueueEnqueueV2");
  (*d.mutable_attr())["Tcomponents"] = Types({DT_FLOAT, DT_INT32});
  AsyncRun eq(device_, d, {h, F({2}), I32(2)});
  ASSERT_TRUE(eq.Start().ok());
  ASSERT_TRUE(Close(h, /*cancel_pending=*/true).ok());
  ASSERT_TRUE(eq.Wait());
  EXPECT_EQ(eq.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(Size(h), 1);
}

class AccumulatorTest : public ::testing::Test {
 protected:
  Tensor Make(const std::string& reduction = "MEAN") {
    OpTester t("ResourceConditionalAccumulator", "acc");
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({2}));
    t.Attr("reduction_type", reduction);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0] : Tensor();
  }
  absl::Status Apply(const Tensor& h, int64_t step, Tensor g) {
    OpTester t("ResourceAccumulatorApplyGradient");
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).Input(h).Input(I64(step)).Input(std::move(g));
    return t.Run().status();
  }
  int32_t Num(const Tensor& h) {
    OpTester t("ResourceAccumulatorNumAccumulated");
    t.UseDevice(device_).Input(h);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0].scalar<int32_t>() : -1;
  }
  absl::StatusOr<Tensor> Take(const Tensor& h, int32_t n) {
    OpTester t("ResourceAccumulatorTakeGradient");
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).Input(h).Input(I32(n));
    GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
    return out[0];
  }
  absl::Status SetStep(const Tensor& h, int64_t step) {
    OpTester t("ResourceAccumulatorSetGlobalStep");
    t.UseDevice(device_).Input(h).Input(I64(step));
    return t.Run().status();
  }
  tensorflow::NodeDef TakeDef() {
    tensorflow::NodeDef d;
    d.set_name("take");
    d.set_op("ResourceAccumulatorTakeGradient");
    (*d.mutable_attr())["dtype"] = MakeAttr(DT_FLOAT);
    return d;
  }

  std::shared_ptr<TestCpuDevice> device_ = std::make_shared<TestCpuDevice>();
};

TEST_F(AccumulatorTest, AveragesResetsAndAdvancesTheGlobalStep) {
  Tensor h = Make();
  ASSERT_TRUE(Apply(h, 0, F({1, 2})).ok());
  ASSERT_TRUE(Apply(h, 0, F({3, -6})).ok());
  ASSERT_TRUE(Apply(h, 5, F({2, 1})).ok());  // a newer step is accepted
  EXPECT_EQ(Num(h), 3);
  auto avg = Take(h, 2);  // returns all accumulated, at least 2
  ASSERT_TRUE(avg.ok()) << avg.status();
  EXPECT_EQ(TensorDiff(F({2, -1}), *avg), "");
  EXPECT_EQ(Num(h), 0);
  // The global step is now 1: step 0 is stale and dropped.
  ASSERT_TRUE(Apply(h, 0, F({100, 100})).ok());
  EXPECT_EQ(Num(h), 0);
  ASSERT_TRUE(Apply(h, 1, F({0.5f, 0.25f})).ok());
  EXPECT_EQ(Num(h), 1);
  auto one = Take(h, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(TensorDiff(F({0.5f, 0.25f}), *one), "");
}

TEST_F(AccumulatorTest, SumReductionAndSetGlobalStep) {
  Tensor h = Make("SUM");
  ASSERT_TRUE(SetStep(h, 10).ok());
  ASSERT_TRUE(Apply(h, 9, F({1, 1})).ok());  // stale
  ASSERT_TRUE(Apply(h, 10, F({1, 2})).ok());
  ASSERT_TRUE(Apply(h, 10, F({3, 4})).ok());
  EXPECT_EQ(Num(h), 2);
  auto sum = Take(h, 2);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(TensorDiff(F({4, 6}), *sum), "");
  // Now at 11.
  ASSERT_TRUE(Apply(h, 10, F({1, 1})).ok());
  EXPECT_EQ(Num(h), 0);
}

TEST_F(AccumulatorTest, BadInput) {
  Tensor h = Make();
  Tensor wrong_shape = F({1, 2, 3});
  absl::Status s = Apply(h, 0, wrong_shape);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("shape"));
  EXPECT_EQ(Take(h, 0).status().code(), absl::StatusCode::kInvalidArgument);
  OpTester again("ResourceConditionalAccumulator", "acc");
  again.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({3}));
  EXPECT_EQ(again.Run().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AccumulatorTest, TakeBlocksUntilEnoughGradientsThenCancels) {
  Tensor h = Make();
  AsyncRun take(device_, TakeDef(), {h, I32(2)});
  ASSERT_TRUE(take.Start().ok());
  ASSERT_TRUE(Apply(h, 0, F({1, 1})).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(take.Finished());
  std::thread other([&] { EXPECT_TRUE(Apply(h, 0, F({3, 5})).ok()); });
  ASSERT_TRUE(take.Wait());
  other.join();
  ASSERT_TRUE(take.status().ok()) << take.status();
  EXPECT_EQ(TensorDiff(F({2, 3}), take.output(0)), "");

  AsyncRun blocked(device_, TakeDef(), {h, I32(1)});
  ASSERT_TRUE(blocked.Start().ok());
  EXPECT_FALSE(blocked.Finished());
  blocked.cm().StartCancel();
  ASSERT_TRUE(blocked.Wait());
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kCancelled);
  // The cancelled take did not advance the global step (1): step 1 counts.
  ASSERT_TRUE(Apply(h, 1, F({1, 1})).ok());
  EXPECT_EQ(Num(h), 1);
}

// SparseConditionalAccumulator, named by a ref to its [container, name].
class SparseAccumulatorTest : public ::testing::Test {
 protected:
  using Handle = std::shared_ptr<Var>;

  Handle Make(const std::string& name = "sacc", PartialShape shape = PartialShape({5, 2}),
              const std::string& reduction = "MEAN") {
    OpTester t("SparseConditionalAccumulator", name);
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("shape", shape);
    t.Attr("reduction_type", reduction).Attr("shared_name", name);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return nullptr;
    EXPECT_EQ(TensorDiff(Tensor::FromVector<std::string>({"localhost", name}), (*r)[0]), "");
    return t.output_values()[0].ref;
  }
  absl::Status Apply(const Handle& h, int64_t step, std::vector<int64_t> indices, Tensor values,
                     std::vector<int64_t> dense_shape = {5, 2}, bool has_known_shape = true) {
    OpTester t("SparseAccumulatorApplyGradient");
    t.UseDevice(device_).Attr("dtype", values.dtype()).Attr("has_known_shape", has_known_shape);
    t.InputRef(h).Input(I64(step)).Input(Tensor::FromVector<int64_t>(indices));
    t.Input(std::move(values)).Input(Tensor::FromVector<int64_t>(dense_shape));
    return t.Run().status();
  }
  int32_t Num(const Handle& h) {
    OpTester t("AccumulatorNumAccumulated");
    t.UseDevice(device_).InputRef(h);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0].scalar<int32_t>() : -1;
  }
  // (indices, values, shape).
  absl::StatusOr<std::vector<Tensor>> Take(const Handle& h, int32_t n) {
    OpTester t("SparseAccumulatorTakeGradient");
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).InputRef(h).Input(I32(n));
    return t.Run();
  }
  absl::Status SetStep(const Handle& h, int64_t step) {
    OpTester t("AccumulatorSetGlobalStep");
    t.UseDevice(device_).InputRef(h).Input(I64(step));
    return t.Run().status();
  }
  tensorflow::NodeDef TakeDef() {
    tensorflow::NodeDef d;
    d.set_name("take");
    d.set_op("SparseAccumulatorTakeGradient");
    (*d.mutable_attr())["dtype"] = MakeAttr(DT_FLOAT);
    return d;
  }
  static Tensor Rows(std::vector<float> v) {
    return Tensor::FromVector<float>(v, TensorShape({static_cast<int64_t>(v.size()) / 2, 2}));
  }
  static Tensor I64s(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }

  std::shared_ptr<TestCpuDevice> device_ = std::make_shared<TestCpuDevice>();
};

TEST_F(SparseAccumulatorTest, AveragesOverlappingIndicesPerIndex) {
  Handle h = Make();
  ASSERT_NE(h, nullptr);
  // Unsorted, index 3 twice: its rows add up first ({1.5, 2.25}) and count
  // as one gradient.
  ASSERT_TRUE(Apply(h, 0, {3, 0, 3}, Rows({1, 2, 10, 20, 0.5f, 0.25f})).ok());
  ASSERT_TRUE(Apply(h, 0, {1, 3}, Rows({4, 8, 2.5f, -0.25f})).ok());
  EXPECT_EQ(Num(h), 2);
  auto out = Take(h, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  // The union of the indices, sorted; each row's sum over the number of
  // gradients that had it: 0 and 1 once, 3 twice ({4, 2} / 2).
  EXPECT_EQ(TensorDiff(I64s({0, 1, 3}), (*out)[0]), "");
  EXPECT_EQ(TensorDiff(Rows({10, 20, 4, 8, 2, 1}), (*out)[1]), "");
  EXPECT_EQ(TensorDiff(I64s({5, 2}), (*out)[2]), "");
  EXPECT_EQ(Num(h), 0);
  // The take advanced the global step to 1: step 0 is stale.
  ASSERT_TRUE(Apply(h, 0, {4}, Rows({7, 7})).ok());
  EXPECT_EQ(Num(h), 0);
  ASSERT_TRUE(Apply(h, 1, {4}, Rows({7, 6})).ok());
  EXPECT_EQ(Num(h), 1);
  auto one = Take(h, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(TensorDiff(I64s({4}), (*one)[0]), "");
  EXPECT_EQ(TensorDiff(Rows({7, 6}), (*one)[1]), "");
}

TEST_F(SparseAccumulatorTest, StaleGradientsDroppedSumReductionAndSetGlobalStep) {
  Handle h = Make("sacc", PartialShape({5, 2}), "SUM");
  ASSERT_NE(h, nullptr);
  ASSERT_TRUE(SetStep(h, 10).ok());
  ASSERT_TRUE(Apply(h, 9, {0}, Rows({100, 100})).ok());  // stale: dropped
  EXPECT_EQ(Num(h), 0);
  ASSERT_TRUE(Apply(h, 10, {2}, Rows({1, 1})).ok());
  ASSERT_TRUE(Apply(h, 12, {4, 2}, Rows({5, 6, 3, 4})).ok());  // newer: accepted
  EXPECT_EQ(Num(h), 2);
  auto sum = Take(h, 2);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(TensorDiff(I64s({2, 4}), (*sum)[0]), "");
  EXPECT_EQ(TensorDiff(Rows({4, 5, 5, 6}), (*sum)[1]), "");
  // Now at 11: step 10 is stale, yet a malformed gradient is still an error.
  ASSERT_TRUE(Apply(h, 10, {1}, Rows({1, 1})).ok());
  EXPECT_EQ(Num(h), 0);
  EXPECT_EQ(Apply(h, 10, {9}, Rows({1, 1})).code(), absl::StatusCode::kInvalidArgument);
  // Backwards too, as TensorFlow.
  ASSERT_TRUE(SetStep(h, 3).ok());
  ASSERT_TRUE(Apply(h, 3, {1}, Rows({1, 1})).ok());
  EXPECT_EQ(Num(h), 1);
}

TEST_F(SparseAccumulatorTest, TakeBlocksUntilEnoughGradientsThenCancels) {
  Handle h = Make();
  ASSERT_NE(h, nullptr);
  AsyncRun take(device_, TakeDef(), std::vector<TensorValue>{{Tensor(), h}, {I32(2), nullptr}});
  ASSERT_TRUE(take.Start().ok());
  ASSERT_TRUE(Apply(h, 0, {1}, Rows({1, 1})).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(take.Finished());
  std::thread other([&] { EXPECT_TRUE(Apply(h, 0, {1, 2}, Rows({3, 5, 8, 8})).ok()); });
  ASSERT_TRUE(take.Wait());
  other.join();
  ASSERT_TRUE(take.status().ok()) << take.status();
  EXPECT_EQ(TensorDiff(I64s({1, 2}), take.output(0)), "");
  EXPECT_EQ(TensorDiff(Rows({2, 3, 8, 8}), take.output(1)), "");
  EXPECT_EQ(TensorDiff(I64s({5, 2}), take.output(2)), "");

  AsyncRun blocked(device_, TakeDef(), std::vector<TensorValue>{{Tensor(), h}, {I32(1), nullptr}});
  ASSERT_TRUE(blocked.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(blocked.Finished());
  blocked.cm().StartCancel();
  ASSERT_TRUE(blocked.Wait());
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kCancelled) << blocked.status();
  EXPECT_THAT(std::string(blocked.status().message()), HasSubstr("node 'take'"));
  // The cancelled take did not advance the global step (1): step 1 counts.
  ASSERT_TRUE(Apply(h, 1, {0}, Rows({1, 1})).ok());
  EXPECT_EQ(Num(h), 1);
}

TEST_F(SparseAccumulatorTest, ShapeChecksNameTheAccumulator) {
  Handle h = Make();
  ASSERT_NE(h, nullptr);
  auto expect_invalid = [](const absl::Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("sparse accumulator 'sacc'")) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(what)) << s;
  };
  expect_invalid(Apply(h, 0, {0}, Tensor::FromVector<float>({1, 2, 3}, TensorShape({1, 3}))),
                 "are not rows of the accumulator's shape [5,2]");
  expect_invalid(Apply(h, 0, {5}, Rows({1, 2})), "gradient_indices[0] = 5 is out of range [0, 5)");
  expect_invalid(Apply(h, 0, {1, -1}, Rows({1, 2, 3, 4})), "gradient_indices[1] = -1");
  expect_invalid(Apply(h, 0, {0, 1}, Rows({1, 2})), "one row per index: 2 indices");
  expect_invalid(Apply(h, 0, {0}, Rows({1, 2}), {6, 2}), "gradient_shape [6,2] does not fit");
  expect_invalid(Apply(h, 0, {0}, Tensor::FromVector<double>({1, 2}, TensorShape({1, 2}))),
                 "holds float, got double");
  EXPECT_EQ(Num(h), 0);
  // has_known_shape false: gradient_shape is not looked at.
  EXPECT_TRUE(Apply(h, 0, {0}, Rows({1, 2}), {6, 2}, /*has_known_shape=*/false).ok());
  EXPECT_EQ(Take(h, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // The same shared name with another shape; a scalar accumulator.
  OpTester again("SparseConditionalAccumulator", "sacc");
  again.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({5, 3}));
  EXPECT_EQ(again.Run().status().code(), absl::StatusCode::kInvalidArgument);
  OpTester scalar("SparseConditionalAccumulator", "scalar");
  scalar.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({}));
  auto sr = scalar.Run();
  EXPECT_EQ(sr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(sr.status().message()), HasSubstr("rank >= 1"));
  // A handle naming no accumulator on this device.
  OpTester missing("AccumulatorNumAccumulated");
  missing.UseDevice(device_).Input(Tensor::FromVector<std::string>({"localhost", "nope"}));
  EXPECT_EQ(missing.Run().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SparseAccumulatorTest, UnknownFirstDimensionComesFromGradientShape) {
  Handle h = Make("dyn", PartialShape({-1, 2}));
  ASSERT_NE(h, nullptr);
  absl::Status s = Apply(h, 0, {7}, Rows({1, 2}), {7, 2});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of range [0, 7)"));
  ASSERT_TRUE(Apply(h, 0, {6}, Rows({1, 2}), {7, 2}).ok());
  s = Apply(h, 0, {0}, Rows({1, 2}), {8, 2});
  EXPECT_THAT(std::string(s.message()), HasSubstr("gradient_shape[0] is 8"));
  auto out = Take(h, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TensorDiff(I64s({7, 2}), (*out)[2]), "");
}

// ConditionalAccumulator: the dense accumulator in TensorFlow 1.x's form,
// named by a ref to its [container, name]; AccumulatorNumAccumulated and
// AccumulatorSetGlobalStep serve it as they serve the sparse one.
TEST(RefAccumulatorTest, DenseRefHandleAveragesDropsStaleAndSharesTheRefOps) {
  auto device = std::make_shared<TestCpuDevice>();
  OpTester make("ConditionalAccumulator", "racc");
  make.UseDevice(device).Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({2}));
  make.Attr("shared_name", "racc");
  auto made = make.Run();
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(TensorDiff(Tensor::FromVector<std::string>({"localhost", "racc"}), (*made)[0]), "");
  std::shared_ptr<Var> h = make.output_values()[0].ref;
  ASSERT_NE(h, nullptr);
  auto apply = [&](int64_t step, Tensor g) {
    OpTester t("AccumulatorApplyGradient");
    t.UseDevice(device).Attr("dtype", DT_FLOAT).InputRef(h).Input(I64(step)).Input(std::move(g));
    return t.Run().status();
  };
  auto num = [&] {
    OpTester t("AccumulatorNumAccumulated");
    t.UseDevice(device).InputRef(h);
    auto r = t.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)[0].scalar<int32_t>() : -1;
  };
  auto take = [&](int32_t n) -> absl::StatusOr<Tensor> {
    OpTester t("AccumulatorTakeGradient");
    t.UseDevice(device).Attr("dtype", DT_FLOAT).InputRef(h).Input(I32(n));
    GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
    return out[0];
  };
  ASSERT_TRUE(apply(0, F({1, 2})).ok());
  ASSERT_TRUE(apply(0, F({3, -6})).ok());
  EXPECT_EQ(num(), 2);
  auto avg = take(2);
  ASSERT_TRUE(avg.ok()) << avg.status();
  EXPECT_EQ(TensorDiff(F({2, -2}), *avg), "");
  // The take advanced the global step to 1: step 0 is stale.
  ASSERT_TRUE(apply(0, F({9, 9})).ok());
  EXPECT_EQ(num(), 0);
  OpTester set("AccumulatorSetGlobalStep");
  set.UseDevice(device).InputRef(h).Input(I64(7));
  ASSERT_TRUE(set.Run().ok());
  ASSERT_TRUE(apply(6, F({9, 9})).ok());  // stale now
  ASSERT_TRUE(apply(7, F({0.5f, 0.25f})).ok());
  EXPECT_EQ(num(), 1);
  absl::Status wrong = apply(7, F({1, 2, 3}));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("accumulator 'racc'"));

  // A ref naming no accumulator is NotFound, naming it.
  auto missing = std::make_shared<Var>("missing", DT_STRING, PartialShape({2}));
  missing->tensor = Tensor::FromVector<std::string>({"localhost", "nope"});
  missing->initialized = true;
  OpTester none("AccumulatorNumAccumulated");
  none.UseDevice(device).InputRef(missing);
  absl::Status st = none.Run().status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(st.message()), HasSubstr("nope"));
}

TEST(QueueOpsTest, RegisteredWithKernels) {
  for (const char* op : {"FIFOQueueV2",
                         "QueueEnqueueV2",
                         "QueueEnqueueManyV2",
                         "QueueDequeueV2",
                         "QueueDequeueManyV2",
                         "QueueSizeV2",
                         "QueueCloseV2",
                         "ResourceConditionalAccumulator",
                         "ResourceAccumulatorApplyGradient",
                         "ResourceAccumulatorTakeGradient",
                         "ResourceAccumulatorNumAccumulated",
                         "ResourceAccumulatorSetGlobalStep",
                         "SparseConditionalAccumulator",
                         "SparseAccumulatorApplyGradient",
                         "SparseAccumulatorTakeGradient",
                         "AccumulatorNumAccumulated",
                         "AccumulatorSetGlobalStep",
                         "ConditionalAccumulator",
                         "AccumulatorApplyGradient",
                         "AccumulatorTakeGradient"}) {
    EXPECT_TRUE(DefaultOpRegistry().LookUpOrError(op).ok()) << op;
  }
}

}  // namespace
}  // namespace graphrun
