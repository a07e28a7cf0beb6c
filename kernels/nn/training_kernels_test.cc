// Optimizer, scatter and segment-sum kernels: two update steps of every
// optimizer on ref and resource variables, checked against the update
// formulas evaluated here (SparseApplyRMSProp against hand-computed
// values); copy-on-write versus in-place updates; errors.
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;
using Vec = std::vector<float>;

Tensor F(const Vec& v) { return Tensor::FromVector<float>(v); }
Tensor F(const Vec& v, TensorShape s) { return Tensor::FromVector<float>(v, s); }
Tensor S(float v) { return Tensor::Scalar<float>(v); }
Tensor I(const std::vector<int32_t>& v) { return Tensor::FromVector<int32_t>(v); }

Vec Values(const Tensor& t) { return Vec(t.base<float>(), t.base<float>() + t.NumElements()); }

void ExpectNear(const Vec& expected, const Vec& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(expected[i], actual[i], 1e-5 * std::max(1.0f, std::fabs(expected[i])))
        << "element " << i;
  }
}

// Runs optimizer ops on variables that live in one test device, either as
// ref variables (Apply*) or resource variables (ResourceApply*).
class TrainingTest : public ::testing::TestWithParam<bool> {
 protected:
  bool resource() const { return GetParam(); }

  // Creates (or overwrites) variable `name` with `value`.
  void SetVar(const std::string& name, const Tensor& value) {
    auto& v = vars_[name];
    if (v == nullptr) {
      v = std::make_shared<Var>(name, DT_FLOAT, PartialShape(value.shape()));
      ASSERT_TRUE(device_->resource_manager()->Create<Var>("", name, v).ok());
    }
    std::lock_guard<std::mutex> l(v->mu);
    v->tensor = value.DeepCopy();
    v->initialized = true;
  }
  Vec Get(const std::string& name) {
    std::lock_guard<std::mutex> l(vars_[name]->mu);
    return Values(vars_[name]->tensor);
  }

  // Runs `op` (without its Apply/ResourceApply prefix, e.g. "ApplyAdam"
  // spelled "Adam") on the named variables and `values`.
  absl::Status Step(const std::string& op, const std::vector<std::string>& vars,
                    const std::vector<Tensor>& values,
                    const std::function<void(OpTester&)>& attrs = nullptr,
                    const std::string& node = "update") {
    OpTester t((resource() ? "Resource" : "") + op, node);
    t.UseDevice(device_).Attr("T", DT_FLOAT);
    for (const auto& name : vars) {
      if (resource()) {
        ResourceHandle h;
        h.device = device_->name();
        h.name = name;
        h.type_name = "Var";
        t.Input(Tensor::Scalar<ResourceHandle>(h));
      } else {
        auto it = vars_.find(name);
        t.InputRef(it == vars_.end() ? std::make_shared<Var>(name, DT_FLOAT, PartialShape())
                                     : it->second);
      }
    }
    for (const auto& v : values) t.Input(v);
    if (attrs) attrs(t);
    auto r = t.Run();
    if (r.ok() && !resource()) {
      // The ref output is the updated variable.
      EXPECT_EQ(t.output_values()[0].ref, vars_[vars[0]]);
    }
    return r.status();
  }

  std::shared_ptr<TestCpuDevice> device_ = std::make_shared<TestCpuDevice>();
  std::map<std::string, std::shared_ptr<Var>> vars_;
};

// Enough elements for whole vector blocks, a tail and sharding.
Vec Ramp(int n, float scale, float shift) {
  Vec v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * i + shift);
  return v;
}

constexpr int kN = 37;

TEST_P(TrainingTest, GradientDescent) {
  Vec w = Ramp(kN, 1, 0), g1 = Ramp(kN, 0.5, 1), g2 = Ramp(kN, 0.3, 2);
  SetVar("w", F(w));
  ASSERT_TRUE(Step("ApplyGradientDescent", {"w"}, {S(0.1f), F(g1)}).ok());
  ASSERT_TRUE(Step("ApplyGradientDescent", {"w"}, {S(0.2f), F(g2)}).ok());
  for (int i = 0; i < kN; ++i) w[i] = (w[i] - 0.1f * g1[i]) - 0.2f * g2[i];
  ExpectNear(w, Get("w"));
}

TEST_P(TrainingTest, GradientDescentLargeIsSharded) {
  const int n = 100003;
  Vec w = Ramp(n, 1, 0), g = Ramp(n, 0.5, 1);
  SetVar("w", F(w));
  ASSERT_TRUE(Step("ApplyGradientDescent", {"w"}, {S(0.5f), F(g)}).ok());
  for (int i = 0; i < n; ++i) w[i] -= 0.5f * g[i];
  ExpectNear(w, Get("w"));
}

TEST_P(TrainingTest, Momentum) {
  for (bool nesterov : {false, true}) {
    Vec w = Ramp(kN, 1, 0), a(kN, 0.1f);
    SetVar("w", F(w));
    SetVar("accum", F(a));
    const float lr = 0.1f, m = 0.9f;
    for (int step = 0; step < 2; ++step) {
      Vec g = Ramp(kN, 0.5, step + 1.0f);
      ASSERT_TRUE(Step("ApplyMomentum", {"w", "accum"}, {S(lr), F(g), S(m)}, [&](OpTester& t) {
                    t.Attr("use_nesterov", nesterov);
                  }).ok());
      for (int i = 0; i < kN; ++i) {
        a[i] = a[i] * m + g[i];
        w[i] -= nesterov ? g[i] * lr + a[i] * m * lr : lr * a[i];
      }
    }
    ExpectNear(w, Get("w"));
    ExpectNear(a, Get("accum"));
  }
}

TEST_P(TrainingTest, Adam) {
  for (bool nesterov : {false, true}) {
    Vec w = Ramp(kN, 1, 0), m(kN, 0), v(kN, 0);
    SetVar("w", F(w));
    SetVar("m", F(m));
    SetVar("v", F(v));
    const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
    float b1p = 1, b2p = 1;
    for (int step = 0; step < 2; ++step) {
      b1p *= b1;
      b2p *= b2;
      Vec g = Ramp(kN, 0.5, step + 1.0f);
      ASSERT_TRUE(Step("ApplyAdam", {"w", "m", "v"},
                       {S(b1p), S(b2p), S(lr), S(b1), S(b2), S(eps), F(g)},
                       [&](OpTester& t) { t.Attr("use_nesterov", nesterov); })
                      .ok());
      const float lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
      for (int i = 0; i < kN; ++i) {
        m[i] += (g[i] - m[i]) * (1 - b1);
        v[i] += (g[i] * g[i] - v[i]) * (1 - b2);
        const float mm = nesterov ? m[i] * b1 + (1 - b1) * g[i] : m[i];
        w[i] -= mm * lr_t / (std::sqrt(v[i]) + eps);
      }
    }
    ExpectNear(w, Get("w"));
    ExpectNear(m, Get("m"));
    ExpectNear(v, Get("v"));
  }
}

// Slots decaying towards zero must not reach denormals (each costs a
// microcode assist): updates flush them, and leave the caller's floating
// point mode as it was.
TEST_P(TrainingTest, AdamFlushesDenormalsToZero) {
  const int n = 100003;       // sharded too
  const float tiny = 1e-39f;  // a denormal
  ASSERT_TRUE(std::fpclassify(tiny) == FP_SUBNORMAL);
  SetVar("w", F(Vec(n, 1.0f)));
  SetVar("m", F(Vec(n, tiny)));
  SetVar("v", F(Vec(n, tiny)));
  ASSERT_TRUE(Step("ApplyAdam", {"w", "m", "v"},
                   {S(0.9f), S(0.999f), S(0.01f), S(0.9f), S(0.999f), S(1e-7f), F(Vec(n, 0.0f))})
                  .ok());
  for (float x : Get("m")) ASSERT_EQ(x, 0.0f);
  for (float x : Get("v")) ASSERT_EQ(x, 0.0f);
  for (float x : Get("w")) ASSERT_EQ(x, 1.0f);
  volatile float small = 1e-30f;
  EXPECT_TRUE(std::fpclassify(small * 1e-9f) == FP_SUBNORMAL) << "the thread's mode changed";
}

TEST_P(TrainingTest, Adagrad) {
  for (bool update_slots : {true, false}) {
    Vec w = Ramp(kN, 1, 0), a(kN, 0.1f);
    SetVar("w", F(w));
    SetVar("accum", F(a));
    const float lr = 0.05f;
    for (int step = 0; step < 2; ++step) {
      Vec g = Ramp(kN, 0.5, step + 1.0f);
      ASSERT_TRUE(Step("ApplyAdagrad", {"w", "accum"}, {S(lr), F(g)}, [&](OpTester& t) {
                    t.Attr("update_slots", update_slots);
                  }).ok());
      for (int i = 0; i < kN; ++i) {
        if (update_slots) a[i] += g[i] * g[i];
        w[i] -= lr * g[i] / std::sqrt(a[i]);
      }
    }
    ExpectNear(w, Get("w"));
    ExpectNear(a, Get("accum"));
  }
}

TEST_P(TrainingTest, AdagradV2) {
  Vec w = Ramp(kN, 1, 0), a(kN, 0.1f);
  SetVar("w", F(w));
  SetVar("accum", F(a));
  const float lr = 0.05f, eps = 0.01f;
  for (int step = 0; step < 2; ++step) {
    Vec g = Ramp(kN, 0.5, step + 1.0f);
    ASSERT_TRUE(Step("ApplyAdagradV2", {"w", "accum"}, {S(lr), S(eps), F(g)}).ok());
    for (int i = 0; i < kN; ++i) {
      a[i] += g[i] * g[i];
      w[i] -= lr * g[i] / (std::sqrt(a[i]) + eps);
    }
  }
  ExpectNear(w, Get("w"));
}

TEST_P(TrainingTest, RMSProp) {
  Vec w = Ramp(kN, 1, 0), ms(kN, 1.0f), mom(kN, 0.0f);
  SetVar("w", F(w));
  SetVar("ms", F(ms));
  SetVar("mom", F(mom));
  const float lr = 0.01f, rho = 0.9f, momentum = 0.5f, eps = 1e-6f;
  for (int step = 0; step < 2; ++step) {
    Vec g = Ramp(kN, 0.5, step + 1.0f);
    ASSERT_TRUE(
        Step("ApplyRMSProp", {"w", "ms", "mom"}, {S(lr), S(rho), S(momentum), S(eps), F(g)}).ok());
    for (int i = 0; i < kN; ++i) {
      ms[i] += (g[i] * g[i] - ms[i]) * (1 - rho);
      mom[i] = mom[i] * momentum + lr * g[i] / std::sqrt(ms[i] + eps);
      w[i] -= mom[i];
    }
  }
  ExpectNear(w, Get("w"));
  ExpectNear(ms, Get("ms"));
  ExpectNear(mom, Get("mom"));
}

// Rows of a [4, 3] variable; index 2 appears twice and is updated twice in
// order.
TEST_P(TrainingTest, SparseApplyAdagrad) {
  Vec w = Ramp(12, 1, 0), a(12, 0.1f);
  SetVar("w", F(w, {4, 3}));
  SetVar("accum", F(a, {4, 3}));
  const std::vector<int32_t> idx = {2, 0, 2};
  const float lr = 0.1f;
  for (int step = 0; step < 2; ++step) {
    Vec g = Ramp(9, 0.5, step + 1.0f);
    ASSERT_TRUE(
        Step("SparseApplyAdagrad", {"w", "accum"}, {S(lr), F(g, {3, 3}), I(idx)}, [](OpTester& t) {
          t.Attr("Tindices", DT_INT32);
        }).ok());
    for (size_t r = 0; r < idx.size(); ++r) {
      for (int j = 0; j < 3; ++j) {
        const int k = idx[r] * 3 + j;
        const float gr = g[r * 3 + j];
        a[k] += gr * gr;
        w[k] -= lr * gr / std::sqrt(a[k]);
      }
    }
  }
  ExpectNear(w, Get("w"));
  ExpectNear(a, Get("accum"));
}

TEST_P(TrainingTest, SparseApplyMomentum) {
  for (bool nesterov : {false, true}) {
    Vec w = Ramp(40, 1, 0), a(40, 0.0f);
    SetVar("w", F(w, {2, 20}));
    SetVar("accum", F(a, {2, 20}));
    const float lr = 0.1f, m = 0.9f;
    for (int step = 0; step < 2; ++step) {
      Vec g = Ramp(20, 0.5, step + 1.0f);
      ASSERT_TRUE(
          Step("SparseApplyMomentum", {"w", "accum"}, {S(lr), F(g, {1, 20}), I({1}), S(m)},
               [&](OpTester& t) { t.Attr("Tindices", DT_INT32).Attr("use_nesterov", nesterov); })
              .ok());
      for (int j = 0; j < 20; ++j) {
        const int k = 20 + j;
        a[k] = a[k] * m + g[j];
        w[k] -= nesterov ? g[j] * lr + a[k] * m * lr : lr * a[k];
      }
    }
    ExpectNear(w, Get("w"));
    ExpectNear(a, Get("accum"));
  }
}

// Hand-computed: var [3, 2], ms = 1, mom = 1, lr = rho = momentum = 0.5,
// epsilon = 3 (so every ms + epsilon is 4 or 16). Row 2 is named twice
// and updated in sequence; row 1 is not named and stays as it was.
//   row 2, g = [1, -1]: ms = [1, 1],  mom = [0.75, 0.25], var = [4.25, 5.75]
//   row 0, g = [5, -1]: ms = [13, 1], mom = [1.125, 0.25], var = [-0.125, 1.75]
//   row 2, g = [5, 1]:  ms = [13, 1], mom = [1, 0.375],   var = [3.25, 5.375]
TEST_P(TrainingTest, SparseApplyRMSProp) {
  SetVar("w", F({1, 2, 3, 4, 5, 6}, {3, 2}));
  SetVar("ms", F(Vec(6, 1.0f), {3, 2}));
  SetVar("mom", F(Vec(6, 1.0f), {3, 2}));
  ASSERT_TRUE(
      Step("SparseApplyRMSProp", {"w", "ms", "mom"},
           {S(0.5f), S(0.5f), S(0.5f), S(3.0f), F({1, -1, 5, -1, 5, 1}, {3, 2}), I({2, 0, 2})},
           [](OpTester& t) { t.Attr("Tindices", DT_INT32); })
          .ok());
  ExpectNear({-0.125f, 1.75f, 3, 4, 3.25f, 5.375f}, Get("w"));
  ExpectNear({13, 1, 1, 1, 13, 1}, Get("ms"));
  ExpectNear({1.125f, 0.25f, 1, 1, 1, 0.375f}, Get("mom"));
}

// Bad indices or gradient shapes fail before any row is written.
TEST_P(TrainingTest, SparseApplyRMSPropErrorsNameNode) {
  const Vec w = {1, 2, 3, 4, 5, 6};
  SetVar("w", F(w, {3, 2}));
  SetVar("ms", F(Vec(6, 1.0f), {3, 2}));
  SetVar("mom", F(Vec(6, 0.0f), {3, 2}));
  const std::vector<Tensor> scalars = {S(0.5f), S(0.9f), S(0.0f), S(1e-10f)};
  auto run = [&](const Tensor& grad, const Tensor& indices, DataType tindices) {
    std::vector<Tensor> values = scalars;
    values.push_back(grad);
    values.push_back(indices);
    return Step(
        "SparseApplyRMSProp", {"w", "ms", "mom"}, values,
        [&](OpTester& t) { t.Attr("Tindices", tindices); }, "rms_node");
  };
  // Index 3 of a 3-row variable, after a valid one (int64 indices).
  absl::Status s = run(F(Vec(4, 1.0f), {2, 2}), Tensor::FromVector<int64_t>({0, 3}), DT_INT64);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'rms_node'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("index 3 at offset 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of range [0, 3)"));
  // Rows of the wrong width, and more indices than gradient rows.
  for (const auto& [grad, indices] : std::vector<std::pair<Tensor, Tensor>>{
           {F(Vec(3, 1.0f), {1, 3}), I({0})}, {F(Vec(2, 1.0f), {1, 2}), I({0, 1})}}) {
    s = run(grad, indices, DT_INT32);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("node 'rms_node'"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("+ var.shape[1:]"));
  }
  ExpectNear(w, Get("w"));
  ExpectNear(Vec(6, 1.0f), Get("ms"));
  ExpectNear(Vec(6, 0.0f), Get("mom"));
}

TEST_P(TrainingTest, SparseIndexOutOfRange) {
  SetVar("w", F(Vec(6, 1), {2, 3}));
  SetVar("accum", F(Vec(6, 1), {2, 3}));
  absl::Status s = Step(
      "SparseApplyAdagrad", {"w", "accum"}, {S(0.1f), F(Vec(3, 1), {1, 3}), I({2})},
      [](OpTester& t) { t.Attr("Tindices", DT_INT32); }, "sparse_node");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'sparse_node'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of range"));
}

TEST_P(TrainingTest, UninitializedVariableNamesIt) {
  SetVar("w", F({1, 2}));
  absl::Status s = Step("ApplyMomentum", {"w", "missing_accum"}, {S(0.1f), F({1, 1}), S(0.9f)});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing_accum"));
}

TEST_P(TrainingTest, ShapeMismatchNamesNode) {
  SetVar("w", F({1, 2}));
  SetVar("accum", F({1, 2, 3}));
  absl::Status s =
      Step("ApplyMomentum", {"w", "accum"}, {S(0.1f), F({1, 1}), S(0.9f)}, nullptr, "mom_node");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'mom_node'"));
  SetVar("accum", F({1, 2}));
  s = Step("ApplyMomentum", {"w", "accum"}, {S(0.1f), F({1, 1, 1}), S(0.9f)}, nullptr, "mom_node");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'mom_node'"));
  s = Step("ApplyMomentum", {"w", "accum"}, {F({0.1f, 0.1f}), F({1, 1}), S(0.9f)}, nullptr,
           "mom_node");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("lr is not a scalar"));
}

// An update writes in place when the variable holds the only reference to
// its buffer, and copies first when a reader holds a snapshot.
TEST_P(TrainingTest, InPlaceUnlessShared) {
  SetVar("w", F({1, 2, 3}));
  const char* before = vars_["w"]->tensor.raw_data();
  ASSERT_TRUE(Step("ApplyGradientDescent", {"w"}, {S(1.0f), F({1, 1, 1})}).ok());
  EXPECT_EQ(vars_["w"]->tensor.raw_data(), before);
  Tensor snapshot = vars_["w"]->tensor;
  ASSERT_TRUE(Step("ApplyGradientDescent", {"w"}, {S(1.0f), F({1, 1, 1})}).ok());
  EXPECT_NE(vars_["w"]->tensor.raw_data(), snapshot.raw_data());
  ExpectNear({0, 1, 2}, Values(snapshot));
  ExpectNear({-1, 0, 1}, Get("w"));
}

INSTANTIATE_TEST_SUITE_P(RefAndResource, TrainingTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Resource" : "Ref";
                         });

// ---------------------------------------------------------------------------
// Resource scatter ops and UnsortedSegmentSum.

class ScatterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    var_ = std::make_shared<Var>("table", DT_FLOAT, PartialShape({3, 2}));
    var_->tensor = F({1, 2, 3, 4, 5, 6}, {3, 2});
    var_->initialized = true;
    ASSERT_TRUE(device_->resource_manager()->Create<Var>("", "table", var_).ok());
  }
  absl::Status Scatter(const std::string& op, Tensor indices, Tensor updates) {
    ResourceHandle h;
    h.name = "table";
    OpTester t(op, "scatter");
    t.UseDevice(device_).Attr("dtype", DT_FLOAT).Attr("Tindices", DT_INT32);
    t.Input(Tensor::Scalar<ResourceHandle>(h)).Input(indices).Input(updates);
    return t.Run().status();
  }
  std::shared_ptr<TestCpuDevice> device_ = std::make_shared<TestCpuDevice>();
  std::shared_ptr<Var> var_;
};

TEST_F(ScatterTest, AddSubUpdate) {
  ASSERT_TRUE(
      Scatter("ResourceScatterAdd", I({2, 0, 2}), F({10, 20, 30, 40, 50, 60}, {3, 2})).ok());
  ExpectNear({31, 42, 3, 4, 65, 86}, Values(var_->tensor));
  ASSERT_TRUE(Scatter("ResourceScatterSub", I({1}), F({1, 1}, {1, 2})).ok());
  ExpectNear({31, 42, 2, 3, 65, 86}, Values(var_->tensor));
  ASSERT_TRUE(Scatter("ResourceScatterUpdate", I({0}), F({7, 8}, {1, 2})).ok());
  ExpectNear({7, 8, 2, 3, 65, 86}, Values(var_->tensor));
  ASSERT_TRUE(Scatter("ResourceScatterAdd", I({1}), S(100)).ok());
  ExpectNear({7, 8, 102, 103, 65, 86}, Values(var_->tensor));
}

TEST_F(ScatterTest, Errors) {
  absl::Status s = Scatter("ResourceScatterAdd", I({3}), F({1, 1}, {1, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'scatter'"));
  s = Scatter("ResourceScatterAdd", I({0}), F({1, 1, 1}, {1, 3}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(UnsortedSegmentSumTest, SumsRowsAndDropsNegativeIds) {
  OpTester t("UnsortedSegmentSum");
  t.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("Tnumsegments", DT_INT32);
  t.Input(F({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}))
      .Input(I({2, 0, -1, 2}))
      .Input(Tensor::Scalar<int32_t>(3));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({3, 2}));
  ExpectNear({3, 4, 0, 0, 8, 10}, Values((*out)[0]));

  OpTester bad("UnsortedSegmentSum", "segsum");
  bad.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("Tnumsegments", DT_INT32);
  bad.Input(F({1, 2}, {2})).Input(I({0, 5})).Input(Tensor::Scalar<int32_t>(3));
  auto r = bad.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("node 'segsum'"));
}

TEST(UnsortedSegmentSumTest, MultiDimensionalIds) {
  OpTester t("UnsortedSegmentSum");
  t.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("Tnumsegments", DT_INT32);
  t.Input(F({1, 2, 3, 4}, {2, 2}))
      .Input(Tensor::FromVector<int32_t>({1, 1, 0, 1}, {2, 2}))
      .Input(Tensor::Scalar<int32_t>(2));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear({3, 7}, Values((*out)[0]));
}

}  // namespace
}  // namespace graphrun
