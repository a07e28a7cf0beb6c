#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

Tensor F(std::vector<float> v, TensorShape s) { return Tensor::FromVector<float>(v, s); }

void ExpectOutput(OpTester& t, const Tensor& expected, double tol = 0, int index = 0) {
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GT(out->size(), static_cast<size_t>(index));
  EXPECT_EQ(TensorDiff(expected, (*out)[index], tol), "");
}

void ExpectError(OpTester& t, const std::string& node) {
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("node '" + node + "'"));
}

TEST(NnKernelsTest, ReluAndRelu6) {
  Tensor x = F({-2, -0.5, 0, 3, 7}, {5});
  OpTester r("Relu");
  r.Attr("T", DT_FLOAT).Input(x);
  ExpectOutput(r, F({0, 0, 0, 3, 7}, {5}));
  OpTester r6("Relu6");
  r6.Attr("T", DT_FLOAT).Input(x);
  ExpectOutput(r6, F({0, 0, 0, 3, 6}, {5}));
  OpTester ri("Relu");
  ri.Attr("T", DT_INT32).Input(Tensor::FromVector<int32_t>({-3, 4}));
  ExpectOutput(ri, Tensor::FromVector<int32_t>({0, 4}));
}

TEST(NnKernelsTest, ReluGradients) {
  Tensor g = F({1, 2, 3, 4}, {4});
  Tensor f = F({-1, 0.5, 6.5, 3}, {4});
  OpTester rg("ReluGrad");
  rg.Attr("T", DT_FLOAT).Input(g).Input(f);
  ExpectOutput(rg, F({0, 2, 3, 4}, {4}));
  OpTester r6g("Relu6Grad");
  r6g.Attr("T", DT_FLOAT).Input(g).Input(f);
  ExpectOutput(r6g, F({0, 2, 0, 4}, {4}));
  OpTester bad("ReluGrad", "relugrad_bad");
  bad.Attr("T", DT_FLOAT).Input(g).Input(F({1}, {1}));
  ExpectError(bad, "relugrad_bad");
}

TEST(NnKernelsTest, SoftmaxRows) {
  OpTester t("Softmax");
  t.Attr("T", DT_FLOAT).Input(F({0, std::log(3.0f), 1, 1}, {2, 2}));
  ExpectOutput(t, F({0.25, 0.75, 0.5, 0.5}, {2, 2}), 1e-6);
}

TEST(NnKernelsTest, SoftmaxLargeLogitsStayFinite) {
  OpTester t("Softmax");
  t.Attr("T", DT_FLOAT).Input(F({1000, 1000, -1000, 10000, 0, -10000}, {2, 3}));
  ExpectOutput(t, F({0.5, 0.5, 0, 1, 0, 0}, {2, 3}), 1e-7);
  OpTester l("LogSoftmax");
  l.Attr("T", DT_FLOAT).Input(F({1000, 1000, 0}, {1, 3}));
  const float ln2 = std::log(2.0f);
  ExpectOutput(l, F({-ln2, -ln2, -1000 - ln2}, {1, 3}), 1e-6);
}

TEST(NnKernelsTest, SoftmaxDoubleMatchesFormula) {
  std::vector<double> x = {0.1, -2, 3.5, 0.7, 1.25, -0.4};
  std::vector<double> want(6);
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int i = 0; i < 3; ++i) sum += std::exp(x[r * 3 + i]);
    for (int i = 0; i < 3; ++i) want[r * 3 + i] = std::exp(x[r * 3 + i]) / sum;
  }
  OpTester t("Softmax");
  t.Attr("T", DT_DOUBLE).Input(Tensor::FromVector<double>(x, {2, 3}));
  ExpectOutput(t, Tensor::FromVector<double>(want, {2, 3}), 1e-12);
}

TEST(NnKernelsTest, SoftmaxRejectsScalar) {
  OpTester t("Softmax", "sm_scalar");
  t.Attr("T", DT_FLOAT).Input(Tensor::Scalar<float>(1));
  ExpectError(t, "sm_scalar");
}

TEST(NnKernelsTest, BiasAddNhwcAndNchw) {
  Tensor v = F({1, 2, 3, 4, 5, 6}, {2, 3});
  OpTester t("BiasAdd");
  t.Attr("T", DT_FLOAT).Input(v).Input(F({10, 20, 30}, {3}));
  ExpectOutput(t, F({11, 22, 33, 14, 25, 36}, {2, 3}));
  OpTester n("BiasAdd");
  n.Attr("T", DT_FLOAT)
      .Attr("data_format", "NCHW")
      .Input(F({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}))
      .Input(F({100, 200}, {2}));
  ExpectOutput(n, F({101, 102, 103, 104, 205, 206, 207, 208}, {1, 2, 2, 2}));
  OpTester bad("BiasAdd", "bias_bad");
  bad.Attr("T", DT_FLOAT).Input(v).Input(F({1, 2}, {2}));
  ExpectError(bad, "bias_bad");
}

TEST(NnKernelsTest, BiasAddGrad) {
  OpTester t("BiasAddGrad");
  t.Attr("T", DT_FLOAT).Input(F({1, 2, 3, 4, 5, 6}, {2, 3}));
  ExpectOutput(t, F({5, 7, 9}, {3}));
  OpTester n("BiasAddGrad");
  n.Attr("T", DT_FLOAT).Attr("data_format", "NCHW").Input(F({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}));
  ExpectOutput(n, F({1 + 2 + 5 + 6, 3 + 4 + 7 + 8}, {2}));
  // Large enough to shard.
  const int64_t rows = 40000, c = 4;
  Tensor big(DT_FLOAT, TensorShape({rows, c}));
  for (int64_t i = 0; i < rows * c; ++i) big.base<float>()[i] = (i % c) + 1;
  OpTester b("BiasAddGrad");
  b.Attr("T", DT_FLOAT).Input(big);
  ExpectOutput(b, F({40000, 80000, 120000, 160000}, {4}));
}

TEST(NnKernelsTest, SoftmaxCrossEntropyWithLogits) {
  // Row 0: uniform logits over 2 classes, one-hot label: loss ln 2.
  // Row 1: huge logits must not overflow.
  Tensor features = F({0, 0, 1000, 0}, {2, 2});
  Tensor labels = F({1, 0, 0.5, 0.5}, {2, 2});
  OpTester t("SoftmaxCrossEntropyWithLogits");
  t.Attr("T", DT_FLOAT).Input(features).Input(labels);
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TensorDiff(F({std::log(2.0f), 500}, {2}), (*out)[0], 1e-6), "");
  EXPECT_EQ(TensorDiff(F({-0.5, 0.5, 0.5, -0.5}, {2, 2}), (*out)[1], 1e-6), "");
  OpTester bad("SoftmaxCrossEntropyWithLogits", "xent_bad");
  bad.Attr("T", DT_FLOAT).Input(features).Input(F({1, 0, 0}, {1, 3}));
  ExpectError(bad, "xent_bad");
}

TEST(NnKernelsTest, SparseSoftmaxCrossEntropyWithLogits) {
  Tensor features = F({0, 0, 0, 0, 1000, 0}, {2, 3});
  OpTester t("SparseSoftmaxCrossEntropyWithLogits");
  t.Attr("T", DT_FLOAT)
      .Attr("Tlabels", DT_INT32)
      .Input(features)
      .Input(Tensor::FromVector<int32_t>({2, 1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  const float third = 1.0f / 3;
  EXPECT_EQ(TensorDiff(F({std::log(3.0f), 0}, {2}), (*out)[0], 1e-6), "");
  EXPECT_EQ(TensorDiff(F({third, third, third - 1, 0, 0, 0}, {2, 3}), (*out)[1], 1e-6), "");
  OpTester bad("SparseSoftmaxCrossEntropyWithLogits", "sparse_bad");
  bad.Attr("T", DT_FLOAT).Input(features).Input(Tensor::FromVector<int64_t>({0, 3}));
  ExpectError(bad, "sparse_bad");
}

}  // namespace
}  // namespace graphrun
