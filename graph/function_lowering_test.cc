#include "graph/function_lowering.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "graph/graph.h"
#include "graph/ops/all_ops.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using test::ParseGraph;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::flat_hash_map<std::string, tensorflow::NodeDef> ByName(const tensorflow::GraphDef& g) {
  absl::flat_hash_map<std::string, tensorflow::NodeDef> m;
  for (const auto& n : g.node()) m[n.name()] = n;
  return m;
}

std::vector<std::string> Inputs(const tensorflow::NodeDef& n) {
  return {n.input().begin(), n.input().end()};
}

// f(x) = x * c, with the constant on /device:CPU:1 and colocated with the
// Mul; called with a control input and a device.
const char kCallGraph[] = R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "gate" op: "NoOp" }
node { name: "call" op: "PartitionedCall" input: "x" input: "^gate" device: "/device:CPU:0"
       attr { key: "Tin" value { list { type: DT_FLOAT } } }
       attr { key: "Tout" value { list { type: DT_FLOAT } } }
       attr { key: "_xla_hint" value { s: "kept" } }
       attr { key: "f" value { func { name: "scale" } } } }
node { name: "out" op: "Identity" input: "call" input: "^call" attr { key: "T" value { type: DT_FLOAT } } }
library { function {
  signature { name: "scale" input_arg { name: "x" type: DT_FLOAT }
              output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "c" op: "Const" device: "/device:CPU:1"
             attr { key: "_class" value { list { s: "loc:@mul" } } }
             attr { key: "dtype" value { type: DT_FLOAT } }
             attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 3 } } } }
  node_def { name: "mul" op: "Mul" input: "x" input: "c:output:0"
             attr { key: "T" value { type: DT_FLOAT } } }
  node_def { name: "side" op: "NoOp" input: "^x" }
  ret { key: "y" value: "mul:z:0" }
  control_ret { key: "side" value: "side" }
} }
)";

TEST(FunctionLoweringTest, CallIsInlinedUnderTheCallersName) {
  auto lowered = LowerFunctionCalls(ParseGraph(kCallGraph), DefaultOpRegistry());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(lowered->graph_def.library().function_size(), 0);
  auto n = ByName(lowered->graph_def);
  // x, gate, out, args, input_control_node, c, mul, side, call
  ASSERT_EQ(n.size(), 9u);
  // The arguments pass through an IdentityN of the function's input types.
  EXPECT_EQ(n["call/args"].op(), "IdentityN");
  EXPECT_THAT(Inputs(n["call/args"]), ElementsAre("x"));

  // The body's source node waits for the call's control input.
  EXPECT_EQ(n["call/input_control_node"].op(), "NoOp");
  EXPECT_THAT(Inputs(n["call/input_control_node"]), ElementsAre("^gate"));
  EXPECT_THAT(Inputs(n["call/c"]), ElementsAre("^call/input_control_node"));
  // Its own device and colocation stay (renamed); the others take the call's.
  EXPECT_EQ(n["call/c"].device(), "/device:CPU:1");
  EXPECT_THAT(n["call/c"].attr().at("_class").list().s(), ElementsAre("loc:@call/mul"));
  EXPECT_EQ(n["call/mul"].device(), "/device:CPU:0");
  EXPECT_THAT(Inputs(n["call/mul"]), ElementsAre("call/args:0", "call/c"));
  EXPECT_THAT(Inputs(n["call/side"]), ElementsAre("^call/args"));

  // `call` is now an IdentityN over the return value that also waits for
  // the control return; the call's '_' attrs stay on it.
  EXPECT_EQ(n["call"].op(), "IdentityN");
  EXPECT_THAT(Inputs(n["call"]), ElementsAre("call/mul", "^call/side"));
  EXPECT_EQ(n["call"].attr().at("_xla_hint").s(), "kept");
  EXPECT_THAT(Inputs(n["out"]), ElementsAre("call", "^call"));
  EXPECT_EQ(lowered->origin.at("call/mul"),
            "node 'call/mul' of function 'scale' (called by 'call')");

  // And the lowered graph is a valid graph.
  EXPECT_TRUE(GraphFromGraphDef(lowered->graph_def, DefaultOpRegistry()).ok());
}

TEST(FunctionLoweringTest, GraphFromGraphDefLowersByItself) {
  auto g = GraphFromGraphDef(ParseGraph(kCallGraph), DefaultOpRegistry());
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_NE((*g)->FindNode("call/mul"), nullptr);
  EXPECT_EQ((*g)->FindNode("call")->op(), "IdentityN");
  EXPECT_EQ((*g)->library().function_size(), 0);
}

absl::Status Lower(const std::string& text, LoweringOptions options = {}) {
  return LowerFunctionCalls(ParseGraph(text), DefaultOpRegistry(), options).status();
}

// Validation of the lowered graph, as sessions and `graphrun run` do it.
absl::Status Canonicalize(const std::string& text, std::vector<std::string>* warnings = nullptr) {
  return CanonicalizeGraphDef(ParseGraph(text), DefaultOpRegistry(), warnings).status();
}

TEST(FunctionLoweringTest, CycleInABodyNamesTheFunctionAndNode) {
  absl::Status s = Canonicalize(R"(
node { name: "x" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
node { name: "c" op: "loop" input: "x" }
library { function {
  signature { name: "loop" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "a" op: "AddV2" input: "x" input: "b:z:0" attr { key: "T" value { type: DT_FLOAT } } }
  node_def { name: "b" op: "AddV2" input: "x" input: "a:z:0" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "a:z:0" }
} }
)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("of function 'loop' (called by 'c')"));
  EXPECT_THAT(s.message(), HasSubstr("is on a cycle"));
}

TEST(FunctionLoweringTest, TypeMismatchInABodyNamesTheFunction) {
  // x of `x_type` into neg(x: float), whose Neg computes in `neg_type`.
  auto neg = [](const std::string& x_type, const std::string& value, const std::string& neg_type) {
    return Canonicalize(absl::StrCat(R"(
node { name: "x" op: "Const" attr { key: "dtype" value { type: )",
                                     x_type, R"( } }
       attr { key: "value" value { tensor { dtype: )",
                                     x_type, " tensor_shape {} ", value, R"( } } } }
node { name: "c" op: "neg" input: "x" }
library { function {
  signature { name: "neg" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "n" op: "Neg" input: "x" attr { key: "T" value { type: )",
                                     neg_type, R"( } } }
  ret { key: "y" value: "n:y:0" }
} }
)"));
  };
  // At the call's arguments, as TensorFlow checks a call's inputs.
  absl::Status s = neg("DT_INT32", "int_val: 1", "DT_FLOAT");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the arguments of node 'c', a call of function 'neg'"));
  EXPECT_THAT(s.message(), HasSubstr("expects float but 'x' is int32"));
  // Inside the body.
  s = neg("DT_FLOAT", "float_val: 1", "DT_INT32");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'c/n' of function 'neg' (called by 'c')"));
  EXPECT_THAT(s.message(), HasSubstr("expects int32 but 'c/args:0' is float"));
}

// A call node's Tin and Tout must be its function's types, and the
// tensors it passes of those types.
TEST(FunctionLoweringTest, CallTypesMustBeTheFunctions) {
  auto with = [](const std::string& call_attrs, const std::string& x_type) {
    return Canonicalize(absl::StrCat(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: )",
                                     x_type, R"( } } }
node { name: "c" op: "StatefulPartitionedCall" input: "x"
       attr { key: "f" value { func { name: "sq" } } } )",
                                     call_attrs, R"( }
library { function {
  signature { name: "sq" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "m" op: "Mul" input: "a" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "m:z:0" }
} }
)"));
  };
  const std::string tin = R"(attr { key: "Tin" value { list { type: DT_FLOAT } } } )";
  const std::string tout = R"(attr { key: "Tout" value { list { type: DT_FLOAT } } } )";
  EXPECT_TRUE(with(tin + tout, "DT_FLOAT").ok());
  absl::Status s =
      with(R"(attr { key: "Tin" value { list { type: DT_INT32 } } } )" + tout, "DT_FLOAT");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'c' (op StatefulPartitionedCall): Tin lists [int32] "
                                     "but function 'sq' takes [float]"));
  s = with(tin + R"(attr { key: "Tout" value { list { type: DT_STRING } } } )", "DT_FLOAT");
  EXPECT_THAT(s.message(), HasSubstr("Tout lists [string] but function 'sq' returns [float]"));
  s = with(tin + R"(attr { key: "Tout" value { list { type: DT_FLOAT type: DT_FLOAT } } } )",
           "DT_FLOAT");
  EXPECT_THAT(s.message(),
              HasSubstr("Tout lists [float, float] but function 'sq' returns [float]"));
  s = with(tin + R"(attr { key: "Tout" value { list { } } } )", "DT_FLOAT");
  EXPECT_THAT(s.message(), HasSubstr("Tout lists [] but function 'sq' returns [float]"));
  // The call's types agree with the function, but the tensor passed is not
  // of them.
  s = with(tin + tout, "DT_INT32");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("expects float but 'x' is int32"));
}

const char kScale[] = R"(
library { function {
  signature { name: "scale" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "mul" op: "Mul" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "mul:z:0" }
} }
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
)";

TEST(FunctionLoweringTest, BadCallsAreErrorsNamingTheFunction) {
  // Two inputs to a one-argument function.
  absl::Status s =
      Lower(std::string(kScale) + R"(node { name: "c" op: "scale" input: "x" input: "x" })");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("function 'scale' called by 'c': takes 1 inputs but the call passes 2"));

  // A function that is not in the library.
  s = Lower(std::string(kScale) + R"(
node { name: "c" op: "StatefulPartitionedCall" input: "x"
       attr { key: "Tin" value { list { type: DT_FLOAT } } }
       attr { key: "Tout" value { list { type: DT_FLOAT } } }
       attr { key: "f" value { func { name: "missing" } } } })");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'c' (op StatefulPartitionedCall): attr 'f' names "
                                     "function 'missing', which is not in the graph's function "
                                     "library"));

  // A body input naming nothing.
  s = Lower(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c" op: "f" input: "x" }
library { function {
  signature { name: "f" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "n" op: "Neg" input: "z" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "n:y:0" }
} })");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'n' of function 'f' (called by 'c'): input 'z' names no "
                                     "argument or node of the function"));

  // An output arg name the op does not have.
  s = Lower(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c" op: "f" input: "x" }
library { function {
  signature { name: "f" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "n" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "n:z:0" }
} })");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'n:z:0' cannot be resolved"));

  // A placeholder attr the call does not set.
  s = Lower(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c" op: "StatefulPartitionedCall" input: "x"
       attr { key: "Tin" value { list { type: DT_FLOAT } } }
       attr { key: "Tout" value { list { type: DT_FLOAT } } }
       attr { key: "f" value { func { name: "g" } } } }
library { function {
  signature { name: "g" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "n" op: "Neg" input: "x" attr { key: "T" value { placeholder: "T" } } }
  ret { key: "y" value: "n:y:0" }
} })");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'n' of function 'g' (called by 'c'): attr placeholder "
                                     "'T' is not set by the call"));

  // A function with the name of an op.
  s = Lower(R"(library { function { signature { name: "Neg" } } })");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("function 'Neg': has the name of an op"));
}

TEST(FunctionLoweringTest, FunctionalOpsWithoutALibraryAreErrors) {
  absl::Status s = Lower(R"(
node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_BOOL } } }
node { name: "if" op: "If" input: "p"
       attr { key: "Tcond" value { type: DT_BOOL } }
       attr { key: "Tin" value { list { } } } attr { key: "Tout" value { list { } } }
       attr { key: "then_branch" value { func { name: "t" } } }
       attr { key: "else_branch" value { func { name: "e" } } } })");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'if' (op If): attr 'then_branch' names function 't'"));

  s = Lower(R"(
node { name: "w" op: "While"
       attr { key: "T" value { list { } } }
       attr { key: "cond" value { func { name: "c" } } }
       attr { key: "body" value { func { name: "b" } } } }
library { function { signature { name: "c" output_arg { name: "y" type: DT_BOOL } }
                     node_def { name: "t" op: "Const" attr { key: "dtype" value { type: DT_BOOL } }
                       attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape {} bool_val: true } } } }
                     ret { key: "y" value: "t:output:0" } }
          function { signature { name: "b" } } })");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'w' (op While): has no loop variables"));
}

// f_k calls f_(k-1) twice: 2^k nodes. Inlining stops at the node limit
// instead of exhausting memory.
TEST(FunctionLoweringTest, ExponentialInliningIsRefused) {
  std::string lib = R"(library { function {
  signature { name: "f0" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "n" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "n:y:0" } })";
  for (int k = 1; k <= 30; ++k) {
    std::string prev = "f" + std::to_string(k - 1);
    lib += R"(
  function { signature { name: "f)" +
           std::to_string(k) +
           R"(" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "a" op: ")" +
           prev + R"(" input: "x" }
    node_def { name: "b" op: ")" +
           prev + R"(" input: "a:y:0" }
    ret { key: "y" value: "b:y:0" } })";
  }
  lib += "}\n";
  std::string graph = lib + R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c" op: "f30" input: "x" })";
  LoweringOptions options;
  options.max_nodes = 10000;
  absl::Status s = Lower(graph, options);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("inlining function calls makes more than 10000 nodes"));

  options.max_depth = 8;
  options.max_nodes = int64_t{1} << 20;
  s = Lower(graph, options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("calls nest deeper than 8"));
}

TEST(FunctionLoweringTest, UndeclaredAttrsAreDroppedWithAWarning) {
  const char graph[] = R"(
node { name: "x" op: "PlaceholderWithDefault" input: "d"
       attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { } } }
       attr { key: "_output_shapes" value { list { shape { } } } }
       attr { key: "_user_specified_name" value { s: "x" } }
       attr { key: "new_in_tf_2_99" value { i: 1 } } }
node { name: "d" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
)";
  // Validated as it is, the unknown attr is an error...
  auto g = GraphFromGraphDef(ParseGraph(graph), DefaultOpRegistry());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  // ...which canonicalizing removes, with one warning; '_' attrs stay.
  std::vector<std::string> warnings;
  auto c = CanonicalizeGraphDef(ParseGraph(graph), DefaultOpRegistry(), &warnings);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(warnings, ElementsAre("node 'x' (op PlaceholderWithDefault): dropped attr "
                                    "'new_in_tf_2_99', which the op does not declare"));
  const auto& attrs = c->node(0).attr();
  EXPECT_FALSE(attrs.contains("new_in_tf_2_99"));
  EXPECT_TRUE(attrs.contains("_output_shapes"));
  EXPECT_TRUE(attrs.contains("_user_specified_name"));
  EXPECT_TRUE(GraphFromGraphDef(*c, DefaultOpRegistry()).ok());
}

TEST(FunctionLoweringTest, AnnotateOnlyRewritesKnownNodes) {
  absl::flat_hash_map<std::string, std::string> origin = {{"c/n", "node 'n' of function 'f'"}};
  EXPECT_EQ(AnnotateLoweringError(absl::InvalidArgumentError("node 'x': bad"), origin).message(),
            "node 'x': bad");
  EXPECT_EQ(AnnotateLoweringError(absl::InvalidArgumentError("node 'c/n': bad"), origin).message(),
            "node 'n' of function 'f': bad");
}

TEST(FunctionLoweringTest, VersioningRule) {
  // A graph for a newer consumer, or one that names graphrun's version as
  // bad, is refused; the usual min_consumer 12 is read.
  EXPECT_TRUE(Canonicalize("versions { producer: 1645 min_consumer: 12 }").ok());
  absl::Status s = Canonicalize("versions { producer: 99999 min_consumer: 99999 }");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("GraphDef min consumer version 99999 is above graphrun's "
                                     "version 1766"));
  s = Canonicalize("versions { producer: 1700 bad_consumers: 1766 }");
  EXPECT_THAT(s.message(), HasSubstr("GraphDef disallows consumer version 1766"));
}

// TensorFlow before GraphDef version 22 wrote a Placeholder of unknown
// shape as `shape {}`; read so in such graphs only (a graph without
// versions is hand-written: its scalar stays a scalar, as does one of a
// later version).
TEST(FunctionLoweringTest, LegacyScalarPlaceholderShapeIsUnknown) {
  const std::string node = R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_STRING } }
       attr { key: "shape" value { shape { } } } }
node { name: "y" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { dim { size: 2 } } } } }
)";
  auto shape_of = [&](const std::string& versions, int i) {
    auto c = CanonicalizeGraphDef(ParseGraph(node + versions), DefaultOpRegistry(), nullptr);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->node(i).attr().at("shape").shape().ShortDebugString() : "";
  };
  EXPECT_EQ(shape_of("versions { producer: 19 }", 0), "unknown_rank: true");
  EXPECT_EQ(shape_of("versions { producer: 21 }", 0), "unknown_rank: true");
  EXPECT_EQ(shape_of("versions { producer: 19 }", 1), "dim { size: 2 }");
  EXPECT_EQ(shape_of("versions { producer: 22 }", 0), "");
  EXPECT_EQ(shape_of("", 0), "");
}

}  // namespace
}  // namespace graphrun
