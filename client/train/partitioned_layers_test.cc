// Layers with a partitioner: Dense kernels and Embedding tables become
// PartitionedVariables. A partitioned model starts and trains (GD and Adam,
// dense and sparse gradients) bit for bit like the unpartitioned one, its
// parts go to different PS tasks under ReplicaDeviceSetter, and the
// optimizer's slots follow each part.
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/train/gradients.h"
#include "client/train/layers.h"
#include "client/train/models.h"
#include "client/train/ops_internal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/replica_device_setter.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using ::testing::ElementsAre;

bool BitEqual(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.TotalBytes() == b.TotalBytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

Output Placeholder(const Scope& s, DataType dt, const PartialShape& shape) {
  return internal::Op(s, "Placeholder")
      .Attr("dtype", internal::AType(dt))
      .Attr("shape", client::internal::AttrShape(shape))
      .Out();
}

std::vector<std::string> Names(const std::vector<Variable>& vs) {
  std::vector<std::string> out;
  for (const Variable& v : vs) out.push_back(v.name());
  return out;
}

// The full value of every logical variable of `layers`, by full name: a
// partitioned one read through ConcatV2 of its parts.
std::map<std::string, Output> FullReads(const Scope& s, const Layers& layers) {
  std::map<std::string, Output> reads;
  for (const PartitionedVariable& pv : layers.partitioned_variables()) {
    reads[pv.name()] = pv.Read(s);
  }
  for (const Variable& v : layers.trainable_variables()) {
    if (v.save_slice_info() == nullptr) reads[v.name()] = v.Read(s);
  }
  return reads;
}

enum class Kind { kMlp, kEmbedding };

struct Trace {
  std::vector<std::string> variable_names;
  std::vector<Tensor> losses;
  std::map<std::string, Tensor> initial, final;
};

enum class Opt { kGradientDescent, kAdam, kMomentum };

const char* OptName(Opt o) {
  switch (o) {
    case Opt::kGradientDescent:
      return "GradientDescent";
    case Opt::kAdam:
      return "Adam";
    case Opt::kMomentum:
      return "Momentum";
  }
  return "?";
}

// Builds the model with `partitioner`, trains `steps` steps on a fixed
// batch with optimizer `opt`, and records everything.
Trace Train(Kind kind, Opt opt, VariablePartitioner partitioner, int steps = 4) {
  Trace t;
  Scope s = Scope::NewRootScope();
  Layers layers(s, LayersOptions{7, std::move(partitioner)});
  Output x, labels = Placeholder(s, DT_INT32, PartialShape({-1}));
  Model m;
  Tensor xs;
  if (kind == Kind::kMlp) {
    x = Placeholder(s, DT_FLOAT, PartialShape({-1, 13}));
    MlpOptions o;
    o.hidden = {11, 7};
    o.classes = 3;
    m = Mlp(layers, x, labels, o);
    xs = Tensor(DT_FLOAT, TensorShape({4, 13}));
    for (int i = 0; i < 52; ++i) xs.flat<float>()[i] = ((i * 29) % 17) * 0.13f - 1.0f;
  } else {
    x = Placeholder(s, DT_INT32, PartialShape({-1, 3}));
    EmbeddingModelOptions o;
    o.vocab_size = 10;
    o.embedding_dim = 4;
    o.hidden = 6;
    o.classes = 3;
    m = EmbeddingClassifier(layers, x, labels, o);
    // Ids from every part, repeated within and across examples.
    xs = Tensor::FromVector<int32_t>({0, 9, 4, 4, 2, 7, 9, 9, 1, 5, 3, 8}, TensorShape({4, 3}));
  }
  GradientDescentOptimizer gd(0.25f);
  AdamOptimizer adam(0.05f);
  MomentumOptimizer momentum(0.25f, 0.9);
  Optimizer& optimizer = opt == Opt::kAdam       ? static_cast<Optimizer&>(adam)
                         : opt == Opt::kMomentum ? static_cast<Optimizer&>(momentum)
                                                 : gd;
  auto train = TrainOp(s, layers, m.loss, optimizer);
  EXPECT_TRUE(train.ok()) << train.status();
  t.variable_names = Names(layers.trainable_variables());
  std::map<std::string, Output> reads = FullReads(s, layers);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!train.ok() || !s.ok()) return t;

  ClientSession session(s);
  EXPECT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  auto fetch_all = [&](std::map<std::string, Tensor>* out) {
    for (const auto& [name, read] : reads) {
      auto r = session.Run({read});
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) (*out)[name] = (*r)[0];
    }
  };
  fetch_all(&t.initial);
  ClientSession::FeedType feeds = {{x, xs}, {labels, Tensor::FromVector<int32_t>({0, 1, 2, 1})}};
  for (int i = 0; i < steps; ++i) {
    auto r = session.Run(feeds, {m.loss}, {*train});
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) t.losses.push_back((*r)[0]);
  }
  fetch_all(&t.final);
  return t;
}

void ExpectSameTraining(const Trace& whole, const Trace& parts) {
  ASSERT_EQ(whole.losses.size(), parts.losses.size());
  for (size_t i = 0; i < whole.losses.size(); ++i) {
    EXPECT_TRUE(BitEqual(whole.losses[i], parts.losses[i]))
        << "step " << i << ": " << whole.losses[i].DebugString() << " vs "
        << parts.losses[i].DebugString();
  }
  ASSERT_EQ(whole.final.size(), parts.final.size());
  for (const auto& [name, value] : whole.initial) {
    ASSERT_TRUE(parts.initial.count(name)) << name;
    EXPECT_TRUE(BitEqual(value, parts.initial.at(name))) << name << " initial";
    EXPECT_TRUE(BitEqual(whole.final.at(name), parts.final.at(name))) << name << " final";
  }
  // Training changed the weights (the comparison is not vacuous).
  EXPECT_FALSE(BitEqual(whole.initial.begin()->second, whole.final.begin()->second));
}

TEST(PartitionedLayersTest, MlpWithPartitionedKernelsTrainsBitIdentically) {
  VariablePartitioner split = PartitionsByName({{"dense/kernel", 3}, {"dense_1/kernel", 2}});
  for (Opt opt : {Opt::kGradientDescent, Opt::kAdam}) {
    SCOPED_TRACE(OptName(opt));
    Trace whole = Train(Kind::kMlp, opt, nullptr);
    Trace parts = Train(Kind::kMlp, opt, split);
    EXPECT_THAT(whole.variable_names,
                ElementsAre("dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias",
                            "dense_2/kernel", "dense_2/bias"));
    EXPECT_THAT(parts.variable_names,
                ElementsAre("dense/kernel/part_0", "dense/kernel/part_1", "dense/kernel/part_2",
                            "dense/bias", "dense_1/kernel/part_0", "dense_1/kernel/part_1",
                            "dense_1/bias", "dense_2/kernel", "dense_2/bias"));
    ExpectSameTraining(whole, parts);
  }
}

TEST(PartitionedLayersTest, PartitionedEmbeddingTrainsBitIdentically) {
  // A function partitioner: every variable with more than 8 rows in 3.
  VariablePartitioner big = [](const std::string&, const PartialShape& shape) {
    return shape.dim(0) > 8 ? 3 : 1;
  };
  // Momentum too: its sparse update changes every row a gradient lists,
  // even with a zero value, so each part's gradient must list only the
  // rows of the ids that fell in it.
  for (Opt opt : {Opt::kGradientDescent, Opt::kAdam, Opt::kMomentum}) {
    SCOPED_TRACE(OptName(opt));
    Trace whole = Train(Kind::kEmbedding, opt, nullptr);
    Trace parts = Train(Kind::kEmbedding, opt, big);
    EXPECT_THAT(parts.variable_names,
                ElementsAre("embedding/embeddings/part_0", "embedding/embeddings/part_1",
                            "embedding/embeddings/part_2", "dense/kernel", "dense/bias",
                            "dense_1/kernel", "dense_1/bias"));
    ExpectSameTraining(whole, parts);
  }
}

TEST(PartitionedLayersTest, PartsAndTheirSlotsSpreadOverPsTasks) {
  Scope root = Scope::NewRootScope();
  placement::ReplicaDeviceSetterOptions o;
  o.ps_tasks = 3;
  auto setter = placement::ReplicaDeviceSetter(o);
  ASSERT_TRUE(setter.ok()) << setter.status();
  Scope s = root.WithDeviceFunction(*setter);
  Output x = Placeholder(s, DT_FLOAT, PartialShape({-1, 10}));
  Output labels = Placeholder(s, DT_INT32, PartialShape({-1}));
  Layers layers(s, LayersOptions{1, PartitionsByName({{"dense/kernel", 3}})});
  MlpOptions mo;
  mo.hidden = {8};
  mo.classes = 2;
  Model m = Mlp(layers, x, labels, mo);
  AdamOptimizer adam(0.01f);
  auto train = TrainOp(s, layers, m.loss, adam);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_EQ(layers.partitioned_variables().size(), 1u);
  const PartitionedVariable& kernel = layers.partitioned_variables()[0];
  ASSERT_EQ(kernel.num_parts(), 3);
  for (int k = 0; k < 3; ++k) {
    const Variable& part = kernel.parts()[k];
    const std::string device = absl::StrCat("/job:ps/task:", k);
    EXPECT_EQ(part.op().node()->requested_device(), device) << part.name();
    for (int slot : {0, 1}) {
      Variable* m_or_v = adam.GetSlot(part, slot);
      ASSERT_NE(m_or_v, nullptr);
      EXPECT_EQ(m_or_v->name(), absl::StrCat(part.name(), slot == 0 ? "/Adam" : "/Adam_1"));
      EXPECT_EQ(m_or_v->op().node()->requested_device(), device) << m_or_v->name();
    }
  }
  // The concat of the parts (the MatMul's weights) runs on the worker.
  int concats = 0;
  for (Node* n : root.graph()->nodes()) {
    if (n->op() == "ConcatV2" && absl::StartsWith(n->name(), "dense/")) {
      ++concats;
      EXPECT_EQ(n->requested_device(), "/job:worker") << n->name();
    }
  }
  EXPECT_EQ(concats, 1);
}

// The table is never read whole: each part gathers its rows on its own PS
// task, and the sparse updates go to the parts there too.
TEST(PartitionedLayersTest, EmbeddingGathersNextToEachPart) {
  Scope root = Scope::NewRootScope();
  placement::ReplicaDeviceSetterOptions o;
  o.ps_tasks = 3;
  auto setter = placement::ReplicaDeviceSetter(o);
  ASSERT_TRUE(setter.ok()) << setter.status();
  Scope s = root.WithDeviceFunction(*setter);
  Output ids = Placeholder(s, DT_INT64, PartialShape({-1, 5}));
  Output labels = Placeholder(s, DT_INT64, PartialShape({-1}));
  Layers layers(s, LayersOptions{3, PartitionsByName({{"embedding/embeddings", 3}})});
  EmbeddingModelOptions eo;
  eo.vocab_size = 100;
  eo.embedding_dim = 8;
  Model m = EmbeddingClassifier(layers, ids, labels, eo);
  GradientDescentOptimizer sgd(0.1f);
  auto train = TrainOp(s, layers, m.loss, sgd);
  ASSERT_TRUE(train.ok()) << train.status();
  std::map<std::string, std::string> part_device;
  for (const Variable& p : layers.partitioned_variables().at(0).parts()) {
    part_device[p.name()] = p.op().node()->requested_device();
  }
  ASSERT_EQ(part_device.size(), 3u);
  std::set<std::string> devices;
  for (const auto& [name, device] : part_device) devices.insert(device);
  EXPECT_EQ(devices.size(), 3u);
  int gathers = 0, scatters = 0;
  for (Node* n : root.graph()->nodes()) {
    if (n->num_inputs() == 0) continue;
    const Edge* in0 = nullptr;
    for (const Edge* e : n->in_edges()) {
      if (!e->IsControlEdge() && e->dst_input == 0) in0 = e;
    }
    if (in0 == nullptr || !part_device.count(in0->src->name())) continue;
    EXPECT_NE(n->op(), "ReadVariableOp") << n->name() << " reads a whole part";
    EXPECT_EQ(n->requested_device(), part_device[in0->src->name()]) << n->name();
    gathers += n->op() == "ResourceGather";
    scatters += n->op() == "ResourceScatterAdd";
  }
  EXPECT_EQ(gathers, 3);
  EXPECT_EQ(scatters, 3);
}

// The gradient of a lookup reaches each part as IndexedSlices of the rows
// its ids named, in the ids' order (duplicates kept), with the part's own
// row numbers and shape: nothing for rows of other parts.
TEST(PartitionedLayersTest, LookupGradientGivesEachPartOnlyItsRows) {
  Scope s = Scope::NewRootScope();
  PartitionedVariable w(s.WithOpName("w"), {7, 3}, DT_FLOAT, std::vector<int64_t>{2, 4, 1},
                        init::Zeros());
  // Positions 0..5 hold ids 6, 0, 3 / 3, 1, 5: part 0 = rows [0, 2),
  // part 1 = rows [2, 6), part 2 = row 6.
  Output ids =
      internal::Const(s, Tensor::FromVector<int32_t>({6, 0, 3, 3, 1, 5}, TensorShape({2, 3})));
  Output rows = w.Gather(s, ids);
  Tensor weights(DT_FLOAT, TensorShape({2, 3, 3}));
  for (int i = 0; i < 18; ++i) weights.flat<float>()[i] = static_cast<float>(i + 1);
  Output y = internal::Sum(s, internal::Mul(s, rows, internal::Const(s, weights)), {0, 1, 2});
  std::vector<Output> handles;
  for (const Variable& p : w.parts()) handles.push_back(p.handle());
  auto g = ComputeGradients(s, {y}, handles, {});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->size(), 3u);
  std::vector<Output> fetches;
  for (const Gradient& gk : *g) {
    ASSERT_TRUE(gk.is_sparse());
    fetches.insert(fetches.end(), {gk.sparse->indices, gk.sparse->values, gk.sparse->dense_shape});
  }
  ClientSession session(s);
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  auto r = session.Run(fetches);
  ASSERT_TRUE(r.ok()) << r.status();
  struct Want {
    std::vector<int64_t> local_rows, positions, dense_shape;
  };
  const Want want[] = {
      {{0, 1}, {1, 4}, {2, 3}}, {{1, 1, 3}, {2, 3, 5}, {4, 3}}, {{0}, {0}, {1, 3}}};
  auto ints = [](const Tensor& t) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      v.push_back(t.dtype() == DT_INT32 ? t.flat<int32_t>()[i] : t.flat<int64_t>()[i]);
    }
    return v;
  };
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(absl::StrCat("part ", k));
    const Tensor& indices = (*r)[3 * k];
    const Tensor& values = (*r)[3 * k + 1];
    EXPECT_EQ(ints(indices), want[k].local_rows);
    EXPECT_EQ(ints((*r)[3 * k + 2]), want[k].dense_shape);
    // d y / d row at position p is weights[p].
    const int64_t n = static_cast<int64_t>(want[k].positions.size());
    ASSERT_EQ(values.shape(), TensorShape({n, 3}));
    for (int64_t i = 0; i < n; ++i) {
      for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(values.flat<float>()[i * 3 + j],
                  weights.flat<float>()[want[k].positions[i] * 3 + j]);
      }
    }
  }
}

// An eval tower reuses the partitioned variables and computes the same.
TEST(PartitionedLayersTest, ReusingTowerSharesTheParts) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DT_FLOAT, PartialShape({-1, 6}));
  Output labels = Placeholder(s, DT_INT32, PartialShape({-1}));
  Layers layers(s, LayersOptions{2, PartitionsByName({{"dense/kernel", 2}})});
  MlpOptions mo;
  mo.hidden = {5};
  mo.classes = 3;
  Model m = Mlp(layers, x, labels, mo);
  int handles = 0;
  for (Node* n : s.graph()->nodes()) handles += n->op() == "VarHandleOp";
  Layers eval(s.NewSubScope("eval"), layers);
  Model e = Mlp(eval, x, labels, mo);
  ASSERT_TRUE(s.ok()) << s.status();
  int after = 0;
  for (Node* n : s.graph()->nodes()) after += n->op() == "VarHandleOp";
  EXPECT_EQ(after, handles);
  EXPECT_EQ(Names(eval.trainable_variables()), Names(layers.trainable_variables()));
  ASSERT_EQ(eval.partitioned_variables().size(), 1u);
  EXPECT_EQ(eval.partitioned_variables()[0].name(), "dense/kernel");
  ClientSession session(s);
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  Tensor xs(DT_FLOAT, TensorShape({2, 6}));
  for (int i = 0; i < 12; ++i) xs.flat<float>()[i] = 0.3f * static_cast<float>(i % 5) - 0.5f;
  auto r = session.Run({{x, xs}}, {m.logits, e.logits});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(BitEqual((*r)[0], (*r)[1]));
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
