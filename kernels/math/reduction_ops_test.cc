#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/ops/all_ops.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

Tensor F(std::vector<float> v, TensorShape s) { return Tensor::FromVector<float>(v, s); }
Tensor Axes(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(v); }

void ExpectOutput(OpTester& t, const Tensor& expected, double tol = 0) {
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TensorDiff(expected, (*out)[0], tol), "");
}

// 0..n-1 in a tensor of shape `s`.
Tensor Iota(const TensorShape& s) {
  Tensor t(DT_FLOAT, s);
  for (int64_t i = 0; i < s.num_elements(); ++i) t.base<float>()[i] = i;
  return t;
}

OpTester Reduce(const char* op, const Tensor& in, const Tensor& axes, bool keep_dims = false,
                const char* name = "test_node") {
  OpTester t(op, name);
  t.Attr("T", in.dtype()).Attr("Tidx", axes.dtype()).Attr("keep_dims", keep_dims);
  t.Input(in).Input(axes);
  return t;
}

TEST(ReductionOpsTest, SumEachAxisOfMatrix) {
  Tensor x = Iota({2, 3});  // [[0 1 2] [3 4 5]]
  OpTester rows = Reduce("Sum", x, Axes({1}));
  ExpectOutput(rows, F({3, 12}, {2}));
  OpTester cols = Reduce("Sum", x, Axes({0}));
  ExpectOutput(cols, F({3, 5, 7}, {3}));
  OpTester neg = Reduce("Sum", x, Tensor::Scalar<int32_t>(-1), true);
  ExpectOutput(neg, F({3, 12}, {2, 1}));
  OpTester all = Reduce("Sum", x, Axes({0, 1}));
  ExpectOutput(all, Tensor::Scalar<float>(15));
}

TEST(ReductionOpsTest, SeveralAxesWithKeepDims) {
  // x[a,b,c,d] = linear index over shape [2,3,4,5]; reduce axes 0 and 2.
  Tensor x = Iota({2, 3, 4, 5});
  Tensor want(DT_FLOAT, TensorShape({1, 3, 1, 5}));
  for (int b = 0; b < 3; ++b) {
    for (int d = 0; d < 5; ++d) {
      float s = 0;
      for (int a = 0; a < 2; ++a) {
        for (int c = 0; c < 4; ++c) s += ((a * 3 + b) * 4 + c) * 5 + d;
      }
      want.base<float>()[b * 5 + d] = s;
    }
  }
  OpTester t = Reduce("Sum", x, Tensor::FromVector<int64_t>({0, -2}), true);
  ExpectOutput(t, want);
  Tensor mean(DT_FLOAT, TensorShape({3, 5}));
  for (int i = 0; i < 15; ++i) mean.base<float>()[i] = want.base<float>()[i] / 8;
  OpTester m = Reduce("Mean", x, Axes({2, 0}));
  ExpectOutput(m, mean, 1e-6);
}

TEST(ReductionOpsTest, MaxMinProd) {
  Tensor x = F({3, -1, 4, 1, -5, 9}, {2, 3});
  OpTester mx = Reduce("Max", x, Axes({1}));
  ExpectOutput(mx, F({4, 9}, {2}));
  OpTester mn = Reduce("Min", x, Axes({0}), true);
  ExpectOutput(mn, F({1, -5, 4}, {1, 3}));
  OpTester pr = Reduce("Prod", x, Axes({1}));
  ExpectOutput(pr, F({-12, -45}, {2}));
  OpTester imax = Reduce("Max", Tensor::FromVector<int64_t>({5, -7, 12}), Axes({0}));
  ExpectOutput(imax, Tensor::Scalar<int64_t>(12));
}

TEST(ReductionOpsTest, IntegerMeanTruncates) {
  OpTester t = Reduce("Mean", Tensor::FromVector<int32_t>({1, 2, 4}, {3}), Axes({0}));
  ExpectOutput(t, Tensor::Scalar<int32_t>(2));
}

TEST(ReductionOpsTest, EmptyAxesIsIdentity) {
  Tensor x = Iota({2, 3});
  OpTester t = Reduce("Sum", x, Axes({}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TensorDiff(x, (*out)[0]), "");
  EXPECT_TRUE((*out)[0].SharesBufferWith(x));
}

TEST(ReductionOpsTest, EmptyInput) {
  Tensor x(DT_FLOAT, TensorShape({0, 3}));
  OpTester s = Reduce("Sum", x, Axes({0}));
  ExpectOutput(s, F({0, 0, 0}, {3}));
  OpTester m = Reduce("Max", x, Axes({0}));
  const float inf = std::numeric_limits<float>::infinity();
  ExpectOutput(m, F({-inf, -inf, -inf}, {3}));
}

TEST(ReductionOpsTest, LargeReductionsMatchDoubleSums) {
  // A long full reduction (parallel chunks) and column/row sums.
  const int64_t rows = 513, cols = 1031;
  Tensor x(DT_FLOAT, TensorShape({rows, cols}));
  for (int64_t i = 0; i < rows * cols; ++i) {
    x.base<float>()[i] = static_cast<float>((i * 7919) % 101) / 10.0f;
  }
  std::vector<double> row_sum(rows, 0), col_sum(cols, 0);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double v = x.base<float>()[r * cols + c];
      row_sum[r] += v;
      col_sum[c] += v;
      total += v;
    }
  }
  OpTester all = Reduce("Sum", x, Axes({0, 1}));
  ExpectOutput(all, Tensor::Scalar<float>(static_cast<float>(total)), 1e-5);
  OpTester r = Reduce("Sum", x, Axes({1}));
  ExpectOutput(r, Tensor::FromVector<float>(std::vector<float>(row_sum.begin(), row_sum.end())),
               1e-5);
  OpTester c = Reduce("Mean", x, Axes({0}));
  std::vector<float> col_mean;
  for (double v : col_sum) col_mean.push_back(static_cast<float>(v / rows));
  ExpectOutput(c, Tensor::FromVector<float>(col_mean), 1e-5);
}

TEST(ReductionOpsTest, AxisOutOfRangeNamesTheNode) {
  OpTester t = Reduce("Sum", Iota({2, 3}), Axes({2}), false, "sum_bad");
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("node 'sum_bad'"));
}

// One axis named twice (also as -1 and 1): TensorFlow's error, not a sum.
TEST(ReductionOpsTest, DuplicateAxesAreInvalid) {
  for (auto axes : {std::vector<int32_t>{0, 0}, std::vector<int32_t>{-1, 1}}) {
    OpTester t = Reduce("Sum", Iota({2, 3}), Axes(axes), false, "sum_dup");
    auto out = t.Run();
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(out.status().message()),
                HasSubstr("node 'sum_dup' (op Sum): Invalid reduction arguments: Axes contains "
                          "duplicate dimension: " +
                          std::to_string(axes[1] < 0 ? axes[1] + 2 : axes[1])));
  }
}

TEST(ReductionOpsTest, ShapeFunctionUsesConstantAxes) {
  const OpRegistrationData* reg = DefaultOpRegistry().LookUp("Mean");
  ASSERT_NE(reg, nullptr);
  tensorflow::NodeDef def;
  def.set_name("mean");
  def.set_op("Mean");
  AddDefaultsToNodeDef(reg->op_def, &def);
  Tensor axes = Axes({0, -1});
  ShapeContext c(def, reg->op_def, {PartialShape({2, -1, 4}), PartialShape({2})}, {nullptr, &axes},
                 1);
  ASSERT_TRUE(reg->shape_fn(c).ok());
  EXPECT_EQ(c.output(0), PartialShape({-1}));

  (*def.mutable_attr())["keep_dims"] = MakeAttr(true);
  ShapeContext k(def, reg->op_def, {PartialShape({2, -1, 4}), PartialShape({2})}, {nullptr, &axes},
                 1);
  ASSERT_TRUE(reg->shape_fn(k).ok());
  EXPECT_EQ(k.output(0), PartialShape({1, -1, 1}));

  ShapeContext unknown(def, reg->op_def, {PartialShape({2, 3}), PartialShape({1})}, {}, 1);
  ASSERT_TRUE(reg->shape_fn(unknown).ok());
  EXPECT_EQ(unknown.output(0), PartialShape({-1, -1}));

  Tensor bad_axes = Axes({3});
  ShapeContext bad(def, reg->op_def, {PartialShape({2, 3}), PartialShape({1})},
                   {nullptr, &bad_axes}, 1);
  absl::Status s = reg->shape_fn(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'mean'"));
}

TEST(ReductionOpsTest, ArgMaxArgMin) {
  Tensor x = F({1, 9, 9, 4, 0, 2}, {2, 3});
  OpTester rows("ArgMax");
  rows.Attr("T", DT_FLOAT).Input(x).Input(Tensor::Scalar<int32_t>(1));
  ExpectOutput(rows, Tensor::FromVector<int64_t>({1, 0}));  // ties: first
  OpTester cols("ArgMin");
  cols.Attr("T", DT_FLOAT).Attr("output_type", DT_INT32).Input(x).Input(Tensor::Scalar<int32_t>(0));
  ExpectOutput(cols, Tensor::FromVector<int32_t>({0, 1, 1}));
  OpTester neg("ArgMax");
  neg.Attr("T", DT_INT32)
      .Attr("Tidx", DT_INT64)
      .Input(Tensor::FromVector<int32_t>({3, 8, -2}, {3}))
      .Input(Tensor::Scalar<int64_t>(-1));
  ExpectOutput(neg, Tensor::Scalar<int64_t>(1));

  OpTester bad("ArgMax", "argmax_bad");
  bad.Attr("T", DT_FLOAT).Input(x).Input(Tensor::Scalar<int32_t>(2));
  auto out = bad.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("node 'argmax_bad'"));
}

}  // namespace
}  // namespace graphrun
