#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/memory_budget.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

#define ASSERT_RUN_OK(lhs, tester)                                                     \
  auto GR_CONCAT_(run_, __LINE__) = (tester).Run();                                    \
  ASSERT_TRUE(GR_CONCAT_(run_, __LINE__).ok()) << GR_CONCAT_(run_, __LINE__).status(); \
  lhs = std::move(GR_CONCAT_(run_, __LINE__)).value()

template <typename T>
Tensor T1(std::vector<T> v) {
  return Tensor::FromVector<T>(v);
}
template <typename T>
Tensor TS(std::vector<T> v, TensorShape s) {
  return Tensor::FromVector<T>(v, s);
}
std::vector<float> Iota(int n, float start = 0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

void ExpectTensor(const Tensor& expected, const Tensor& actual) {
  EXPECT_EQ(TensorDiff(expected, actual), "");
}

void ExpectError(const absl::StatusOr<std::vector<Tensor>>& r, absl::StatusCode code,
                 const std::string& substr) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(substr));
}

TEST(ConstTest, OutputsValue) {
  Tensor v = TS<float>({1, 2, 3, 4}, {2, 2});
  OpTester t("Const");
  t.Attr("dtype", DT_FLOAT).Attr("value", v);
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(v, out[0]);
}

TEST(ConstTest, StringValue) {
  OpTester t("Const");
  t.Attr("dtype", DT_STRING).Attr("value", Tensor::FromVector<std::string>({"a", "bc"}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ASSERT_EQ(out[0].NumElements(), 2);
  EXPECT_EQ(out[0].base<std::string>()[1], "bc");
}

TEST(ConstTest, DtypeMismatchIsError) {
  OpTester t("Const", "c");
  t.Attr("dtype", DT_INT32).Attr("value", T1<float>({1}));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument, "node 'c'");
}

TEST(PlaceholderTest, UnfedIsInvalidArgumentNamingNode) {
  OpTester t("Placeholder", "x");
  t.Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({-1, 3}));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument,
              "You must feed a value for placeholder tensor 'x' with dtype float");
}

TEST(PlaceholderWithDefaultTest, PassesInput) {
  OpTester t("PlaceholderWithDefault");
  t.Attr("dtype", DT_INT32).Attr("shape", PartialShape({2})).Input(T1<int32_t>({7, 8}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(T1<int32_t>({7, 8}), out[0]);
}

TEST(IdentityTest, SharesBuffer) {
  Tensor in = T1<float>({1, 2});
  for (const char* op : {"Identity", "StopGradient", "Snapshot"}) {
    OpTester t(op);
    t.Attr("T", DT_FLOAT).Input(in);
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(in, out[0]);
  }
}

TEST(IdentityTest, IdentityN) {
  OpTester t("IdentityN");
  t.Attr("T", std::vector<DataType>{DT_FLOAT, DT_INT32});
  t.Input(T1<float>({1.5})).Input(T1<int32_t>({3, 4}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ASSERT_EQ(out.size(), 2u);
  ExpectTensor(T1<float>({1.5}), out[0]);
  ExpectTensor(T1<int32_t>({3, 4}), out[1]);
}

TEST(IdentityTest, UninitializedRefIsFailedPrecondition) {
  auto var = std::make_shared<Var>("w", DT_FLOAT, PartialShape({2}));
  OpTester t("Identity", "id");
  t.Attr("T", DT_FLOAT).InputRef(var);
  ExpectError(t.Run(), absl::StatusCode::kFailedPrecondition, "uninitialized value w");
}

TEST(NoOpTest, Runs) {
  OpTester t("NoOp");
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  EXPECT_TRUE(out.empty());
}

TEST(ReshapeTest, InfersMinusOne) {
  OpTester t("Reshape");
  t.Attr("T", DT_FLOAT).Input(TS<float>(Iota(6), {2, 3})).Input(T1<int32_t>({-1, 2}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(TS<float>(Iota(6), {3, 2}), out[0]);
}

TEST(ReshapeTest, Int64Shape) {
  OpTester t("Reshape");
  t.Attr("T", DT_FLOAT).Attr("Tshape", DT_INT64);
  t.Input(TS<float>(Iota(6), {6})).Input(T1<int64_t>({3, -1}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  EXPECT_EQ(out[0].shape(), TensorShape({3, 2}));
}

TEST(ReshapeTest, WrongSizeNamesNode) {
  OpTester t("Reshape", "r");
  t.Attr("T", DT_FLOAT).Input(TS<float>(Iota(6), {2, 3})).Input(T1<int32_t>({4}));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument, "node 'r'");
}

TEST(ReshapeTest, TwoMinusOnesIsError) {
  OpTester t("Reshape", "r2");
  t.Attr("T", DT_FLOAT).Input(TS<float>(Iota(6), {6})).Input(T1<int32_t>({-1, -1}));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument, "only one input size may be -1");
}

TEST(ReshapeTest, NotDivisibleIsError) {
  OpTester t("Reshape", "r3");
  t.Attr("T", DT_FLOAT).Input(TS<float>(Iota(7), {7})).Input(T1<int32_t>({-1, 2}));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument, "node 'r3'");
}

TEST(ShapeTest, ShapeSizeRank) {
  Tensor in = TS<float>(Iota(6), {2, 3, 1});
  {
    OpTester t("Shape");
    t.Attr("T", DT_FLOAT).Input(in);
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(T1<int32_t>({2, 3, 1}), out[0]);
  }
  {
    OpTester t("Shape");
    t.Attr("T", DT_FLOAT).Attr("out_type", DT_INT64).Input(in);
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(T1<int64_t>({2, 3, 1}), out[0]);
  }
  {
    OpTester t("Size");
    t.Attr("T", DT_FLOAT).Input(in);
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(Tensor::Scalar<int32_t>(6), out[0]);
  }
  {
    OpTester t("Rank");
    t.Attr("T", DT_FLOAT).Input(in);
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(Tensor::Scalar<int32_t>(3), out[0]);
  }
}

TEST(FillTest, FillsScalar) {
  OpTester t("Fill");
  t.Attr("T", DT_DOUBLE).Input(T1<int32_t>({2, 2})).Input(Tensor::Scalar<double>(2.5));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(TS<double>({2.5, 2.5, 2.5, 2.5}, {2, 2}), out[0]);
}

TEST(FillTest, NegativeDimIsError) {
  OpTester t("Fill", "f");
  t.Attr("T", DT_FLOAT).Input(T1<int32_t>({-2})).Input(Tensor::Scalar<float>(1));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument, "node 'f'");
}

TEST(ZerosOnesLikeTest, Values) {
  Tensor in = TS<float>({3, 4, 5}, {3});
  {
    OpTester t("ZerosLike");
    t.Attr("T", DT_FLOAT).Input(in);
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(T1<float>({0, 0, 0}), out[0]);
  }
  {
    OpTester t("OnesLike");
    t.Attr("T", DT_INT64).Input(T1<int64_t>({9, 9}));
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(T1<int64_t>({1, 1}), out[0]);
  }
}

TEST(ExpandDimsSqueezeTest, RoundTrip) {
  OpTester t("ExpandDims");
  t.Attr("T", DT_FLOAT).Input(TS<float>(Iota(6), {2, 3})).Input(Tensor::Scalar<int32_t>(-1));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  EXPECT_EQ(out[0].shape(), TensorShape({2, 3, 1}));

  OpTester s("Squeeze");
  s.Attr("T", DT_FLOAT).Input(out[0]);
  ASSERT_RUN_OK(std::vector<Tensor> sq, s);
  ExpectTensor(TS<float>(Iota(6), {2, 3}), sq[0]);

  OpTester bad("Squeeze", "sq");
  bad.Attr("T", DT_FLOAT).Attr("squeeze_dims", std::vector<int64_t>{0}).Input(out[0]);
  ExpectError(bad.Run(), absl::StatusCode::kInvalidArgument, "node 'sq'");
}

TEST(ConcatSplitTest, RoundTripAxis1) {
  Tensor a = TS<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = TS<float>({5, 6, 7, 8, 9, 10}, {2, 3});
  OpTester c("ConcatV2");
  c.Attr("N", 2).Attr("T", DT_FLOAT).Input(a).Input(b).Input(Tensor::Scalar<int32_t>(1));
  ASSERT_RUN_OK(std::vector<Tensor> cat, c);
  ExpectTensor(TS<float>({1, 2, 5, 6, 7, 3, 4, 8, 9, 10}, {2, 5}), cat[0]);

  OpTester s("SplitV");
  s.Attr("num_split", 2).Attr("T", DT_FLOAT).Attr("Tlen", DT_INT32);
  s.Input(cat[0]).Input(T1<int32_t>({2, -1})).Input(Tensor::Scalar<int32_t>(-1));
  ASSERT_RUN_OK(std::vector<Tensor> parts, s);
  ExpectTensor(a, parts[0]);
  ExpectTensor(b, parts[1]);
}

TEST(ConcatSplitTest, SplitEvenAxis0AndBack) {
  Tensor x = TS<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
  OpTester s("Split");
  s.Attr("num_split", 2).Attr("T", DT_INT32).Input(Tensor::Scalar<int32_t>(0)).Input(x);
  ASSERT_RUN_OK(std::vector<Tensor> parts, s);
  ExpectTensor(TS<int32_t>({0, 1, 2, 3}, {2, 2}), parts[0]);
  ExpectTensor(TS<int32_t>({4, 5, 6, 7}, {2, 2}), parts[1]);

  OpTester c("ConcatV2");
  c.Attr("N", 2).Attr("T", DT_INT32).Input(parts[0]).Input(parts[1]);
  c.Input(Tensor::Scalar<int64_t>(0)).Attr("Tidx", DT_INT64);
  ASSERT_RUN_OK(std::vector<Tensor> back, c);
  ExpectTensor(x, back[0]);
}

TEST(ConcatSplitTest, Errors) {
  OpTester s("Split", "sp");
  s.Attr("num_split", 3).Attr("T", DT_FLOAT).Input(Tensor::Scalar<int32_t>(0));
  s.Input(TS<float>(Iota(4), {4}));
  ExpectError(s.Run(), absl::StatusCode::kInvalidArgument, "node 'sp'");

  OpTester c("ConcatV2", "cat");
  c.Attr("N", 2).Attr("T", DT_FLOAT).Input(TS<float>(Iota(4), {2, 2}));
  c.Input(TS<float>(Iota(3), {3, 1})).Input(Tensor::Scalar<int32_t>(0));
  ExpectError(c.Run(), absl::StatusCode::kInvalidArgument, "node 'cat'");
}

TEST(ConcatTest, Strings) {
  OpTester c("ConcatV2");
  c.Attr("N", 2).Attr("T", DT_STRING);
  c.Input(Tensor::FromVector<std::string>({"a"}))
      .Input(Tensor::FromVector<std::string>({"b", "c"}));
  c.Input(Tensor::Scalar<int32_t>(0));
  ASSERT_RUN_OK(std::vector<Tensor> out, c);
  ExpectTensor(Tensor::FromVector<std::string>({"a", "b", "c"}), out[0]);
}

TEST(TransposeTest, ThreeD) {
  // in[i][j][k] = 100i + 10j + k, shape [2,3,4]; perm [2,0,1] -> out[k][i][j].
  std::vector<float> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) v.push_back(100 * i + 10 * j + k);
  OpTester t("Transpose");
  t.Attr("T", DT_FLOAT).Input(TS<float>(v, {2, 3, 4})).Input(T1<int32_t>({2, 0, 1}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ASSERT_EQ(out[0].shape(), TensorShape({4, 2, 3}));
  const float* p = out[0].base<float>();
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(p[(k * 2 + i) * 3 + j], 100 * i + 10 * j + k);
}

TEST(TransposeTest, TwoDBlocked) {
  const int r = 37, c = 70;
  std::vector<int64_t> v(r * c);
  for (int i = 0; i < r * c; ++i) v[i] = i;
  OpTester t("Transpose");
  t.Attr("T", DT_INT64).Input(TS<int64_t>(v, {r, c})).Input(T1<int32_t>({1, 0}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ASSERT_EQ(out[0].shape(), TensorShape({c, r}));
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < r; ++j) ASSERT_EQ(out[0].base<int64_t>()[i * r + j], j * c + i);
}

TEST(TransposeTest, BadPerm) {
  OpTester t("Transpose", "tr");
  t.Attr("T", DT_FLOAT).Input(TS<float>(Iota(4), {2, 2})).Input(T1<int32_t>({0, 0}));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument, "node 'tr'");
}

TEST(PackUnpackTest, Axis1) {
  Tensor a = T1<float>({1, 2, 3}), b = T1<float>({4, 5, 6});
  OpTester p("Pack");
  p.Attr("N", 2).Attr("T", DT_FLOAT).Attr("axis", 1).Input(a).Input(b);
  ASSERT_RUN_OK(std::vector<Tensor> out, p);
  ExpectTensor(TS<float>({1, 4, 2, 5, 3, 6}, {3, 2}), out[0]);

  OpTester u("Unpack");
  u.Attr("num", 2).Attr("T", DT_FLOAT).Attr("axis", -1).Input(out[0]);
  ASSERT_RUN_OK(std::vector<Tensor> parts, u);
  ExpectTensor(a, parts[0]);
  ExpectTensor(b, parts[1]);
}

TEST(RangeTest, IntAndFloat) {
  {
    OpTester t("Range");
    t.Input(Tensor::Scalar<int32_t>(3)).Input(Tensor::Scalar<int32_t>(10));
    t.Input(Tensor::Scalar<int32_t>(3));
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(T1<int32_t>({3, 6, 9}), out[0]);
  }
  {
    OpTester t("Range");
    t.Attr("Tidx", DT_FLOAT).Input(Tensor::Scalar<float>(1)).Input(Tensor::Scalar<float>(0));
    t.Input(Tensor::Scalar<float>(-0.25f));
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
    ExpectTensor(T1<float>({1, 0.75f, 0.5f, 0.25f}), out[0]);
  }
  OpTester bad("Range", "rg");
  bad.Input(Tensor::Scalar<int32_t>(0)).Input(Tensor::Scalar<int32_t>(1));
  bad.Input(Tensor::Scalar<int32_t>(0));
  ExpectError(bad.Run(), absl::StatusCode::kInvalidArgument, "node 'rg'");
}

// int64 ranges whose span does not fit int64: the right elements, or an
// error, never a wrapped size.
TEST(RangeTest, Int64SpansBeyondInt64) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto range = [](int64_t start, int64_t limit, int64_t delta) {
    OpTester t("Range", "rg");
    t.Attr("Tidx", DT_INT64).Input(Tensor::Scalar<int64_t>(start));
    t.Input(Tensor::Scalar<int64_t>(limit)).Input(Tensor::Scalar<int64_t>(delta));
    return t.Run();
  };
  auto halves = range(kMin, kMax, int64_t{1} << 62);  // 4 elements, the last 2^62
  ASSERT_TRUE(halves.ok()) << halves.status();
  ExpectTensor(T1<int64_t>({kMin, kMin / 2, 0, int64_t{1} << 62}), (*halves)[0]);
  auto down = range(kMax, kMin, kMin);  // kMax, -1
  ASSERT_TRUE(down.ok()) << down.status();
  ExpectTensor(T1<int64_t>({kMax, -1}), (*down)[0]);
  auto two = range(0, kMax, int64_t{1} << 62);
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectTensor(T1<int64_t>({0, int64_t{1} << 62}), (*two)[0]);
  ExpectError(range(kMin, kMax, 1), absl::StatusCode::kInvalidArgument,
              "has more than 2^63 - 1 elements");
}

TEST(SliceTest, BeginSize) {
  OpTester t("Slice");
  t.Attr("T", DT_FLOAT).Attr("Index", DT_INT32).Input(TS<float>(Iota(12), {3, 4}));
  t.Input(T1<int32_t>({1, 1})).Input(T1<int32_t>({-1, 2}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(TS<float>({5, 6, 9, 10}, {2, 2}), out[0]);

  OpTester bad("Slice", "sl");
  bad.Attr("T", DT_FLOAT).Attr("Index", DT_INT32).Input(TS<float>(Iota(4), {4}));
  bad.Input(T1<int32_t>({2})).Input(T1<int32_t>({3}));
  ExpectError(bad.Run(), absl::StatusCode::kInvalidArgument, "node 'sl'");
}

// Runs StridedSlice on `in` with the given spec and masks.
absl::StatusOr<std::vector<Tensor>> RunStridedSlice(const Tensor& in, std::vector<int32_t> b,
                                                    std::vector<int32_t> e, std::vector<int32_t> s,
                                                    int begin_mask = 0, int end_mask = 0,
                                                    int ellipsis_mask = 0, int new_axis_mask = 0,
                                                    int shrink_mask = 0) {
  OpTester t("StridedSlice", "ss");
  t.Attr("T", in.dtype()).Attr("Index", DT_INT32).Input(in);
  t.Input(T1<int32_t>(b)).Input(T1<int32_t>(e)).Input(T1<int32_t>(s));
  t.Attr("begin_mask", begin_mask).Attr("end_mask", end_mask);
  t.Attr("ellipsis_mask", ellipsis_mask).Attr("new_axis_mask", new_axis_mask);
  t.Attr("shrink_axis_mask", shrink_mask);
  return t.Run();
}

TEST(StridedSliceTest, Basics) {
  Tensor x = TS<float>(Iota(12), {3, 4});
  {  // x[1:3]
    auto r = RunStridedSlice(x, {1}, {3}, {1});
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectTensor(TS<float>(Iota(8, 4), {2, 4}), (*r)[0]);
  }
  {  // x[::-1, 1]
    auto r = RunStridedSlice(x, {0, 1}, {0, 2}, {-1, 1}, 1, 1, 0, 0, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectTensor(T1<float>({9, 5, 1}), (*r)[0]);
  }
  {  // x[:, ::2]
    auto r = RunStridedSlice(x, {0, 0}, {0, 0}, {1, 2}, 3, 3);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectTensor(TS<float>({0, 2, 4, 6, 8, 10}, {3, 2}), (*r)[0]);
  }
  {  // x[..., newaxis]: ellipsis bit 0, new axis bit 1
    auto r = RunStridedSlice(x, {0, 0}, {0, 0}, {1, 1}, 0, 0, 1, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].shape(), TensorShape({3, 4, 1}));
  }
  {  // x[-1] (shrink) -> [4]
    auto r = RunStridedSlice(x, {-1}, {0}, {1}, 0, 0, 0, 0, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectTensor(T1<float>({8, 9, 10, 11}), (*r)[0]);
  }
  {  // x[..., 2] -> [3]
    auto r = RunStridedSlice(x, {0, 2}, {0, 3}, {1, 1}, 0, 0, 1, 0, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectTensor(T1<float>({2, 6, 10}), (*r)[0]);
  }
  ExpectError(RunStridedSlice(x, {5}, {6}, {1}, 0, 0, 0, 0, 1), absl::StatusCode::kInvalidArgument,
              "node 'ss'");
  ExpectError(RunStridedSlice(x, {0}, {1}, {0}), absl::StatusCode::kInvalidArgument, "node 'ss'");
}

TEST(GatherTest, GatherV2Axis1) {
  OpTester t("GatherV2");
  t.Attr("Tparams", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("Taxis", DT_INT32);
  t.Input(TS<float>(Iota(6), {2, 3})).Input(T1<int32_t>({2, 0})).Input(Tensor::Scalar<int32_t>(1));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(TS<float>({2, 0, 5, 3}, {2, 2}), out[0]);
}

TEST(GatherTest, GatherRows) {
  OpTester t("Gather");
  t.Attr("Tparams", DT_INT32).Attr("Tindices", DT_INT64);
  t.Input(TS<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2})).Input(TS<int64_t>({2, 2, 0}, {3}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(TS<int32_t>({5, 6, 5, 6, 1, 2}, {3, 2}), out[0]);
}

TEST(GatherTest, OutOfRangeNamesNode) {
  OpTester t("GatherV2", "g");
  t.Attr("Tparams", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("Taxis", DT_INT32);
  t.Input(TS<float>(Iota(3), {3})).Input(T1<int32_t>({0, 3})).Input(Tensor::Scalar<int32_t>(0));
  auto r = t.Run();
  ExpectError(r, absl::StatusCode::kInvalidArgument, "node 'g'");
  ExpectError(r, absl::StatusCode::kInvalidArgument, "indices[1] = 3 is not in [0, 3)");
}

TEST(OneHotTest, DefaultAxis) {
  OpTester t("OneHot");
  t.Attr("T", DT_FLOAT).Attr("TI", DT_INT32);
  t.Input(T1<int32_t>({0, 2, 5})).Input(Tensor::Scalar<int32_t>(3));
  t.Input(Tensor::Scalar<float>(1)).Input(Tensor::Scalar<float>(0));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(TS<float>({1, 0, 0, 0, 0, 1, 0, 0, 0}, {3, 3}), out[0]);
}

TEST(OneHotTest, DepthMustBeAScalar) {
  OpTester t("OneHot", "oh");
  t.Attr("T", DT_FLOAT).Attr("TI", DT_INT32);
  t.Input(T1<int32_t>({0})).Input(TS<int32_t>({3}, {1, 1}));
  t.Input(Tensor::Scalar<float>(1)).Input(Tensor::Scalar<float>(0));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument,
              "node 'oh' (op OneHot): depth must be a scalar, but got: [1,1]");
}

// A requested shape whose element count overflows, even beside a 0.
TEST(ReshapeTest, OverflowingShapesAreErrors) {
  for (auto sizes : {std::vector<int64_t>{2147483647, 2147483647, 2147483647, 0},
                     std::vector<int64_t>{2147483647, 2147483647, 2147483647, -1}}) {
    OpTester t("Reshape", "r");
    t.Attr("T", DT_FLOAT).Attr("Tshape", DT_INT64).Input(TS<float>({}, {0}));
    t.Input(T1<int64_t>(sizes));
    auto out = t.Run();
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("node 'r' (op Reshape): "));
  }
  OpTester deep("Reshape", "r");
  deep.Attr("T", DT_FLOAT).Input(Tensor::Scalar<float>(1));
  deep.Input(T1<int32_t>(std::vector<int32_t>(300, 1)));
  ExpectError(deep.Run(), absl::StatusCode::kInvalidArgument,
              "shape has 300 dimensions, more than the 254 a tensor may have");
}

TEST(TileTest, TwoD) {
  OpTester t("Tile");
  t.Attr("T", DT_INT32).Input(TS<int32_t>({1, 2, 3, 4}, {2, 2})).Input(T1<int32_t>({2, 2}));
  ASSERT_RUN_OK(std::vector<Tensor> out, t);
  ExpectTensor(TS<int32_t>({1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}, {4, 4}), out[0]);
}

// Multiples whose products overflow: an error naming the dimension, not a
// wrapped (or empty) shape or a crash.
TEST(TileTest, OverflowingMultiplesAreErrors) {
  auto tile = [](Tensor in, Tensor mult) {
    OpTester t("Tile", "tile");
    t.Attr("T", DT_FLOAT).Attr("Tmultiples", DT_INT64).Input(std::move(in)).Input(std::move(mult));
    return t.Run();
  };
  ExpectError(tile(T1<float>({1, 2, 3, 4}), T1<int64_t>({(int64_t{1} << 62) + 1})),
              absl::StatusCode::kInvalidArgument,
              "node 'tile' (op Tile): dimension 0 (4) times multiples[0] (4611686018427387905) "
              "overflows");
  ExpectError(tile(T1<float>({1, 2, 3, 4}), T1<int64_t>({int64_t{1} << 62})),
              absl::StatusCode::kInvalidArgument, "dimension 0 (4) times multiples[0]");
  ExpectError(
      tile(TS<float>({1, 2, 3, 4}, {2, 2}), T1<int64_t>({int64_t{1} << 32, int64_t{1} << 32})),
      absl::StatusCode::kInvalidArgument, "has too many elements");
  // Zero stays zero: no overflow.
  auto empty = tile(T1<float>({}), T1<int64_t>({std::numeric_limits<int64_t>::max()}));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].NumElements(), 0);
}

// String contents count in the memory budget: a long string copied into
// many elements (Fill, Tile, GatherV2 with repeated indices, ConcatV2 of
// one input many times, StringJoin with a scalar) is refused before it is
// copied, and what the outputs hold is given back when they die.
TEST(StringContentsTest, CopiesAreChargedAndRefusedOverTheLimit) {
  const std::string kilo(1000, 'k');  // 1000 heap bytes per copy
  const int64_t before = TensorBytesInUse();
  SetMemoryLimits(int64_t{8} << 20, int64_t{8} << 20);
  auto fill = [&](int32_t n) {
    OpTester t("Fill", "f");
    t.Attr("T", DT_STRING).Input(T1<int32_t>({n})).Input(Tensor::Scalar<std::string>(kilo));
    return t.Run();
  };
  {
    auto ok = fill(1000);  // 1 MB
    ASSERT_TRUE(ok.ok()) << ok.status();
    EXPECT_EQ((*ok)[0].base<std::string>()[999], kilo);
    EXPECT_EQ((*ok)[0].buffer()->contents_bytes(), 1000000);
    EXPECT_GE(TensorBytesInUse(), before + 1000000);
  }
  ExpectError(fill(10000), absl::StatusCode::kResourceExhausted,
              "cannot allocate the string contents filled into a [10000] string tensor: the "
              "tensor would hold 10320000 bytes (9.8 MiB), over the per-allocation cap");
  {
    OpTester t("Tile");
    t.Attr("T", DT_STRING).Input(T1<std::string>({kilo, "short"})).Input(T1<int32_t>({10000}));
    ExpectError(t.Run(), absl::StatusCode::kResourceExhausted,
                "the string contents copied into a [20000] string tensor");
  }
  {
    OpTester t("GatherV2");
    t.Attr("Tparams", DT_STRING).Attr("Tindices", DT_INT32).Attr("Taxis", DT_INT32);
    t.Input(T1<std::string>({kilo})).Input(T1<int32_t>(std::vector<int32_t>(10000, 0)));
    t.Input(Tensor::Scalar<int32_t>(0));
    ExpectError(t.Run(), absl::StatusCode::kResourceExhausted, "string contents");
  }
  {
    OpTester t("ConcatV2");
    t.Attr("T", DT_STRING).Attr("N", 10000).Attr("Tidx", DT_INT32);
    for (int i = 0; i < 10000; ++i) t.Input(T1<std::string>({kilo}));
    t.Input(Tensor::Scalar<int32_t>(0));
    ExpectError(t.Run(), absl::StatusCode::kResourceExhausted,
                "the string contents copied into a [10000] string tensor");
  }
  {
    OpTester t("StringJoin");
    t.Attr("N", 2).Attr("separator", "");
    t.Input(Tensor::Scalar<std::string>(kilo))
        .Input(T1<std::string>(std::vector<std::string>(10000, "x")));
    ExpectError(t.Run(), absl::StatusCode::kResourceExhausted,
                "the joined strings ([10000]): the tensor would hold 10330000 bytes");
  }
  {
    // SelectV2 broadcasting one long string over many elements.
    OpTester t("SelectV2");
    t.Attr("T", DT_STRING).Input(T1<bool>(std::vector<bool>(10000, true)));
    t.Input(Tensor::Scalar<std::string>(kilo)).Input(Tensor::Scalar<std::string>("x"));
    ExpectError(t.Run(), absl::StatusCode::kResourceExhausted,
                "the string contents selected into a [10000] string tensor");
  }
  // One tensor filled in steps is held to the per-allocation cap as a whole.
  SetMemoryLimits(int64_t{8} << 20, int64_t{1} << 20);
  {
    OpTester t("Tile");
    t.Attr("T", DT_STRING).Input(T1<std::string>({kilo})).Input(T1<int32_t>({2000}));
    ExpectError(t.Run(), absl::StatusCode::kResourceExhausted,
                "over the per-allocation cap of 1.0 MiB (--max_allocation_bytes)");
  }
  EXPECT_EQ(TensorBytesInUse(), before);
  SetMemoryLimits(0, 0);
}

// Strings overwritten by shorter ones give their bytes back (a string
// variable assigned again and again does not grow its charge).
TEST(StringContentsTest, OverwritesChargeTheDifference) {
  const int64_t before = TensorBytesInUse();
  auto var = std::make_shared<Var>("s", DT_STRING, PartialShape({2}));
  var->tensor = T1<std::string>({std::string(100, 'a'), std::string(100, 'b')});
  var->initialized = true;
  for (int i = 0; i < 3; ++i) {
    OpTester t("ScatterUpdate");
    t.Attr("T", DT_STRING).Attr("Tindices", DT_INT32);
    t.InputRef(var).Input(T1<int32_t>({0})).Input(T1<std::string>({std::string(5000, 'c')}));
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
  }
  EXPECT_EQ(var->tensor.base<std::string>()[0], std::string(5000, 'c'));
  // The first charge counted the strings already there (100 'b's).
  EXPECT_EQ(var->tensor.buffer()->contents_bytes(), 5100);
  {
    OpTester t("ScatterUpdate");
    t.Attr("T", DT_STRING).Attr("Tindices", DT_INT32);
    t.InputRef(var).Input(T1<int32_t>({0})).Input(T1<std::string>({"d"}));
    ASSERT_RUN_OK(std::vector<Tensor> out, t);
  }
  EXPECT_EQ(var->tensor.buffer()->contents_bytes(), 100);
  var.reset();
  EXPECT_EQ(TensorBytesInUse(), before);
}

}  // namespace
}  // namespace graphrun
