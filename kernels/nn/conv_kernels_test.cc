// Conv2D, pooling and batch-norm kernels against naive reference loops
// written here (small random inputs, SAME/VALID/EXPLICIT padding, stride 2,
// odd sizes, dilation), and batch norm's gradient against central
// differences of the reference forward pass.
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/op_registry.h"
#include "graph/ops/all_ops.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::HasSubstr;
using Vec = std::vector<float>;

constexpr double kTol = 1e-4;

Vec Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  Vec v(n);
  for (auto& x : v) x = d(gen);
  return v;
}
Tensor F(const Vec& v, TensorShape s) { return Tensor::FromVector<float>(v, s); }
Tensor Shape4(const TensorShape& s) {
  std::vector<int32_t> d;
  for (int64_t x : s.dim_sizes()) d.push_back(static_cast<int32_t>(x));
  return Tensor::FromVector<int32_t>(d);
}

absl::StatusOr<std::vector<Tensor>> RunOk(OpTester& t) {
  auto r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status();
  return r;
}
void ExpectClose(const Tensor& expected, const Tensor& actual, double tol = kTol) {
  EXPECT_EQ(TensorDiff(expected, actual, tol), "");
}

// One spatial dimension computed independently of window_util.h.
struct RefDim {
  int64_t out, pad;
};
RefDim Ref(int64_t in, int64_t k, int64_t dil, int64_t stride, const std::string& padding,
           int64_t explicit_before = 0, int64_t explicit_after = 0) {
  const int64_t eff = (k - 1) * dil + 1;
  if (padding == "VALID") return {(in - eff) / stride + 1, 0};
  if (padding == "EXPLICIT") {
    return {(in + explicit_before + explicit_after - eff) / stride + 1, explicit_before};
  }
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + eff - in, 0);
  return {out, total / 2};
}

struct ConvCase {
  int64_t n, h, w, c, kh, kw, out_c, stride, dil;
  std::string padding;
  std::vector<int64_t> explicit_paddings;  // 8 values for EXPLICIT
};

// Naive NHWC x HWIO convolution and both its gradients: every (output,
// tap) pair visited once.
struct ConvRef {
  Vec y, dx, dw;
  TensorShape y_shape;
};
ConvRef NaiveConv(const ConvCase& k, const Vec& x, const Vec& w, const Vec& dy) {
  const int64_t eb_h = k.explicit_paddings.empty() ? 0 : k.explicit_paddings[2];
  const int64_t ea_h = k.explicit_paddings.empty() ? 0 : k.explicit_paddings[3];
  const int64_t eb_w = k.explicit_paddings.empty() ? 0 : k.explicit_paddings[4];
  const int64_t ea_w = k.explicit_paddings.empty() ? 0 : k.explicit_paddings[5];
  RefDim dh = Ref(k.h, k.kh, k.dil, k.stride, k.padding, eb_h, ea_h);
  RefDim dw = Ref(k.w, k.kw, k.dil, k.stride, k.padding, eb_w, ea_w);
  ConvRef r;
  r.y_shape = TensorShape({k.n, dh.out, dw.out, k.out_c});
  r.y.assign(r.y_shape.num_elements(), 0);
  r.dx.assign(x.size(), 0);
  r.dw.assign(w.size(), 0);
  for (int64_t b = 0; b < k.n; ++b)
    for (int64_t oh = 0; oh < dh.out; ++oh)
      for (int64_t ow = 0; ow < dw.out; ++ow)
        for (int64_t co = 0; co < k.out_c; ++co) {
          const int64_t yi = ((b * dh.out + oh) * dw.out + ow) * k.out_c + co;
          for (int64_t fh = 0; fh < k.kh; ++fh)
            for (int64_t fw = 0; fw < k.kw; ++fw) {
              const int64_t ih = oh * k.stride - dh.pad + fh * k.dil;
              const int64_t iw = ow * k.stride - dw.pad + fw * k.dil;
              if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
              for (int64_t ci = 0; ci < k.c; ++ci) {
                const int64_t xi = ((b * k.h + ih) * k.w + iw) * k.c + ci;
                const int64_t wi = ((fh * k.kw + fw) * k.c + ci) * k.out_c + co;
                r.y[yi] += x[xi] * w[wi];
                r.dx[xi] += dy[yi] * w[wi];
                r.dw[wi] += x[xi] * dy[yi];
              }
            }
        }
  return r;
}

void SetConvAttrs(OpTester& t, const ConvCase& k) {
  t.Attr("T", DT_FLOAT)
      .Attr("strides", std::vector<int64_t>{1, k.stride, k.stride, 1})
      .Attr("dilations", std::vector<int64_t>{1, k.dil, k.dil, 1})
      .Attr("padding", k.padding);
  if (!k.explicit_paddings.empty()) {
    t.Attr("explicit_paddings", k.explicit_paddings);
  }
}

class ConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvTest, ForwardAndGradientsMatchNaive) {
  const ConvCase& k = GetParam();
  const TensorShape x_shape({k.n, k.h, k.w, k.c});
  const TensorShape w_shape({k.kh, k.kw, k.c, k.out_c});
  const Vec x = Random(x_shape.num_elements(), 1);
  const Vec w = Random(w_shape.num_elements(), 2);
  ConvRef shape_only = NaiveConv(k, x, w, Vec(1 << 16, 0));
  const Vec dy = Random(shape_only.y_shape.num_elements(), 3);
  ConvRef ref = NaiveConv(k, x, w, dy);

  OpTester fwd("Conv2D");
  SetConvAttrs(fwd, k);
  fwd.Input(F(x, x_shape)).Input(F(w, w_shape));
  auto y = RunOk(fwd);
  ASSERT_TRUE(y.ok());
  ExpectClose(F(ref.y, ref.y_shape), (*y)[0]);

  OpTester bwd_in("Conv2DBackpropInput");
  SetConvAttrs(bwd_in, k);
  bwd_in.Input(Shape4(x_shape)).Input(F(w, w_shape)).Input(F(dy, ref.y_shape));
  auto dx = RunOk(bwd_in);
  ASSERT_TRUE(dx.ok());
  ExpectClose(F(ref.dx, x_shape), (*dx)[0]);

  OpTester bwd_f("Conv2DBackpropFilter");
  SetConvAttrs(bwd_f, k);
  bwd_f.Input(F(x, x_shape)).Input(Shape4(w_shape)).Input(F(dy, ref.y_shape));
  auto dw = RunOk(bwd_f);
  ASSERT_TRUE(dw.ok());
  ExpectClose(F(ref.dw, w_shape), (*dw)[0]);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConvTest,
    ::testing::Values(ConvCase{2, 5, 7, 3, 3, 3, 4, 2, 1, "SAME", {}},
                      ConvCase{2, 6, 6, 2, 3, 3, 3, 2, 1, "VALID", {}},
                      ConvCase{1, 7, 5, 3, 2, 2, 2, 1, 1, "SAME", {}},
                      ConvCase{2, 8, 9, 2, 3, 3, 5, 1, 2, "SAME", {}},
                      ConvCase{1, 9, 9, 3, 1, 1, 5, 2, 1, "VALID", {}},
                      ConvCase{2, 11, 10, 16, 3, 3, 32, 1, 1, "SAME", {}},
                      ConvCase{1, 6, 5, 2, 3, 3, 3, 2, 1, "EXPLICIT", {0, 0, 1, 2, 0, 1, 0, 0}}));

TEST(ConvErrorsTest, BadInputsNameTheNode) {
  OpTester t("Conv2D", "conv_bad");
  t.Attr("T", DT_FLOAT).Attr("strides", std::vector<int64_t>{1, 1, 1, 1}).Attr("padding", "SAME");
  t.Input(F(Random(2 * 3 * 3 * 2, 1), {2, 3, 3, 2})).Input(F(Random(9 * 3, 1), {3, 3, 3, 1}));
  auto r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("node 'conv_bad'"));

  OpTester nchw("Conv2D", "conv_nchw");
  nchw.Attr("T", DT_FLOAT)
      .Attr("strides", std::vector<int64_t>{1, 1, 1, 1})
      .Attr("padding", "SAME")
      .Attr("data_format", "NCHW");
  nchw.Input(F(Random(8, 1), {1, 2, 2, 2})).Input(F(Random(8, 1), {1, 1, 2, 4}));
  r = nchw.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("NHWC"));
}

// ---------------------------------------------------------------------------
// Pooling.

struct PoolCase {
  int64_t n, h, w, c, kh, kw, stride;
  std::string padding;
};

struct PoolRef {
  Vec max_y, avg_y, max_dx, avg_dx;
  TensorShape y_shape;
};
PoolRef NaivePool(const PoolCase& k, const Vec& x, const Vec& dy) {
  RefDim dh = Ref(k.h, k.kh, 1, k.stride, k.padding);
  RefDim dw = Ref(k.w, k.kw, 1, k.stride, k.padding);
  PoolRef r;
  r.y_shape = TensorShape({k.n, dh.out, dw.out, k.c});
  r.max_y.assign(r.y_shape.num_elements(), 0);
  r.avg_y.assign(r.y_shape.num_elements(), 0);
  r.max_dx.assign(x.size(), 0);
  r.avg_dx.assign(x.size(), 0);
  for (int64_t b = 0; b < k.n; ++b)
    for (int64_t oh = 0; oh < dh.out; ++oh)
      for (int64_t ow = 0; ow < dw.out; ++ow)
        for (int64_t c = 0; c < k.c; ++c) {
          const int64_t yi = ((b * dh.out + oh) * dw.out + ow) * k.c + c;
          float best = -INFINITY, sum = 0;
          int64_t best_i = -1, count = 0;
          std::vector<int64_t> taps;
          for (int64_t fh = 0; fh < k.kh; ++fh)
            for (int64_t fw = 0; fw < k.kw; ++fw) {
              const int64_t ih = oh * k.stride - dh.pad + fh;
              const int64_t iw = ow * k.stride - dw.pad + fw;
              if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
              const int64_t xi = ((b * k.h + ih) * k.w + iw) * k.c + c;
              if (x[xi] > best) {
                best = x[xi];
                best_i = xi;
              }
              sum += x[xi];
              ++count;
              taps.push_back(xi);
            }
          r.max_y[yi] = best;
          r.avg_y[yi] = sum / count;
          r.max_dx[best_i] += dy[yi];
          for (int64_t xi : taps) r.avg_dx[xi] += dy[yi] / count;
        }
  return r;
}

void SetPoolAttrs(OpTester& t, const PoolCase& k) {
  t.Attr("T", DT_FLOAT)
      .Attr("ksize", std::vector<int64_t>{1, k.kh, k.kw, 1})
      .Attr("strides", std::vector<int64_t>{1, k.stride, k.stride, 1})
      .Attr("padding", k.padding);
}

class PoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolTest, MaxAndAvgWithGradientsMatchNaive) {
  const PoolCase& k = GetParam();
  const TensorShape x_shape({k.n, k.h, k.w, k.c});
  const Vec x = Random(x_shape.num_elements(), 4);
  PoolRef shape_only = NaivePool(k, x, Vec(1 << 16, 0));
  const Vec dy = Random(shape_only.y_shape.num_elements(), 5);
  PoolRef ref = NaivePool(k, x, dy);

  OpTester max("MaxPool");
  SetPoolAttrs(max, k);
  max.Input(F(x, x_shape));
  auto y = RunOk(max);
  ASSERT_TRUE(y.ok());
  ExpectClose(F(ref.max_y, ref.y_shape), (*y)[0]);

  OpTester avg("AvgPool");
  SetPoolAttrs(avg, k);
  avg.Input(F(x, x_shape));
  auto ya = RunOk(avg);
  ASSERT_TRUE(ya.ok());
  ExpectClose(F(ref.avg_y, ref.y_shape), (*ya)[0]);

  OpTester max_grad("MaxPoolGrad");
  SetPoolAttrs(max_grad, k);
  max_grad.Input(F(x, x_shape)).Input(F(ref.max_y, ref.y_shape)).Input(F(dy, ref.y_shape));
  auto dx = RunOk(max_grad);
  ASSERT_TRUE(dx.ok());
  ExpectClose(F(ref.max_dx, x_shape), (*dx)[0]);

  OpTester avg_grad("AvgPoolGrad");
  SetPoolAttrs(avg_grad, k);
  avg_grad.Input(Shape4(x_shape)).Input(F(dy, ref.y_shape));
  auto dxa = RunOk(avg_grad);
  ASSERT_TRUE(dxa.ok());
  ExpectClose(F(ref.avg_dx, x_shape), (*dxa)[0]);
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolTest,
                         ::testing::Values(PoolCase{2, 5, 7, 3, 2, 2, 2, "SAME"},
                                           PoolCase{2, 7, 7, 3, 3, 3, 2, "SAME"},
                                           PoolCase{1, 6, 5, 4, 2, 2, 2, "VALID"},
                                           PoolCase{2, 9, 8, 17, 3, 3, 1, "SAME"},
                                           PoolCase{1, 7, 9, 2, 3, 2, 3, "VALID"}));

// ---------------------------------------------------------------------------
// Batch norm.

// Reference forward pass in double: y and the batch statistics.
struct BnRef {
  std::vector<double> y, mean, var;  // var biased
};
BnRef NaiveBatchNorm(const Vec& x, int64_t c, const Vec& scale, const Vec& offset, double eps,
                     bool training, const Vec& pop_mean, const Vec& pop_var) {
  const int64_t rows = static_cast<int64_t>(x.size()) / c;
  BnRef r;
  r.mean.assign(c, 0);
  r.var.assign(c, 0);
  if (training) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = 0; k < c; ++k) r.mean[k] += x[i * c + k];
    for (auto& m : r.mean) m /= rows;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = 0; k < c; ++k) {
        const double d = x[i * c + k] - r.mean[k];
        r.var[k] += d * d;
      }
    for (auto& v : r.var) v /= rows;
  } else {
    r.mean.assign(pop_mean.begin(), pop_mean.end());
    r.var.assign(pop_var.begin(), pop_var.end());
  }
  r.y.resize(x.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < c; ++k) {
      r.y[i * c + k] =
          (x[i * c + k] - r.mean[k]) / std::sqrt(r.var[k] + eps) * scale[k] + offset[k];
    }
  return r;
}

Tensor D2F(const std::vector<double>& v, TensorShape s) {
  Vec f(v.begin(), v.end());
  return F(f, s);
}

class BatchNormTest : public ::testing::TestWithParam<bool> {};

TEST_P(BatchNormTest, ForwardMatchesNaive) {
  const bool training = GetParam();
  const int64_t c = 5;
  const TensorShape x_shape({2, 3, 3, c});
  const Vec x = Random(x_shape.num_elements(), 6);
  const Vec scale = Random(c, 7), offset = Random(c, 8), pop_mean = Random(c, 9);
  Vec pop_var = Random(c, 10);
  for (auto& v : pop_var) v = std::fabs(v) + 0.5f;
  const float eps = 0.001f;
  BnRef ref = NaiveBatchNorm(x, c, scale, offset, eps, training, pop_mean, pop_var);

  for (float factor : {1.0f, 0.25f}) {
    OpTester t("FusedBatchNormV3");
    t.Attr("T", DT_FLOAT)
        .Attr("U", DT_FLOAT)
        .Attr("epsilon", eps)
        .Attr("is_training", training)
        .Attr("exponential_avg_factor", factor);
    t.Input(F(x, x_shape))
        .Input(F(scale, {c}))
        .Input(F(offset, {c}))
        .Input(F(pop_mean, {c}))
        .Input(F(pop_var, {c}));
    auto out = RunOk(t);
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(out->size(), 6u);
    ExpectClose(D2F(ref.y, x_shape), (*out)[0]);
    std::vector<double> want_mean = ref.mean, want_var = ref.var;
    if (training) {
      const double rows = 18, bessel = rows / (rows - 1);
      for (int64_t k = 0; k < c; ++k) {
        want_mean[k] = (1 - factor) * pop_mean[k] + factor * ref.mean[k];
        want_var[k] = (1 - factor) * pop_var[k] + factor * ref.var[k] * bessel;
      }
    }
    ExpectClose(D2F(want_mean, {c}), (*out)[1]);
    ExpectClose(D2F(want_var, {c}), (*out)[2]);
    ExpectClose(D2F(ref.mean, {c}), (*out)[3]);
    ExpectClose(D2F(ref.var, {c}), (*out)[4]);
  }
}

// The gradient against central differences of L = sum(y * dy) computed by
// the double reference, for x, scale and offset.
TEST_P(BatchNormTest, GradientMatchesNumeric) {
  const bool training = GetParam();
  const int64_t c = 4;
  const TensorShape x_shape({2, 3, 2, c});
  const Vec x = Random(x_shape.num_elements(), 11);
  const Vec dy = Random(x_shape.num_elements(), 12);
  const Vec scale = Random(c, 13), offset = Random(c, 14), pop_mean = Random(c, 15);
  Vec pop_var = Random(c, 16);
  for (auto& v : pop_var) v = std::fabs(v) + 0.5f;
  const float eps = 0.001f;
  BnRef ref = NaiveBatchNorm(x, c, scale, offset, eps, training, pop_mean, pop_var);

  OpTester t("FusedBatchNormGradV3");
  t.Attr("T", DT_FLOAT).Attr("U", DT_FLOAT).Attr("epsilon", eps).Attr("is_training", training);
  t.Input(F(dy, x_shape))
      .Input(F(x, x_shape))
      .Input(F(scale, {c}))
      .Input(D2F(ref.mean, {c}))
      .Input(D2F(ref.var, {c}))
      .Input(F({}, {0}));
  auto out = RunOk(t);
  ASSERT_TRUE(out.ok());

  auto loss = [&](const Vec& xx, const Vec& ss, const Vec& oo) {
    BnRef r = NaiveBatchNorm(xx, c, ss, oo, eps, training, pop_mean, pop_var);
    double l = 0;
    for (size_t i = 0; i < r.y.size(); ++i) l += r.y[i] * dy[i];
    return l;
  };
  // Perturbations in float are too coarse for 1e-4; perturb in double via
  // the reference taking float vectors: use a step that floats represent.
  const float h = 1.0f / 1024;
  auto numeric = [&](Vec v, int64_t i, int which) {
    Vec plus = v, minus = v;
    plus[i] += h;
    minus[i] -= h;
    auto eval = [&](const Vec& p) {
      return which == 0   ? loss(p, scale, offset)
             : which == 1 ? loss(x, p, offset)
                          : loss(x, scale, p);
    };
    return (eval(plus) - eval(minus)) / (2.0 * h);
  };
  std::vector<double> want_dx(x.size()), want_ds(c), want_do(c);
  for (size_t i = 0; i < x.size(); ++i) want_dx[i] = numeric(x, i, 0);
  for (int64_t k = 0; k < c; ++k) {
    want_ds[k] = numeric(scale, k, 1);
    want_do[k] = numeric(offset, k, 2);
  }
  // Central differences are exact to O(h^2) ~ 1e-6 times the third
  // derivative; 1e-3 leaves room for that, the kernel must be within it.
  ExpectClose(D2F(want_dx, x_shape), (*out)[0], 1e-3);
  ExpectClose(D2F(want_ds, {c}), (*out)[1], 1e-3);
  ExpectClose(D2F(want_do, {c}), (*out)[2], 1e-3);
}

// And against the closed form at 1e-4.
TEST(BatchNormGradTest, TrainingMatchesClosedForm) {
  const int64_t c = 3;
  const TensorShape x_shape({1, 5, 3, c});
  const Vec x = Random(x_shape.num_elements(), 17), dy = Random(x_shape.num_elements(), 18);
  const Vec scale = Random(c, 19);
  const float eps = 0.01f;
  BnRef ref = NaiveBatchNorm(x, c, scale, Vec(c, 0), eps, true, {}, {});
  const int64_t rows = 15;
  std::vector<double> dx(x.size()), ds(c, 0), doff(c, 0);
  for (int64_t k = 0; k < c; ++k) {
    const double inv = 1 / std::sqrt(ref.var[k] + eps);
    double sum_dy = 0, sum_dyx = 0;
    for (int64_t i = 0; i < rows; ++i) {
      sum_dy += dy[i * c + k];
      sum_dyx += dy[i * c + k] * (x[i * c + k] - ref.mean[k]);
    }
    ds[k] = sum_dyx * inv;
    doff[k] = sum_dy;
    for (int64_t i = 0; i < rows; ++i) {
      const double xc = x[i * c + k] - ref.mean[k];
      dx[i * c + k] =
          scale[k] * inv * (dy[i * c + k] - sum_dy / rows - xc * inv * inv * sum_dyx / rows);
    }
  }
  OpTester t("FusedBatchNormGrad");
  t.Attr("T", DT_FLOAT).Attr("epsilon", eps);
  t.Input(F(dy, x_shape))
      .Input(F(x, x_shape))
      .Input(F(scale, {c}))
      .Input(D2F(ref.mean, {c}))
      .Input(D2F(ref.var, {c}));
  auto out = RunOk(t);
  ASSERT_TRUE(out.ok());
  ExpectClose(D2F(dx, x_shape), (*out)[0]);
  ExpectClose(D2F(ds, {c}), (*out)[1]);
  ExpectClose(D2F(doff, {c}), (*out)[2]);
}

INSTANTIATE_TEST_SUITE_P(TrainingAndInference, BatchNormTest, ::testing::Bool());

TEST(L2LossTest, HalfSumOfSquares) {
  const Vec x = Random(37, 20);
  double want = 0;
  for (float v : x) want += 0.5 * v * v;
  OpTester t("L2Loss");
  t.Attr("T", DT_FLOAT).Input(F(x, {37}));
  auto out = RunOk(t);
  ASSERT_TRUE(out.ok());
  ExpectClose(Tensor::Scalar<float>(static_cast<float>(want)), (*out)[0]);
}

// ---------------------------------------------------------------------------
// Shape functions.

// Runs op's shape function on a node with `attrs` and `inputs`.
absl::StatusOr<std::vector<PartialShape>> InferShapes(
    const std::string& op, const std::map<std::string, tensorflow::AttrValue>& attrs,
    std::vector<PartialShape> inputs, std::vector<const Tensor*> values = {}) {
  const OpRegistrationData* reg = DefaultOpRegistry().LookUp(op);
  if (reg == nullptr) return absl::NotFoundError(op);
  tensorflow::NodeDef def;
  def.set_name("shape_node");
  def.set_op(op);
  for (const auto& [k, v] : attrs) (*def.mutable_attr())[k] = v;
  AddDefaultsToNodeDef(reg->op_def, &def);
  values.resize(inputs.size(), nullptr);
  ShapeContext c(def, reg->op_def, std::move(inputs), values, reg->op_def.output_arg_size());
  GR_RETURN_IF_ERROR(reg->shape_fn(c));
  return c.TakeOutputs();
}

TEST(ShapeFnTest, ConvPoolBatchNorm) {
  auto conv = InferShapes(
      "Conv2D",
      {{"strides", MakeAttr(std::vector<int64_t>{1, 2, 2, 1})}, {"padding", MakeAttr("SAME")}},
      {PartialShape({-1, 7, 8, 3}), PartialShape({3, 3, 3, 16})});
  ASSERT_TRUE(conv.ok()) << conv.status();
  EXPECT_EQ((*conv)[0], PartialShape({-1, 4, 4, 16}));
  auto valid = InferShapes(
      "Conv2D",
      {{"strides", MakeAttr(std::vector<int64_t>{1, 2, 2, 1})}, {"padding", MakeAttr("VALID")}},
      {PartialShape({2, 7, 8, 3}), PartialShape({3, 3, 3, 16})});
  ASSERT_TRUE(valid.ok());
  EXPECT_EQ((*valid)[0], PartialShape({2, 3, 3, 16}));
  auto bad = InferShapes(
      "Conv2D",
      {{"strides", MakeAttr(std::vector<int64_t>{1, 1, 1, 1})}, {"padding", MakeAttr("SAME")}},
      {PartialShape({2, 7, 8, 3}), PartialShape({3, 3, 2, 16})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("node 'shape_node'"));

  Tensor sizes = Shape4(TensorShape({2, 7, 8, 3}));
  auto bwd = InferShapes(
      "Conv2DBackpropInput",
      {{"strides", MakeAttr(std::vector<int64_t>{1, 2, 2, 1})}, {"padding", MakeAttr("SAME")}},
      {PartialShape({4}), PartialShape({3, 3, 3, 16}), PartialShape({2, 4, 4, 16})}, {&sizes});
  ASSERT_TRUE(bwd.ok());
  EXPECT_EQ((*bwd)[0], PartialShape({2, 7, 8, 3}));

  auto pool = InferShapes("MaxPool",
                          {{"ksize", MakeAttr(std::vector<int64_t>{1, 3, 3, 1})},
                           {"strides", MakeAttr(std::vector<int64_t>{1, 2, 2, 1})},
                           {"padding", MakeAttr("SAME")}},
                          {PartialShape({2, 5, 7, 6})});
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)[0], PartialShape({2, 3, 4, 6}));

  auto bn = InferShapes("FusedBatchNormV3", {},
                        {PartialShape({2, 5, 7, 6}), PartialShape({6}), PartialShape({6}),
                         PartialShape({0}), PartialShape({0})});
  ASSERT_TRUE(bn.ok()) << bn.status();
  EXPECT_EQ((*bn)[0], PartialShape({2, 5, 7, 6}));
  EXPECT_EQ((*bn)[2], PartialShape({6}));
}

TEST(ShapeFnTest, TrainingOps) {
  auto adam = InferShapes("ApplyAdam", {},
                          {PartialShape({3, 4}), PartialShape({3, 4}), PartialShape({3, 4}),
                           PartialShape({}), PartialShape({}), PartialShape({}), PartialShape({}),
                           PartialShape({}), PartialShape({}), PartialShape({3, 4})});
  ASSERT_TRUE(adam.ok()) << adam.status();
  EXPECT_EQ((*adam)[0], PartialShape({3, 4}));
  auto bad = InferShapes("ApplyGradientDescent", {},
                         {PartialShape({3, 4}), PartialShape({1}), PartialShape({3, 4})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("alpha must be a scalar"));
  Tensor n = Tensor::Scalar<int32_t>(10);
  auto seg = InferShapes("UnsortedSegmentSum", {},
                         {PartialShape({5, 3, 2}), PartialShape({5}), PartialShape({})},
                         {nullptr, nullptr, &n});
  ASSERT_TRUE(seg.ok()) << seg.status();
  EXPECT_EQ((*seg)[0], PartialShape({10, 3, 2}));
}

}  // namespace
}  // namespace graphrun
