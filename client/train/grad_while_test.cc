// Gradients through while loops (grad_while.h): checked against closed
// forms, against the same computation unrolled in the same graph, against
// central differences, and by training a variable used inside a loop.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>

#include "client/client_session.h"
#include "client/graph_import.h"
#include "client/train/gradient_checker.h"
#include "client/train/gradients.h"
#include "client/train/ops_internal.h"
#include "client/train/optimizers.h"
#include "client/variables.h"
#include "client/while_loop.h"
#include "gmock/gmock.h"
#include "graph/graph.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using internal::Op;
using ::testing::HasSubstr;

Output Placeholder(const Scope& s, DataType dt, const PartialShape& shape) {
  return Op(s, "Placeholder")
      .Attr("dtype", internal::AType(dt))
      .Attr("shape", client::internal::AttrShape(shape))
      .Out();
}

// Fetched {loss, unrolled loss, 3 loop gradients, 3 unrolled gradients}:
// equal to 1e-12, element by element.
void ExpectLoopMatchesUnrolled(const std::vector<Tensor>& out) {
  EXPECT_NEAR(out[0].scalar<double>(), out[1].scalar<double>(), 1e-12);
  for (int i = 0; i < 3; ++i) {
    const Tensor& a = out[2 + i];
    const Tensor& b = out[5 + i];
    ASSERT_EQ(a.shape(), b.shape()) << "x " << i;
    for (int64_t j = 0; j < a.NumElements(); ++j) {
      EXPECT_NEAR(a.flat<double>()[j], b.flat<double>()[j], 1e-12) << "x " << i << " [" << j << "]";
    }
  }
}

// v = x^n by n multiplications: dv/dx = n x^(n-1), for every n including 0
// (no iteration: the gradient is 0 and the loop's Exit passes 1 through).
class PowerLoopTest : public ::testing::TestWithParam<int> {};

TEST_P(PowerLoopTest, GradientIsNTimesXToTheNMinusOne) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DT_DOUBLE, PartialShape({}));
  Output n = Placeholder(s, DT_INT32, PartialShape({}));
  WhileLoopOptions o;
  o.parallel_iterations = GetParam();
  auto r = WhileLoop(
      s, {internal::ScalarOf(s, 0, DT_INT32), internal::ScalarOf(s, 1, DT_DOUBLE)},
      [&](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return internal::Binary(c, "Less", v[0], n);
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        return std::vector<Output>{internal::Add(b, v[0], 1), internal::Mul(b, v[1], x)};
      },
      o);
  ASSERT_TRUE(r.ok()) << r.status();
  auto g = AddSymbolicGradients(s, {(*r)[1]}, {x}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  ClientSession session(s);
  for (int k : {0, 1, 3, 7}) {
    auto out = session.Run({{x, Tensor::Scalar<double>(1.5)}, {n, Tensor::Scalar<int32_t>(k)}},
                           {(*r)[1], (*g)[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_DOUBLE_EQ((*out)[0].scalar<double>(), std::pow(1.5, k)) << "n=" << k;
    EXPECT_DOUBLE_EQ((*out)[1].scalar<double>(), k == 0 ? 0.0 : k * std::pow(1.5, k - 1))
        << "n=" << k;
  }
  // The forward loop alone still runs (no stack is pushed).
  auto fwd =
      session.Run({{x, Tensor::Scalar<double>(2.0)}, {n, Tensor::Scalar<int32_t>(4)}}, {(*r)[1]});
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  EXPECT_EQ((*fwd)[0].scalar<double>(), 16.0);
}

INSTANTIATE_TEST_SUITE_P(ParallelIterations, PowerLoopTest, ::testing::Values(1, 10, 32));

// An RNN cell: h <- tanh(h W + b), T times, W and b captured from outside
// the loop (constant Enters whose gradients sum over the iterations).
// The loop's gradients equal those of the same cell unrolled T times.
TEST(WhileGradientTest, RnnMatchesUnrolledAndCentralDifferences) {
  Scope s = Scope::NewRootScope();
  Output w = Placeholder(s, DT_DOUBLE, PartialShape({3, 3}));
  Output bias = Placeholder(s, DT_DOUBLE, PartialShape({3}));
  Output h0 = Placeholder(s, DT_DOUBLE, PartialShape({2, 3}));
  constexpr int kSteps = 4;
  auto cell = [&](const Scope& b, const Output& h) {
    return internal::Tanh(b, internal::Add(b, internal::MatMul(b, h, w, false, false), bias));
  };
  auto r = WhileLoop(
      s, {internal::ScalarOf(s, 0, DT_INT32), h0},
      [&](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return internal::Binary(c, "Less", v[0], kSteps);
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        return std::vector<Output>{internal::Add(b, v[0], 1), cell(b, v[1])};
      });
  ASSERT_TRUE(r.ok()) << r.status();
  Output loss = internal::Sum(s, internal::Square(s, (*r)[1]), {0, 1});
  Output h = h0;
  for (int t = 0; t < kSteps; ++t) h = cell(s, h);
  Output unrolled = internal::Sum(s, internal::Square(s, h), {0, 1});
  auto g = AddSymbolicGradients(s, {loss}, {w, bias, h0}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto gu = AddSymbolicGradients(s, {unrolled}, {w, bias, h0}, {});
  ASSERT_TRUE(gu.ok()) << gu.status();

  const Tensor wv = testing::RandomTensor(DT_DOUBLE, TensorShape({3, 3}), -0.8, 0.8, 3);
  const Tensor bv = testing::RandomTensor(DT_DOUBLE, TensorShape({3}), -0.5, 0.5, 4);
  const Tensor hv = testing::RandomTensor(DT_DOUBLE, TensorShape({2, 3}), -1, 1, 5);
  ClientSession session(s);
  auto out = session.Run({{w, wv}, {bias, bv}, {h0, hv}},
                         {loss, unrolled, (*g)[0], (*g)[1], (*g)[2], (*gu)[0], (*gu)[1], (*gu)[2]});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectLoopMatchesUnrolled(*out);
  auto check = testing::CheckGradients(s, {w, bias, h0}, {wv, bv, hv}, loss, 1e-6);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_LT(check->max_rel_error, 1e-6);
  EXPECT_EQ(check->checked, 9 + 3 + 6);
}

// Training through a loop: a resource variable read in the body, updated
// by gradient descent on the loop's output. Each step's value is checked
// against the closed form: y = w^3 x (three multiplications by w), loss =
// (y - t)^2, dloss/dw = 2 (y - t) 3 w^2 x.
TEST(WhileGradientTest, TrainsAVariableUsedInsideTheLoop) {
  Scope s = Scope::NewRootScope();
  Variable w(s.WithOpName("w"), PartialShape({}), DT_DOUBLE,
             init::Constant(Tensor::Scalar<double>(0.5)));
  Output x = internal::ScalarOf(s, 2.0, DT_DOUBLE);
  auto r = WhileLoop(
      s, {internal::ScalarOf(s, 0, DT_INT32), x},
      [&](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return internal::Binary(c, "Less", v[0], 3);
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        return std::vector<Output>{
            internal::Add(b, v[0], 1),
            internal::Mul(b, v[1], internal::ReadVariable(b, w.handle(), DT_DOUBLE))};
      });
  ASSERT_TRUE(r.ok()) << r.status();
  Output loss = internal::Square(s, internal::Sub(s, (*r)[1], 1.0));
  GradientDescentOptimizer opt(0.01);
  auto train = opt.Minimize(s, loss, {w});
  ASSERT_TRUE(train.ok()) << train.status();
  ClientSession session(s);
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  double wv = 0.5;
  for (int step = 0; step < 5; ++step) {
    const double y = wv * wv * wv * 2.0;
    const double grad = 2 * (y - 1.0) * 3 * wv * wv * 2.0;
    auto out = session.Run({}, {loss}, {*train});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].scalar<double>(), (y - 1.0) * (y - 1.0), 1e-12) << "step " << step;
    wv -= 0.01 * grad;
    auto now = session.Run({w.Read()});
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_NEAR((*now)[0].scalar<double>(), wv, 1e-12) << "step " << step;
  }
}

absl::StatusOr<tensorflow::GraphDef> TfGraph(const std::string& name) {
  return ReadGraphDefFile(std::string(std::getenv("TEST_SRCDIR")) +
                          "/graphrun/tools/testdata/tf2/" + name);
}

// TensorFlow-authored graphs with functional control flow, imported and
// differentiated: a StatelessWhile (result = acc0 * 2^n, so d/dacc0 = 2^n)
// and a StatelessIf (|x|: d/dx = sign(x)).
TEST(WhileGradientTest, ThroughImportedTensorFlowWhileAndIf) {
  Scope s = Scope::NewRootScope();
  auto pow_def = TfGraph("while_pow.pbtxt");
  ASSERT_TRUE(pow_def.ok()) << pow_def.status();
  auto pow = ImportGraphDef(s, *pow_def);
  ASSERT_TRUE(pow.ok()) << pow.status();
  auto abs_def = TfGraph("if_abs.pbtxt");
  ASSERT_TRUE(abs_def.ok()) << abs_def.status();
  auto abs = ImportGraphDef(s, *abs_def, "abs");
  ASSERT_TRUE(abs.ok()) << abs.status();
  Output n = *pow->Tensor("n"), acc0 = *pow->Tensor("acc0"), result = *pow->Tensor("result");
  Output x = *abs->Tensor("x"), absx = *abs->Tensor("cond/Identity");
  EXPECT_EQ(n.node()->name(), "import/n");
  auto g = AddSymbolicGradients(s, {result, absx}, {acc0, x}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  ClientSession session(s);
  for (int k : {0, 1, 5}) {
    for (float xv : {-2.5f, 3.0f}) {
      auto out = session.Run({{n, Tensor::Scalar<int32_t>(k)}, {x, Tensor::Scalar<float>(xv)}},
                             {result, (*g)[0], absx, (*g)[1]});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].scalar<float>(), std::ldexp(1.0f, k));
      EXPECT_EQ((*out)[1].scalar<float>(), std::ldexp(1.0f, k)) << "n=" << k;
      EXPECT_EQ((*out)[2].scalar<float>(), std::fabs(xv));
      EXPECT_EQ((*out)[3].scalar<float>(), xv < 0 ? -1.0f : 1.0f) << "x=" << xv;
    }
  }
  // Importing the same names again clashes, named.
  auto again = ImportGraphDef(s, *abs_def, "");
  auto twice = ImportGraphDef(s.NewSubScope("abs").WithNameScope("abs"), *abs_def, "");
  EXPECT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument) << twice.status();
  EXPECT_THAT(twice.status().message(), HasSubstr("'abs/x'"));
}

// A resource handle as a loop variable, passed through: its gradient from
// after the loop reaches the handle, with and without a float variable
// carrying gradients through the body.
TEST(WhileGradientTest, ResourceLoopVariableGetsItsExitGradient) {
  for (bool with_float : {true, false}) {
    Scope s = Scope::NewRootScope();
    Variable w(s.WithOpName("w"), PartialShape({}), DT_DOUBLE,
               init::Constant(Tensor::Scalar<double>(4.0)));
    std::vector<Output> init = {internal::ScalarOf(s, 0, DT_INT32), w.handle()};
    if (with_float) init.push_back(internal::ScalarOf(s, 1.5, DT_DOUBLE));
    auto r = WhileLoop(
        s, init,
        [](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
          return internal::Binary(c, "Less", v[0], 3);
        },
        [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
          std::vector<Output> next = {internal::Add(b, v[0], 1), v[1]};
          if (with_float) {
            next.push_back(internal::Mul(b, v[2], internal::ReadVariable(b, v[1], DT_DOUBLE)));
          }
          return next;
        });
    ASSERT_TRUE(r.ok()) << r.status();
    // y = 3 * w (read after the loop) [+ 1.5 * w^3 through the body].
    Output y = internal::Mul(s, internal::ReadVariable(s, (*r)[1], DT_DOUBLE), 3.0);
    if (with_float) y = internal::Add(s, y, (*r)[2]);
    auto g = AddSymbolicGradients(s, {y}, {w.handle()}, {});
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_NE((*g)[0].node(), nullptr) << "with_float=" << with_float;
    ClientSession session(s);
    ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
    auto out = session.Run({y, (*g)[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_DOUBLE_EQ((*out)[0].scalar<double>(), 12.0 + (with_float ? 1.5 * 64 : 0));
    EXPECT_DOUBLE_EQ((*out)[1].scalar<double>(), 3.0 + (with_float ? 1.5 * 3 * 16 : 0))
        << "with_float=" << with_float;
  }
}

// The same TensorFlow graph imported twice: each import has its own loop
// frame, and each loop its own gradient.
TEST(WhileGradientTest, ImportedTwiceKeepsTwoLoops) {
  Scope s = Scope::NewRootScope();
  auto def = TfGraph("while_pow.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status();
  auto a = ImportGraphDef(s, *def, "a");
  auto b = ImportGraphDef(s, *def, "b");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  Output ya = *a->Tensor("result"), yb = *b->Tensor("result");
  auto g = AddSymbolicGradients(s, {ya, yb}, {*a->Tensor("acc0"), *b->Tensor("acc0")}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  ClientSession session(s);
  auto out = session.Run({{*a->Tensor("n"), Tensor::Scalar<int32_t>(3)},
                          {*b->Tensor("n"), Tensor::Scalar<int32_t>(5)}},
                         {ya, yb, (*g)[0], (*g)[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 8);
  EXPECT_EQ((*out)[1].scalar<float>(), 32);
  EXPECT_EQ((*out)[2].scalar<float>(), 8);
  EXPECT_EQ((*out)[3].scalar<float>(), 32);
}

TEST(WhileGradientTest, NestedLoopsAndAYInsideALoop) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DT_DOUBLE, PartialShape({}));
  Output inside;
  auto inner_loop = [&](const Scope& b, const Output& v) {
    auto in = WhileLoop(
        b, {internal::ScalarOf(b, 0, DT_INT32), v},
        [](const Scope& c, const std::vector<Output>& u) -> absl::StatusOr<Output> {
          return internal::Binary(c, "Less", u[0], 2);
        },
        [](const Scope& c, const std::vector<Output>& u) -> absl::StatusOr<std::vector<Output>> {
          return std::vector<Output>{internal::Add(c, u[0], 1), internal::Mul(c, u[1], u[1])};
        },
        WhileLoopOptions{"inner", 10});
    return in.ok() ? (*in)[1] : Output();
  };
  auto outer = WhileLoop(
      s, {internal::ScalarOf(s, 0, DT_INT32), x},
      [](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return internal::Binary(c, "Less", v[0], 2);
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        inside = internal::Mul(b, v[1], 2.0);
        return std::vector<Output>{internal::Add(b, v[0], 1), inner_loop(b, inside)};
      },
      WhileLoopOptions{"outer", 10});
  ASSERT_TRUE(outer.ok()) << outer.status();
  // Forward, the nested loops run: ((x*2)^4 * 2)^4 for x = 0.5.
  ClientSession session(s);
  auto fwd = session.Run({{x, Tensor::Scalar<double>(0.5)}}, {(*outer)[1]});
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  EXPECT_DOUBLE_EQ((*fwd)[0].scalar<double>(), std::pow(std::pow(1.0, 4) * 2, 4));

  // f(x) = 16 (2x)^16: f'(0.5) = 512, through both loops.
  auto nested = AddSymbolicGradients(s, {(*outer)[1]}, {x}, {});
  ASSERT_TRUE(nested.ok()) << nested.status();
  auto d = session.Run({{x, Tensor::Scalar<double>(0.5)}}, {(*nested)[0]});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ((*d)[0].scalar<double>(), 512.0);

  auto from_inside = AddSymbolicGradients(s, {inside}, {x}, {});
  EXPECT_EQ(from_inside.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(from_inside.status().message(), HasSubstr("is inside the loop 'outer'"));
}

// Conditionals in a loop body, nested (tf.cond inside tf.while_loop):
//   x <- x < 2 ? x * w : (x > 3 ? tanh(x) * w : 0.5 x + w)
// Each iteration takes one of three branches; a forward value of a branch
// is pushed only when its branch runs, and popped only in the mirroring
// backprop iteration (gated by the popped predicates). The gradients
// equal forward-mode derivatives computed here alongside the values.
class ConditionalInLoopTest : public ::testing::TestWithParam<int> {};

TEST_P(ConditionalInLoopTest, NestedConditionalsMatchForwardModeDerivatives) {
  Scope s = Scope::NewRootScope();
  Output x0 = Placeholder(s, DT_DOUBLE, PartialShape({}));
  Output w = Placeholder(s, DT_DOUBLE, PartialShape({}));
  Output n = Placeholder(s, DT_INT32, PartialShape({}));
  auto c = [](const Scope& b, double v) { return internal::ScalarOf(b, v, DT_DOUBLE); };
  WhileLoopOptions o;
  o.parallel_iterations = GetParam();
  auto r = WhileLoop(
      s, {internal::ScalarOf(s, 0, DT_INT32), x0},
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return internal::Binary(b, "Less", v[0], n);
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        Output p = internal::Binary(b, "Less", v[1], c(b, 2));
        std::vector<Output> sx = Op(b, "Switch").In(v[1]).In(p).Outs();
        std::vector<Output> sw = Op(b, "Switch").In(w).In(p).Outs();
        Output t = internal::Mul(b, sx[1], sw[1]);
        Output q = internal::Binary(b, "Greater", sx[0], c(b, 3));
        std::vector<Output> sx2 = Op(b, "Switch").In(sx[0]).In(q).Outs();
        std::vector<Output> sw2 = Op(b, "Switch").In(sw[0]).In(q).Outs();
        Output ft = internal::Mul(b, internal::Tanh(b, sx2[1]), sw2[1]);
        Output ff = internal::Add(b, internal::Mul(b, sx2[0], c(b, 0.5)), sw2[0]);
        Output f = Op(b, "Merge").InList(InputList({ff, ft})).Out(0);
        Output next = Op(b, "Merge").InList(InputList({f, t})).Out(0);
        return std::vector<Output>{internal::Add(b, v[0], 1), next};
      },
      o);
  ASSERT_TRUE(r.ok()) << r.status();
  auto g = AddSymbolicGradients(s, {(*r)[1]}, {x0, w}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  ClientSession session(s);
  const double wv = 1.7;
  for (int k : {0, 1, 3, 5, 12}) {
    // Forward mode: the value and its derivatives by x0 and w.
    double x = 0.5, dx0 = 1, dw = 0;
    int taken[3] = {0, 0, 0};
    for (int i = 0; i < k; ++i) {
      if (x < 2) {
        std::tie(x, dx0, dw) = std::make_tuple(x * wv, dx0 * wv, dw * wv + x);
        ++taken[0];
      } else if (x > 3) {
        const double th = std::tanh(x), dth = 1 - th * th;
        std::tie(x, dx0, dw) = std::make_tuple(th * wv, dth * wv * dx0, dth * wv * dw + th);
        ++taken[1];
      } else {
        std::tie(x, dx0, dw) = std::make_tuple(0.5 * x + wv, 0.5 * dx0, 0.5 * dw + 1);
        ++taken[2];
      }
    }
    if (k == 12) {
      EXPECT_EQ(taken[0], 5);  // every branch runs in this case
      EXPECT_EQ(taken[1], 3);
      EXPECT_EQ(taken[2], 4);
    }
    auto out = session.Run({{x0, Tensor::Scalar<double>(0.5)},
                            {w, Tensor::Scalar<double>(wv)},
                            {n, Tensor::Scalar<int32_t>(k)}},
                           {(*r)[1], (*g)[0], (*g)[1]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].scalar<double>(), x, 1e-12) << "n=" << k;
    EXPECT_NEAR((*out)[1].scalar<double>(), dx0, 1e-12) << "n=" << k;
    EXPECT_NEAR((*out)[2].scalar<double>(), dw, 1e-12) << "n=" << k;
  }
}

INSTANTIATE_TEST_SUITE_P(ParallelIterations, ConditionalInLoopTest, ::testing::Values(1, 10));

// Loops nested three deep, x <- x * w in the innermost, w captured from
// outside all three: x = x0 w^(n1 n2 n3), so d/dx0 = w^N and
// d/dw = N x0 w^(N-1) with N = n1 n2 n3. Each level's gradient pushes its
// nested loop's counts and stack handles in its own forward frame.
class NestedLoopTest : public ::testing::TestWithParam<int> {};

TEST_P(NestedLoopTest, ThreeDeepMatchesClosedForm) {
  Scope s = Scope::NewRootScope();
  Output x0 = Placeholder(s, DT_DOUBLE, PartialShape({}));
  Output w = Placeholder(s, DT_DOUBLE, PartialShape({}));
  const std::vector<Output> n = {Placeholder(s, DT_INT32, PartialShape({})),
                                 Placeholder(s, DT_INT32, PartialShape({})),
                                 Placeholder(s, DT_INT32, PartialShape({}))};
  WhileLoopOptions o;
  o.parallel_iterations = GetParam();
  auto count_below = [&](int level) {
    return [&, level](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
      return internal::Binary(c, "Less", v[0], n[level]);
    };
  };
  std::function<absl::StatusOr<Output>(const Scope&, const Output&, int)> level_loop =
      [&](const Scope& b, const Output& x, int level) -> absl::StatusOr<Output> {
    auto r = WhileLoop(
        b, {internal::ScalarOf(b, 0, DT_INT32), x}, count_below(level),
        [&, level](const Scope& c,
                   const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
          Output next;
          if (level == 2) {
            next = internal::Mul(c, v[1], w);
          } else {
            absl::StatusOr<Output> deeper = level_loop(c, v[1], level + 1);
            if (!deeper.ok()) return deeper.status();
            next = *deeper;
          }
          return std::vector<Output>{internal::Add(c, v[0], 1), next};
        },
        WhileLoopOptions{absl::StrCat("level", level), o.parallel_iterations});
    if (!r.ok()) return r.status();
    return (*r)[1];
  };
  auto y = level_loop(s, x0, 0);
  ASSERT_TRUE(y.ok()) << y.status();
  auto g = AddSymbolicGradients(s, {*y}, {x0, w}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  ClientSession session(s);
  for (const std::vector<int32_t>& sizes :
       std::vector<std::vector<int32_t>>{{2, 3, 2}, {1, 1, 1}, {3, 0, 2}, {2, 2, 3}}) {
    const int total = sizes[0] * sizes[1] * sizes[2];
    const double wv = 1.1, xv = 0.7;
    auto out = session.Run({{x0, Tensor::Scalar<double>(xv)},
                            {w, Tensor::Scalar<double>(wv)},
                            {n[0], Tensor::Scalar<int32_t>(sizes[0])},
                            {n[1], Tensor::Scalar<int32_t>(sizes[1])},
                            {n[2], Tensor::Scalar<int32_t>(sizes[2])}},
                           {*y, (*g)[0], (*g)[1]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].scalar<double>(), xv * std::pow(wv, total), 1e-12) << total;
    EXPECT_NEAR((*out)[1].scalar<double>(), std::pow(wv, total), 1e-12) << total;
    EXPECT_NEAR((*out)[2].scalar<double>(), total == 0 ? 0 : total * xv * std::pow(wv, total - 1),
                1e-12)
        << total;
  }
}

INSTANTIATE_TEST_SUITE_P(ParallelIterations, NestedLoopTest, ::testing::Values(1, 10));

// An RNN whose step is itself a loop: h <- c_t tanh(h W + b), K times per
// outer step, with c_t (an outer loop variable) read inside the inner loop.
// The gradients equal those of the same T K cells unrolled.
TEST(WhileGradientTest, NestedRnnMatchesUnrolled) {
  Scope s = Scope::NewRootScope();
  Output w = Placeholder(s, DT_DOUBLE, PartialShape({3, 3}));
  Output bias = Placeholder(s, DT_DOUBLE, PartialShape({3}));
  Output h0 = Placeholder(s, DT_DOUBLE, PartialShape({2, 3}));
  constexpr int kOuter = 3, kInner = 2;
  auto cell = [&](const Scope& b, const Output& h, const Output& c) {
    return internal::Mul(
        b, c, internal::Tanh(b, internal::Add(b, internal::MatMul(b, h, w, false, false), bias)));
  };
  auto r = WhileLoop(
      s, {internal::ScalarOf(s, 0, DT_INT32), internal::ScalarOf(s, 0.5, DT_DOUBLE), h0},
      [&](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return internal::Binary(c, "Less", v[0], kOuter);
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        const Output scale = v[1];
        auto inner = WhileLoop(
            b, {internal::ScalarOf(b, 0, DT_INT32), v[2]},
            [&](const Scope& c, const std::vector<Output>& u) -> absl::StatusOr<Output> {
              return internal::Binary(c, "Less", u[0], kInner);
            },
            [&](const Scope& c,
                const std::vector<Output>& u) -> absl::StatusOr<std::vector<Output>> {
              return std::vector<Output>{internal::Add(c, u[0], 1), cell(c, u[1], scale)};
            },
            WhileLoopOptions{"inner", 10});
        if (!inner.ok()) return inner.status();
        return std::vector<Output>{internal::Add(b, v[0], 1),
                                   internal::Add(b, v[1], internal::ScalarOf(b, 0.25, DT_DOUBLE)),
                                   (*inner)[1]};
      },
      WhileLoopOptions{"outer", 10});
  ASSERT_TRUE(r.ok()) << r.status();
  Output loss = internal::Sum(s, internal::Square(s, (*r)[2]), {0, 1});
  Output h = h0;
  for (int t = 0; t < kOuter; ++t) {
    Output c = internal::ScalarOf(s, 0.5 + 0.25 * t, DT_DOUBLE);
    for (int k = 0; k < kInner; ++k) h = cell(s, h, c);
  }
  Output unrolled = internal::Sum(s, internal::Square(s, h), {0, 1});
  auto g = AddSymbolicGradients(s, {loss}, {w, bias, h0}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto gu = AddSymbolicGradients(s, {unrolled}, {w, bias, h0}, {});
  ASSERT_TRUE(gu.ok()) << gu.status();
  const Tensor wv = testing::RandomTensor(DT_DOUBLE, TensorShape({3, 3}), -0.8, 0.8, 13);
  const Tensor bv = testing::RandomTensor(DT_DOUBLE, TensorShape({3}), -0.5, 0.5, 14);
  const Tensor hv = testing::RandomTensor(DT_DOUBLE, TensorShape({2, 3}), -1, 1, 15);
  ClientSession session(s);
  auto out = session.Run({{w, wv}, {bias, bv}, {h0, hv}},
                         {loss, unrolled, (*g)[0], (*g)[1], (*g)[2], (*gu)[0], (*gu)[1], (*gu)[2]});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectLoopMatchesUnrolled(*out);
}

// A loop inside one branch of a conditional inside a loop:
//   x <- x < 1.5 ? (x <- x * w, m times) : 0.5 x
// The inner loop runs only in the iterations that take its branch (all its
// inputs are in the branch, as tf.cond's rule asks); its counts are pushed
// and popped only in those.
TEST(WhileGradientTest, LoopInAConditionalInALoop) {
  Scope s = Scope::NewRootScope();
  Output x0 = Placeholder(s, DT_DOUBLE, PartialShape({}));
  Output w = Placeholder(s, DT_DOUBLE, PartialShape({}));
  Output n = Placeholder(s, DT_INT32, PartialShape({}));
  Output m = Placeholder(s, DT_INT32, PartialShape({}));
  auto r = WhileLoop(
      s, {internal::ScalarOf(s, 0, DT_INT32), x0},
      [&](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return internal::Binary(c, "Less", v[0], n);
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        Output p = internal::Binary(b, "Less", v[1], internal::ScalarOf(b, 1.5, DT_DOUBLE));
        std::vector<Output> sx = Op(b, "Switch").In(v[1]).In(p).Outs();
        // w enters the branch through a Switch too (tf.cond's rule).
        const Output wb = Op(b, "Switch").In(w).In(p).Out(1);
        // The inner loop's inputs are in the branch: its counter starts
        // from a constant tied to the branch (as tf.cond anchors constants).
        const Output xb = internal::Identity(b, sx[1]);
        auto inner = WhileLoop(
            b, {internal::ScalarOf(b.WithControlDependencies(xb), 0, DT_INT32), xb},
            [&](const Scope& c, const std::vector<Output>& u) -> absl::StatusOr<Output> {
              return internal::Binary(c, "Less", u[0], m);
            },
            [&](const Scope& c,
                const std::vector<Output>& u) -> absl::StatusOr<std::vector<Output>> {
              return std::vector<Output>{internal::Add(c, u[0], 1), internal::Mul(c, u[1], wb)};
            },
            WhileLoopOptions{"inner", 10});
        if (!inner.ok()) return inner.status();
        Output f = internal::Mul(b, sx[0], internal::ScalarOf(b, 0.5, DT_DOUBLE));
        Output next = Op(b, "Merge").InList(InputList({f, (*inner)[1]})).Out(0);
        return std::vector<Output>{internal::Add(b, v[0], 1), next};
      },
      WhileLoopOptions{"outer", 10});
  ASSERT_TRUE(r.ok()) << r.status();
  auto g = AddSymbolicGradients(s, {(*r)[1]}, {x0, w}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  ClientSession session(s);
  const double wv = 1.3;
  for (int k : {0, 1, 4, 7}) {
    for (int inner : {0, 2}) {
      double x = 0.6, dx0 = 1, dw = 0;
      for (int i = 0; i < k; ++i) {
        if (x < 1.5) {
          for (int j = 0; j < inner; ++j) {
            std::tie(x, dx0, dw) = std::make_tuple(x * wv, dx0 * wv, dw * wv + x);
          }
        } else {
          std::tie(x, dx0, dw) = std::make_tuple(0.5 * x, 0.5 * dx0, 0.5 * dw);
        }
      }
      auto out = session.Run({{x0, Tensor::Scalar<double>(0.6)},
                              {w, Tensor::Scalar<double>(wv)},
                              {n, Tensor::Scalar<int32_t>(k)},
                              {m, Tensor::Scalar<int32_t>(inner)}},
                             {(*r)[1], (*g)[0], (*g)[1]});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_NEAR((*out)[0].scalar<double>(), x, 1e-12) << "n=" << k << " m=" << inner;
      EXPECT_NEAR((*out)[1].scalar<double>(), dx0, 1e-12) << "n=" << k << " m=" << inner;
      EXPECT_NEAR((*out)[2].scalar<double>(), dw, 1e-12) << "n=" << k << " m=" << inner;
    }
  }
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
