// Between-graph replication end to end: 2 PS + 2 workers as in-process gRPC
// servers on loopback, each worker a separate client (its own graph, its
// own master) building the same model with ReplicaDeviceSetter, so the
// variables are spread over both PS tasks and shared by name.
//
//   * asynchronous: both workers apply gradients concurrently;
//   * synchronous, the SyncReplicasOptimizer scheme (docs/distributed.md,
//     "Synchronous replication"): per-variable accumulators on the
//     variable's PS, a token queue on the global step's PS, the chief
//     aggregating, applying once and releasing the step; stale gradients
//     dropped; backup workers (2 replicas, 1 to aggregate).
//
// Final values are compared bit for bit with the same computation run in
// one local session. Every step runs with a deadline; the cluster is
// stopped in TearDown.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client_session.h"
#include "client/ops.h"
#include "client/scope.h"
#include "client/variables.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/replica_device_setter.h"
#include "tests/distributed/test_graphs.h"

namespace graphrun {
namespace distributed {
namespace {

using client::ClientSession;
using client::Operation;
using client::Output;
using client::RefVariable;
using client::Scope;
using test::BitEqual;
namespace ops = client::ops;
namespace init = client::init;

constexpr int64_t kStepTimeoutMs = 30000;
constexpr float kLearningRate = 0.125f;

tensorflow::RunOptions Deadline(int64_t ms = kStepTimeoutMs) {
  tensorflow::RunOptions ro;
  ro.set_timeout_in_ms(ms);
  return ro;
}

// One worker's fixed training example for the linear model w·x + b.
struct Example {
  std::vector<float> x;
  float y;
};
const Example kData[2] = {{{1.5f, -0.3f}, 0.7f}, {{-0.6f, 2.2f}, -1.1f}};

// Gradients of 0.5 * (w·x + b - y)^2 written out with forward ops (no
// symbolic differentiation): dw = (w·x + b - y) x, db = w·x + b - y.
struct Grads {
  Output w, b;
};
Grads LinearGradients(const Scope& s, Output w, Output b, const Example& e) {
  Tensor x = Tensor::FromVector<float>(e.x);
  Output pred = ops::AddV2(s, ops::Sum(s, ops::Mul(s, w, x), 0), b);
  Output err = ops::Sub(s, pred, e.y);
  return {ops::Mul(s, err, x), err};
}

// The model every worker client builds (same node names, so the PS
// resources are shared). Built with ReplicaDeviceSetter: global_step ->
// ps:0, w -> ps:1, b -> ps:0 (round robin in creation order).
struct ReplicatedModel {
  Scope root = Scope::NewRootScope();
  std::unique_ptr<RefVariable> global_step, w, b, local_step;
  Operation init;         // chief: variables, then the accumulators' global step
  Operation local_init;   // this worker's local_step = global_step
  Operation async_step;   // ApplyGradientDescent with this worker's constant gradients
  Operation train;        // sync: accumulate with local_step, then wait for a token
  Operation chief_sync;   // sync: take, apply once, global_step += 1, release tokens
  Operation stale_apply;  // a gradient stamped with local step 0
  Output num_accumulated_w;
  Output tokens_left;
};

struct SyncConfig {
  int replicas_to_aggregate = 2;
  int total_num_replicas = 2;
};

std::unique_ptr<ReplicatedModel> BuildReplicatedModel(int task, const Example& data,
                                                      const SyncConfig& sync) {
  auto m = std::make_unique<ReplicatedModel>();
  placement::ReplicaDeviceSetterOptions o;
  o.ps_tasks = 2;
  o.worker_device = absl::StrCat("/job:worker/task:", task);
  auto setter = placement::ReplicaDeviceSetter(o);
  if (!setter.ok()) {
    m->root.UpdateStatus(setter.status());
    return m;
  }
  Scope s = m->root.WithDeviceFunction(*setter);
  m->global_step = std::make_unique<RefVariable>(s.WithOpName("global_step"), PartialShape({}),
                                                 DT_INT64, init::Zeros());
  m->w = std::make_unique<RefVariable>(s.WithOpName("w"), PartialShape({2}), DT_FLOAT,
                                       init::Constant({0.5f, -1.25f}));
  m->b = std::make_unique<RefVariable>(s.WithOpName("b"), PartialShape({}), DT_FLOAT,
                                       init::Constant(0.75f));
  // TensorFlow keeps the local step off the PS (colocated with a local op).
  m->local_step = std::make_unique<RefVariable>(
      s.WithDevice(o.worker_device).WithOpName("sync_rep_local_step"), PartialShape({}), DT_INT64);
  m->local_init = m->local_step->Assign(m->global_step->value()).op();

  // Asynchronous: given gradients, applied at once.
  const float gw[2][2] = {{1.0f, -0.5f}, {0.25f, 2.0f}};
  const float gb[2] = {0.5f, -1.5f};
  {
    Scope a = s.NewSubScope("async");
    auto uw = ops::ApplyGradientDescent(a.ColocateWith(m->w->op()), m->w->ref(), 0.25f,
                                        Tensor::FromVector<float>({gw[task][0], gw[task][1]}));
    auto ub = ops::ApplyGradientDescent(a.ColocateWith(m->b->op()), m->b->ref(), 0.25f,
                                        Tensor::Scalar<float>(gb[task]));
    m->async_step = ops::NoOp(a.WithControlDependencies({uw.operation, ub.operation}));
  }

  // Synchronous. Accumulators live with their variables, the token queue
  // with the global step.
  Scope sw = s.ColocateWith(m->w->op());
  Scope sb = s.ColocateWith(m->b->op());
  Scope sg = s.ColocateWith(m->global_step->op());
  auto accum_w = ops::ResourceConditionalAccumulator(
      sw.WithOpName("w/grad_accum"), DT_FLOAT, PartialShape({2}),
      ops::ResourceConditionalAccumulator::SharedName("w/grad_accum"));
  auto accum_b = ops::ResourceConditionalAccumulator(
      sb.WithOpName("b/grad_accum"), DT_FLOAT, PartialShape({}),
      ops::ResourceConditionalAccumulator::SharedName("b/grad_accum"));
  auto queue =
      ops::FIFOQueueV2(sg.WithOpName("sync_token_q"), {DT_INT64},
                       ops::FIFOQueueV2::Shapes({PartialShape({})}).SharedName("sync_token_q"));

  // Worker step: gradients at the current values, stamped with local_step.
  Grads g = LinearGradients(s.NewSubScope("gradients"), m->w->value(), m->b->value(), data);
  auto apply_w = ops::ResourceAccumulatorApplyGradient(sw, accum_w, m->local_step->value(), g.w);
  auto apply_b = ops::ResourceAccumulatorApplyGradient(sb, accum_b, m->local_step->value(), g.b);
  auto token = ops::QueueDequeueV2(
      sg.WithControlDependencies({apply_w.operation, apply_b.operation}), queue, {DT_INT64});
  m->train = m->local_step->Assign(token[0]).op();

  // Chief step. Every apply waits for every take, so a worker reading a
  // new value of one variable finds every accumulator already advanced
  // (its gradient is then dropped as stale, never mixed into a step).
  auto take_w =
      ops::ResourceAccumulatorTakeGradient(sw, accum_w, sync.replicas_to_aggregate, DT_FLOAT);
  auto take_b =
      ops::ResourceAccumulatorTakeGradient(sb, accum_b, sync.replicas_to_aggregate, DT_FLOAT);
  Scope after_take = s.WithControlDependencies({take_w.operation, take_b.operation});
  auto upd_w = ops::ApplyGradientDescent(after_take.ColocateWith(m->w->op()), m->w->ref(),
                                         kLearningRate, take_w);
  auto upd_b = ops::ApplyGradientDescent(after_take.ColocateWith(m->b->op()), m->b->ref(),
                                         kLearningRate, take_b);
  auto inc = ops::AssignAdd(sg.WithControlDependencies({upd_w.operation, upd_b.operation}),
                            m->global_step->ref(), int64_t{1});
  const int tokens_per_step = std::max(sync.total_num_replicas, sync.replicas_to_aggregate);
  auto tokens = ops::Fill(sg, {tokens_per_step}, inc);
  m->chief_sync = ops::QueueEnqueueManyV2(sg, queue, {Output(tokens)}).operation;

  Operation vars_init = client::GlobalVariablesInitializer(s.WithOpName("var_init"));
  Scope after_init = s.WithControlDependencies({vars_init});
  auto initial_step =
      ops::Identity(after_init.ColocateWith(m->global_step->op()), m->global_step->ref());
  auto set_w = ops::ResourceAccumulatorSetGlobalStep(after_init.ColocateWith(accum_w.operation),
                                                     accum_w, initial_step);
  auto set_b = ops::ResourceAccumulatorSetGlobalStep(after_init.ColocateWith(accum_b.operation),
                                                     accum_b, initial_step);
  m->init = ops::NoOp(
      s.WithOpName("chief_init").WithControlDependencies({set_w.operation, set_b.operation}));

  m->stale_apply =
      ops::ResourceAccumulatorApplyGradient(sw.WithOpName("stale_apply"), accum_w, int64_t{0}, g.w)
          .operation;
  m->num_accumulated_w = ops::ResourceAccumulatorNumAccumulated(sw, accum_w).num_accumulated;
  m->tokens_left = ops::QueueSizeV2(sg, queue).size;
  return m;
}

// The same arithmetic in one local graph: `steps` synchronous steps, each
// averaging the gradients of `examples` at the current values (as the
// accumulator does: sum in arrival order, then divide by the count).
struct LocalResult {
  Tensor w, b, global_step;
};
absl::StatusOr<LocalResult> RunLocally(const std::vector<Example>& examples, int steps) {
  Scope root = Scope::NewRootScope();
  RefVariable gs(root.WithOpName("global_step"), PartialShape({}), DT_INT64, init::Zeros());
  RefVariable w(root.WithOpName("w"), PartialShape({2}), DT_FLOAT, init::Constant({0.5f, -1.25f}));
  RefVariable b(root.WithOpName("b"), PartialShape({}), DT_FLOAT, init::Constant(0.75f));
  std::vector<Grads> gs_per_example;
  for (const Example& e : examples) {
    gs_per_example.push_back(
        LinearGradients(root.NewSubScope("gradients"), w.value(), b.value(), e));
  }
  Output gw = gs_per_example[0].w, gb = gs_per_example[0].b;
  if (examples.size() > 1) {
    for (size_t i = 1; i < examples.size(); ++i) {
      gw = ops::AddV2(root, gw, gs_per_example[i].w);
      gb = ops::AddV2(root, gb, gs_per_example[i].b);
    }
    gw = ops::Div(root, gw, static_cast<float>(examples.size()));
    gb = ops::Div(root, gb, static_cast<float>(examples.size()));
  }
  auto uw = ops::ApplyGradientDescent(root, w.ref(), kLearningRate, gw);
  auto ub = ops::ApplyGradientDescent(root, b.ref(), kLearningRate, gb);
  auto inc = ops::AssignAdd(root.WithControlDependencies({uw.operation, ub.operation}), gs.ref(),
                            int64_t{1});
  Operation init_op = client::GlobalVariablesInitializer(root);
  ClientSession session(root);
  GR_RETURN_IF_ERROR(session.Run({}, {}, {init_op}).status());
  for (int i = 0; i < steps; ++i) {
    GR_RETURN_IF_ERROR(session.Run({}, {}, {inc.operation}).status());
  }
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> v, session.Run({w.value(), b.value(), gs.value()}));
  return LocalResult{v[0], v[1], v[2]};
}

class SyncReplicasTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { RegisterGrpcSession(); }

  void SetUp() override {
    LocalClusterOptions o;
    o.jobs = {{"ps", 2}, {"worker", 2}};
    o.server.intra_op_threads = 1;
    o.server.inter_op_threads = 2;
    auto c = LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
  }
  void TearDown() override {
    sessions_.clear();
    if (cluster_) cluster_->StopAll();
  }

  // Worker `task`'s client: its own model and a session on its own task's
  // master.
  void StartWorkers(const std::vector<Example>& data, const SyncConfig& sync) {
    for (int task = 0; task < 2; ++task) {
      models_.push_back(BuildReplicatedModel(task, data[task], sync));
      ASSERT_TRUE(models_.back()->root.ok()) << models_.back()->root.status();
      SessionOptions so;
      so.target = cluster_->target("worker", task);
      sessions_.push_back(std::make_unique<ClientSession>(models_.back()->root, so));
    }
  }
  absl::Status RunTarget(int task, const Operation& op) {
    return sessions_[task]->Run({}, {}, {op}, Deadline(), nullptr).status();
  }
  absl::StatusOr<std::vector<Tensor>> Fetch(int task, const std::vector<Output>& fetches) {
    return sessions_[task]->Run({}, fetches, {}, Deadline(), nullptr);
  }
  // The chief (worker 0) initializes the shared state; every worker its
  // local step.
  void Initialize() {
    absl::Status st = RunTarget(0, models_[0]->init);
    ASSERT_TRUE(st.ok()) << st;
    for (int task = 0; task < 2; ++task) {
      absl::Status s = RunTarget(task, models_[task]->local_init);
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  void ExpectFinalValues(const LocalResult& want) {
    auto got = Fetch(
        1, {models_[1]->w->value(), models_[1]->b->value(), models_[1]->global_step->value()});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(BitEqual((*got)[0], want.w))
        << (*got)[0].DebugString() << " vs " << want.w.DebugString();
    EXPECT_TRUE(BitEqual((*got)[1], want.b))
        << (*got)[1].DebugString() << " vs " << want.b.DebugString();
    EXPECT_EQ((*got)[2].scalar<int64_t>(), want.global_step.scalar<int64_t>());
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::vector<std::unique_ptr<ReplicatedModel>> models_;
  std::vector<std::unique_ptr<ClientSession>> sessions_;
};

TEST_F(SyncReplicasTest, VariablesAreSpreadOverBothPs) {
  StartWorkers({kData[0], kData[1]}, {});
  const ReplicatedModel& m = *models_[0];
  EXPECT_EQ(m.global_step->op().node()->requested_device(), "/job:ps/task:0");
  EXPECT_EQ(m.w->op().node()->requested_device(), "/job:ps/task:1");
  EXPECT_EQ(m.b->op().node()->requested_device(), "/job:ps/task:0");
  EXPECT_EQ(m.local_step->op().node()->requested_device(), "/job:worker/task:0");
  EXPECT_EQ(models_[1]->local_step->op().node()->requested_device(), "/job:worker/task:1");
}

TEST_F(SyncReplicasTest, AsynchronousUpdatesFromBothWorkers) {
  StartWorkers({kData[0], kData[1]}, {});
  ASSERT_NO_FATAL_FAILURE(Initialize());
  constexpr int kSteps = 25;
  std::atomic<int> failures{0};
  auto train = [&](int task) {
    for (int i = 0; i < kSteps; ++i) {
      if (!RunTarget(task, models_[task]->async_step).ok()) ++failures;
    }
  };
  std::thread t0(train, 0), t1(train, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(failures.load(), 0);
  // Gradients and rate are dyadic, so every order gives the same exact
  // sums: w = w0 - 25 * 0.25 * (g0 + g1).
  auto got = Fetch(0, {models_[0]->w->value(), models_[0]->b->value()});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(
      BitEqual((*got)[0], Tensor::FromVector<float>({0.5f - 6.25f * 1.25f, -1.25f - 6.25f * 1.5f})))
      << (*got)[0].DebugString();
  EXPECT_TRUE(BitEqual((*got)[1], Tensor::Scalar<float>(0.75f + 6.25f))) << (*got)[1].DebugString();
}

TEST_F(SyncReplicasTest, SynchronousStepsAverageBothWorkersBitExact) {
  SyncConfig sync;  // 2 replicas, aggregate 2
  StartWorkers({kData[0], kData[1]}, sync);
  ASSERT_NO_FATAL_FAILURE(Initialize());
  constexpr int kRounds = 6;
  absl::Status chief_status;
  std::thread chief([&] {
    for (int i = 0; i < kRounds && chief_status.ok(); ++i) {
      chief_status = RunTarget(0, models_[0]->chief_sync);
    }
  });
  // Each round both workers run one step (accumulate, then block on the
  // token queue until the chief has applied the average).
  for (int r = 0; r < kRounds; ++r) {
    absl::Status s0, s1;
    std::thread w0([&] { s0 = RunTarget(0, models_[0]->train); });
    std::thread w1([&] { s1 = RunTarget(1, models_[1]->train); });
    w0.join();
    w1.join();
    ASSERT_TRUE(s0.ok() && s1.ok()) << "round " << r << ": " << s0 << " / " << s1;
  }
  chief.join();
  ASSERT_TRUE(chief_status.ok()) << chief_status;

  auto want = RunLocally({kData[0], kData[1]}, kRounds);
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectFinalValues(*want);
  // Every worker's local step followed the global step; no tokens left.
  for (int task = 0; task < 2; ++task) {
    auto ls = Fetch(task, {models_[task]->local_step->value(), models_[task]->tokens_left});
    ASSERT_TRUE(ls.ok()) << ls.status();
    EXPECT_EQ((*ls)[0].scalar<int64_t>(), kRounds);
    EXPECT_EQ((*ls)[1].scalar<int32_t>(), 0);
  }

  // A gradient stamped with an old local step is dropped.
  ASSERT_TRUE(RunTarget(1, models_[1]->stale_apply).ok());
  auto n = Fetch(1, {models_[1]->num_accumulated_w});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ((*n)[0].scalar<int32_t>(), 0);
  ExpectFinalValues(*want);
}

TEST_F(SyncReplicasTest, BackupWorkerFreeRunning) {
  // Two replicas, one gradient per step: the slower worker's gradient is
  // either part of the step (then identical to the faster one's, as both
  // see the same data and values) or stale and dropped.
  SyncConfig sync;
  sync.replicas_to_aggregate = 1;
  sync.total_num_replicas = 2;
  StartWorkers({kData[0], kData[0]}, sync);
  ASSERT_NO_FATAL_FAILURE(Initialize());
  constexpr int kSteps = 8;
  absl::Status chief_status;
  std::thread chief([&] {
    for (int i = 0; i < kSteps && chief_status.ok(); ++i) {
      chief_status = RunTarget(0, models_[0]->chief_sync);
    }
  });
  std::atomic<int> failures{0};
  std::atomic<int> worker_steps{0};
  auto worker = [&](int task) {
    // Train until the global step reaches kSteps (bounded, in case of a bug).
    for (int i = 0; i < 4 * kSteps; ++i) {
      auto gs = Fetch(task, {models_[task]->global_step->value()});
      if (!gs.ok()) {
        ++failures;
        return;
      }
      if ((*gs)[0].scalar<int64_t>() >= kSteps) return;
      if (!RunTarget(task, models_[task]->train).ok()) {
        ++failures;
        return;
      }
      ++worker_steps;
    }
  };
  std::thread w0(worker, 0), w1(worker, 1);
  w0.join();
  w1.join();
  chief.join();
  ASSERT_TRUE(chief_status.ok()) << chief_status;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(worker_steps.load(), kSteps);
  EXPECT_LE(worker_steps.load(), 2 * kSteps);

  auto want = RunLocally({kData[0]}, kSteps);
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectFinalValues(*want);
}

// A step blocked in a dequeue ends at its deadline, locally and on a PS,
// and leaves the queue usable.
TEST_F(SyncReplicasTest, BlockedDequeueEndsAtTheStepDeadline) {
  for (const std::string& target : {std::string(), cluster_->target("worker", 0)}) {
    SCOPED_TRACE(target.empty() ? "local" : target);
    Scope root = Scope::NewRootScope();
    Scope s = target.empty() ? root : root.WithDevice("/job:ps/task:1");
    auto q = ops::FIFOQueueV2(s.WithOpName("q"), {DT_FLOAT});
    auto dq = ops::QueueDequeueV2(s, q, {DT_FLOAT});
    auto eq = ops::QueueEnqueueV2(s, q, client::InputList({client::Input(2.5f)}));
    SessionOptions so;
    so.target = target;
    ClientSession session(root, so);
    auto start = std::chrono::steady_clock::now();
    auto r = session.Run({}, {dq[0]}, {}, Deadline(300), nullptr);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    EXPECT_LT(secs, 10.0);
    ASSERT_TRUE(session.Run({}, {}, {eq.operation}, Deadline(), nullptr).ok());
    auto v = session.Run({}, {dq[0]}, {}, Deadline(), nullptr);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ((*v)[0].scalar<float>(), 2.5f);
  }
}

// Closing a session cancels its running steps (TensorFlow's
// Session.close()): a dequeue blocked on a PS without a deadline returns
// Cancelled, and the queue stays usable from another session.
TEST_F(SyncReplicasTest, CloseCancelsABlockedStep) {
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDevice("/job:ps/task:1");
  auto q =
      ops::FIFOQueueV2(s.WithOpName("q"), {DT_FLOAT}, ops::FIFOQueueV2::SharedName("close_test_q"));
  auto dq = ops::QueueDequeueV2(s, q, {DT_FLOAT});
  auto eq = ops::QueueEnqueueV2(s, q, client::InputList({client::Input(1.5f)}));
  SessionOptions so;
  so.target = cluster_->target("worker", 0);
  auto blocked = std::make_unique<ClientSession>(root, so);
  ClientSession other(root, so);
  absl::Status result;
  std::atomic<bool> returned{false};
  std::thread t([&] {
    result = blocked->Run({}, {dq[0]}, {}).status();
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load());
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(blocked->session()->Close().ok());
  t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.code(), absl::StatusCode::kCancelled) << result;
  EXPECT_LT(secs, 10.0);
  // The closed session refuses new steps; the queue still works.
  EXPECT_FALSE(blocked->Run({}, {dq[0]}, {}).ok());
  ASSERT_TRUE(other.Run({}, {}, {eq.operation}, Deadline(), nullptr).ok());
  auto v = other.Run({}, {dq[0]}, {}, Deadline(), nullptr);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].scalar<float>(), 1.5f);
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
