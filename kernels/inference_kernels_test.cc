// Pad/PadV2/MirrorPad, BatchMatMul(V2), DepthwiseConv2dNative and the
// resize ops, against TensorFlow's documented results.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor TS(std::vector<T> v, TensorShape s) {
  return Tensor::FromVector<T>(v, s);
}

Tensor Run1(OpTester& t) {
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() && !out->empty() ? (*out)[0] : Tensor();
}

void Expect(const Tensor& want, const Tensor& got, double tol = 0) {
  EXPECT_EQ(TensorDiff(want, got, tol), "");
}

Tensor Grid23() { return TS<int32_t>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})); }
Tensor Pads() { return TS<int32_t>({1, 1, 2, 2}, TensorShape({2, 2})); }

TEST(PadTest, ZerosAroundAsTensorFlowDocuments) {
  OpTester t("Pad");
  t.Attr("T", DT_INT32).Input(Grid23()).Input(Pads());
  Expect(TS<int32_t>({0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0,  //
                      0, 0, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                     TensorShape({4, 7})),
         Run1(t));
}

TEST(PadTest, PadV2WithAConstantAndStrings) {
  OpTester t("PadV2");
  t.Attr("T", DT_STRING)
      .Input(Tensor::FromVector<std::string>({"a", "b"}))
      .Input(TS<int64_t>({1, 2}, TensorShape({1, 2})))
      .Input(Tensor::Scalar<std::string>("-"))
      .Attr("Tpaddings", DT_INT64);
  Expect(Tensor::FromVector<std::string>({"-", "a", "b", "-", "-"}), Run1(t));
}

TEST(PadTest, MirrorPadReflectAndSymmetric) {
  OpTester r("MirrorPad");
  r.Attr("T", DT_INT32).Attr("mode", "REFLECT").Input(Grid23()).Input(Pads());
  Expect(TS<int32_t>({6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1,  //
                      6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1},
                     TensorShape({4, 7})),
         Run1(r));
  OpTester s("MirrorPad");
  s.Attr("T", DT_INT32).Attr("mode", "SYMMETRIC").Input(Grid23()).Input(Pads());
  Expect(TS<int32_t>({2, 1, 1, 2, 3, 3, 2, 2, 1, 1, 2, 3, 3, 2,  //
                      5, 4, 4, 5, 6, 6, 5, 5, 4, 4, 5, 6, 6, 5},
                     TensorShape({4, 7})),
         Run1(s));
  // REFLECT cannot pad by the dimension's size.
  OpTester bad("MirrorPad");
  bad.Attr("T", DT_INT32)
      .Attr("mode", "REFLECT")
      .Input(Grid23())
      .Input(TS<int32_t>({0, 0, 3, 0}, TensorShape({2, 2})));
  auto out = bad.Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("must be at most 2 for REFLECT"));
}

TEST(PadTest, BadPaddingsAreErrors) {
  OpTester t("Pad");
  t.Attr("T", DT_INT32).Input(Grid23()).Input(TS<int32_t>({1, -1, 0, 0}, TensorShape({2, 2})));
  auto out = t.Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("paddings must be non-negative"));
  OpTester r("Pad");
  r.Attr("T", DT_INT32).Input(Grid23()).Input(TS<int32_t>({1, 1}, TensorShape({1, 2})));
  EXPECT_EQ(r.Run().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchMatMulTest, BroadcastsBatchDimensions) {
  // x [2, 2, 3] times y [3, 1] (no batch dims): y is used for both.
  OpTester t("BatchMatMulV2");
  t.Attr("T", DT_FLOAT)
      .Attr("adj_x", false)
      .Attr("adj_y", false)
      .Input(TS<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, TensorShape({2, 2, 3})))
      .Input(TS<float>({1, 0, -1}, TensorShape({3, 1})));
  Expect(TS<float>({-2, -2, -2, -2}, TensorShape({2, 2, 1})), Run1(t));
}

TEST(BatchMatMulTest, Adjoints) {
  // x [1, 3, 2] adjoint is [[1, 3, 5], [2, 4, 6]]; y [1, 2, 3] adjoint is
  // [[1, 0], [0, 1], [1, 1]].
  OpTester t("BatchMatMulV2");
  t.Attr("T", DT_FLOAT)
      .Attr("adj_x", true)
      .Attr("adj_y", true)
      .Input(TS<float>({1, 2, 3, 4, 5, 6}, TensorShape({1, 3, 2})))
      .Input(TS<float>({1, 0, 1, 0, 1, 1}, TensorShape({1, 2, 3})));
  Expect(TS<float>({6, 8, 8, 10}, TensorShape({1, 2, 2})), Run1(t));
}

TEST(BatchMatMulTest, MismatchesAreErrors) {
  OpTester t("BatchMatMulV2");
  t.Attr("T", DT_FLOAT)
      .Attr("adj_x", false)
      .Attr("adj_y", false)
      .Input(TS<float>({1, 2, 3, 4}, TensorShape({2, 2})))
      .Input(TS<float>({1, 2, 3}, TensorShape({3, 1})));
  auto out = t.Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("contracting dimensions differ"));
  OpTester b("BatchMatMulV2");
  b.Attr("T", DT_FLOAT)
      .Attr("adj_x", false)
      .Attr("adj_y", false)
      .Input(Tensor(DT_FLOAT, TensorShape({2, 1, 1})))
      .Input(Tensor(DT_FLOAT, TensorShape({3, 1, 1})));
  EXPECT_THAT(b.Run().status().message(), HasSubstr("batch dimensions do not broadcast"));
}

TEST(DepthwiseConvTest, EachChannelItsOwnFilter) {
  // Pixel p (1..9) of a 3x3 image is [p, 10p]. Channel 0's 2x2 filter is
  // all ones (window sums); channel 1's takes the top-left tap only.
  std::vector<float> in;
  for (int p = 1; p <= 9; ++p) {
    in.push_back(p);
    in.push_back(10 * p);
  }
  OpTester t("DepthwiseConv2dNative");
  t.Attr("T", DT_FLOAT)
      .Attr("strides", std::vector<int64_t>{1, 1, 1, 1})
      .Attr("padding", "VALID")
      .Input(TS<float>(in, TensorShape({1, 3, 3, 2})))
      .Input(TS<float>({1, 1, 1, 0, 1, 0, 1, 0}, TensorShape({2, 2, 2, 1})));
  Expect(TS<float>({12, 10, 16, 20, 24, 40, 28, 50}, TensorShape({1, 2, 2, 2})), Run1(t));
}

TEST(ResizeTest, BilinearAlignCornersAndHalfPixel) {
  Tensor img = TS<float>({0, 10, 20, 30}, TensorShape({1, 2, 2, 1}));
  OpTester a("ResizeBilinear");
  a.Attr("T", DT_FLOAT)
      .Attr("align_corners", true)
      .Input(img)
      .Input(Tensor::FromVector<int32_t>({3, 3}));
  Expect(TS<float>({0, 5, 10, 10, 15, 20, 20, 25, 30}, TensorShape({1, 3, 3, 1})), Run1(a), 1e-5);
  OpTester h("ResizeBilinear");
  h.Attr("T", DT_UINT8)
      .Attr("half_pixel_centers", true)
      .Input(TS<uint8_t>({0, 10, 20, 30}, TensorShape({1, 2, 2, 1})))
      .Input(Tensor::FromVector<int32_t>({1, 4}));
  // One row at source y = 0.5 (halfway): 10 + [0, 2.5, 7.5, 10].
  Expect(TS<float>({10, 12.5, 17.5, 20}, TensorShape({1, 1, 4, 1})), Run1(h), 1e-5);
}

TEST(ResizeTest, NearestNeighbor) {
  OpTester t("ResizeNearestNeighbor");
  t.Attr("T", DT_INT32)
      .Input(TS<int32_t>({1, 2, 3, 4}, TensorShape({1, 2, 2, 1})))
      .Input(Tensor::FromVector<int32_t>({4, 4}));
  Expect(TS<int32_t>({1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, TensorShape({1, 4, 4, 1})),
         Run1(t));
  OpTester bad("ResizeNearestNeighbor");
  bad.Attr("T", DT_INT32)
      .Input(TS<int32_t>({1, 2, 3, 4}, TensorShape({1, 2, 2, 1})))
      .Input(Tensor::FromVector<int32_t>({0, 4}));
  EXPECT_THAT(bad.Run().status().message(), HasSubstr("size must be positive"));
}

}  // namespace
}  // namespace graphrun
