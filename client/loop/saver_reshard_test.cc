// Saver with partitioned variables on in-process gRPC clusters: variables
// spread by ReplicaDeviceSetter over the PS tasks, "w" cut into parts that
// are saved as slices of "w". A checkpoint written from 3 PS tasks with 3
// parts restores bit for bit into 2 PS tasks with 2 or 4 parts or a plain
// "w", a plain checkpoint into 1 PS task (plain or in parts), Adam's slots
// follow (saved as slices of "w/Adam"); every SaveV2 runs on the PS that
// holds its variables; a different full shape is InvalidArgument naming "w".
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/loop/saver.h"
#include "client/ops.h"
#include "client/partitioned_variable.h"
#include "client/train/optimizers.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/io/checkpoint_util.h"
#include "placement/replica_device_setter.h"

namespace graphrun {
namespace client {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kStepTimeoutMs = 30000;

bool BitEqual(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.TotalBytes() == b.TotalBytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

std::string TempDir() {
  std::string base = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/saver_reshard_test_XXXXXX";
  return mkdtemp(dir.data());
}

tensorflow::RunOptions Deadline() {
  tensorflow::RunOptions ro;
  ro.set_timeout_in_ms(kStepTimeoutMs);
  return ro;
}

// Known values, none exact in decimal.
Tensor WValue(int64_t rows) {
  Tensor t(DT_FLOAT, TensorShape({rows, 3}));
  for (int64_t i = 0; i < rows * 3; ++i) {
    t.flat<float>()[i] = (static_cast<float>(i) * 0.731f - 3.3f) / 7.0f;
  }
  return t;
}
Tensor AValue() { return Tensor::FromVector<float>({0.1f, -0.2f, 1e-30f, 3.14159f, -7.7f}); }
Tensor BValue() { return Tensor::Scalar<int64_t>((int64_t{1} << 50) + 3); }
Tensor CValue() {
  return Tensor::FromVector<double>({1.0 / 3, -2.0 / 7, 1e300, 0.1, -0.0, 5.5},
                                    TensorShape({2, 3}));
}

struct ModelSpec {
  int ps_tasks = 1;
  int w_parts = 0;  // 0: a plain Variable "w"
  int64_t w_rows = 7;
  bool adam = false;  // also an Adam train op on Sum(w^2) + Sum(a^2)
};

// "w" [w_rows, 3] (first, so its parts take PS tasks 0, 1, ... in order),
// then "a" [5] float, "b" [] int64, "c" [2, 3] double, all placed by
// ReplicaDeviceSetter over spec.ps_tasks PS tasks.
struct Model {
  explicit Model(const ModelSpec& spec) {
    placement::ReplicaDeviceSetterOptions o;
    o.ps_tasks = spec.ps_tasks;
    o.worker_device = "/job:worker/task:0";
    auto setter = placement::ReplicaDeviceSetter(o);
    if (!setter.ok()) {
      root.UpdateStatus(setter.status());
      return;
    }
    Scope s = root.WithDeviceFunction(*setter);
    const PartialShape w_shape({spec.w_rows, 3});
    if (spec.w_parts > 0) {
      w_parts.emplace(s.WithOpName("w"), w_shape, DT_FLOAT, spec.w_parts);
      vars = w_parts->parts();
      w_read = w_parts->Read();
    } else {
      w_plain.emplace(s.WithOpName("w"), w_shape, DT_FLOAT);
      vars = {*w_plain};
      w_read = w_plain->Read();
    }
    Variable a(s.WithOpName("a"), {5}, DT_FLOAT);
    Variable b(s.WithOpName("b"), PartialShape({}), DT_INT64);
    Variable c(s.WithOpName("c"), {2, 3}, DT_DOUBLE);
    reads = {w_read, a.Read(), b.Read(), c.Read()};
    std::vector<Operation> sets = {
        w_parts ? w_parts->Assign(s, WValue(spec.w_rows)) : w_plain->Assign(WValue(spec.w_rows)),
        a.Assign(AValue()), b.Assign(BValue()), c.Assign(CValue())};
    set_values = ops::NoOp(s.WithControlDependencies(sets)).operation;
    vars.insert(vars.end(), {a, b, c});
    if (spec.adam) {
      Output loss = ops::AddV2(s, ops::Sum(s, ops::Square(s, w_read), {0, 1}),
                               ops::Sum(s, ops::Square(s, reads[1]), 0));
      std::vector<Variable> trainable(vars.begin(), vars.end() - 2);  // w (parts), a
      auto op = adam.Minimize(s, loss, trainable);
      if (!op.ok()) {
        root.UpdateStatus(op.status());
        return;
      }
      train = *op;
      for (int slot : {0, 1}) {
        std::vector<Input> w_slots;
        for (size_t i = 0; i + 1 < trainable.size(); ++i) {
          w_slots.push_back(adam.GetSlot(trainable[i], slot)->Read());
        }
        reads.push_back(w_slots.size() == 1 ? adam.GetSlot(trainable[0], slot)->Read()
                                            : ops::ConcatV2(s, InputList(w_slots), 0).output);
        reads.push_back(adam.GetSlot(trainable.back(), slot)->Read());
      }
      for (const Variable& v : adam.variables()) {
        if (v.name() == "beta1_power" || v.name() == "beta2_power") reads.push_back(v.Read());
      }
      std::vector<Variable> opt = adam.variables();
      vars.insert(vars.end(), opt.begin(), opt.end());
      init_slots = GlobalVariablesInitializer(s);  // only the optimizer's have initializers
    }
  }

  Scope root = Scope::NewRootScope();
  std::optional<PartitionedVariable> w_parts;
  std::optional<Variable> w_plain;
  Output w_read;
  std::vector<Output> reads;  // w, a, b, c [, w/Adam, a/Adam, w/Adam_1, a/Adam_1, beta powers]
  std::vector<Variable> vars;
  Operation set_values;
  train::AdamOptimizer adam{0.1f};
  Operation train;
  Operation init_slots;
};

class SaverReshardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { distributed::RegisterGrpcSession(); }
  void TearDown() override {
    sessions_.clear();
    for (auto& c : clusters_) c->StopAll();
  }

  // A new cluster of `ps` PS tasks and one worker, a model on it and a
  // session on the worker's master. The model outlives the session.
  struct Setup {
    std::unique_ptr<Model> model;
    ClientSession* session = nullptr;
    std::unique_ptr<Saver> saver;
  };
  Setup Start(const ModelSpec& spec) {
    distributed::LocalClusterOptions o;
    o.jobs = {{"ps", spec.ps_tasks}, {"worker", 1}};
    o.server.intra_op_threads = 1;
    o.server.inter_op_threads = 2;
    auto c = distributed::LocalCluster::Start(o);
    EXPECT_TRUE(c.ok()) << c.status();
    Setup setup;
    setup.model = std::make_unique<Model>(spec);
    EXPECT_TRUE(setup.model->root.ok()) << setup.model->root.status();
    if (!c.ok()) return setup;
    auto saver = Saver::Create(setup.model->root, setup.model->vars);
    EXPECT_TRUE(saver.ok()) << saver.status();
    if (saver.ok()) setup.saver = std::make_unique<Saver>(*saver);
    SessionOptions so;
    so.target = (*c)->target("worker", 0);
    clusters_.push_back(std::move(*c));
    sessions_.push_back(std::make_unique<ClientSession>(setup.model->root, so));
    setup.session = sessions_.back().get();
    return setup;
  }

  absl::StatusOr<std::vector<Tensor>> Fetch(const Setup& s) {
    return s.session->Run({}, s.model->reads, {}, Deadline(), nullptr);
  }
  absl::Status RunOp(const Setup& s, const Operation& op) {
    return s.session->Run({}, {}, {op}, Deadline(), nullptr).status();
  }

  // Values set, saved to a fresh directory; returns the prefix.
  std::string SetAndSave(const Setup& s) {
    absl::Status st = RunOp(s, s.model->set_values);
    EXPECT_TRUE(st.ok()) << st;
    auto prefix = s.saver->Save(*s.session, TempDir(), 1);
    EXPECT_TRUE(prefix.ok()) << prefix.status();
    return prefix.ok() ? *prefix : "";
  }

  void ExpectKnownValues(const Setup& s, int64_t rows = 7) {
    auto r = Fetch(s);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(BitEqual((*r)[0], WValue(rows))) << (*r)[0].DebugString();
    EXPECT_TRUE(BitEqual((*r)[1], AValue())) << (*r)[1].DebugString();
    EXPECT_TRUE(BitEqual((*r)[2], BValue())) << (*r)[2].DebugString();
    EXPECT_TRUE(BitEqual((*r)[3], CValue())) << (*r)[3].DebugString();
  }

  std::vector<std::unique_ptr<distributed::LocalCluster>> clusters_;
  std::vector<std::unique_ptr<ClientSession>> sessions_;
};

TEST_F(SaverReshardTest, ThreePartsOnThreePsRestoreIntoOtherPartitionings) {
  Setup src = Start({/*ps_tasks=*/3, /*w_parts=*/3});
  ASSERT_NE(src.saver, nullptr);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(src.model->w_parts->parts()[k].op().node()->requested_device(),
              absl::StrCat("/job:ps/task:", k));
  }
  EXPECT_EQ(src.saver->num_shards(), 3);
  const std::string prefix = SetAndSave(src);
  ASSERT_FALSE(prefix.empty());

  // The index holds "w" as three slices, one per shard (PS task).
  auto reader = checkpoint::BundleReader::Open(prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> w_slices;
  std::set<int> w_shards;
  for (const checkpoint::BundleEntry& e : (*reader)->entries()) {
    EXPECT_FALSE(absl::StrContains(e.name, "part_")) << e.name;
    if (e.name != "w") continue;
    EXPECT_EQ(e.shape, TensorShape({7, 3}));
    w_slices.push_back(e.slice.DebugString());
    w_shards.insert(e.shard);
  }
  EXPECT_THAT(w_slices, ::testing::ElementsAre("0,3:0,3", "3,2:0,3", "5,2:0,3"));
  EXPECT_EQ(w_shards.size(), 3u);

  for (int parts : {2, 0, 4}) {
    SCOPED_TRACE(absl::StrCat("restored into ", parts, " parts on 2 PS"));
    Setup dst = Start({/*ps_tasks=*/2, parts});
    ASSERT_NE(dst.saver, nullptr);
    EXPECT_FALSE(Fetch(dst).ok());  // nothing there before the restore
    absl::Status st = dst.saver->Restore(*dst.session, prefix);
    ASSERT_TRUE(st.ok()) << st;
    ExpectKnownValues(dst);
  }
}

// Every SaveV2 reads only variables of its own device, in the client graph
// and in the partition graphs the master ran (no _Recv feeds a SaveV2).
TEST_F(SaverReshardTest, EverySaveV2RunsOnThePsHoldingItsVariables) {
  Setup src = Start({/*ps_tasks=*/3, /*w_parts=*/3});
  ASSERT_NE(src.saver, nullptr);
  ASSERT_TRUE(RunOp(src, src.model->set_values).ok());
  // The client graph: each SaveV2 asks for its variables' device.
  std::set<std::string> save_devices;
  for (Node* n : src.model->root.graph()->nodes()) {
    if (n->op() != "SaveV2") continue;
    save_devices.insert(n->requested_device());
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() || e->dst_input < 3) continue;
      ASSERT_EQ(e->src->op(), "ReadVariableOp") << e->src->name();
      const Node* var = nullptr;
      for (const Edge* ve : e->src->in_edges()) {
        if (!ve->IsControlEdge()) var = ve->src;
      }
      ASSERT_NE(var, nullptr);
      EXPECT_EQ(var->requested_device(), n->requested_device()) << var->name();
    }
  }
  EXPECT_EQ(save_devices,
            (std::set<std::string>{"/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2"}));

  // The partition graphs the master ran for a save.
  Node* filename = nullptr;
  Node* merge = nullptr;
  for (Node* n : src.model->root.graph()->nodes()) {
    if (n->name() == "save/filename") filename = n;
    if (n->name() == "save/merge") merge = n;
  }
  ASSERT_NE(filename, nullptr);
  ASSERT_NE(merge, nullptr);
  tensorflow::RunOptions ro = Deadline();
  ro.set_output_partition_graphs(true);
  tensorflow::RunMetadata md;
  const std::string prefix = TempDir() + "/traced";
  auto r = src.session->Run({{Output(filename), prefix}}, {}, {Operation(merge)}, ro, &md);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::string> ran_on;
  for (const tensorflow::GraphDef& g : md.partition_graphs()) {
    std::map<std::string, const tensorflow::NodeDef*> by_name;
    for (const auto& n : g.node()) by_name[n.name()] = &n;
    for (const auto& n : g.node()) {
      if (n.op() != "SaveV2") continue;
      ran_on.insert(n.device());
      EXPECT_THAT(n.device(), HasSubstr("/job:ps/")) << n.name();
      for (int i = 3; i < n.input_size(); ++i) {
        std::string in = n.input(i).substr(0, n.input(i).find(':'));
        ASSERT_TRUE(by_name.count(in)) << in;
        EXPECT_EQ(by_name[in]->op(), "ReadVariableOp") << n.name() << " input " << in;
        EXPECT_EQ(by_name[in]->device(), n.device()) << in;
      }
    }
  }
  EXPECT_EQ(ran_on.size(), 3u);  // three SaveV2s on three different PS tasks
  EXPECT_TRUE(checkpoint::BundleReader::Open(prefix).ok());
}

TEST_F(SaverReshardTest, PlainModelFromThreePsRestoresOntoOnePs) {
  Setup src = Start({/*ps_tasks=*/3, /*w_parts=*/0});
  ASSERT_NE(src.saver, nullptr);
  EXPECT_EQ(src.saver->num_shards(), 3);
  const std::string prefix = SetAndSave(src);
  ASSERT_FALSE(prefix.empty());
  for (int parts : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("restored into ", parts, " parts on 1 PS"));
    Setup dst = Start({/*ps_tasks=*/1, parts});
    ASSERT_NE(dst.saver, nullptr);
    EXPECT_EQ(dst.saver->num_shards(), 1);
    absl::Status st = dst.saver->Restore(*dst.session, prefix);
    ASSERT_TRUE(st.ok()) << st;
    ExpectKnownValues(dst);
  }
}

TEST_F(SaverReshardTest, DifferentFullShapeIsInvalidArgumentNamingTheVariable) {
  Setup src = Start({/*ps_tasks=*/3, /*w_parts=*/3});
  ASSERT_NE(src.saver, nullptr);
  const std::string prefix = SetAndSave(src);
  ASSERT_FALSE(prefix.empty());
  for (int parts : {2, 0}) {
    SCOPED_TRACE(absl::StrCat("restored into ", parts, " parts"));
    Setup dst = Start({/*ps_tasks=*/2, parts, /*w_rows=*/8});
    ASSERT_NE(dst.saver, nullptr);
    absl::Status st = dst.saver->Restore(*dst.session, prefix);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("tensor 'w'"));
  }
}

TEST_F(SaverReshardTest, AdamSlotsFollowTheParts) {
  Setup src = Start({/*ps_tasks=*/3, /*w_parts=*/3, /*w_rows=*/7, /*adam=*/true});
  ASSERT_NE(src.saver, nullptr);
  // Slots live with their part.
  for (const Variable& part : src.model->w_parts->parts()) {
    EXPECT_EQ(src.model->adam.GetSlot(part, 0)->op().node()->requested_device(),
              part.op().node()->requested_device());
  }
  ASSERT_TRUE(RunOp(src, src.model->set_values).ok());
  absl::Status st = RunOp(src, src.model->init_slots);
  ASSERT_TRUE(st.ok()) << st;
  for (int i = 0; i < 2; ++i) {
    st = RunOp(src, src.model->train);
    ASSERT_TRUE(st.ok()) << st;
  }
  auto prefix = src.saver->Save(*src.session, TempDir(), 2);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  auto reader = checkpoint::BundleReader::Open(*prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  int w_adam = 0, w_adam_1 = 0;
  for (const checkpoint::BundleEntry& e : (*reader)->entries()) {
    EXPECT_FALSE(absl::StrContains(e.name, "part_")) << e.name;
    w_adam += e.name == "w/Adam";
    w_adam_1 += e.name == "w/Adam_1";
  }
  EXPECT_EQ(w_adam, 3);
  EXPECT_EQ(w_adam_1, 3);

  Setup dst = Start({/*ps_tasks=*/2, /*w_parts=*/2, /*w_rows=*/7, /*adam=*/true});
  ASSERT_NE(dst.saver, nullptr);
  st = dst.saver->Restore(*dst.session, *prefix);
  ASSERT_TRUE(st.ok()) << st;
  // One more step on both: the same state gives the same bits.
  ASSERT_TRUE(RunOp(src, src.model->train).ok());
  ASSERT_TRUE(RunOp(dst, dst.model->train).ok());
  auto want = Fetch(src);
  auto got = Fetch(dst);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(want->size(), got->size());
  ASSERT_EQ(want->size(), 10u);
  for (size_t i = 0; i < want->size(); ++i) {
    EXPECT_TRUE(BitEqual((*want)[i], (*got)[i]))
        << src.model->reads[i].name() << ": " << (*want)[i].DebugString() << " vs "
        << (*got)[i].DebugString();
  }
  EXPECT_FALSE(BitEqual((*got)[0], WValue(7)));  // trained
}

}  // namespace
}  // namespace client
}  // namespace graphrun
