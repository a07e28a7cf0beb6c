// Gradients through call frames (grad_call.cc): a `_noinline` function's
// body is recomputed inline on the call's inputs and differentiated there.
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/str_replace.h"
#include "client/client_session.h"
#include "client/graph_import.h"
#include "client/ops.h"
#include "client/train/gradients.h"
#include "client/train/optimizers.h"
#include "client/variables.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "graph/graph.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using ::testing::HasSubstr;

const tensorflow::FunctionDef* FindFunction(const tensorflow::FunctionDefLibrary& lib,
                                            const std::string& name) {
  for (const auto& f : lib.function()) {
    if (f.signature().name() == name) return &f;
  }
  return nullptr;
}
const tensorflow::FunctionDef* FindFunction(const tensorflow::GraphDef& def,
                                            const std::string& name) {
  return FindFunction(def.library(), name);
}

// Adds mul(a, b) = a b, a `_noinline` function, to `def`'s library.
void AddMulFunction(tensorflow::GraphDef* def) {
  ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(
      R"pb(
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
      def));
}

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
      )pb",
      &def));
  AddMulFunction(&def);
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

// A call frame inside a loop body: x_{j+1} = mul(x_j, w), three times, so
// y = x0 w^3, dy/dx0 = w^3 and dy/dw = 3 x0 w^2. The call's inputs in each
// iteration are pushed by the forward loop and popped by the backprop one,
// as any forward value its gradient reads.
TEST(CallFrameGradientTest, CallInsideALoopBody) {
  tensorflow::GraphDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        node {
          name: "x0"
          op: "Placeholder"
          attr {
            key: "dtype"
            value { type: DT_FLOAT }
          }
        }
        node {
          name: "w"
          op: "Placeholder"
          attr {
            key: "dtype"
            value { type: DT_FLOAT }
          }
        }
        node {
          name: "i0"
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
                tensor_shape {}
                int_val: 0
              }
            }
          }
        }
        node {
          name: "loop"
          op: "StatelessWhile"
          input: "i0"
          input: "x0"
          input: "w"
          attr {
            key: "T"
            value { list { type: DT_INT32 type: DT_FLOAT type: DT_FLOAT } }
          }
          attr {
            key: "cond"
            value { func { name: "three" } }
          }
          attr {
            key: "body"
            value { func { name: "step" } }
          }
        }
        node {
          name: "y"
          op: "Identity"
          input: "loop:1"
          attr {
            key: "T"
            value { type: DT_FLOAT }
          }
        }
        library {
          function {
            signature {
              name: "three"
              input_arg { name: "i" type: DT_INT32 }
              input_arg { name: "x" type: DT_FLOAT }
              input_arg { name: "w" type: DT_FLOAT }
              output_arg { name: "go" type: DT_BOOL }
            }
            node_def {
              name: "n"
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
                    tensor_shape {}
                    int_val: 3
                  }
                }
              }
            }
            node_def {
              name: "less"
              op: "Less"
              input: "i"
              input: "n:output:0"
              attr {
                key: "T"
                value { type: DT_INT32 }
              }
            }
            ret { key: "go" value: "less:z:0" }
          }
          function {
            signature {
              name: "step"
              input_arg { name: "i" type: DT_INT32 }
              input_arg { name: "x" type: DT_FLOAT }
              input_arg { name: "w" type: DT_FLOAT }
              output_arg { name: "i2" type: DT_INT32 }
              output_arg { name: "x2" type: DT_FLOAT }
              output_arg { name: "w2" type: DT_FLOAT }
            }
            node_def {
              name: "one"
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
                    tensor_shape {}
                    int_val: 1
                  }
                }
              }
            }
            node_def {
              name: "inc"
              op: "AddV2"
              input: "i"
              input: "one:output:0"
              attr {
                key: "T"
                value { type: DT_INT32 }
              }
            }
            node_def { name: "prod" op: "mul" input: "x" input: "w" }
            ret { key: "i2" value: "inc:z:0" }
            ret { key: "x2" value: "prod:p:0" }
            ret { key: "w2" value: "w" }
          }
        }
      )pb",
      &def));
  AddMulFunction(&def);
  Scope s = Scope::NewRootScope();
  auto g = ImportGraphDef(s, def);
  ASSERT_TRUE(g.ok()) << g.status();
  Output x0 = *g->Tensor("x0"), w = *g->Tensor("w"), y = *g->Tensor("y");
  int calls = 0;
  for (Node* n : s.graph()->nodes()) {
    calls += n->op() == "PartitionedCall" || n->op() == "StatefulPartitionedCall";
  }
  ASSERT_EQ(calls, 1) << "the call should stay a call frame in the loop body";
  auto grads = AddSymbolicGradients(s, {y}, {x0, w}, {});
  ASSERT_TRUE(grads.ok()) << grads.status();
  // The caller's registry reaches the call's body: without Mul's gradient
  // nothing flows back through the call (the loop's gradients are zeros).
  GradientRegistry no_mul;
  RegisterAllGradients(no_mul);
  no_mul.AddNoGradient("Mul");
  GradientOptions options;
  options.registry = &no_mul;
  auto none = ComputeGradients(s, {y}, {x0, w}, {}, options);
  ASSERT_TRUE(none.ok()) << none.status();
  ASSERT_FALSE((*none)[0].is_null());
  ASSERT_FALSE((*none)[1].is_null());
  Output none0 = ToDense(s, (*none)[0]), none1 = ToDense(s, (*none)[1]);
  ClientSession session(s);
  auto zeros = session.Run({{x0, Tensor::Scalar<float>(1.5f)}, {w, Tensor::Scalar<float>(2.0f)}},
                           {none0, none1});
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  EXPECT_EQ((*zeros)[0].scalar<float>(), 0.0f);
  EXPECT_EQ((*zeros)[1].scalar<float>(), 0.0f);
  for (float x : {1.5f, -0.25f}) {
    auto out = session.Run({{x0, Tensor::Scalar<float>(x)}, {w, Tensor::Scalar<float>(2.0f)}},
                           {y, (*grads)[0], (*grads)[1]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<float>(), 8 * x);         // x0 w^3
    EXPECT_EQ((*out)[1].scalar<float>(), 8.0f);          // w^3
    EXPECT_EQ((*out)[2].scalar<float>(), 3 * x * 4.0f);  // 3 x0 w^2
  }
}

// A call frame in a loop body whose function has a loop of its own: the
// gradient runs through the function's gradient function, a call frame in
// the backprop loop. Three outer iterations, each x <- f(x, 1):
//  - doubling (tools/testdata/noinline_call.pbtxt): y = 8 x0, dy/dx0 = 8;
//  - squaring (a loop of k squarings, here one): y = x0^8, dy/dx0 = 8 x0^7,
//    which reads each iteration's x, popped in the mirroring backprop one.
class LoopInACallInALoopTest : public ::testing::TestWithParam<bool> {};

TEST_P(LoopInACallInALoopTest, DifferentiatesThroughAGradientFunction) {
  const bool squaring = GetParam();
  auto def = ReadGraphDefFile(std::string(std::getenv("TEST_SRCDIR")) +
                              "/graphrun/tools/testdata/noinline_call.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status();
  def->clear_node();
  ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(
      R"pb(
        node {
          name: "x0"
          op: "Placeholder"
          attr {
            key: "dtype"
            value { type: DT_FLOAT }
          }
        }
        node {
          name: "i0"
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
                tensor_shape {}
                int_val: 0
              }
            }
          }
        }
        node {
          name: "outer"
          op: "StatelessWhile"
          input: "i0"
          input: "x0"
          attr {
            key: "T"
            value { list { type: DT_INT32 type: DT_FLOAT } }
          }
          attr {
            key: "cond"
            value { func { name: "below3" } }
          }
          attr {
            key: "body"
            value { func { name: "twice_each" } }
          }
        }
        library {
          function {
            signature {
              name: "below3"
              input_arg { name: "i" type: DT_INT32 }
              input_arg { name: "x" type: DT_FLOAT }
              output_arg { name: "go" type: DT_BOOL }
            }
            node_def {
              name: "n"
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
                    tensor_shape {}
                    int_val: 3
                  }
                }
              }
            }
            node_def {
              name: "less"
              op: "Less"
              input: "i"
              input: "n:output:0"
              attr {
                key: "T"
                value { type: DT_INT32 }
              }
            }
            ret { key: "go" value: "less:z:0" }
          }
          function {
            signature {
              name: "twice_each"
              input_arg { name: "i" type: DT_INT32 }
              input_arg { name: "x" type: DT_FLOAT }
              output_arg { name: "i2" type: DT_INT32 }
              output_arg { name: "x2" type: DT_FLOAT }
            }
            node_def {
              name: "one"
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
                    tensor_shape {}
                    int_val: 1
                  }
                }
              }
            }
            node_def {
              name: "inc"
              op: "AddV2"
              input: "i"
              input: "one:output:0"
              attr {
                key: "T"
                value { type: DT_INT32 }
              }
            }
            node_def { name: "dbl" op: "doubling" input: "x" input: "one:output:0" }
            ret { key: "i2" value: "inc:z:0" }
            ret { key: "x2" value: "dbl:out:0" }
          }
        }
      )pb",
      &*def));
  if (squaring) {
    // squaring(a, k): doubling's loop with acc * acc for acc + acc.
    for (auto& f : *def->mutable_library()->mutable_function()) {
      if (f.signature().name() == "twice_each") f.mutable_node_def(2)->set_op("squaring");
    }
    tensorflow::FunctionDef sq = *FindFunction(*def, "doubling");
    sq.mutable_signature()->set_name("squaring");
    (*sq.mutable_node_def(1)->mutable_attr())["body"].mutable_func()->set_name("sq_body");
    tensorflow::FunctionDef body = *FindFunction(*def, "loop_body");
    body.mutable_signature()->set_name("sq_body");
    body.mutable_node_def(2)->set_op("Mul");
    *def->mutable_library()->add_function() = sq;
    *def->mutable_library()->add_function() = body;
  }
  Scope s = Scope::NewRootScope();
  auto g = ImportGraphDef(s, *def);
  ASSERT_TRUE(g.ok()) << g.status();
  Output x0 = *g->Tensor("x0"), y = *g->Tensor("outer:1");
  auto grads = AddSymbolicGradients(s, {y}, {x0}, {});
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_NE(FindFunction(s.graph()->library(), squaring ? "squaring_grad" : "doubling_grad"),
            nullptr);
  // Asked for again, the same gradient reuses the function it made.
  const int functions = s.graph()->library().function_size();
  auto again = AddSymbolicGradients(s, {y}, {x0}, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(s.graph()->library().function_size(), functions);
  EXPECT_EQ(FindFunction(s.graph()->library(), squaring ? "squaring_grad_2" : "doubling_grad_2"),
            nullptr);
  ClientSession session(s);
  for (float x : {1.5f, -0.5f}) {
    auto out = session.Run({{x0, Tensor::Scalar<float>(x)}}, {y, (*grads)[0], (*again)[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    const float x7 = x * x * x * x * x * x * x;
    EXPECT_EQ((*out)[0].scalar<float>(), squaring ? x7 * x : 8 * x) << "x0=" << x;
    EXPECT_EQ((*out)[1].scalar<float>(), squaring ? 8 * x7 : 8.0f) << "x0=" << x;
    EXPECT_EQ((*out)[2].scalar<float>(), (*out)[1].scalar<float>()) << "x0=" << x;
  }
}

INSTANTIATE_TEST_SUITE_P(DoublingAndSquaring, LoopInACallInALoopTest, ::testing::Bool());

// A variable read inside a call frame, as TF 2 passes captured variables:
// the handle is a resource input of `mulw` (x -> x w^2, by a loop of its
// own), called at the top level (y = x0 w^2) or in the body of a loop of
// two iterations (y = x0 w^4), where the handle is a loop invariant. The
// variable is trained by gradient descent on y; each step is checked
// against the closed form (dy/dw = 2 x0 w, or 4 x0 w^3).
class ResourceInACallTest : public ::testing::TestWithParam<bool> {};

TEST_P(ResourceInACallTest, TrainsTheVariable) {
  const bool in_loop = GetParam();
  const std::string loop_vars = R"(input_arg { name: "i" type: DT_INT32 }
                                   input_arg { name: "x" type: DT_FLOAT }
                                   input_arg { name: "h" type: DT_RESOURCE })";
  const std::string text = absl::StrReplaceAll(
      R"(
node { name: "x0" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "h" op: "Placeholder" attr { key: "dtype" value { type: DT_RESOURCE } } }
node { name: "i0" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
node { name: "outer" op: "StatelessWhile" input: "i0" input: "x0" input: "h"
       attr { key: "T" value { list { type: DT_INT32 type: DT_FLOAT type: DT_RESOURCE } } }
       attr { key: "cond" value { func { name: "lt2" } } }
       attr { key: "body" value { func { name: "outer_body" } } } }
node { name: "direct" op: "mulw" input: "x0" input: "h" }
library {
  function {
    signature { name: "mulw" input_arg { name: "a" type: DT_FLOAT }
                input_arg { name: "h" type: DT_RESOURCE } output_arg { name: "out" type: DT_FLOAT }
                is_stateful: true }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "i0" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
      attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
    node_def { name: "loop" op: "StatelessWhile" input: "i0:output:0" input: "a" input: "h"
      attr { key: "T" value { list { type: DT_INT32 type: DT_FLOAT type: DT_RESOURCE } } }
      attr { key: "cond" value { func { name: "lt2" } } }
      attr { key: "body" value { func { name: "mulw_body" } } } }
    ret { key: "out" value: "loop:output:1" }
  }
  function {
    signature { name: "lt2" LOOP_VARS output_arg { name: "go" type: DT_BOOL } }
    node_def { name: "two" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
      attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 2 } } } }
    node_def { name: "less" op: "Less" input: "i" input: "two:output:0"
      attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "go" value: "less:z:0" }
  }
  function {
    signature { name: "mulw_body" LOOP_VARS output_arg { name: "i2" type: DT_INT32 }
                output_arg { name: "x2" type: DT_FLOAT } output_arg { name: "h2" type: DT_RESOURCE }
                is_stateful: true }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
      attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
    node_def { name: "inc" op: "AddV2" input: "i" input: "one:output:0"
      attr { key: "T" value { type: DT_INT32 } } }
    node_def { name: "w" op: "ReadVariableOp" input: "h" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "m" op: "Mul" input: "x" input: "w:value:0"
      attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "i2" value: "inc:z:0" } ret { key: "x2" value: "m:z:0" } ret { key: "h2" value: "h" }
  }
  function {
    signature { name: "outer_body" LOOP_VARS output_arg { name: "i2" type: DT_INT32 }
                output_arg { name: "x2" type: DT_FLOAT } output_arg { name: "h2" type: DT_RESOURCE }
                is_stateful: true }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
      attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
    node_def { name: "inc" op: "AddV2" input: "i" input: "one:output:0"
      attr { key: "T" value { type: DT_INT32 } } }
    node_def { name: "call" op: "mulw" input: "x" input: "h" }
    ret { key: "i2" value: "inc:z:0" } ret { key: "x2" value: "call:out:0" } ret { key: "h2" value: "h" }
  }
}
versions { producer: 1395 min_consumer: 12 })",
      {{"LOOP_VARS", loop_vars}});
  tensorflow::GraphDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &def));
  Scope s = Scope::NewRootScope();
  Variable w(s.WithOpName("w"), PartialShape({}), DT_FLOAT,
             init::Constant(Tensor::Scalar<float>(1.5f)));
  auto g = ImportGraphDef(s, def, "import", {{"h", w.handle()}});
  ASSERT_TRUE(g.ok()) << g.status();
  Output x0 = *g->Tensor("x0");
  Output y = *g->Tensor(in_loop ? "outer:1" : "direct");
  GradientDescentOptimizer opt(0.01);
  auto train = opt.Minimize(s, y, {w});
  ASSERT_TRUE(train.ok()) << train.status();
  ClientSession session(s);
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  float wv = 1.5f;
  const float x = 2.0f;
  for (int step = 0; step < 3; ++step) {
    auto out = session.Run({{x0, Tensor::Scalar<float>(x)}}, {y}, {*train});
    ASSERT_TRUE(out.ok()) << out.status();
    const float w2 = wv * wv;
    EXPECT_FLOAT_EQ((*out)[0].scalar<float>(), in_loop ? x * w2 * w2 : x * w2) << step;
    wv -= 0.01f * (in_loop ? 4 * x * w2 * wv : 2 * x * wv);
    auto now = session.Run({w.Read()});
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_FLOAT_EQ((*now)[0].scalar<float>(), wv) << "after step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(TopLevelAndInALoop, ResourceInACallTest, ::testing::Bool());

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
