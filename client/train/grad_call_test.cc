// Gradients through call frames (grad_call.cc): a `_noinline` function's
// body is recomputed inline on the call's inputs and differentiated there.
#include <cmath>
#include <cstdlib>
#include <string>

#include "client/client_session.h"
#include "client/graph_import.h"
#include "client/ops.h"
#include "client/train/gradients.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "graph/graph.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using ::testing::HasSubstr;

// tools/testdata/noinline_call.pbtxt: norm = norm2(v) = sum(v * v) and
// doubled = doubling(norm, n) = norm * 2^n (a StatelessWhile inside the
// function), both call frames. d doubled / dv = 2 v 2^n.
TEST(CallFrameGradientTest, NoInlineFunctionsWithALoopInside) {
  Scope s = Scope::NewRootScope();
  auto def = ReadGraphDefFile(std::string(std::getenv("TEST_SRCDIR")) +
                              "/graphrun/tools/testdata/noinline_call.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status();
  auto g = ImportGraphDef(s, *def);
  ASSERT_TRUE(g.ok()) << g.status();
  Output v = *g->Tensor("v"), n = *g->Tensor("n");
  Output norm = *g->Tensor("norm"), doubled = *g->Tensor("doubled");
  EXPECT_EQ(norm.node()->op(), "StatefulPartitionedCall");
  EXPECT_EQ(doubled.node()->op(), "StatefulPartitionedCall");
  auto grads = AddSymbolicGradients(s, {doubled, norm}, {v, n}, {});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ((*grads)[1].node(), nullptr);  // n is an int32: no gradient
  ClientSession session(s);
  const Tensor vv = Tensor::FromVector<float>({1, -2, 3});
  for (int k : {0, 3}) {
    auto out = session.Run({{v, vv}, {n, Tensor::Scalar<int32_t>(k)}}, {doubled, (*grads)[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    const float scale = std::ldexp(1.0f, k);
    EXPECT_EQ((*out)[0].scalar<float>(), 14 * scale) << "n=" << k;
    ASSERT_EQ((*out)[1].NumElements(), 3);
    for (int i = 0; i < 3; ++i) {
      // d(doubled + norm)/dv = 2 v (2^n + 1).
      EXPECT_EQ((*out)[1].flat<float>()[i], 2 * vv.flat<float>()[i] * (scale + 1))
          << "n=" << k << " [" << i << "]";
    }
  }
}

// A body with a side effect cannot be run twice: Unimplemented naming the
// call, the function and the stateful node.
TEST(CallFrameGradientTest, StatefulBodyIsUnimplemented) {
  tensorflow::GraphDef def;
  ASSERT_TRUE(
      google::protobuf::TextFormat::ParseFromString(R"pb(
                                                      node {
                                                        name: "x"
                                                        op: "Placeholder"
                                                        attr {
                                                          key: "dtype"
                                                          value { type: DT_FLOAT }
                                                        }
                                                      }
                                                      node {
                                                        name: "call"
                                                        op: "StatefulPartitionedCall"
                                                        input: "x"
                                                        attr {
                                                          key: "Tin"
                                                          value { list { type: DT_FLOAT } }
                                                        }
                                                        attr {
                                                          key: "Tout"
                                                          value { list { type: DT_FLOAT } }
                                                        }
                                                        attr {
                                                          key: "f"
                                                          value { func { name: "noisy" } }
                                                        }
                                                      }
                                                      library {
                                                        function {
                                                          signature {
                                                            name: "noisy"
                                                            input_arg { name: "a" type: DT_FLOAT }
                                                            output_arg { name: "b" type: DT_FLOAT }
                                                          }
                                                          attr {
                                                            key: "_noinline"
                                                            value { b: true }
                                                          }
                                                          node_def {
                                                            name: "shape"
                                                            op: "Const"
                                                            attr {
                                                              key: "dtype"
                                                              value { type: DT_INT32 }
                                                            }
                                                            attr {
                                                              key: "value"
                                                              value {
                                                                tensor {
                                                                  dtype: DT_INT32
                                                                  tensor_shape { dim { size: 0 } }
                                                                }
                                                              }
                                                            }
                                                          }
                                                          node_def {
                                                            name: "r"
                                                            op: "RandomUniform"
                                                            input: "shape:output:0"
                                                            attr {
                                                              key: "dtype"
                                                              value { type: DT_FLOAT }
                                                            }
                                                            attr {
                                                              key: "T"
                                                              value { type: DT_INT32 }
                                                            }
                                                          }
                                                          node_def {
                                                            name: "sum"
                                                            op: "AddV2"
                                                            input: "a"
                                                            input: "r:output:0"
                                                            attr {
                                                              key: "T"
                                                              value { type: DT_FLOAT }
                                                            }
                                                          }
                                                          ret { key: "b" value: "sum:z:0" }
                                                        }
                                                      }
                                                    )pb",
                                                    &def));
  Scope s = Scope::NewRootScope();
  auto g = ImportGraphDef(s, def);
  ASSERT_TRUE(g.ok()) << g.status();
  auto grads = AddSymbolicGradients(s, {*g->Tensor("call")}, {*g->Tensor("x")}, {});
  EXPECT_EQ(grads.status().code(), absl::StatusCode::kUnimplemented) << grads.status();
  EXPECT_THAT(grads.status().message(), HasSubstr("'import/call'"));
  EXPECT_THAT(grads.status().message(), HasSubstr("'noisy'"));
  EXPECT_THAT(grads.status().message(), HasSubstr("'r' (op RandomUniform)"));
}

// A call whose inputs are one tensor twice, or one computed from the
// other: each path from x into the body counts once. mul(a, b) = a b, so
// d mul(x, x)/dx = 2x and d mul(x, x^2)/dx = 3x^2.
TEST(CallFrameGradientTest, SharedAndDependentInputsCountOnce) {
  tensorflow::GraphDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        node {
          name: "x"
          op: "Placeholder"
          attr {
            key: "dtype"
            value { type: DT_FLOAT }
          }
        }
        node {
          name: "sq"
          op: "Mul"
          input: "x"
          input: "x"
          attr {
            key: "T"
            value { type: DT_FLOAT }
          }
        }
        node { name: "twice" op: "mul" input: "x" input: "x" }
        node { name: "cube" op: "mul" input: "x" input: "sq" }
        library {
          function {
            signature {
              name: "mul"
              input_arg { name: "a" type: DT_FLOAT }
              input_arg { name: "b" type: DT_FLOAT }
              output_arg { name: "p" type: DT_FLOAT }
            }
            attr {
              key: "_noinline"
              value { b: true }
            }
            node_def {
              name: "m"
              op: "Mul"
              input: "a"
              input: "b"
              attr {
                key: "T"
                value { type: DT_FLOAT }
              }
            }
            ret { key: "p" value: "m:z:0" }
          }
        }
      )pb",
      &def));
  Scope s = Scope::NewRootScope();
  auto g = ImportGraphDef(s, def);
  ASSERT_TRUE(g.ok()) << g.status();
  Output x = *g->Tensor("x");
  auto d2 = AddSymbolicGradients(s, {*g->Tensor("twice")}, {x}, {});
  ASSERT_TRUE(d2.ok()) << d2.status();
  auto d3 = AddSymbolicGradients(s, {*g->Tensor("cube")}, {x}, {});
  ASSERT_TRUE(d3.ok()) << d3.status();
  ClientSession session(s);
  auto out = session.Run({{x, Tensor::Scalar<float>(1.5f)}}, {(*d2)[0], (*d3)[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 3.0f);
  EXPECT_EQ((*out)[1].scalar<float>(), 3 * 1.5f * 1.5f);
}

// input_map: consumers of a mapped tensor read the scope's tensor instead;
// a key naming nothing, or a tensor of another dtype, is InvalidArgument.
TEST(ImportInputMapTest, MapsAndRejects) {
  tensorflow::GraphDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
                                                              node {
                                                                name: "p"
                                                                op: "Placeholder"
                                                                attr {
                                                                  key: "dtype"
                                                                  value { type: DT_FLOAT }
                                                                }
                                                              }
                                                              node {
                                                                name: "twice"
                                                                op: "AddV2"
                                                                input: "p"
                                                                input: "p"
                                                                attr {
                                                                  key: "T"
                                                                  value { type: DT_FLOAT }
                                                                }
                                                              }
                                                            )pb",
                                                            &def));
  Scope s = Scope::NewRootScope();
  Output x = ops::Const(s, 5.0f);
  auto g = ImportGraphDef(s, def, "m", {{"p:0", x}});
  ASSERT_TRUE(g.ok()) << g.status();
  ClientSession session(s);
  auto out = session.Run({*g->Tensor("twice")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 10.0f);

  auto missing = ImportGraphDef(s, def, "m2", {{"q:0", x}});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("'q:0'"));
  auto wrong = ImportGraphDef(s, def, "m3", {{"p", ops::Const(s, 1)}});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("int32"));
  auto twice = ImportGraphDef(s, def, "m4", {{"p", x}, {"p:0", x}});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.status().message(), HasSubstr("another key names the same tensor"));
  Scope other = Scope::NewRootScope();
  auto foreign = ImportGraphDef(s, def, "m5", {{"p", ops::Const(other, 2.0f)}});
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(foreign.status().message(), HasSubstr("not in the scope's graph"));
  EXPECT_EQ(s.graph()->FindNode("m2/p"), nullptr);  // nothing added on error
}

}  // namespace
}  // namespace train
}  // namespace client
}  // namespace graphrun
