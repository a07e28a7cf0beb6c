#include <cmath>
#include <complex>
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

// Runs `t` and compares output `index` with `expected`.
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

Tensor F(std::vector<float> v, TensorShape s) { return Tensor::FromVector<float>(v, s); }
Tensor I32(std::vector<int32_t> v, TensorShape s) { return Tensor::FromVector<int32_t>(v, s); }
Tensor B(std::vector<bool> v, TensorShape s) { return Tensor::FromVector<bool>(v, s); }

// Row-major strides padded to `rank`, 0 where the dimension broadcasts.
std::vector<int64_t> BStrides(const TensorShape& s, const TensorShape& out) {
  std::vector<int64_t> st(out.dims(), 0);
  int64_t stride = 1;
  for (int d = s.dims() - 1; d >= 0; --d) {
    st[out.dims() - s.dims() + d] = s.dim_size(d) == 1 ? 0 : stride;
    stride *= s.dim_size(d);
  }
  return st;
}

// Naive reference: out[i] = f(x[.], y[.]) with NumPy broadcasting.
template <typename Fn>
Tensor Reference(const Tensor& x, const Tensor& y, const TensorShape& out, Fn f) {
  Tensor r(DT_FLOAT, out);
  auto sx = BStrides(x.shape(), out), sy = BStrides(y.shape(), out);
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    int64_t rem = i, ox = 0, oy = 0;
    for (int d = out.dims() - 1; d >= 0; --d) {
      int64_t idx = rem % out.dim_size(d);
      rem /= out.dim_size(d);
      ox += idx * sx[d];
      oy += idx * sy[d];
    }
    r.base<float>()[i] = f(x.base<float>()[ox], y.base<float>()[oy]);
  }
  return r;
}

Tensor Iota(const TensorShape& s, float scale = 1.0f) {
  Tensor t(DT_FLOAT, s);
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    t.base<float>()[i] = scale * static_cast<float>(i % 1000) - 3.0f;
  }
  return t;
}

TEST(CwiseOpsTest, AddSameShape) {
  OpTester t("Add");
  t.Attr("T", DT_FLOAT)
      .Input(F({1, 2, 3, 4, 5, 6}, {2, 3}))
      .Input(F({10, 20, 30, 40, 50, 60}, {2, 3}));
  ExpectOutput(t, F({11, 22, 33, 44, 55, 66}, {2, 3}));
}

TEST(CwiseOpsTest, SubScalarLeftAndRight) {
  OpTester left("Sub");
  left.Attr("T", DT_FLOAT).Input(Tensor::Scalar<float>(10)).Input(F({1, 2, 3}, {3}));
  ExpectOutput(left, F({9, 8, 7}, {3}));
  OpTester right("Sub");
  right.Attr("T", DT_FLOAT).Input(F({1, 2, 3, 4}, {2, 2})).Input(F({1}, {1}));
  ExpectOutput(right, F({0, 1, 2, 3}, {2, 2}));
}

TEST(CwiseOpsTest, AddV2BroadcastsBothSides) {
  Tensor x = Iota({2, 1, 3});
  Tensor y = Iota({4, 1}, 10);
  OpTester t("AddV2");
  t.Attr("T", DT_FLOAT).Input(x).Input(y);
  ExpectOutput(t, Reference(x, y, {2, 4, 3}, [](float a, float b) { return a + b; }));
}

TEST(CwiseOpsTest, MulOuterProduct) {
  OpTester t("Mul");
  t.Attr("T", DT_FLOAT).Input(F({1, 2, 3}, {3, 1})).Input(F({1, 10, 100, 1000}, {1, 4}));
  ExpectOutput(t, F({1, 10, 100, 1000, 2, 20, 200, 2000, 3, 30, 300, 3000}, {3, 4}));
}

TEST(CwiseOpsTest, LargeBroadcastsMatchReference) {
  struct Case {
    TensorShape x, y, out;
  };
  for (const Case& c : std::vector<Case>{
           {{300, 1000}, {1000}, {300, 1000}},       // bias-like rows
           {{2, 100000}, {2, 1}, {2, 100000}},       // few long rows, chunked
           {{1, 70000}, {3, 1}, {3, 70000}},         // both sides broadcast
           {{4, 1, 5, 1}, {3, 1, 6}, {4, 3, 5, 6}},  // rank 4, alternating
       }) {
    Tensor x = Iota(c.x), y = Iota(c.y, 0.5f);
    OpTester t("SquaredDifference");
    t.Attr("T", DT_FLOAT).Input(x).Input(y);
    ExpectOutput(t, Reference(x, y, c.out, [](float a, float b) { return (a - b) * (a - b); }),
                 1e-6);
  }
}

TEST(CwiseOpsTest, IncompatibleShapesNameTheNode) {
  OpTester t("Add", "add_bad");
  t.Attr("T", DT_FLOAT).Input(F({1, 2, 3, 4, 5, 6}, {2, 3})).Input(F({1, 2}, {2}));
  ExpectError(t, "add_bad");
}

TEST(CwiseOpsTest, ShapeFunctionRejectsIncompatibleShapes) {
  const OpRegistrationData* reg = DefaultOpRegistry().LookUp("Mul");
  ASSERT_NE(reg, nullptr);
  tensorflow::NodeDef def;
  def.set_name("mul_bad");
  def.set_op("Mul");
  ShapeContext bad(def, reg->op_def, {PartialShape({2, 3}), PartialShape({4})}, {}, 1);
  absl::Status s = reg->shape_fn(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'mul_bad'"));
  ShapeContext ok(def, reg->op_def, {PartialShape({5, 1, 3}), PartialShape({-1, 1})}, {}, 1);
  ASSERT_TRUE(reg->shape_fn(ok).ok());
  EXPECT_EQ(ok.output(0), PartialShape({5, -1, 3}));
}

TEST(CwiseOpsTest, IntegerDivTruncatesAndRejectsZero) {
  OpTester t("Div");
  t.Attr("T", DT_INT32)
      .Input(I32({7, -7, 9, std::numeric_limits<int32_t>::min()}, {4}))
      .Input(I32({2, 2, -4, -1}, {4}));
  ExpectOutput(t, I32({3, -3, -2, std::numeric_limits<int32_t>::min()}, {4}));
  OpTester zero("Div", "div0");
  zero.Attr("T", DT_INT32).Input(I32({1, 2}, {2})).Input(I32({1, 0}, {2}));
  ExpectError(zero, "div0");
}

TEST(CwiseOpsTest, RealDivAndDivFloat) {
  for (const char* op : {"RealDiv", "Div"}) {
    OpTester t(op);
    t.Attr("T", DT_FLOAT).Input(F({1, 3, -6}, {3})).Input(Tensor::Scalar<float>(2));
    ExpectOutput(t, F({0.5, 1.5, -3}, {3}));
  }
}

TEST(CwiseOpsTest, MaximumMinimumPow) {
  OpTester mx("Maximum");
  mx.Attr("T", DT_INT32).Input(I32({1, 5, -3}, {3})).Input(I32({2}, {}));
  ExpectOutput(mx, I32({2, 5, 2}, {3}));
  OpTester mn("Minimum");
  mn.Attr("T", DT_FLOAT).Input(F({1, 5, -3}, {3})).Input(F({2, 2, 2}, {3}));
  ExpectOutput(mn, F({1, 2, -3}, {3}));
  OpTester pw("Pow");
  pw.Attr("T", DT_FLOAT).Input(F({2, 4, 9}, {3})).Input(F({3, 0.5, 0}, {3}));
  ExpectOutput(pw, F({8, 2, 1}, {3}), 1e-6);
  OpTester ipw("Pow");
  ipw.Attr("T", DT_INT32).Input(I32({2, -3, 5}, {3})).Input(I32({10, 3, 0}, {3}));
  ExpectOutput(ipw, I32({1024, -27, 1}, {3}));
  OpTester neg("Pow", "pow_neg");
  neg.Attr("T", DT_INT64)
      .Input(Tensor::FromVector<int64_t>({2}))
      .Input(Tensor::FromVector<int64_t>({-1}));
  ExpectError(neg, "pow_neg");
}

TEST(CwiseOpsTest, UnaryMath) {
  Tensor x = F({0.25f, 1.0f, 4.0f}, {3});
  struct Case {
    const char* op;
    double (*f)(double);
  };
  for (const Case& c : std::vector<Case>{
           {"Neg", [](double v) { return -v; }},
           {"Square", [](double v) { return v * v; }},
           {"Sqrt", [](double v) { return std::sqrt(v); }},
           {"Rsqrt", [](double v) { return 1 / std::sqrt(v); }},
           {"Exp", [](double v) { return std::exp(v); }},
           {"Log", [](double v) { return std::log(v); }},
           {"Abs", [](double v) { return std::fabs(v); }},
           {"Sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
           {"Tanh", [](double v) { return std::tanh(v); }},
       }) {
    std::vector<float> want;
    for (float v : x.flat<float>()) want.push_back(static_cast<float>(c.f(v)));
    OpTester t(c.op);
    t.Attr("T", DT_FLOAT).Input(x);
    SCOPED_TRACE(c.op);
    ExpectOutput(t, F(want, {3}), 1e-6);
  }
}

TEST(CwiseOpsTest, AbsAndNegOnIntegersAndLargeTensors) {
  OpTester a("Abs");
  a.Attr("T", DT_INT64).Input(Tensor::FromVector<int64_t>({-5, 0, 7}));
  ExpectOutput(a, Tensor::FromVector<int64_t>({5, 0, 7}));
  Tensor big = Iota({200000});
  Tensor want(DT_FLOAT, big.shape());
  for (int64_t i = 0; i < big.NumElements(); ++i) {
    want.base<float>()[i] = -big.base<float>()[i];
  }
  OpTester n("Neg");
  n.Attr("T", DT_FLOAT).Input(big);
  ExpectOutput(n, want);
}

TEST(CwiseOpsTest, SigmoidSaturatesWithoutNaN) {
  OpTester t("Sigmoid");
  t.Attr("T", DT_FLOAT).Input(F({-1000, 0, 1000}, {3}));
  ExpectOutput(t, F({0, 0.5, 1}, {3}));
}

TEST(CwiseOpsTest, SigmoidAndTanhGrad) {
  OpTester s("SigmoidGrad");
  s.Attr("T", DT_FLOAT).Input(F({0.5, 0.25}, {2})).Input(F({2, 4}, {2}));
  ExpectOutput(s, F({0.5, 0.75}, {2}));
  OpTester t("TanhGrad");
  t.Attr("T", DT_DOUBLE)
      .Input(Tensor::FromVector<double>({0.5, -1}))
      .Input(Tensor::FromVector<double>({2, 3}));
  ExpectOutput(t, Tensor::FromVector<double>({1.5, 0}));
}

TEST(CwiseOpsTest, AddN) {
  OpTester t("AddN");
  t.Attr("T", DT_FLOAT)
      .Attr("N", 3)
      .Input(F({1, 2}, {2}))
      .Input(F({10, 20}, {2}))
      .Input(F({100, 200}, {2}));
  ExpectOutput(t, F({111, 222}, {2}));
  OpTester bad("AddN", "addn_bad");
  bad.Attr("T", DT_FLOAT).Attr("N", 2).Input(F({1, 2}, {2})).Input(F({1}, {1}));
  ExpectError(bad, "addn_bad");
}

TEST(CwiseOpsTest, Comparisons) {
  Tensor x = F({1, 2, 3}, {3});
  Tensor y = Tensor::Scalar<float>(2);
  struct Case {
    const char* op;
    std::vector<bool> want;
  };
  for (const Case& c : std::vector<Case>{{"Less", {true, false, false}},
                                         {"LessEqual", {true, true, false}},
                                         {"Greater", {false, false, true}},
                                         {"GreaterEqual", {false, true, true}},
                                         {"Equal", {false, true, false}},
                                         {"NotEqual", {true, false, true}}}) {
    OpTester t(c.op);
    t.Attr("T", DT_FLOAT).Input(x).Input(y);
    SCOPED_TRACE(c.op);
    ExpectOutput(t, B(c.want, {3}));
  }
  OpTester bc("Less");
  bc.Attr("T", DT_INT32).Input(I32({1, 5}, {2, 1})).Input(I32({2, 6}, {2}));
  ExpectOutput(bc, B({true, true, false, true}, {2, 2}));
}

TEST(CwiseOpsTest, EqualIncompatibleShapes) {
  OpTester strict("Equal", "eq_strict");
  strict.Attr("T", DT_INT32).Input(I32({1, 2}, {2})).Input(I32({1, 2, 3}, {3}));
  ExpectError(strict, "eq_strict");
  OpTester eq("Equal");
  eq.Attr("T", DT_INT32)
      .Attr("incompatible_shape_error", false)
      .Input(I32({1, 2}, {2}))
      .Input(I32({1, 2, 3}, {3}));
  ExpectOutput(eq, Tensor::Scalar<bool>(false));
  OpTester ne("NotEqual");
  ne.Attr("T", DT_INT32)
      .Attr("incompatible_shape_error", false)
      .Input(I32({1, 2}, {2}))
      .Input(I32({1, 2, 3}, {3}));
  ExpectOutput(ne, Tensor::Scalar<bool>(true));
}

TEST(CwiseOpsTest, EqualStrings) {
  OpTester t("Equal");
  t.Attr("T", DT_STRING)
      .Input(Tensor::FromVector<std::string>({"a", "b"}))
      .Input(Tensor::Scalar<std::string>("b"));
  ExpectOutput(t, B({false, true}, {2}));
}

TEST(CwiseOpsTest, Logical) {
  Tensor x = B({true, true, false, false}, {4});
  Tensor y = B({true, false, true, false}, {4});
  OpTester a("LogicalAnd");
  a.Input(x).Input(y);
  ExpectOutput(a, B({true, false, false, false}, {4}));
  OpTester o("LogicalOr");
  o.Input(x).Input(y);
  ExpectOutput(o, B({true, true, true, false}, {4}));
  OpTester n("LogicalNot");
  n.Input(x);
  ExpectOutput(n, B({false, false, true, true}, {4}));
  OpTester bc("LogicalAnd");
  bc.Input(B({true, false}, {2, 1})).Input(B({true, false}, {2}));
  ExpectOutput(bc, B({true, false, false, false}, {2, 2}));
}

TEST(CwiseOpsTest, SelectV1) {
  Tensor tt = F({1, 2, 3, 4}, {2, 2}), ee = F({-1, -2, -3, -4}, {2, 2});
  OpTester same("Select");
  same.Attr("T", DT_FLOAT).Input(B({true, false, false, true}, {2, 2})).Input(tt).Input(ee);
  ExpectOutput(same, F({1, -2, -3, 4}, {2, 2}));
  OpTester vec("Select");
  vec.Attr("T", DT_FLOAT).Input(B({false, true}, {2})).Input(tt).Input(ee);
  ExpectOutput(vec, F({-1, -2, 3, 4}, {2, 2}));
  OpTester scalar("Select");
  scalar.Attr("T", DT_FLOAT).Input(Tensor::Scalar<bool>(false)).Input(tt).Input(ee);
  ExpectOutput(scalar, ee);
  OpTester bad("Select", "sel_bad");
  bad.Attr("T", DT_FLOAT).Input(B({true, false, true}, {3})).Input(tt).Input(ee);
  ExpectError(bad, "sel_bad");
}

TEST(CwiseOpsTest, SelectV2Broadcasts) {
  OpTester t("SelectV2");
  t.Attr("T", DT_INT32)
      .Input(B({true, false}, {2, 1}))
      .Input(I32({1, 2, 3, 4, 5, 6}, {2, 3}))
      .Input(Tensor::Scalar<int32_t>(0));
  ExpectOutput(t, I32({1, 2, 3, 0, 0, 0}, {2, 3}));
  OpTester bad("SelectV2", "sel2_bad");
  bad.Attr("T", DT_INT32)
      .Input(B({true, false}, {2}))
      .Input(I32({1, 2, 3}, {3}))
      .Input(Tensor::Scalar<int32_t>(0));
  ExpectError(bad, "sel2_bad");
}

TEST(CwiseOpsTest, CastFloatToIntTruncatesAndSaturates) {
  OpTester t("Cast");
  t.Attr("SrcT", DT_FLOAT)
      .Attr("DstT", DT_INT32)
      .Input(F({1.9f, -1.9f, 3e10f, std::nanf("")}, {4}));
  ExpectOutput(t, I32({1, -1, std::numeric_limits<int32_t>::max(), 0}, {4}));
}

TEST(CwiseOpsTest, CastBoolAndInts) {
  OpTester tb("Cast");
  tb.Attr("SrcT", DT_INT32).Attr("DstT", DT_BOOL).Input(I32({0, 3, -1}, {3}));
  ExpectOutput(tb, B({false, true, true}, {3}));
  OpTester fb("Cast");
  fb.Attr("SrcT", DT_BOOL).Attr("DstT", DT_FLOAT).Input(B({true, false}, {2}));
  ExpectOutput(fb, F({1, 0}, {2}));
  OpTester u8("Cast");
  u8.Attr("SrcT", DT_INT64)
      .Attr("DstT", DT_UINT8)
      .Input(Tensor::FromVector<int64_t>({1, 255, 256}));
  ExpectOutput(u8, Tensor::FromVector<uint8_t>({1, 255, 0}));
}

TEST(CwiseOpsTest, CastHalf) {
  // 1.5 = 0x3E00, -2 = 0xC000, 65504 (max half) = 0x7BFF, 0.1 rounds to 0x2E66.
  Tensor h(DT_HALF, TensorShape({4}));
  uint16_t* bits = h.base<uint16_t>();
  bits[0] = 0x3E00;
  bits[1] = 0xC000;
  bits[2] = 0x7BFF;
  bits[3] = 0x2E66;
  OpTester to_half("Cast");
  to_half.Attr("SrcT", DT_FLOAT).Attr("DstT", DT_HALF).Input(F({1.5f, -2.0f, 65504.0f, 0.1f}, {4}));
  auto out = to_half.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DT_HALF);
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*out)[0].base<uint16_t>()[i], bits[i]) << i;

  OpTester from_half("Cast");
  from_half.Attr("SrcT", DT_HALF).Attr("DstT", DT_FLOAT).Input(h);
  ExpectOutput(from_half, F({1.5f, -2.0f, 65504.0f, HalfToFloat(0x2E66)}, {4}));
  OpTester half_to_int("Cast");
  half_to_int.Attr("SrcT", DT_HALF).Attr("DstT", DT_INT32).Input(h);
  ExpectOutput(half_to_int, I32({1, -2, 65504, 0}, {4}));
}

TEST(CwiseOpsTest, CastBFloat16TruncateVersusRound) {
  // 1 + 2^-8 + 2^-9 rounds up to 1 + 2^-7 but truncates to 1.
  const float v = 1.0f + 1.0f / 256 + 1.0f / 512;
  OpTester round("Cast");
  round.Attr("SrcT", DT_FLOAT).Attr("DstT", DT_BFLOAT16).Input(F({v}, {1}));
  auto r = round.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].base<uint16_t>()[0], 0x3F81);
  OpTester trunc("Cast");
  trunc.Attr("SrcT", DT_FLOAT).Attr("DstT", DT_BFLOAT16).Attr("Truncate", true).Input(F({v}, {1}));
  auto tr = trunc.Run();
  ASSERT_TRUE(tr.ok()) << tr.status();
  EXPECT_EQ((*tr)[0].base<uint16_t>()[0], 0x3F80);
}

// TensorFlow's rules: real part to real types, both parts to bool, a zero
// imaginary part from real types; complex64 <-> complex128 per part.
TEST(CwiseOpsTest, CastComplex) {
  using C64 = std::complex<float>;
  using C128 = std::complex<double>;
  Tensor c(DT_COMPLEX64, TensorShape({4}));
  C64* cv = c.base<C64>();
  cv[0] = C64(1.5f, -2.0f);
  cv[1] = C64(0.0f, 3.0f);
  cv[2] = C64(0.0f, 0.0f);
  cv[3] = C64(-7.75f, 0.5f);
  OpTester to_float("Cast");
  to_float.Attr("SrcT", DT_COMPLEX64).Attr("DstT", DT_FLOAT).Input(c);
  ExpectOutput(to_float, F({1.5f, 0.0f, 0.0f, -7.75f}, {4}));
  OpTester to_int("Cast");
  to_int.Attr("SrcT", DT_COMPLEX64).Attr("DstT", DT_INT32).Input(c);
  ExpectOutput(to_int, I32({1, 0, 0, -7}, {4}));
  OpTester to_bool("Cast");
  to_bool.Attr("SrcT", DT_COMPLEX64).Attr("DstT", DT_BOOL).Input(c);
  ExpectOutput(to_bool, B({true, true, false, true}, {4}));

  OpTester wide("Cast");
  wide.Attr("SrcT", DT_COMPLEX64).Attr("DstT", DT_COMPLEX128).Input(c);
  auto w = wide.Run();
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ((*w)[0].dtype(), DT_COMPLEX128);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*w)[0].base<C128>()[i], C128(cv[i].real(), cv[i].imag())) << i;
  }

  OpTester from_int("Cast");
  from_int.Attr("SrcT", DT_INT32).Attr("DstT", DT_COMPLEX128).Input(I32({-3, 5}, {2}));
  auto fi = from_int.Run();
  ASSERT_TRUE(fi.ok()) << fi.status();
  EXPECT_EQ((*fi)[0].base<C128>()[0], C128(-3.0, 0.0));
  EXPECT_EQ((*fi)[0].base<C128>()[1], C128(5.0, 0.0));
}

TEST(CwiseOpsTest, CastUnsignedWidths) {
  OpTester t("Cast");
  t.Attr("SrcT", DT_FLOAT).Attr("DstT", DT_UINT16).Input(F({-1.0f, 65535.0f, 1e9f, 7.9f}, {4}));
  ExpectOutput(t, Tensor::FromVector<uint16_t>({0, 65535, 65535, 7}));
  OpTester u64("Cast");
  u64.Attr("SrcT", DT_INT64)
      .Attr("DstT", DT_UINT64)
      .Input(Tensor::FromVector<int64_t>({int64_t{1} << 40, 3}));
  ExpectOutput(u64, Tensor::FromVector<uint64_t>({uint64_t{1} << 40, 3}));
}

TEST(CwiseOpsTest, CastToSameTypeSharesTheBuffer) {
  Tensor x = F({1, 2}, {2});
  OpTester t("Cast");
  t.Attr("SrcT", DT_FLOAT).Attr("DstT", DT_FLOAT).Input(x);
  auto out = t.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE((*out)[0].SharesBufferWith(x));
}

TEST(CwiseOpsTest, NoKernelForUnsupportedType) {
  OpTester t("Sqrt");
  t.Attr("T", DT_COMPLEX64).Input(Tensor(DT_COMPLEX64, TensorShape({1})));
  EXPECT_FALSE(t.Run().ok());
}

// half and bfloat16 compute in float and round to nearest even.
TEST(CwiseOpsTest, HalfAndBfloat16ThroughFloat) {
  Tensor a(DT_HALF, TensorShape({2})), b(DT_HALF, TensorShape({2}));
  a.flat<Half>()[0] = Half{FloatToHalf(1.5f)};
  a.flat<Half>()[1] = Half{FloatToHalf(2048.0f)};
  b.flat<Half>()[0] = Half{FloatToHalf(0.25f)};
  b.flat<Half>()[1] = Half{FloatToHalf(1.0f)};  // 2049 is not a half: ties to even 2048
  OpTester t("AddV2");
  t.Attr("T", DT_HALF).Input(a).Input(b);
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].SummarizeValue(10), "1.75 2048");
  Tensor x(DT_BFLOAT16, TensorShape({1}));
  x.flat<BFloat16>()[0] = BFloat16{FloatToBFloat16(4.0f)};
  OpTester s("Rsqrt");
  s.Attr("T", DT_BFLOAT16).Input(x);
  auto r = s.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].SummarizeValue(10), "0.5");
}

}  // namespace
}  // namespace graphrun
