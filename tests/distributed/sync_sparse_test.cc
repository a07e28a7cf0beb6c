// Synchronous replication of an embedding table: SyncReplicasOptimizer
// over GradientDescent on an in-process cluster of 2 PS + 2 workers (gRPC
// on loopback), each worker a client of its own building the same graph
// under ReplicaDeviceSetter (global_step and a small dense variable on
// ps:0, the 10000 x 16 table on ps:1).
//
// The table's gradient is sparse (IndexedSlices of a ResourceGather), so
// it goes to a SparseConditionalAccumulator as indices, values and dense
// shape; the chief takes the per-index average and applies it with
// GradientDescent's sparse update. Checked:
//   * after a few lockstep rounds the table and the dense variable equal,
//     bit for bit, the same averaged updates computed on the host (per
//     index: the rows of one worker summed in batch order, the workers'
//     sums added and divided by the number of workers that had the index);
//   * one FULL_TRACE step's RunMetadata shows what the worker sent to the
//     table's PS: the gradient rows (kBatch x kDim floats) and small
//     tensors, far below the table's 640,000 bytes.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/ops.h"
#include "client/scope.h"
#include "client/train/optimizers.h"
#include "client/train/sync_replicas_optimizer.h"
#include "client/variables.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "gtest/gtest.h"
#include "placement/placement_report.h"
#include "placement/replica_device_setter.h"
#include "tests/distributed/test_graphs.h"

namespace graphrun {
namespace distributed {
namespace {

using client::ClientSession;
using client::Operation;
using client::Output;
using client::Scope;
using client::Variable;
using test::BitEqual;
namespace ops = client::ops;
namespace init = client::init;
namespace train = client::train;

constexpr int64_t kVocab = 10000;
constexpr int64_t kDim = 16;
constexpr int64_t kBatch = 64;
constexpr int64_t kTableBytes = kVocab * kDim * 4;  // 640,000
constexpr int64_t kDense = 4;
constexpr int kWorkers = 2;
constexpr int kRounds = 4;
// A power of two: avg * -lr is exact, so the host's update rounds once,
// as ScatterAdd does, whether or not the compiler fuses multiply and add.
constexpr float kLearningRate = 0.25f;
constexpr int64_t kStepTimeoutMs = 60000;

tensorflow::RunOptions Deadline() {
  tensorflow::RunOptions ro;
  ro.set_timeout_in_ms(kStepTimeoutMs);
  return ro;
}

// The dense variable's target on worker `task`.
std::vector<float> DenseTarget(int task) { return {0.375f + task, -1.5f, 2.25f - task, 0.8125f}; }

// One worker client's graph: loss = 0.5 * |table[ids] - target|^2 +
// 0.5 * |w - DenseTarget(task)|^2, so the table's gradient rows are exactly
// table[ids] - target and w's is exactly w - DenseTarget(task).
struct WorkerModel {
  Scope root = Scope::NewRootScope();
  std::unique_ptr<Variable> global_step, table, w;
  Output ids, target;
  std::unique_ptr<train::GradientDescentOptimizer> gd;
  std::unique_ptr<train::SyncReplicasOptimizer> sync;
  Operation train_op, init;
};

std::unique_ptr<WorkerModel> BuildWorker(int task) {
  auto m = std::make_unique<WorkerModel>();
  placement::ReplicaDeviceSetterOptions o;
  o.ps_tasks = 2;
  o.worker_device = absl::StrCat("/job:worker/task:", task);
  auto setter = placement::ReplicaDeviceSetter(o);
  if (!setter.ok()) {
    m->root.UpdateStatus(setter.status());
    return m;
  }
  Scope s = m->root.WithDeviceFunction(*setter);
  m->global_step = std::make_unique<Variable>(train::CreateGlobalStep(s));
  m->table = std::make_unique<Variable>(s.WithOpName("embedding"), PartialShape({kVocab, kDim}),
                                        DT_FLOAT, init::RandomUniform(-1.0, 1.0, /*seed=*/7));
  m->w = std::make_unique<Variable>(s.WithOpName("w"), PartialShape({kDense}), DT_FLOAT,
                                    init::Constant({0.5f, -1.25f, 3.0f, 0.0625f}));
  m->ids = ops::Placeholder(s.WithOpName("ids"), DT_INT32);
  m->target = ops::Placeholder(s.WithOpName("target"), DT_FLOAT);
  // The gather runs on the table's PS (a resource edge keeps them together).
  Output rows =
      ops::ResourceGather(s.ColocateWith(m->table->op()), m->table->handle(), m->ids, DT_FLOAT);
  Output d = ops::Sub(s, rows, m->target);
  Output dw = ops::Sub(s, m->w->Read(), Tensor::FromVector<float>(DenseTarget(task)));
  Output loss = ops::AddV2(s, ops::Mul(s, ops::Sum(s, ops::Square(s, d), {0, 1}), 0.5f),
                           ops::Mul(s, ops::Sum(s, ops::Square(s, dw), 0), 0.5f));
  m->gd = std::make_unique<train::GradientDescentOptimizer>(kLearningRate);
  train::SyncReplicasOptions so;
  so.replicas_to_aggregate = kWorkers;
  so.total_num_replicas = kWorkers;
  m->sync = std::make_unique<train::SyncReplicasOptimizer>(m->gd.get(), so);
  auto train_op = m->sync->Minimize(s, loss, {*m->table, *m->w}, m->global_step.get());
  if (!train_op.ok()) {
    m->root.UpdateStatus(train_op.status());
    return m;
  }
  m->train_op = *train_op;
  m->init = client::GlobalVariablesInitializer(s);
  return m;
}

// One worker's batch: ids (int32, with repeats) and target rows.
struct Batch {
  std::vector<int32_t> ids;
  std::vector<float> target;  // kBatch x kDim
};

// Worker 1 repeats worker 0's first 16 ids (rows both workers touch);
// each batch repeats its own first id (rows summed inside one gradient).
std::vector<Batch> MakeBatches(std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<Batch> batches(kWorkers);
  for (int task = 0; task < kWorkers; ++task) {
    Batch& b = batches[task];
    for (int64_t i = 0; i < kBatch; ++i) b.ids.push_back(id(rng));
    b.ids[1] = b.ids[0];
    for (int64_t i = 0; i < kBatch * kDim; ++i) b.target.push_back(value(rng));
  }
  for (int i = 0; i < 16; ++i) batches[1].ids[2 + i] = batches[0].ids[2 + i];
  return batches;
}

// The host's copy of the model, updated as the scheme should.
struct HostModel {
  std::vector<float> table, w;

  void Step(const std::vector<Batch>& batches,
            const std::vector<std::vector<float>>& dense_targets) {
    // Per index: the sum of each worker's rows (in batch order), then the
    // workers' sums added in any order (two: IEEE addition commutes).
    std::map<int64_t, std::vector<std::vector<float>>> per_worker_sums;
    for (const Batch& b : batches) {
      std::map<int64_t, std::vector<float>> sums;
      for (int64_t i = 0; i < kBatch; ++i) {
        const int64_t row = b.ids[i];
        std::vector<float> g(kDim);
        for (int64_t k = 0; k < kDim; ++k) g[k] = table[row * kDim + k] - b.target[i * kDim + k];
        auto it = sums.find(row);
        if (it == sums.end()) {
          sums.emplace(row, g);
        } else {
          for (int64_t k = 0; k < kDim; ++k) it->second[k] = it->second[k] + g[k];
        }
      }
      for (auto& [row, g] : sums) per_worker_sums[row].push_back(g);
    }
    for (const auto& [row, sums] : per_worker_sums) {
      for (int64_t k = 0; k < kDim; ++k) {
        float total = sums[0][k];
        for (size_t j = 1; j < sums.size(); ++j) total = total + sums[j][k];
        const float avg = total / static_cast<float>(sums.size());
        table[row * kDim + k] = table[row * kDim + k] + avg * -kLearningRate;
      }
    }
    std::vector<float> next = w;
    for (int64_t k = 0; k < kDense; ++k) {
      float total = 0;
      for (size_t j = 0; j < dense_targets.size(); ++j) {
        const float g = w[k] - dense_targets[j][k];
        total = j == 0 ? g : total + g;
      }
      const float avg = total / static_cast<float>(dense_targets.size());
      next[k] = w[k] + avg * -kLearningRate;
    }
    w = next;
  }
};

class SyncSparseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { RegisterGrpcSession(); }

  void SetUp() override {
    LocalClusterOptions o;
    o.jobs = {{"ps", 2}, {"worker", kWorkers}};
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

  std::unique_ptr<LocalCluster> cluster_;
  std::vector<std::unique_ptr<WorkerModel>> models_;
  std::vector<std::unique_ptr<ClientSession>> sessions_;
};

TEST_F(SyncSparseTest, EmbeddingTableTrainsBitExactAndSendsOnlyRows) {
  for (int task = 0; task < kWorkers; ++task) {
    models_.push_back(BuildWorker(task));
    ASSERT_TRUE(models_.back()->root.ok()) << models_.back()->root.status();
    SessionOptions so;
    so.target = cluster_->target("worker", task);
    sessions_.push_back(std::make_unique<ClientSession>(models_.back()->root, so));
  }
  const WorkerModel& chief = *models_[0];
  ASSERT_EQ(chief.table->op().node()->requested_device(), "/job:ps/task:1");
  // The table's gradient is accumulated sparse, w's dense.
  std::map<std::string, std::string> accum_ops;
  for (const Node* n : chief.root.graph()->nodes()) {
    if (absl::EndsWith(n->name(), "/grad_accum")) accum_ops[n->name()] = n->op();
  }
  EXPECT_EQ(accum_ops["embedding/grad_accum"], "SparseConditionalAccumulator");
  EXPECT_EQ(accum_ops["w/grad_accum"], "ResourceConditionalAccumulator");

  auto run = [&](int task, const Operation& op) {
    return sessions_[task]->Run({}, {}, {op}, Deadline(), nullptr).status();
  };
  ASSERT_TRUE(run(0, chief.init).ok());
  ASSERT_TRUE(run(0, chief.sync->chief_init_op()).ok());
  for (int task = 0; task < kWorkers; ++task) {
    ASSERT_TRUE(run(task, models_[task]->sync->local_step_init_op()).ok());
  }
  HostModel host;
  {
    auto v = sessions_[0]->Run({}, {chief.table->Read(), chief.w->Read()}, {}, Deadline(), nullptr);
    ASSERT_TRUE(v.ok()) << v.status();
    host.table.assign((*v)[0].base<float>(), (*v)[0].base<float>() + kVocab * kDim);
    host.w.assign((*v)[1].base<float>(), (*v)[1].base<float>() + kDense);
  }

  absl::Status chief_status;
  std::thread queue_runner([&] {
    for (int i = 0; i < kRounds && chief_status.ok(); ++i) {
      chief_status = run(0, chief.sync->chief_sync_op());
    }
  });
  // On a failed round the queue runner may be blocked in a take: closing
  // its session cancels it.
  struct JoinOnExit {
    std::thread* t;
    ClientSession* session;
    ~JoinOnExit() {
      if (!t->joinable()) return;
      session->session()->Close().IgnoreError();
      t->join();
    }
  } join_on_exit{&queue_runner, sessions_[0].get()};
  std::mt19937 rng(2024);
  const std::vector<std::vector<float>> dense_targets = {DenseTarget(0), DenseTarget(1)};
  tensorflow::RunMetadata traced;
  for (int r = 0; r < kRounds; ++r) {
    const std::vector<Batch> batches = MakeBatches(rng);
    absl::Status status[kWorkers];
    std::vector<std::thread> workers;
    for (int task = 0; task < kWorkers; ++task) {
      workers.emplace_back([&, task] {
        const WorkerModel& m = *models_[task];
        ClientSession::FeedType feeds = {
            {m.ids, Tensor::FromVector<int32_t>(batches[task].ids)},
            {m.target,
             Tensor::FromVector<float>(batches[task].target, TensorShape({kBatch, kDim}))}};
        tensorflow::RunOptions ro = Deadline();
        const bool trace = task == 0 && r == 1;
        if (trace) ro.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
        status[task] =
            sessions_[task]->Run(feeds, {}, {m.train_op}, ro, trace ? &traced : nullptr).status();
      });
    }
    for (std::thread& t : workers) t.join();
    for (int task = 0; task < kWorkers; ++task) {
      ASSERT_TRUE(status[task].ok())
          << "round " << r << ", worker " << task << ": " << status[task];
    }
    host.Step(batches, dense_targets);
  }
  queue_runner.join();
  ASSERT_TRUE(chief_status.ok()) << chief_status;

  // Read through worker 1's client: the PS state both share.
  const WorkerModel& other = *models_[1];
  auto got =
      sessions_[1]->Run({}, {other.table->Read(), other.w->Read(), other.global_step->Read()}, {},
                        Deadline(), nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[2].scalar<int64_t>(), kRounds);
  const Tensor want_table = Tensor::FromVector<float>(host.table, TensorShape({kVocab, kDim}));
  ASSERT_EQ((*got)[0].shape(), want_table.shape());
  EXPECT_TRUE(BitEqual((*got)[0], want_table));
  int64_t differing = 0, first = -1;
  for (int64_t i = 0; i < kVocab * kDim; ++i) {
    if ((*got)[0].base<float>()[i] != host.table[i]) {
      if (first < 0) first = i;
      ++differing;
    }
  }
  EXPECT_EQ(differing, 0) << "first at " << first << ": " << (*got)[0].base<float>()[first]
                          << " vs " << host.table[first];
  EXPECT_TRUE(BitEqual((*got)[1], Tensor::FromVector<float>(host.w))) << (*got)[1].DebugString();

  // What worker 0 sent to the table's PS in the traced step.
  auto report = placement::MeasuredTrafficReport(traced);
  ASSERT_TRUE(report.ok()) << report.status();
  int64_t to_table_ps = 0, largest = 0;
  std::string edges;
  for (const placement::EdgeReport& e : report->edges) {
    absl::StrAppend(&edges, e.src_task, " -> ", e.dst_task, " ", e.tensor, " ", e.bytes_per_step,
                    "\n");
    if (e.src_task == "/job:worker/task:0" && e.dst_task == "/job:ps/task:1") {
      to_table_ps += e.bytes_per_step;
      largest = std::max(largest, e.bytes_per_step);
    }
  }
  std::cout << "measured edges of a traced worker step:\n" << edges;
  // The gradient's rows are the largest tensor (a densified gradient would
  // be the whole table); with ids, indices and shapes all stays far below.
  EXPECT_EQ(largest, kBatch * kDim * 4) << edges;
  EXPECT_LT(to_table_ps, kTableBytes / 50) << edges;
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun
