// Every gradient function checked against central differences (float64
// where the kernels have it, float32 with a looser tolerance otherwise),
// plus the algorithm's own rules: summing, stopping, unconnected xs,
// sparse gradients of gathers.
#include "client/train/gradients.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/client_session.h"
#include "client/graph_import.h"
#include "client/train/gradient_checker.h"
#include "client/train/ops_internal.h"
#include "client/train/optimizers.h"
#include "client/variables.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "graph/ops/all_ops.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using internal::Op;
using testing::CheckGradients;
using ::testing::HasSubstr;
using testing::RandomTensor;

using BuildFn = std::function<Output(const Scope&, const std::vector<Output>&)>;

struct Case {
  std::vector<TensorShape> shapes;
  DataType dtype = DT_DOUBLE;
  double lo = -1, hi = 1;
  bool dynamic = false;       // placeholders of unknown dims
  bool unknown_rank = false;  // placeholders of unknown rank
  double tol = 1e-6;
  double float_tol = 2e-2;
  double delta = 1e-5;
  double float_delta = 1e-2;
};

Output Placeholder(const Scope& s, DataType dt, const PartialShape& shape) {
  return Op(s, "Placeholder")
      .Attr("dtype", internal::AType(dt))
      .Attr("shape", client::internal::AttrShape(shape))
      .Out();
}

void Check(const Case& c, const BuildFn& build) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> xs;
  std::vector<Tensor> values;
  uint32_t seed = 1;
  for (const TensorShape& shape : c.shapes) {
    PartialShape ps =
        c.dynamic ? PartialShape::UnknownOfRank(shape.dims()) : PartialShape(shape.dim_sizes());
    if (c.unknown_rank) ps = PartialShape();
    xs.push_back(Placeholder(root, c.dtype, ps));
    values.push_back(RandomTensor(c.dtype, shape, c.lo, c.hi, seed++));
  }
  Output y = build(root, xs);
  ASSERT_TRUE(root.ok()) << root.status();
  auto r = CheckGradients(root, xs, values, y, c.dtype == DT_DOUBLE ? c.delta : c.float_delta);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->checked, 0);
  EXPECT_LT(r->max_rel_error, c.dtype == DT_DOUBLE ? c.tol : c.float_tol)
      << "abs error " << r->max_abs_error;
}

BuildFn BinaryFn(const char* op) {
  return [op](const Scope& s, const std::vector<Output>& x) {
    return internal::Binary(s, op, x[0], x[1]);
  };
}
BuildFn UnaryFn(const char* op) {
  return
      [op](const Scope& s, const std::vector<Output>& x) { return internal::Unary(s, op, x[0]); };
}

TEST(GradientsTest, BroadcastingBinaryOps) {
  for (const char* op : {"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum",
                         "SquaredDifference"}) {
    SCOPED_TRACE(op);
    const bool div = std::string(op).find("Div") != std::string::npos;
    for (bool dynamic : {false, true}) {
      Case c;
      c.dynamic = dynamic;
      if (div) c.lo = 0.5, c.hi = 2;
      c.shapes = {TensorShape({2, 3}), TensorShape({3})};
      Check(c, BinaryFn(op));
      c.shapes = {TensorShape({2, 1}), TensorShape({1, 3})};
      Check(c, BinaryFn(op));
      c.shapes = {TensorShape({}), TensorShape({2, 2})};
      Check(c, BinaryFn(op));
      c.shapes = {TensorShape({2, 3}), TensorShape({2, 3})};
      Check(c, BinaryFn(op));
    }
  }
}

TEST(GradientsTest, UnaryOps) {
  for (const char* op :
       {"Neg", "Square", "Exp", "Tanh", "Sigmoid", "Relu", "Abs", "Identity", "Snapshot"}) {
    SCOPED_TRACE(op);
    Case c;
    c.shapes = {TensorShape({3, 4})};
    Check(c, UnaryFn(op));
  }
  for (const char* op : {"Sqrt", "Log", "Rsqrt"}) {
    SCOPED_TRACE(op);
    Case c;
    c.shapes = {TensorShape({3, 4})};
    c.lo = 0.5;
    c.hi = 2;
    Check(c, UnaryFn(op));
  }
}

TEST(GradientsTest, Reductions) {
  for (const char* op : {"Sum", "Mean", "Max", "Min"}) {
    SCOPED_TRACE(op);
    for (bool dynamic : {false, true}) {
      for (bool keep : {false, true}) {
        Case c;
        c.dynamic = dynamic;
        c.shapes = {TensorShape({2, 3, 4})};
        for (std::vector<int32_t> axes :
             std::vector<std::vector<int32_t>>{{1}, {0, 2}, {-1}, {0, 1, 2}}) {
          Check(c, [&](const Scope& s, const std::vector<Output>& x) {
            return internal::Reduce(s, op, x[0], Input(Tensor::FromVector<int32_t>(axes)), keep);
          });
        }
      }
    }
  }
}

TEST(GradientsTest, MatMulAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Case c;
      c.shapes = {ta ? TensorShape({4, 3}) : TensorShape({3, 4}),
                  tb ? TensorShape({5, 4}) : TensorShape({4, 5})};
      Check(c, [&](const Scope& s, const std::vector<Output>& x) {
        return internal::MatMul(s, x[0], x[1], ta, tb);
      });
    }
  }
}

TEST(GradientsTest, NnOps) {
  Case c;
  c.shapes = {TensorShape({3, 4}), TensorShape({4})};
  Check(c, BinaryFn("BiasAdd"));
  c.shapes = {TensorShape({3, 5})};
  Check(c, UnaryFn("Softmax"));
  Check(c, UnaryFn("LogSoftmax"));
  // Softmax cross-entropy w.r.t. logits and labels.
  c.shapes = {TensorShape({3, 5}), TensorShape({3, 5})};
  c.lo = 0.1;
  // The op's backprop assumes labels that sum to 1 (as TensorFlow's).
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    Output labels = internal::Unary(s, "Softmax", x[1]);
    return Op(s, "SoftmaxCrossEntropyWithLogits").In(x[0]).In(labels).Out(0);
  });
  c.shapes = {TensorShape({3, 5})};
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    Output labels = internal::Const(s, Tensor::FromVector<int64_t>({0, 4, 2}));
    return Op(s, "SparseSoftmaxCrossEntropyWithLogits").In(x[0]).In(labels).Out(0);
  });
}

TEST(GradientsTest, ArrayOps) {
  Case c;
  c.shapes = {TensorShape({2, 6})};
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    return internal::Reshape(s, x[0], {3, 4});
  });
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    return internal::ExpandDims(s, x[0], 1);
  });
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    return internal::Binary(s, "Transpose", x[0], {1, 0});
  });
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    std::vector<Output> parts =
        Op(s, "Split").In(1).In(x[0]).Attr("num_split", internal::AInt(3)).Outs();
    // Only two of three parts reach y: the third gets zeros.
    return internal::Mul(s, parts[0], parts[2]);
  });
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    std::vector<Output> parts =
        Op(s, "SplitV").In(x[0]).In({1, 5}).In(1).Attr("num_split", internal::AInt(2)).Outs();
    return internal::Sum(s, parts[1], 1);
  });
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    std::vector<Output> parts = Op(s, "Unpack").In(x[0]).Attr("num", internal::AInt(2)).Outs();
    return internal::Square(s, parts[1]);
  });
  c.shapes = {TensorShape({2, 3}), TensorShape({2, 2})};
  for (bool dynamic : {false, true}) {
    c.dynamic = dynamic;
    Check(c, [](const Scope& s, const std::vector<Output>& x) {
      return internal::ConcatV2(s, {x[0], x[1], x[0]}, -1);
    });
  }
  c.dynamic = false;
  c.shapes = {TensorShape({2, 3}), TensorShape({2, 3})};
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    return Op(s, "Pack")
        .InList(std::vector<Output>{x[0], x[1]})
        .Attr("axis", internal::AInt(1))
        .Out();
  });
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    return internal::AddN(s, {x[0], x[1], x[0]});
  });
  // Cast double -> float -> double.
  c.shapes = {TensorShape({4})};
  c.tol = 1e-4;
  c.delta = 1e-2;  // central differences are exact for a square
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    return internal::Cast(s, internal::Square(s, internal::Cast(s, x[0], DT_FLOAT)), DT_DOUBLE);
  });
}

// The same tensor used twice: gradients are summed.
TEST(GradientsTest, SumsGradientsOfSharedTensors) {
  Case c;
  c.shapes = {TensorShape({3})};
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    Output t = internal::Tanh(s, x[0]);
    return internal::Add(s, internal::Mul(s, t, t), internal::Exp(s, t));
  });
}

TEST(GradientsTest, StopGradientAndUnconnected) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DT_DOUBLE, PartialShape({2}));
  Output z = Placeholder(s, DT_DOUBLE, PartialShape({2}));
  Output y = internal::Add(s, internal::Mul(s, x, x),
                           internal::Unary(s, "StopGradient", internal::Mul(s, x, z)));
  auto g = AddSymbolicGradients(s, {y}, {x, z}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_NE((*g)[0].node(), nullptr);
  EXPECT_EQ((*g)[1].node(), nullptr);  // only reachable through StopGradient

  GradientOptions opts;
  opts.unconnected_zeros = true;
  auto g2 = ComputeGradients(s, {y}, {x, z}, {}, opts);
  ASSERT_TRUE(g2.ok()) << g2.status();
  ASSERT_NE((*g2)[1].dense.node(), nullptr);

  ClientSession session(s);
  auto r = session.Run(
      {{x, Tensor::FromVector<double>({1, 2})}, {z, Tensor::FromVector<double>({3, 4})}},
      {(*g)[0], (*g2)[1].dense});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].flat<double>()[0], 2.0);
  EXPECT_EQ((*r)[0].flat<double>()[1], 4.0);
  EXPECT_EQ((*r)[1].flat<double>()[1], 0.0);
}

TEST(GradientsTest, ErrorsNameTheNode) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DT_DOUBLE, PartialShape({2}));
  Output y = internal::Unary(s.WithOpName("weird"), "Relu6", x);
  GradientRegistry empty;
  GradientOptions opts;
  opts.registry = &empty;
  auto g = ComputeGradients(s, {y}, {x}, {}, opts);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), HasSubstr("'weird'"));

  auto bad = AddSymbolicGradients(s, {y}, {x}, {y, y});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

// A conditional of Switch and Merge, as tf.cond builds it:
//   y = x > 0 ? x * x : -3 * x,   z = x > 0 ? x * x : 5 (a constant branch)
// dy/dx is 2x or -3, dz/dx 2x or 0 (zeros routed to the branch without a
// gradient), each from the branch taken; the other branch's gradient ops
// are dead and never run. A stray Enter (no loop around it) is Unimplemented.
TEST(GradientsTest, ThroughSwitchAndMerge) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DT_DOUBLE, PartialShape({}));
  Output pred = internal::Binary(s, "Greater", x, internal::ScalarOf(s, 0, DT_DOUBLE));
  std::vector<Output> sw = Op(s, "Switch").In(x).In(pred).Outs();
  Output t = internal::Mul(s, sw[1], sw[1]);
  Output f = internal::Mul(s, sw[0], internal::ScalarOf(s, -3, DT_DOUBLE));
  Output y = Op(s, "Merge").InList(InputList({f, t})).Out(0);
  // The constant branch hangs off a pivot (Identity of pred's own false
  // output), as tf.cond anchors its constants.
  std::vector<Output> pivots = Op(s, "Switch").In(pred).In(pred).Outs();
  Output pivot_f = internal::Identity(s, pivots[0]);
  Output five =
      internal::ScalarOf(s.WithControlDependencies({Operation(pivot_f.node())}), 5, DT_DOUBLE);
  Output z = Op(s, "Merge").InList(InputList({five, t})).Out(0);
  auto g = AddSymbolicGradients(s, {y}, {x}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto gz = AddSymbolicGradients(s, {z}, {x}, {});
  ASSERT_TRUE(gz.ok()) << gz.status();
  ClientSession session(s);
  for (double v : {2.0, -1.0}) {
    auto r = session.Run({{x, Tensor::Scalar<double>(v)}}, {y, (*g)[0], z, (*gz)[0]});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].scalar<double>(), v > 0 ? v * v : -3 * v);
    EXPECT_EQ((*r)[1].scalar<double>(), v > 0 ? 2 * v : -3);
    EXPECT_EQ((*r)[2].scalar<double>(), v > 0 ? v * v : 5);
    EXPECT_EQ((*r)[3].scalar<double>(), v > 0 ? 2 * v : 0);
  }

  Output entered = Op(s.WithOpName("loop_enter"), "Enter")
                       .In(x)
                       .Attr("frame_name", client::internal::AttrString("loop"))
                       .Out();
  auto loop = AddSymbolicGradients(s, {internal::Square(s, entered)}, {x}, {});
  EXPECT_EQ(loop.status().code(), absl::StatusCode::kUnimplemented) << loop.status();
  EXPECT_THAT(loop.status().message(), HasSubstr("'loop_enter'"));
}

// TensorFlow's tf.switch_case, as a TF 2 graph holds it: a Case over three
// library functions, lowered at import to _SwitchN and Merge.
//   y = [x * w, w * w, x][i]  (the last branch for an index out of range)
// dy/dx = w, 0, 1 and dy/dw = x, 2w, 0: a branch that does not read an
// input gets zeros routed by the same index. Then w is trained through the
// Case by gradient descent on (y - 3)^2, the imported `w` mapped to a
// variable's read; each step is checked against the closed form, and a step
// through the branch without w leaves it unchanged.
TEST(GradientsTest, ThroughImportedTensorFlowCase) {
  tensorflow::GraphDef def;
  const std::string arg = R"(input_arg { name: "x" type: DT_DOUBLE }
                             input_arg { name: "w" type: DT_DOUBLE }
                             output_arg { name: "y" type: DT_DOUBLE })";
  const std::string text = absl::StrReplaceAll(R"(
node { name: "i" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_DOUBLE } } }
node { name: "w" op: "Placeholder" attr { key: "dtype" value { type: DT_DOUBLE } } }
node { name: "y" op: "StatelessCase" input: "i" input: "x" input: "w"
       attr { key: "Tin" value { list { type: DT_DOUBLE type: DT_DOUBLE } } }
       attr { key: "Tout" value { list { type: DT_DOUBLE } } }
       attr { key: "branches" value { list { func { name: "xw" } func { name: "ww" }
                                            func { name: "x_only" } } } } }
library {
  function { signature { name: "xw" ARGS }
    node_def { name: "m" op: "Mul" input: "x" input: "w" attr { key: "T" value { type: DT_DOUBLE } } }
    ret { key: "y" value: "m:z:0" } }
  function { signature { name: "ww" ARGS }
    node_def { name: "m" op: "Mul" input: "w" input: "w" attr { key: "T" value { type: DT_DOUBLE } } }
    ret { key: "y" value: "m:z:0" } }
  function { signature { name: "x_only" ARGS }
    node_def { name: "id" op: "Identity" input: "x" attr { key: "T" value { type: DT_DOUBLE } } }
    ret { key: "y" value: "id:output:0" } }
}
versions { producer: 1395 min_consumer: 12 })",
                                               {{"ARGS", arg}});
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &def));
  {
    Scope s = Scope::NewRootScope();
    auto g = ImportGraphDef(s, def);
    ASSERT_TRUE(g.ok()) << g.status();
    Output i = *g->Tensor("i"), x = *g->Tensor("x"), w = *g->Tensor("w"), y = *g->Tensor("y");
    auto d = AddSymbolicGradients(s, {y}, {x, w}, {});
    ASSERT_TRUE(d.ok()) << d.status();
    ClientSession session(s);
    const double xv = 1.5, wv = -2.0;
    for (int32_t k : {0, 1, 2, 7, -1}) {
      auto r = session.Run({{i, Tensor::Scalar<int32_t>(k)},
                            {x, Tensor::Scalar<double>(xv)},
                            {w, Tensor::Scalar<double>(wv)}},
                           {y, (*d)[0], (*d)[1]});
      ASSERT_TRUE(r.ok()) << r.status();
      const int b = k == 0 || k == 1 ? k : 2;
      EXPECT_EQ((*r)[0].scalar<double>(), b == 0 ? xv * wv : b == 1 ? wv * wv : xv) << k;
      EXPECT_EQ((*r)[1].scalar<double>(), b == 0 ? wv : b == 1 ? 0 : 1) << "dy/dx, i=" << k;
      EXPECT_EQ((*r)[2].scalar<double>(), b == 0 ? xv : b == 1 ? 2 * wv : 0) << "dy/dw, i=" << k;
    }
  }
  Scope s = Scope::NewRootScope();
  Variable w(s.WithOpName("w_var"), PartialShape({}), DT_DOUBLE,
             init::Constant(Tensor::Scalar<double>(0.5)));
  auto g = ImportGraphDef(s, def, "import", {{"w", w.Read()}});
  ASSERT_TRUE(g.ok()) << g.status();
  Output i = *g->Tensor("i"), x = *g->Tensor("x");
  Output loss = internal::Square(s, internal::Sub(s, *g->Tensor("y"), 3.0));
  GradientDescentOptimizer opt(0.05);
  auto train = opt.Minimize(s, loss, {w});
  ASSERT_TRUE(train.ok()) << train.status();
  ClientSession session(s);
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  double wv = 0.5;
  const double xv = 2.0;
  for (int32_t k : {0, 1, 2, 0, 1}) {
    const double y = k == 0 ? xv * wv : k == 1 ? wv * wv : xv;
    const double dw = k == 0 ? xv : k == 1 ? 2 * wv : 0;
    auto out = session.Run({{i, Tensor::Scalar<int32_t>(k)}, {x, Tensor::Scalar<double>(xv)}},
                           {loss}, {*train});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].scalar<double>(), (y - 3) * (y - 3), 1e-12) << "branch " << k;
    wv -= 0.05 * 2 * (y - 3) * dw;
    auto now = session.Run({w.Read()});
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_NEAR((*now)[0].scalar<double>(), wv, 1e-12) << "after branch " << k;
  }
}

// Resource variables: ReadVariableOp passes the gradient to the handle;
// ResourceGather gives IndexedSlices.
TEST(GradientsTest, ResourceVariableDenseAndSparse) {
  Scope s = Scope::NewRootScope();
  Variable v(
      s.WithOpName("table"), PartialShape({4, 2}), DT_FLOAT,
      init::Constant(Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7}, TensorShape({4, 2}))));
  Output read = v.Read();
  Output dense_y = internal::Sum(s, internal::Mul(s, read, read), {0, 1});
  Output rows = Op(s, "ResourceGather")
                    .In(v.handle())
                    .In({2, 0, 2})
                    .Attr("dtype", internal::AType(DT_FLOAT))
                    .Out();
  Output sparse_y = internal::Sum(s, internal::Mul(s, rows, 3.0f), {0, 1});

  auto dense = ComputeGradients(s, {dense_y}, {v.handle()}, {});
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_FALSE((*dense)[0].is_sparse());
  auto sparse = ComputeGradients(s, {sparse_y}, {v.handle()}, {});
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  ASSERT_TRUE((*sparse)[0].is_sparse());
  const IndexedSlices& sl = *(*sparse)[0].sparse;

  ClientSession session(s);
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  auto r = session.Run({(*dense)[0].dense, sl.values, sl.indices, sl.dense_shape});
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*r)[0].flat<float>()[i], 2.0f * i);
  EXPECT_EQ((*r)[1].shape(), TensorShape({3, 2}));
  for (float g : (*r)[1].flat<float>()) EXPECT_EQ(g, 3.0f);
  EXPECT_THAT(std::vector<int32_t>((*r)[2].flat<int32_t>().begin(), (*r)[2].flat<int32_t>().end()),
              ::testing::ElementsAre(2, 0, 2));
  EXPECT_THAT(std::vector<int32_t>((*r)[3].flat<int32_t>().begin(), (*r)[3].flat<int32_t>().end()),
              ::testing::ElementsAre(4, 2));

  // Sparse + dense reaching one variable are densified and summed.
  auto both = AddSymbolicGradients(s, {internal::Add(s, dense_y, sparse_y)}, {v.handle()}, {});
  ASSERT_TRUE(both.ok()) << both.status();
  auto rb = session.Run({(*both)[0]});
  ASSERT_TRUE(rb.ok()) << rb.status();
  // Rows 0 and 2 gathered (row 2 twice): 2x + 3 * count.
  const float want[] = {0 + 3, 2 + 3, 4, 6, 8 + 6, 10 + 6, 12, 14};
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*rb)[0].flat<float>()[i], want[i]) << i;
}

TEST(GradientsTest, GatherIsSparseAndMatchesNumeric) {
  Case c;
  c.shapes = {TensorShape({5, 3})};
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    return internal::GatherV2(s, x[0], {4, 1, 4}, 0);
  });
  Check(c, [](const Scope& s, const std::vector<Output>& x) {
    return Op(s, "Gather").In(x[0]).In({{0, 1}, {1, 3}}).Out();
  });
}

Output Stitch(const Scope& s, const std::vector<Tensor>& indices, const std::vector<Output>& data) {
  std::vector<Output> idx;
  for (const Tensor& t : indices) idx.push_back(internal::Const(s, t));
  return Op(s, "DynamicStitch").InList(idx).InList(data).Out();
}

TEST(GradientsTest, DynamicPartition) {
  Case c;
  c.shapes = {TensorShape({5, 3})};
  for (bool dynamic : {false, true}) {
    c.dynamic = dynamic;
    // Partition 1 reaches nothing: its rows get zeros.
    Check(c, [](const Scope& s, const std::vector<Output>& x) {
      std::vector<Output> parts = Op(s, "DynamicPartition")
                                      .In(x[0])
                                      .In({2, 0, 2, 1, 0})
                                      .Attr("num_partitions", internal::AInt(3))
                                      .Outs();
      return internal::Mul(s, parts[0], internal::Square(s, parts[2]));
    });
    // Matrix partitions: scalar rows.
    Check(c, [](const Scope& s, const std::vector<Output>& x) {
      std::vector<Output> parts =
          Op(s, "DynamicPartition")
              .In(x[0])
              .In(Input(Tensor::FromVector<int32_t>({0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0},
                                                    TensorShape({5, 3}))))
              .Attr("num_partitions", internal::AInt(2))
              .Outs();
      return internal::Square(s, parts[1]);
    });
  }
}

// Numeric differences see that an overwritten element does not reach the
// output: its gradient must be zero, within one input and across inputs.
TEST(GradientsTest, DynamicStitch) {
  Case c;
  c.shapes = {TensorShape({2, 2, 3}), TensorShape({3, 3})};
  for (bool dynamic : {false, true}) {
    c.dynamic = dynamic;
    Check(c, [](const Scope& s, const std::vector<Output>& x) {
      // Rows 0 and 4 of x[0] are overwritten by x[1].
      Output merged = Stitch(s,
                             {Tensor::FromVector<int32_t>({0, 3, 1, 4}, TensorShape({2, 2})),
                              Tensor::FromVector<int32_t>({4, 2, 0})},
                             {x[0], x[1]});
      return internal::Square(s, merged);
    });
  }
  c.dynamic = false;
  c.shapes = {TensorShape({4, 2})};
  for (bool unknown_rank : {false, true}) {
    c.unknown_rank = unknown_rank;
    Check(c, [](const Scope& s, const std::vector<Output>& x) {
      // Row 1 is written by x[0][0] and then x[0][2]; row 3 by nobody.
      Output merged = Stitch(s, {Tensor::FromVector<int32_t>({1, 0, 1, 4})}, {x[0]});
      return internal::Mul(s, merged, merged);
    });
  }
}

// The kernels of these ops are always registered: a missing one fails the
// check rather than skipping it.
TEST(GradientsTest, Conv2DAndMaxPool) {
  for (const char* padding : {"SAME", "VALID"}) {
    SCOPED_TRACE(padding);
    Case c;
    c.dtype = DT_FLOAT;
    c.shapes = {TensorShape({2, 5, 5, 2}), TensorShape({3, 3, 2, 3})};
    SCOPED_TRACE("Conv2D");
    Check(c, [&](const Scope& s, const std::vector<Output>& x) {
      return Op(s, "Conv2D")
          .In(x[0])
          .In(x[1])
          .Attr("strides", client::internal::AttrIntList({1, 2, 2, 1}))
          .Attr("padding", client::internal::AttrString(padding))
          .Out();
    });
    c.shapes = {TensorShape({2, 4, 4, 3})};
    c.float_delta = 1e-4;  // below the gaps between random window values
    SCOPED_TRACE("MaxPool");
    Check(c, [&](const Scope& s, const std::vector<Output>& x) {
      return Op(s, "MaxPool")
          .In(x[0])
          .Attr("ksize", client::internal::AttrIntList({1, 2, 2, 1}))
          .Attr("strides", client::internal::AttrIntList({1, 2, 2, 1}))
          .Attr("padding", client::internal::AttrString(padding))
          .Out();
    });
  }
}

TEST(GradientsTest, AvgPool) {
  for (const char* padding : {"SAME", "VALID"}) {
    SCOPED_TRACE(padding);
    Case c;
    c.dtype = DT_FLOAT;
    c.float_tol = 1e-4;  // linear: only float rounding
    // Overlapping 3x3 windows, stride 2; SAME pads the border windows, which
    // average over their in-bounds taps only.
    c.shapes = {TensorShape({2, 5, 5, 3})};
    Check(c, [&](const Scope& s, const std::vector<Output>& x) {
      return Op(s, "AvgPool")
          .In(x[0])
          .Attr("ksize", client::internal::AttrIntList({1, 3, 3, 1}))
          .Attr("strides", client::internal::AttrIntList({1, 2, 2, 1}))
          .Attr("padding", client::internal::AttrString(padding))
          .Out();
    });
  }
}

// FusedBatchNorm and V2 have five outputs and their own gradient ops; V3 a
// sixth (reserve_space_3) that its gradient op takes.
TEST(GradientsTest, FusedBatchNormAllVersions) {
  for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}) {
    for (bool training : {true, false}) {
      SCOPED_TRACE(absl::StrCat(op, training ? " training" : " inference"));
      Case c;
      c.dtype = DT_FLOAT;
      c.float_tol = 1e-3;
      c.shapes = {TensorShape({2, 3, 3, 2}), TensorShape({2}), TensorShape({2})};
      Check(c, [&](const Scope& s, const std::vector<Output>& x) {
        Output mean = internal::Const(s, Tensor::FromVector<float>({0.1f, -0.2f}));
        Output var = internal::Const(s, Tensor::FromVector<float>({1.5f, 0.7f}));
        return Op(s, op)
            .In(x[0])
            .In(x[1])
            .In(x[2])
            .In(training ? internal::Const(s, Tensor::FromVector<float>({})) : mean)
            .In(training ? internal::Const(s, Tensor::FromVector<float>({})) : var)
            .Attr("is_training", internal::ABool(training))
            .Attr("epsilon", client::internal::AttrFloat(0.001f))
            .Out(0);
      });
    }
  }
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
