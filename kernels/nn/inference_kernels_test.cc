// Pad/PadV2/MirrorPad, BatchMatMul(V2), DepthwiseConv2dNative and the
// resize ops, against TensorFlow's documented results.
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
  // Paddings whose sums overflow, or whose product of dimensions does.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  OpTester huge("Pad", "pad");
  huge.Attr("T", DT_INT32).Attr("Tpaddings", DT_INT64).Input(TS<int32_t>({7}, TensorShape({1})));
  huge.Input(TS<int64_t>({kMax, kMax}, TensorShape({1, 2})));
  out = huge.Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("node 'pad' (op Pad): padded size is too large: dimension 0 of size 1 "
                        "padded by [9223372036854775807, 9223372036854775807]"));
  OpTester wide("Pad", "pad");
  wide.Attr("T", DT_INT32).Attr("Tpaddings", DT_INT64).Input(Grid23());
  wide.Input(TS<int64_t>({int64_t{1} << 39, 0, int64_t{1} << 39, 0}, TensorShape({2, 2})));
  out = wide.Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("padded size is too large: shape ["));
}

// A long string padded in many times is charged as it is copied: refused
// at the limit, not after the whole output is built; empty outputs build
// no index tables however large their other dimensions.
TEST(PadTest, StringsAreChargedAndEmptyOutputsCostNothing) {
  const int64_t before = TensorBytesInUse();
  SetMemoryLimits(int64_t{4} << 20, int64_t{4} << 20);
  const std::string kilo(1000, 'k');
  {
    OpTester v2("PadV2", "pad");
    v2.Attr("T", DT_STRING).Input(Tensor::FromVector<std::string>({"x"}));
    v2.Input(TS<int32_t>({0, 9999}, TensorShape({1, 2}))).Input(Tensor::Scalar<std::string>(kilo));
    auto out = v2.Run();
    EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr("the string contents copied into a [10000]"));
    OpTester mirror("MirrorPad");
    mirror.Attr("T", DT_STRING).Attr("mode", "SYMMETRIC");
    mirror.Input(TS<std::string>({kilo}, TensorShape({1, 1, 1, 1, 1, 1, 1, 1, 1})));
    mirror.Input(TS<int32_t>(std::vector<int32_t>(18, 1), TensorShape({9, 2})));
    EXPECT_EQ(mirror.Run().status().code(), absl::StatusCode::kResourceExhausted);
  }
  SetMemoryLimits(0, 0);
  EXPECT_EQ(TensorBytesInUse(), before);
  // [0, 1] padded to [0, 2^27]: nothing to index.
  OpTester empty("Pad");
  empty.Attr("T", DT_FLOAT).Input(TS<float>({}, TensorShape({0, 1})));
  empty.Input(TS<int32_t>({0, 0, 0, (1 << 27) - 1}, TensorShape({2, 2})));
  EXPECT_EQ(Run1(empty).shape(), TensorShape({0, 1 << 27}));
  OpTester resize("ResizeBilinear");
  resize.Attr("T", DT_FLOAT).Input(TS<float>({}, TensorShape({1, 1, 1, 0})));
  resize.Input(Tensor::FromVector<int32_t>({40000000, 1}));
  EXPECT_EQ(Run1(resize).shape(), TensorShape({1, 40000000, 1, 0}));
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

// Float goes through oneDNN's sgemm per batch, double through the plain
// loop: both against a reference, with broadcast on both sides and each
// adjoint.
TEST(BatchMatMulTest, MatchesReferenceOverBroadcastBatches) {
  for (bool adj_x : {false, true}) {
    for (bool adj_y : {false, true}) {
      const int64_t m = 5, k = 7, n = 6;
      // x [3, 1, m, k] (or [3, 1, k, m]), y [4, k, n] (or [4, n, k]).
      TensorShape xs = adj_x ? TensorShape({3, 1, k, m}) : TensorShape({3, 1, m, k});
      TensorShape ys = adj_y ? TensorShape({4, n, k}) : TensorShape({4, k, n});
      std::vector<float> xv(xs.num_elements()), yv(ys.num_elements());
      for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7) % 11) - 5.0f;
      for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<float>((i * 5) % 13) * 0.25f;
      std::vector<float> want(3 * 4 * m * n, 0.0f);
      for (int64_t b0 = 0; b0 < 3; ++b0) {
        for (int64_t b1 = 0; b1 < 4; ++b1) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double acc = 0;
              for (int64_t p = 0; p < k; ++p) {
                float a = adj_x ? xv[b0 * k * m + p * m + i] : xv[b0 * m * k + i * k + p];
                float bb = adj_y ? yv[b1 * n * k + j * k + p] : yv[b1 * k * n + p * n + j];
                acc += static_cast<double>(a) * bb;
              }
              want[((b0 * 4 + b1) * m + i) * n + j] = static_cast<float>(acc);
            }
          }
        }
      }
      for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
        OpTester t("BatchMatMulV2");
        t.Attr("T", dt).Attr("adj_x", adj_x).Attr("adj_y", adj_y);
        if (dt == DT_FLOAT) {
          t.Input(TS<float>(xv, xs)).Input(TS<float>(yv, ys));
        } else {
          t.Input(TS<double>(std::vector<double>(xv.begin(), xv.end()), xs))
              .Input(TS<double>(std::vector<double>(yv.begin(), yv.end()), ys));
        }
        auto out = t.Run();
        ASSERT_TRUE(out.ok()) << out.status();
        const Tensor& o = (*out)[0];
        ASSERT_EQ(o.shape(), TensorShape({3, 4, m, n}));
        for (size_t i = 0; i < want.size(); ++i) {
          const double got = dt == DT_FLOAT ? o.base<float>()[i] : o.base<double>()[i];
          // Small integers and quarters: exact in both types.
          ASSERT_EQ(got, want[i]) << "adj_x " << adj_x << " adj_y " << adj_y << " at " << i;
        }
      }
    }
  }
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
