// A lookup in a PartitionedVariable split over two PS tasks, trained with
// sparse GradientDescent on an in-process 2 PS + 1 worker gRPC cluster.
// One FULL_TRACE step's RunMetadata says what crossed the network: each
// part's PS sends the rows of the ids that fell in its part, not a row per
// id of the batch, and receives those ids and their gradient rows only.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/ops.h"
#include "client/partitioned_variable.h"
#include "client/train/optimizers.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "gtest/gtest.h"
#include "placement/placement_report.h"
#include "placement/replica_device_setter.h"

namespace graphrun {
namespace {

using client::ClientSession;
using client::Output;
using client::PartitionedVariable;
using client::Scope;
namespace ops = client::ops;

constexpr int64_t kRows = 1000;
constexpr int64_t kDim = 64;
constexpr int64_t kRowBytes = kDim * 4;
const char kWorker[] = "/job:worker/task:0";

class PartitionedLookupTrafficTest : public ::testing::Test {
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

struct TaskTraffic {
  int64_t sent = 0, received = 0;  // data bytes to and from the worker
  int64_t largest_received = 0;
};

TEST_F(PartitionedLookupTrafficTest, EachPsSendsOnlyTheRowsOfItsIds) {
  Scope root = Scope::NewRootScope();
  placement::ReplicaDeviceSetterOptions rds;
  rds.ps_tasks = 2;
  rds.worker_device = kWorker;
  auto setter = placement::ReplicaDeviceSetter(rds);
  ASSERT_TRUE(setter.ok()) << setter.status();
  Scope s = root.WithDeviceFunction(*setter);
  // Parts of 500 rows: part k on ps:k (round robin in creation order).
  PartitionedVariable table(s.WithOpName("table"), {kRows, kDim}, DT_FLOAT, 2,
                            client::init::RandomUniform(-0.05, 0.05, 3));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(table.num_parts(), 2);
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(table.parts()[k].op().node()->requested_device(), absl::StrCat("/job:ps/task:", k));
  }
  Output ids =
      ops::Placeholder(s.WithOpName("ids"), DT_INT32, ops::Placeholder::Shape(PartialShape({-1})));
  Output rows = table.Gather(s, ids);
  Output loss = ops::Sum(s, ops::Square(s, rows), Tensor::FromVector<int32_t>({0, 1}));
  client::train::GradientDescentOptimizer sgd(0.1f);
  auto train = sgd.Minimize(s, loss, table.parts());
  ASSERT_TRUE(train.ok()) << train.status();
  auto init = client::GlobalVariablesInitializer(s);
  ASSERT_TRUE(root.ok()) << root.status();

  // A batch of 64 ids: 48 in part 0 (repeats included), 16 in part 1.
  const int64_t in_part[2] = {48, 16};
  std::vector<int32_t> batch;
  for (int i = 0; i < 48; ++i) batch.push_back((i * 37) % 40);
  for (int i = 0; i < 16; ++i) batch.insert(batch.begin() + 3 * i, 500 + (i * 53) % 500);
  ASSERT_EQ(batch.size(), 64u);

  SessionOptions so;
  so.target = cluster_->target("worker", 0);
  ClientSession session(root, so);
  tensorflow::RunOptions ro;
  ro.set_timeout_in_ms(60000);
  ASSERT_TRUE(session.Run({}, {}, {init}, ro, nullptr).ok());
  ro.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  tensorflow::RunMetadata md;
  auto out = session.Run({{ids, Tensor::FromVector<int32_t>(batch)}}, {loss}, {*train}, ro, &md);
  ASSERT_TRUE(out.ok()) << out.status();

  auto report = placement::MeasuredTrafficReport(md);
  ASSERT_TRUE(report.ok()) << report.status();
  std::map<std::string, TaskTraffic> ps;
  std::string edges;
  for (const placement::EdgeReport& e : report->edges) {
    absl::StrAppend(&edges, e.src_task, " -> ", e.dst_task, " ", e.tensor, " ", e.bytes_per_step,
                    "\n");
    if (absl::StartsWith(e.tensor, "^")) continue;  // control edges: a 4-byte dummy
    if (e.src_task == kWorker) {
      TaskTraffic& t = ps[e.dst_task];
      t.received += e.bytes_per_step;
      t.largest_received = std::max(t.largest_received, e.bytes_per_step);
    }
    if (e.dst_task == kWorker) ps[e.src_task].sent += e.bytes_per_step;
  }
  std::cout << "measured edges:\n" << edges;
  const int64_t batch_rows_bytes = static_cast<int64_t>(batch.size()) * kRowBytes;
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(absl::StrCat("ps:", k));
    const TaskTraffic& t = ps[absl::StrCat("/job:ps/task:", k)];
    const int64_t rows_bytes = in_part[k] * kRowBytes;
    // Forward: only the gathered rows come back (K rows per id would be
    // batch_rows_bytes from each PS).
    EXPECT_EQ(t.sent, rows_bytes) << edges;
    EXPECT_LT(t.sent, batch_rows_bytes) << edges;
    // To the PS: the part's local ids for the gather, then the gradient
    // rows and their indices (4 bytes an id) for the sparse update.
    EXPECT_EQ(t.largest_received, rows_bytes) << edges;
    EXPECT_EQ(t.received, rows_bytes + 2 * in_part[k] * 4) << edges;
  }
}

}  // namespace
}  // namespace graphrun
