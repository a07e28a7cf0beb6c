#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/ops/all_ops.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor Random(const TensorShape& s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-8, 8);
  Tensor t(DataTypeToEnum<T>::value, s);
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    t.base<T>()[i] = static_cast<T>(dist(gen)) / static_cast<T>(2);
  }
  return t;
}

// C = op(A) * op(B), computed in double from the stored (untransposed)
// matrices.
template <typename T>
Tensor NaiveMatMul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const int64_t m = a.dim_size(ta ? 1 : 0), k = a.dim_size(ta ? 0 : 1);
  const int64_t n = b.dim_size(tb ? 0 : 1);
  Tensor c(DataTypeToEnum<T>::value, TensorShape({m, n}));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a.base<T>()[p * m + i] : a.base<T>()[i * k + p];
        const double bv = tb ? b.base<T>()[j * k + p] : b.base<T>()[p * n + j];
        sum += av * bv;
      }
      c.base<T>()[i * n + j] = static_cast<T>(sum);
    }
  }
  return c;
}

template <typename T>
void CheckAllTransposes(int64_t m, int64_t k, int64_t n) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << DataTypeString(DataTypeToEnum<T>::value) << " m=" << m << " k=" << k
                   << " n=" << n << " ta=" << ta << " tb=" << tb);
      Tensor a = Random<T>(ta ? TensorShape({k, m}) : TensorShape({m, k}), 1);
      Tensor b = Random<T>(tb ? TensorShape({n, k}) : TensorShape({k, n}), 2);
      OpTester t("MatMul");
      t.Attr("T", DataTypeToEnum<T>::value)
          .Attr("transpose_a", ta)
          .Attr("transpose_b", tb)
          .Input(a)
          .Input(b);
      auto out = t.Run();
      ASSERT_TRUE(out.ok()) << out.status();
      // Inputs are multiples of 1/2 and sums are small: exact in float.
      EXPECT_EQ(TensorDiff(NaiveMatMul<T>(a, b, ta, tb), (*out)[0]), "");
    }
  }
}

TEST(MatMulOpTest, SmallExample) {
  OpTester t("MatMul");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}))
      .Input(Tensor::FromVector<float>({7, 8, 9, 10, 11, 12}, {3, 2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TensorDiff(Tensor::FromVector<float>({58, 64, 139, 154}, {2, 2}), (*out)[0]), "");
}

TEST(MatMulOpTest, FloatTransposesMatchReference) {
  CheckAllTransposes<float>(7, 5, 3);
  CheckAllTransposes<float>(64, 33, 17);
  CheckAllTransposes<float>(1, 1, 1);
}

TEST(MatMulOpTest, DoubleAndIntTransposesMatchReference) {
  CheckAllTransposes<double>(9, 4, 6);
  CheckAllTransposes<int32_t>(5, 7, 3);
  CheckAllTransposes<int64_t>(3, 2, 4);
}

TEST(MatMulOpTest, EmptyInnerDimensionGivesZeros) {
  OpTester t("MatMul");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor(DT_FLOAT, TensorShape({2, 0})))
      .Input(Tensor(DT_FLOAT, TensorShape({0, 3})));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TensorDiff(Tensor::FromVector<float>({0, 0, 0, 0, 0, 0}, {2, 3}), (*out)[0]), "");
}

TEST(MatMulOpTest, RejectsBadShapesNamingTheNode) {
  OpTester inner("MatMul", "mm_inner");
  inner.Attr("T", DT_FLOAT)
      .Input(Tensor(DT_FLOAT, TensorShape({2, 3})))
      .Input(Tensor(DT_FLOAT, TensorShape({2, 3})));
  auto s = inner.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("node 'mm_inner'"));

  OpTester rank("MatMul", "mm_rank");
  rank.Attr("T", DT_DOUBLE)
      .Input(Tensor(DT_DOUBLE, TensorShape({2, 3, 1})))
      .Input(Tensor(DT_DOUBLE, TensorShape({3, 2})));
  s = rank.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("node 'mm_rank'"));
}

TEST(MatMulOpTest, ShapeFunction) {
  const OpRegistrationData* reg = DefaultOpRegistry().LookUp("MatMul");
  ASSERT_NE(reg, nullptr);
  tensorflow::NodeDef def;
  def.set_name("mm");
  def.set_op("MatMul");
  AddDefaultsToNodeDef(reg->op_def, &def);
  (*def.mutable_attr())["transpose_b"] = MakeAttr(true);
  ShapeContext ok(def, reg->op_def, {PartialShape({-1, 4}), PartialShape({5, 4})}, {}, 1);
  ASSERT_TRUE(reg->shape_fn(ok).ok());
  EXPECT_EQ(ok.output(0), PartialShape({-1, 5}));
  ShapeContext bad(def, reg->op_def, {PartialShape({2, 4}), PartialShape({5, 3})}, {}, 1);
  absl::Status s = reg->shape_fn(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'mm'"));
}

}  // namespace
}  // namespace graphrun
