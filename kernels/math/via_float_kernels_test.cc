// half and bfloat16 through the float kernels: every op listed has a float
// kernel to run; values are widened, computed and rounded back; inputs of
// other types pass through; errors name the node.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/ops/all_ops.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {

const std::vector<std::string>& ViaFloatOps();  // via_float_kernels.cc

namespace {

using ::testing::HasSubstr;

Tensor Halves(const std::vector<float>& v, const TensorShape& s) {
  Tensor t(DT_HALF, s);
  for (size_t i = 0; i < v.size(); ++i) t.base<Half>()[i].bits = FloatToHalf(v[i]);
  return t;
}
Tensor BFloats(const std::vector<float>& v, const TensorShape& s) {
  Tensor t(DT_BFLOAT16, s);
  for (size_t i = 0; i < v.size(); ++i) t.base<BFloat16>()[i].bits = FloatToBFloat16(v[i]);
  return t;
}
std::vector<float> Floats(const Tensor& t) {
  std::vector<float> out;
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    out.push_back(t.dtype() == DT_HALF ? HalfToFloat(t.base<Half>()[i].bits)
                                       : BFloat16ToFloat(t.base<BFloat16>()[i].bits));
  }
  return out;
}

TEST(ViaFloatKernelsTest, EveryOpHasAFloatKernelToRun) {
  for (const std::string& op : ViaFloatOps()) {
    tensorflow::NodeDef def;
    def.set_name("n");
    def.set_op(op);
    (*def.mutable_attr())["T"].set_type(DT_FLOAT);
    EXPECT_TRUE(DefaultKernelRegistry().HasKernel(def, "CPU")) << op;
    (*def.mutable_attr())["T"].set_type(DT_HALF);
    EXPECT_TRUE(DefaultKernelRegistry().HasKernel(def, "CPU")) << op;
    (*def.mutable_attr())["T"].set_type(DT_BFLOAT16);
    EXPECT_TRUE(DefaultKernelRegistry().HasKernel(def, "CPU")) << op;
  }
}

TEST(ViaFloatKernelsTest, MatMulInHalfAndBFloat16) {
  // [[1, 2], [3, 4]] x [[0.5, -1], [0.25, 2]] = [[1, 3], [2.5, 5]]
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    auto make = dt == DT_HALF ? Halves : BFloats;
    OpTester t("MatMul");
    t.Attr("T", dt)
        .Input(make({1, 2, 3, 4}, TensorShape({2, 2})))
        .Input(make({0.5f, -1, 0.25f, 2}, TensorShape({2, 2})));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), dt);
    EXPECT_EQ((*out)[0].shape(), TensorShape({2, 2}));
    EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1, 3, 2.5f, 5}));
  }
}

TEST(ViaFloatKernelsTest, RoundsOnceToNearestEven) {
  // 1 + 2^-11 + 2^-11 is not a half; in float it is 1 + 2^-10, which is.
  // Rounding after each add would give 1 (ties to even), twice.
  OpTester sum("Sum");
  Tensor x(DT_HALF, TensorShape({3}));
  x.base<Half>()[0].bits = FloatToHalf(1.0f);
  x.base<Half>()[1].bits = FloatToHalf(1.0f / 2048);
  x.base<Half>()[2].bits = FloatToHalf(1.0f / 2048);
  sum.Attr("T", DT_HALF).Attr("Tidx", DT_INT32).Input(x).Input(Tensor::Scalar<int32_t>(0));
  auto out = sum.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0]), std::vector<float>{1.0f + 1.0f / 1024});
}

TEST(ViaFloatKernelsTest, ReductionsSoftmaxReluAndBiasAdd) {
  const TensorShape s({2, 3});
  const std::vector<float> v = {1, -2, 3, 0.5f, 4, -1};
  OpTester mean("Mean");
  mean.Attr("T", DT_BFLOAT16)
      .Attr("Tidx", DT_INT32)
      .Input(BFloats(v, s))
      .Input(Tensor::FromVector<int32_t>({1}));
  auto m = mean.Run();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Floats((*m)[0]), (std::vector<float>{BFloat16ToFloat(FloatToBFloat16(2.0f / 3)),
                                                 BFloat16ToFloat(FloatToBFloat16(3.5f / 3))}));
  OpTester relu("Relu");
  relu.Attr("T", DT_HALF).Input(Halves(v, s));
  auto r = relu.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{1, 0, 3, 0.5f, 4, 0}));
  OpTester bias("BiasAdd");
  bias.Attr("T", DT_HALF).Input(Halves(v, s)).Input(Halves({1, 2, 3}, TensorShape({3})));
  auto b = bias.Run();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Floats((*b)[0]), (std::vector<float>{2, 0, 6, 1.5f, 6, 2}));
  OpTester softmax("Softmax");
  softmax.Attr("T", DT_HALF).Input(Halves({0, 0, 0, 0}, TensorShape({1, 4})));
  auto sm = softmax.Run();
  ASSERT_TRUE(sm.ok()) << sm.status();
  EXPECT_EQ(Floats((*sm)[0]), (std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f}));
}

TEST(ViaFloatKernelsTest, Conv2DInBFloat16) {
  // A 3x3 image of ones, a 2x2 filter of ones, VALID: every output is 4.
  OpTester conv("Conv2D");
  conv.Attr("T", DT_BFLOAT16)
      .Attr("strides", std::vector<int64_t>{1, 1, 1, 1})
      .Attr("padding", std::string("VALID"))
      .Input(BFloats(std::vector<float>(9, 1), TensorShape({1, 3, 3, 1})))
      .Input(BFloats(std::vector<float>(4, 1), TensorShape({2, 2, 1, 1})));
  auto out = conv.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DT_BFLOAT16);
  EXPECT_EQ((*out)[0].shape(), TensorShape({1, 2, 2, 1}));
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{4, 4, 4, 4}));
}

TEST(ViaFloatKernelsTest, FusedBatchNormV3KeepsItsFloatStatistics) {
  // x in half, scale/offset/mean/variance in float (U), inference mode.
  OpTester bn("FusedBatchNormV3");
  bn.Attr("T", DT_HALF)
      .Attr("U", DT_FLOAT)
      .Attr("epsilon", 0.0f)
      .Attr("is_training", false)
      .Input(Halves({1, 3, 5, 7}, TensorShape({1, 2, 2, 1})))
      .Input(Tensor::FromVector<float>({2}))   // scale
      .Input(Tensor::FromVector<float>({1}))   // offset
      .Input(Tensor::FromVector<float>({4}))   // mean
      .Input(Tensor::FromVector<float>({4}));  // variance: stddev 2
  auto out = bn.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DT_HALF);
  // (x - 4) / 2 * 2 + 1
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{-2, 0, 2, 4}));
  EXPECT_EQ((*out)[1].dtype(), DT_FLOAT);
}

TEST(ViaFloatKernelsTest, ErrorsNameTheNode) {
  OpTester t("MatMul", "mm_half");
  t.Attr("T", DT_HALF)
      .Input(Halves({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})))
      .Input(Halves({1, 2, 3, 4}, TensorShape({2, 2})));
  auto out = t.Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("node 'mm_half' (op MatMul)"));
}

}  // namespace
}  // namespace graphrun
