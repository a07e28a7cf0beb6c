// The embedding model of the zoo (client/train/models.h EmbeddingClassifier:
// mean of embedded ids, Dense 64 ReLU, Dense 2) trained end to end on an
// in-process 2 PS + 1 worker gRPC cluster, built with ReplicaDeviceSetter
// as `graphrun train` builds its replicas.
//
// The task has a clear answer: a sequence of kLen ids drawn from a 20000-id
// vocabulary is positive exactly when it holds one of the kSignal ids
// [0, kSignal). The model must learn those ids' embeddings; the rest of
// the table is touched only where a batch happens to gather it.
//
// Besides accuracy, one FULL_TRACE step's RunMetadata says what crossed the
// network: the table's gradient must reach the table's PS as gathered rows
// (IndexedSlices: kBatch * kLen rows of kDim floats and their indices),
// never as a dense [20000, 32] tensor (2.56 MB), in either direction.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/ops.h"
#include "client/train/models.h"
#include "client/train/optimizers.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "graph/status.h"
#include "gtest/gtest.h"
#include "placement/placement_report.h"
#include "placement/replica_device_setter.h"

namespace graphrun {
namespace {

using client::ClientSession;
using client::Operation;
using client::Output;
using client::Scope;
using client::Variable;
namespace ops = client::ops;
namespace train = client::train;

constexpr int64_t kVocab = 20000;
constexpr int64_t kDim = 32;
constexpr int64_t kLen = 10;
constexpr int64_t kBatch = 64;
constexpr int64_t kSignal = 100;  // ids [0, kSignal) make a sequence positive
constexpr int64_t kEvalExamples = 2000;
constexpr int64_t kTableBytes = kVocab * kDim * 4;  // 2,560,000
const char kWorker[] = "/job:worker/task:0";

struct Batch {
  Tensor ids, labels;
};

// `n` sequences, half of them (at random) positive: one id at a random
// position is replaced by a signal id. The others never hold one.
Batch MakeBatch(std::mt19937& rng, int64_t n) {
  std::uniform_int_distribution<int32_t> plain(kSignal, kVocab - 1);
  std::uniform_int_distribution<int32_t> signal(0, kSignal - 1);
  std::uniform_int_distribution<int64_t> position(0, kLen - 1);
  std::bernoulli_distribution positive(0.5);
  std::vector<int32_t> ids(static_cast<size_t>(n * kLen));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < kLen; ++j) ids[i * kLen + j] = plain(rng);
    labels[i] = positive(rng) ? 1 : 0;
    if (labels[i] == 1) ids[i * kLen + position(rng)] = signal(rng);
  }
  return {Tensor::FromVector<int32_t>(ids, TensorShape({n, kLen})),
          Tensor::FromVector<int32_t>(labels)};
}

tensorflow::RunOptions Deadline() {
  tensorflow::RunOptions ro;
  ro.set_timeout_in_ms(60000);
  return ro;
}

struct EmbeddingGraph {
  Scope root = Scope::NewRootScope();
  std::unique_ptr<train::Layers> layers;
  std::unique_ptr<train::Optimizer> optimizer;
  std::unique_ptr<Variable> global_step;
  Output ids, labels;
  train::Model model;
  Operation train_op, init;
  std::string table_device;  // requested device of embedding/embeddings
};

using OptimizerFactory = std::function<std::unique_ptr<train::Optimizer>()>;

// The worker's graph: variables round-robin over 2 PS tasks, everything
// else on the worker.
std::unique_ptr<EmbeddingGraph> BuildGraph(const OptimizerFactory& make_optimizer) {
  auto g = std::make_unique<EmbeddingGraph>();
  placement::ReplicaDeviceSetterOptions rds;
  rds.ps_tasks = 2;
  rds.worker_device = kWorker;
  auto setter = placement::ReplicaDeviceSetter(rds);
  if (!setter.ok()) {
    g->root.UpdateStatus(setter.status());
    return g;
  }
  Scope s = g->root.WithDeviceFunction(*setter);
  s.SetGraphSeed(7);
  g->global_step = std::make_unique<Variable>(train::CreateGlobalStep(s));
  g->ids = ops::Placeholder(s.WithOpName("ids"), DT_INT32,
                            ops::Placeholder::Shape(PartialShape({-1, kLen})));
  g->labels = ops::Placeholder(s.WithOpName("labels"), DT_INT32,
                               ops::Placeholder::Shape(PartialShape({-1})));
  g->layers = std::make_unique<train::Layers>(s, 7);
  train::EmbeddingModelOptions mo;
  mo.vocab_size = kVocab;
  mo.embedding_dim = kDim;
  mo.hidden = 64;
  mo.classes = 2;
  g->model = train::EmbeddingClassifier(*g->layers, g->ids, g->labels, mo);
  g->optimizer = make_optimizer();
  auto train_op = train::TrainOp(s, *g->layers, g->model.loss, *g->optimizer, g->global_step.get());
  if (!train_op.ok()) {
    g->root.UpdateStatus(train_op.status());
    return g;
  }
  g->train_op = *train_op;
  g->init = client::GlobalVariablesInitializer(s);
  for (const Variable& v : g->layers->trainable_variables()) {
    if (v.name() == "embedding/embeddings") g->table_device = v.op().node()->requested_device();
  }
  return g;
}

struct Traffic {
  int64_t to_table_ps = 0, from_table_ps = 0;
  int64_t largest_to_table_ps = 0;
  std::string edges;  // for failure messages
};

// Bytes per step between the worker and the table's PS task, measured.
absl::StatusOr<Traffic> MeasureTraffic(const tensorflow::RunMetadata& md,
                                       const std::string& table_task) {
  GR_ASSIGN_OR_RETURN(placement::PlacementReport report, placement::MeasuredTrafficReport(md));
  Traffic t;
  for (const placement::EdgeReport& e : report.edges) {
    absl::StrAppend(&t.edges, e.src_task, " -> ", e.dst_task, " ", e.tensor, " ", e.bytes_per_step,
                    "\n");
    if (e.src_task == kWorker && e.dst_task == table_task) {
      t.to_table_ps += e.bytes_per_step;
      t.largest_to_table_ps = std::max(t.largest_to_table_ps, e.bytes_per_step);
    }
    if (e.src_task == table_task && e.dst_task == kWorker) t.from_table_ps += e.bytes_per_step;
  }
  return t;
}

struct Case {
  std::string name;
  OptimizerFactory make_optimizer;
  int steps;
  double min_accuracy;  // on kEvalExamples held-out sequences
};

class EmbeddingTrainTest : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { distributed::RegisterGrpcSession(); }

  void SetUp() override {
    distributed::LocalClusterOptions o;
    o.jobs = {{"ps", 2}, {"worker", 1}};
    o.server.intra_op_threads = 1;
    o.server.inter_op_threads = 2;
    auto c = distributed::LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
  }
  void TearDown() override {
    if (cluster_) cluster_->StopAll();
  }

  std::unique_ptr<distributed::LocalCluster> cluster_;
};

// Accuracy of `g` on `eval`.
absl::StatusOr<float> Accuracy(const EmbeddingGraph& g, const ClientSession& session,
                               const Batch& eval) {
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                      session.Run({{g.ids, eval.ids}, {g.labels, eval.labels}}, {g.model.accuracy},
                                  {}, Deadline(), nullptr));
  return out[0].scalar<float>();
}

TEST_P(EmbeddingTrainTest, LearnsSignalIdsAndSendsOnlyGatheredRows) {
  std::unique_ptr<EmbeddingGraph> g = BuildGraph(GetParam().make_optimizer);
  ASSERT_TRUE(g->root.ok()) << g->root.status();
  // Round robin: global_step on ps:0, the table on ps:1.
  ASSERT_EQ(g->table_device, "/job:ps/task:1");
  const std::string table_task = placement::TaskOfDevice(g->table_device);

  SessionOptions so;
  so.target = cluster_->target("worker", 0);
  ClientSession session(g->root, so);
  auto init = session.Run({}, {}, {g->init}, Deadline(), nullptr);
  ASSERT_TRUE(init.ok()) << init.status();

  std::mt19937 eval_rng(12345);
  const Batch eval = MakeBatch(eval_rng, kEvalExamples);
  auto before = Accuracy(*g, session, eval);
  ASSERT_TRUE(before.ok()) << before.status();

  std::mt19937 rng(1);
  float first_loss = 0;
  for (int step = 0; step < GetParam().steps; ++step) {
    Batch b = MakeBatch(rng, kBatch);
    ClientSession::FeedType feeds = {{g->ids, b.ids}, {g->labels, b.labels}};
    tensorflow::RunOptions ro = Deadline();
    tensorflow::RunMetadata md;
    const bool trace = step == 10;
    if (trace) ro.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
    auto out = session.Run(feeds, {g->model.loss}, {g->train_op}, ro, trace ? &md : nullptr);
    ASSERT_TRUE(out.ok()) << "step " << step << ": " << out.status();
    if (step == 0) first_loss = (*out)[0].scalar<float>();
    if (!trace) continue;

    auto traffic = MeasureTraffic(md, table_task);
    ASSERT_TRUE(traffic.ok()) << traffic.status();
    std::cout << "measured edges of step " << step << ":\n" << traffic->edges;
    // The gradient rows: one kDim-float row per gathered id.
    const int64_t rows_bytes = kBatch * kLen * kDim * 4;  // 81,920
    EXPECT_EQ(traffic->largest_to_table_ps, rows_bytes) << traffic->edges;
    // Rows, their indices, the ids of the forward gather and the small
    // dense gradients of the variables sharing the task: under a tenth of
    // the table (a densified gradient alone would be the whole table).
    EXPECT_GE(traffic->to_table_ps, rows_bytes) << traffic->edges;
    EXPECT_LT(traffic->to_table_ps, kTableBytes / 10) << traffic->edges;
    // The forward pass brings back the gathered rows, not the table.
    EXPECT_LT(traffic->from_table_ps, kTableBytes / 10) << traffic->edges;
  }

  auto after = Accuracy(*g, session, eval);
  ASSERT_TRUE(after.ok()) << after.status();
  auto last = session.Run({{g->ids, eval.ids}, {g->labels, eval.labels}},
                          {g->model.loss, g->global_step->Read()}, {}, Deadline(), nullptr);
  ASSERT_TRUE(last.ok()) << last.status();
  const float eval_loss = (*last)[0].scalar<float>();
  std::cout << GetParam().name << ": accuracy " << *before << " -> " << *after << ", loss "
            << first_loss << " -> " << eval_loss << " (held-out)\n";
  EXPECT_EQ((*last)[1].scalar<int64_t>(), GetParam().steps);
  EXPECT_LT(*before, 0.6);  // balanced classes: chance before training
  EXPECT_GE(*after, GetParam().min_accuracy);
  EXPECT_LT(eval_loss, first_loss - 0.4);
}

// Thresholds: measured held-out accuracy with margin (fixed seeds; seeds
// 2-5 of the data and initializers for the spread).
INSTANTIATE_TEST_SUITE_P(
    Optimizers, EmbeddingTrainTest,
    ::testing::Values(
        // Adam densifies the slices on the PS (UnsortedSegmentSum colocated
        // with the table), so rows still travel sparse. 300 steps: measured
        // 0.946 (0.95-0.962 over seeds 2-5).
        Case{"Adam", [] { return std::make_unique<train::AdamOptimizer>(0.01); }, 300, 0.85},
        // Adagrad applies the rows with ResourceSparseApplyAdagrad. Its
        // steps scale with the gradient, which the mean over kLen ids makes
        // small: accuracy stays at chance on a plateau, then jumps to 1.0
        // between step ~900 and ~2000 (seeds 2-5, 7). 3000 steps: measured
        // 1.0 for every seed.
        Case{"Adagrad", [] { return std::make_unique<train::AdagradOptimizer>(0.5); }, 3000, 0.9}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace graphrun
