// One and two steps of every optimizer against the formulas, slot names
// and colocation, sparse updates (RMSProp's against hand-computed values and
// the dense update), global_step and learning-rate schedules.
#include "client/train/optimizers.h"

#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/client_session.h"
#include "client/train/learning_rate.h"
#include "client/train/ops_internal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using internal::Op;

const float kGrad[2] = {0.5f, -0.25f};

// w = {1, 2}; loss = sum(kGrad * w) so dloss/dw = kGrad exactly.
struct Fixture {
  Scope s = Scope::NewRootScope();
  Variable w{s.WithOpName("w"), PartialShape({2}), DT_FLOAT,
             init::Constant(Tensor::FromVector<float>({1, 2}))};
  Variable step = CreateGlobalStep(s);
  Output loss = internal::Sum(
      s, internal::Mul(s, w.Read(), Tensor::FromVector<float>({kGrad[0], kGrad[1]})), 0);
};

// Runs `train` twice and returns w after each step.
std::vector<std::vector<float>> TwoSteps(Fixture& f, Operation train) {
  ClientSession session(f.s);
  EXPECT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(f.s)}).ok());
  std::vector<std::vector<float>> out;
  for (int i = 0; i < 2; ++i) {
    auto r = session.Run({}, {}, {train});
    EXPECT_TRUE(r.ok()) << r.status();
    auto v = session.Run({f.w.Read(), f.step.Read()});
    EXPECT_TRUE(v.ok()) << v.status();
    if (!v.ok()) return out;
    out.push_back({(*v)[0].flat<float>()[0], (*v)[0].flat<float>()[1]});
    EXPECT_EQ((*v)[1].scalar<int64_t>(), i + 1);
  }
  return out;
}

void ExpectSteps(const std::vector<std::vector<float>>& got,
                 const std::function<void(int step, float* w)>& formula) {
  ASSERT_EQ(got.size(), 2u);
  float w[2] = {1, 2};
  for (int t = 1; t <= 2; ++t) {
    formula(t, w);
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(got[t - 1][i], w[i], 1e-6 * std::max(1.0f, std::abs(w[i])))
          << "step " << t << " element " << i;
    }
  }
}

TEST(OptimizersTest, GradientDescent) {
  Fixture f;
  GradientDescentOptimizer opt(0.1f);
  auto train = opt.Minimize(f.s, f.loss, {f.w}, &f.step);
  ASSERT_TRUE(train.ok()) << train.status();
  ExpectSteps(TwoSteps(f, *train), [](int, float* w) {
    for (int i = 0; i < 2; ++i) w[i] -= 0.1f * kGrad[i];
  });
}

TEST(OptimizersTest, MomentumAndNesterov) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov);
    Fixture f;
    MomentumOptimizer opt(0.1f, 0.9, nesterov);
    auto train = opt.Minimize(f.s, f.loss, {f.w}, &f.step);
    ASSERT_TRUE(train.ok()) << train.status();
    ASSERT_NE(opt.GetSlot(f.w, 0), nullptr);
    EXPECT_EQ(opt.GetSlot(f.w, 0)->name(), "w/Momentum");
    float accum[2] = {0, 0};
    ExpectSteps(TwoSteps(f, *train), [&](int, float* w) {
      for (int i = 0; i < 2; ++i) {
        accum[i] = accum[i] * 0.9f + kGrad[i];
        w[i] -= nesterov ? 0.1f * kGrad[i] + 0.1f * 0.9f * accum[i] : 0.1f * accum[i];
      }
    });
  }
}

TEST(OptimizersTest, Adam) {
  Fixture f;
  AdamOptimizer opt(0.01f);
  auto train = opt.Minimize(f.s, f.loss, {f.w}, &f.step);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(opt.GetSlot(f.w, 0)->name(), "w/Adam");
  EXPECT_EQ(opt.GetSlot(f.w, 1)->name(), "w/Adam_1");
  EXPECT_NE(f.s.graph()->FindNode("beta1_power"), nullptr);
  EXPECT_NE(f.s.graph()->FindNode("beta2_power"), nullptr);
  double m[2] = {0, 0}, v[2] = {0, 0};
  ExpectSteps(TwoSteps(f, *train), [&](int t, float* w) {
    const double lr_t = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (int i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * kGrad[i];
      v[i] = 0.999 * v[i] + 0.001 * kGrad[i] * kGrad[i];
      w[i] = static_cast<float>(w[i] - lr_t * m[i] / (std::sqrt(v[i]) + 1e-8));
    }
  });
}

TEST(OptimizersTest, Adagrad) {
  Fixture f;
  AdagradOptimizer opt(0.1f, 0.1);
  auto train = opt.Minimize(f.s, f.loss, {f.w}, &f.step);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(opt.GetSlot(f.w, 0)->name(), "w/Adagrad");
  double acc[2] = {0.1, 0.1};
  ExpectSteps(TwoSteps(f, *train), [&](int, float* w) {
    for (int i = 0; i < 2; ++i) {
      acc[i] += kGrad[i] * kGrad[i];
      w[i] = static_cast<float>(w[i] - 0.1 * kGrad[i] / std::sqrt(acc[i]));
    }
  });
}

TEST(OptimizersTest, RMSProp) {
  Fixture f;
  RMSPropOptimizer opt(0.01f, {0.9, 0.5, 1e-10});
  auto train = opt.Minimize(f.s, f.loss, {f.w}, &f.step);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(opt.GetSlot(f.w, 0)->name(), "w/RMSProp");
  EXPECT_EQ(opt.GetSlot(f.w, 1)->name(), "w/RMSProp_1");
  double ms[2] = {1, 1}, mom[2] = {0, 0};
  ExpectSteps(TwoSteps(f, *train), [&](int, float* w) {
    for (int i = 0; i < 2; ++i) {
      ms[i] = 0.9 * ms[i] + 0.1 * kGrad[i] * kGrad[i];
      mom[i] = 0.5 * mom[i] + 0.01 * kGrad[i] / std::sqrt(ms[i] + 1e-10);
      w[i] = static_cast<float>(w[i] - mom[i]);
    }
  });
}

// Updates and slots are colocated with their variable, so they follow it
// to its device (a parameter server).
TEST(OptimizersTest, UpdatesAndSlotsColocatedWithVariable) {
  Scope root = Scope::NewRootScope();
  Variable w(root.WithDevice("/job:ps/task:1").WithOpName("w"), PartialShape({2}), DT_FLOAT,
             init::Zeros());
  Scope worker = root.WithDevice("/job:worker/task:0");
  Output loss = internal::Sum(worker, internal::Square(worker, w.Read(worker)), 0);
  AdamOptimizer opt(0.01f);
  auto train = opt.Minimize(worker, loss, {w});
  ASSERT_TRUE(train.ok()) << train.status();
  int applies = 0;
  for (Node* n : root.graph()->nodes()) {
    const bool slot = n->name() == "w/Adam" || n->name() == "w/Adam_1";
    if (n->op() != "ResourceApplyAdam" && !slot) continue;
    ++applies;
    EXPECT_EQ(n->requested_device(), "/job:ps/task:1") << n->name();
    auto it = n->def().attr().find("_class");
    ASSERT_NE(it, n->def().attr().end()) << n->name();
    EXPECT_THAT(it->second.list().s(), ::testing::Contains("loc:@w")) << n->name();
  }
  EXPECT_EQ(applies, 3);
}

// Gathered rows give sparse updates that touch only those rows.
TEST(OptimizersTest, SparseUpdatesTouchOnlyGatheredRows) {
  for (int which = 0; which < 4; ++which) {
    SCOPED_TRACE(which);
    Scope s = Scope::NewRootScope();
    Variable table(s.WithOpName("table"), PartialShape({4, 2}), DT_FLOAT, init::Ones());
    Output rows = Op(s, "ResourceGather")
                      .In(table.handle())
                      .In({3, 1, 3})
                      .Attr("dtype", internal::AType(DT_FLOAT))
                      .Out();
    Output loss = internal::Sum(s, rows, {0, 1});
    std::unique_ptr<Optimizer> opt;
    if (which == 0) opt = std::make_unique<GradientDescentOptimizer>(0.5f);
    if (which == 1) opt = std::make_unique<MomentumOptimizer>(0.5f, 0.9);
    if (which == 2) opt = std::make_unique<AdagradOptimizer>(0.5f);
    if (which == 3) opt = std::make_unique<AdamOptimizer>(0.5f);
    auto train = opt->Minimize(s, loss, {table});
    ASSERT_TRUE(train.ok()) << train.status();
    ClientSession session(s);
    ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
    ASSERT_TRUE(session.Run({}, {}, {*train}).ok());
    auto r = session.Run({table.Read()});
    ASSERT_TRUE(r.ok()) << r.status();
    auto v = (*r)[0].flat<float>();
    // Rows 0 and 2 untouched; row 3 (gathered twice) and row 1 moved.
    EXPECT_EQ(v[0], 1.0f);
    EXPECT_EQ(v[4], 1.0f);
    EXPECT_LT(v[2], 1.0f);
    EXPECT_LT(v[6], 1.0f);
    // Row 3's gradient is 1 + 1 = 2 in one update, as the dense update
    // would give (TensorFlow deduplicates before a sparse apply); applied
    // twice in a row, Momentum would end at -0.45 and Adagrad lower too.
    if (which == 0 || which == 1) {
      EXPECT_FLOAT_EQ(v[2], 0.5f);  // 1 - 0.5 * 1 (Momentum: accum = 1)
      EXPECT_FLOAT_EQ(v[6], 0.0f);  // 1 - 0.5 * 2 (Momentum: accum = 2)
    }
    if (which == 2) {  // accum = 0.1 + g^2, var -= 0.5 * g / sqrt(accum)
      EXPECT_FLOAT_EQ(v[2], 1 - 0.5f * 1 / std::sqrt(1.1f));
      EXPECT_FLOAT_EQ(v[6], 1 - 0.5f * 2 / std::sqrt(4.1f));
    }
  }
}

// RMSProp on a [4, 2] table, lr = decay = momentum = 0.5, epsilon = 3, with
// gradient rows 3: [1, -1] and 1: [5, 1], either through a ResourceGather
// of rows {3, 1} (sparse) or a dense read of the whole table. Returns the
// table, ms and mom after each of `steps` steps, and the ops in the graph.
struct RMSPropRun {
  std::vector<std::vector<float>> table, ms, mom;
  std::multiset<std::string> ops;
};

RMSPropRun RunRMSProp(bool sparse, int steps) {
  RMSPropRun out;
  Scope s = Scope::NewRootScope();
  Variable table(s.WithOpName("table"), PartialShape({4, 2}), DT_FLOAT,
                 init::Constant(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2})));
  Output loss;
  if (sparse) {
    Output rows = Op(s, "ResourceGather")
                      .In(table.handle())
                      .In({3, 1})
                      .Attr("dtype", internal::AType(DT_FLOAT))
                      .Out();
    loss = internal::Sum(
        s, internal::Mul(s, rows, Tensor::FromVector<float>({1, -1, 5, 1}, {2, 2})), {0, 1});
  } else {
    loss =
        internal::Sum(s,
                      internal::Mul(s, table.Read(),
                                    Tensor::FromVector<float>({0, 0, 5, 1, 0, 0, 1, -1}, {4, 2})),
                      {0, 1});
  }
  RMSPropOptimizer opt(0.5f, {0.5, 0.5, 3.0});
  auto train = opt.Minimize(s, loss, {table});
  EXPECT_TRUE(train.ok()) << train.status();
  if (!train.ok()) return out;
  for (Node* n : s.graph()->nodes()) {
    out.ops.insert(n->op());
    if (n->op() == "ResourceSparseApplyRMSProp") {
      EXPECT_EQ(n->input_edge(0)->src->name(), "table");
      EXPECT_EQ(n->input_edge(1)->src->name(), "table/RMSProp");
      EXPECT_EQ(n->input_edge(2)->src->name(), "table/RMSProp_1");
    }
  }
  ClientSession session(s);
  EXPECT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  for (int i = 0; i < steps; ++i) {
    auto r = session.Run({}, {}, {*train});
    EXPECT_TRUE(r.ok()) << r.status();
    auto v =
        session.Run({table.Read(), opt.GetSlot(table, 0)->Read(), opt.GetSlot(table, 1)->Read()});
    EXPECT_TRUE(v.ok()) << v.status();
    if (!v.ok()) return out;
    for (auto [t, dst] :
         {std::make_pair(0, &out.table), std::make_pair(1, &out.ms), std::make_pair(2, &out.mom)}) {
      const float* p = (*v)[t].base<float>();
      dst->push_back(std::vector<float>(p, p + 8));
    }
  }
  return out;
}

TEST(OptimizersTest, RMSPropSparseUpdatesOnlyGatheredRowsAndSlots) {
  RMSPropRun sparse = RunRMSProp(true, 2);
  EXPECT_EQ(sparse.ops.count("ResourceSparseApplyRMSProp"), 1u);
  EXPECT_EQ(sparse.ops.count("ResourceApplyRMSProp"), 0u);
  // Not densified: the one UnsortedSegmentSum sums the rows of repeated
  // indices (here none) after a Unique.
  EXPECT_EQ(sparse.ops.count("Unique"), 1u);
  EXPECT_EQ(sparse.ops.count("UnsortedSegmentSum"), 1u);
  ASSERT_EQ(sparse.table.size(), 2u);
  // Step 1 by hand: ms = 0.5 * 1 + 0.5 * g^2 (1 for g = +-1, 13 for g = 5),
  // sqrt(ms + 3) = 2 or 4, mom = 0.5 * g / sqrt(ms + 3), var -= mom.
  // Rows 0 and 2, and their slots, are untouched (ms stays 1, mom 0).
  using V = std::vector<float>;
  EXPECT_EQ(sparse.table[0], (V{1, 2, 2.375f, 3.75f, 5, 6, 6.75f, 8.25f}));
  EXPECT_EQ(sparse.ms[0], (V{1, 1, 13, 1, 1, 1, 1, 1}));
  EXPECT_EQ(sparse.mom[0], (V{0, 0, 0.625f, 0.25f, 0, 0, 0.25f, -0.25f}));
  // Step 2 by hand, row 3: ms = 1, mom = 0.5 * 0.25 + 0.25 = 0.375.
  EXPECT_EQ(sparse.table[1][6], 6.375f);
  EXPECT_EQ(sparse.table[1][7], 8.625f);
  EXPECT_EQ(sparse.mom[1][6], 0.375f);
  for (int i : {0, 1, 4, 5}) {
    EXPECT_EQ(sparse.table[1][i], static_cast<float>(i + 1)) << i;
    EXPECT_EQ(sparse.ms[1][i], 1.0f) << i;
    EXPECT_EQ(sparse.mom[1][i], 0.0f) << i;
  }

  // The dense update of the same gradient agrees on the touched rows (it
  // decays ms of the others, where the gradient is 0).
  RMSPropRun dense = RunRMSProp(false, 2);
  EXPECT_EQ(dense.ops.count("ResourceApplyRMSProp"), 1u);
  EXPECT_EQ(dense.ops.count("ResourceSparseApplyRMSProp"), 0u);
  ASSERT_EQ(dense.table.size(), 2u);
  for (int step = 0; step < 2; ++step) {
    for (int i : {2, 3, 6, 7}) {
      SCOPED_TRACE(testing::Message() << "step " << step << " element " << i);
      EXPECT_FLOAT_EQ(sparse.table[step][i], dense.table[step][i]);
      EXPECT_FLOAT_EQ(sparse.ms[step][i], dense.ms[step][i]);
      EXPECT_FLOAT_EQ(sparse.mom[step][i], dense.mom[step][i]);
    }
  }
  EXPECT_EQ(dense.ms[0][0], 0.5f);
}

TEST(OptimizersTest, LearningRateSchedules) {
  Scope s = Scope::NewRootScope();
  Output step = internal::Op(s, "Placeholder")
                    .Attr("dtype", internal::AType(DT_INT64))
                    .Attr("shape", client::internal::AttrShape(PartialShape({})))
                    .Out();
  Output pc = PiecewiseConstant(s, step, {10, 20}, {1.0f, 0.5f, 0.1f});
  Output ed = ExponentialDecay(s, 0.1f, step, 10, 0.5f);
  Output eds = ExponentialDecay(s, 0.1f, step, 10, 0.5f, /*staircase=*/true);
  ASSERT_TRUE(s.ok()) << s.status();
  ClientSession session(s);
  struct Want {
    int64_t step;
    float pc, ed, eds;
  };
  for (const Want& w : {Want{0, 1.0f, 0.1f, 0.1f}, Want{10, 1.0f, 0.05f, 0.05f},
                        Want{15, 0.5f, 0.1f * std::pow(0.5f, 1.5f), 0.05f},
                        Want{21, 0.1f, 0.1f * std::pow(0.5f, 2.1f), 0.025f}}) {
    auto r = session.Run({{step, Tensor::Scalar<int64_t>(w.step)}}, {pc, ed, eds});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FLOAT_EQ((*r)[0].scalar<float>(), w.pc) << w.step;
    EXPECT_NEAR((*r)[1].scalar<float>(), w.ed, 1e-7) << w.step;
    EXPECT_FLOAT_EQ((*r)[2].scalar<float>(), w.eds) << w.step;
  }
}

TEST(OptimizersTest, NoGradientsIsAnError) {
  Fixture f;
  Variable other(f.s.WithOpName("other"), PartialShape({2}), DT_FLOAT, init::Zeros());
  GradientDescentOptimizer opt(0.1f);
  auto train = opt.Minimize(f.s, f.loss, {other});
  EXPECT_EQ(train.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
