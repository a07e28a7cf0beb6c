// Sessions run graphs with function libraries: stateful calls on resource
// variables, control returns, bodies split across devices, Extend with a
// library.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "runtime/direct_session.h"

namespace graphrun {
namespace {

using test::ParseGraph;
using ::testing::HasSubstr;

std::unique_ptr<Session> NewLocalSession(int cpus) {
  SessionOptions opts;
  (*opts.config.mutable_device_count())["CPU"] = cpus;
  auto s = NewSession(opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

float Scalar(const Tensor& t) { return t.flat<float>()[0]; }

// A resource variable `counter`, bumped by a tf.function that takes the
// variable's handle (AssignAddVariableOp, then a read that depends on it, a
// control return), and a second function with no outputs whose only effect
// is its control return.
const char kCounter[] = R"(
node { name: "v" op: "VarHandleOp"
       attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { } } }
       attr { key: "shared_name" value { s: "counter" } } }
node { name: "ten" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 10 } } } }
node { name: "init" op: "AssignVariableOp" input: "v" input: "ten"
       attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "delta" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "bump" op: "StatefulPartitionedCall" input: "v" input: "delta"
       attr { key: "Tin" value { list { type: DT_RESOURCE type: DT_FLOAT } } }
       attr { key: "Tout" value { list { type: DT_FLOAT } } }
       attr { key: "_read_only_resource_inputs" value { list { } } }
       attr { key: "f" value { func { name: "__inference_bump_90" } } } }
node { name: "tick" op: "StatefulPartitionedCall" input: "v"
       attr { key: "Tin" value { list { type: DT_RESOURCE } } }
       attr { key: "Tout" value { list { } } }
       attr { key: "f" value { func { name: "__inference_tick_95" } } } }
node { name: "read" op: "ReadVariableOp" input: "v" attr { key: "dtype" value { type: DT_FLOAT } } }
library {
  function {
    signature { name: "__inference_bump_90"
                input_arg { name: "resource" type: DT_RESOURCE }
                input_arg { name: "delta" type: DT_FLOAT }
                output_arg { name: "identity" type: DT_FLOAT }
                is_stateful: true }
    node_def { name: "AssignAddVariableOp" op: "AssignAddVariableOp" input: "resource" input: "delta"
               attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "ReadVariableOp" op: "ReadVariableOp" input: "resource"
               input: "^AssignAddVariableOp" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "Identity" op: "Identity" input: "ReadVariableOp:value:0"
               input: "^AssignAddVariableOp" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "identity" value: "Identity:output:0" }
    control_ret { key: "AssignAddVariableOp" value: "AssignAddVariableOp" }
  }
  function {
    signature { name: "__inference_tick_95"
                input_arg { name: "resource" type: DT_RESOURCE }
                is_stateful: true }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
               attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
    node_def { name: "AssignAddVariableOp" op: "AssignAddVariableOp" input: "resource"
               input: "one:output:0" attr { key: "dtype" value { type: DT_FLOAT } } }
    control_ret { key: "AssignAddVariableOp" value: "AssignAddVariableOp" }
  }
}
versions { producer: 1395 min_consumer: 12 }
)";

TEST(FunctionSessionTest, StatefulCallsOnAResourceVariable) {
  auto session = NewLocalSession(1);
  ASSERT_TRUE(session->Create(ParseGraph(kCounter)).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}).ok());
  Tensor delta = Tensor::Scalar<float>(5);
  auto out = session->Run({{"delta", delta}}, {"bump"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 15);
  out = session->Run({{"delta", delta}}, {"bump:0"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 20);
  // `tick` returns nothing: running it as a target runs its control return.
  ASSERT_TRUE(session->Run({}, {}, {"tick"}).ok());
  out = session->Run({}, {"read"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 21);
}

// A call whose body is split across two devices: the partitioner puts a
// Send/Recv pair inside the inlined body.
TEST(FunctionSessionTest, BodyNodesAreSplitAcrossDevices) {
  auto session = NewLocalSession(2);
  absl::Status s = session->Create(ParseGraph(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "call" op: "f" input: "x" device: "/device:CPU:0" }
library { function {
  signature { name: "f" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "sq" op: "Square" input: "x" device: "/device:CPU:1" attr { key: "T" value { type: DT_FLOAT } } }
  node_def { name: "neg" op: "Neg" input: "sq:y:0" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "neg:y:0" }
} }
)"));
  ASSERT_TRUE(s.ok()) << s;
  tensorflow::RunOptions options;
  options.set_output_partition_graphs(true);
  tensorflow::RunMetadata metadata;
  auto out = session->Run(options, {{"x", Tensor::Scalar<float>(3)}}, {"call"}, {}, &metadata);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), -9);
  ASSERT_EQ(metadata.partition_graphs_size(), 2);
  // x (through the call's arguments) goes to CPU:1 for the Square; its
  // result comes back for the Neg.
  std::vector<std::string> sends;
  for (const auto& g : metadata.partition_graphs()) {
    for (const auto& n : g.node()) {
      if (n.op() == "_Send") sends.push_back(n.input(0) + " from " + n.device());
    }
  }
  EXPECT_THAT(sends, ::testing::UnorderedElementsAre(
                         "call/args from /job:localhost/replica:0/task:0/device:CPU:0",
                         "call/sq from /job:localhost/replica:0/task:0/device:CPU:1"));
}

// Case / StatelessCase (TensorFlow's tf.switch_case): branches[i] runs,
// the last one for an index out of range; a branch's control return runs
// only when it is taken.
TEST(FunctionSessionTest, CaseRunsTheIndexedBranch) {
  auto session = NewLocalSession(1);
  absl::Status s = session->Create(ParseGraph(R"(
node { name: "i" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "v" op: "VarHandleOp" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { } } } attr { key: "shared_name" value { s: "taken" } } }
node { name: "zero" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 0 } } } }
node { name: "init" op: "AssignVariableOp" input: "v" input: "zero"
       attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "case" op: "Case" input: "i" input: "x" input: "v"
       attr { key: "Tin" value { list { type: DT_FLOAT type: DT_RESOURCE } } }
       attr { key: "Tout" value { list { type: DT_FLOAT } } }
       attr { key: "branches" value { list { func { name: "plus_one" } func { name: "twice" }
                                            func { name: "count" } } } } }
node { name: "scase" op: "StatelessCase" input: "i" input: "x"
       attr { key: "Tin" value { list { type: DT_FLOAT } } }
       attr { key: "Tout" value { list { type: DT_FLOAT } } }
       attr { key: "branches" value { list { func { name: "neg" } func { name: "neg" } } } } }
node { name: "read" op: "ReadVariableOp" input: "v" attr { key: "dtype" value { type: DT_FLOAT } } }
library {
  function {
    signature { name: "plus_one" input_arg { name: "x" type: DT_FLOAT }
                input_arg { name: "v" type: DT_RESOURCE } output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
               attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
    node_def { name: "add" op: "AddV2" input: "x" input: "one:output:0"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "add:z:0" }
  }
  function {
    signature { name: "twice" input_arg { name: "x" type: DT_FLOAT }
                input_arg { name: "v" type: DT_RESOURCE } output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "add" op: "AddV2" input: "x" input: "x"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "add:z:0" }
  }
  function {
    signature { name: "count" input_arg { name: "x" type: DT_FLOAT }
                input_arg { name: "v" type: DT_RESOURCE } output_arg { name: "y" type: DT_FLOAT }
                is_stateful: true }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
               attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
    node_def { name: "bump" op: "AssignAddVariableOp" input: "v" input: "one:output:0"
               attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "y" op: "Identity" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "y:output:0" }
    control_ret { key: "bump" value: "bump" }
  }
  function {
    signature { name: "neg" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "n" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "n:y:0" }
  }
}
versions { producer: 1395 min_consumer: 12 }
)"));
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(session->Run({}, {}, {"init"}).ok());
  const Tensor x = Tensor::Scalar<float>(5);
  auto run = [&](int32_t i) {
    auto out = session->Run({{"i", Tensor::Scalar<int32_t>(i)}, {"x", x}}, {"case", "scase"});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? std::vector<float>{Scalar((*out)[0]), Scalar((*out)[1])}
                    : std::vector<float>{};
  };
  EXPECT_THAT(run(0), ::testing::ElementsAre(6, -5));
  EXPECT_THAT(run(1), ::testing::ElementsAre(10, -5));
  EXPECT_THAT(run(2), ::testing::ElementsAre(5, -5));
  EXPECT_THAT(run(7), ::testing::ElementsAre(5, -5));   // out of range: the last
  EXPECT_THAT(run(-1), ::testing::ElementsAre(5, -5));  // branch
  auto read = session->Run({}, {"read"});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(Scalar((*read)[0]), 3);  // `count` ran 3 times of 5

  // A branch that returns another number of outputs names the branch.
  auto bad = NewLocalSession(1);
  s = bad->Create(ParseGraph(R"(
node { name: "i" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
node { name: "case" op: "StatelessCase" input: "i"
       attr { key: "Tin" value { list { } } }
       attr { key: "Tout" value { list { type: DT_FLOAT } } }
       attr { key: "branches" value { list { func { name: "nothing" } } } } }
library { function { signature { name: "nothing" } } }
)"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("node 'case' (op StatelessCase): Tout lists 1 outputs but branch 0 "
                        "returns 0"));
}

TEST(FunctionSessionTest, ExtendAddsCallsAndTheirLibrary) {
  auto session = NewLocalSession(1);
  ASSERT_TRUE(session
                  ->Create(ParseGraph(R"(
node { name: "x" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 4 } } } }
)"))
                  .ok());
  absl::Status s = session->Extend(ParseGraph(R"(
node { name: "call" op: "half" input: "x" }
library { function {
  signature { name: "half" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
             attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 0.5 } } } }
  node_def { name: "m" op: "Mul" input: "x" input: "c:output:0" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "m:z:0" }
} }
)"));
  ASSERT_TRUE(s.ok()) << s;
  auto out = session->Run({}, {"call"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 2);
}

TEST(FunctionSessionTest, CreateNamesTheFunctionOfABadNode) {
  auto session = NewLocalSession(1);
  absl::Status s = session->Create(ParseGraph(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "call" op: "f" input: "x" }
library { function {
  signature { name: "f" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "bad" op: "Frobnicate" input: "x" }
  ret { key: "y" value: "x" }
} }
)"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'call/bad' of function 'f' (called by 'call')"));
  EXPECT_THAT(s.message(), HasSubstr("op type not registered 'Frobnicate'"));
}

// Errors found after Create, when a step is placed or run, name the
// function of an inlined body node too: an impossible device and a
// kernel's shape check, in a graph given at Create and one added by Extend.
TEST(FunctionSessionTest, PlacementAndStepErrorsNameTheFunction) {
  const char kBody[] = R"(
library { function {
  signature { name: "f" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "m" op: "MatMul" input: "x" input: "x" device: "/device:CPU:7"
             attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "m:product:0" }
}
function {
  signature { name: "g" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "m" op: "MatMul" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "m:product:0" }
} }
)";
  auto session = NewLocalSession(1);
  ASSERT_TRUE(session
                  ->Create(ParseGraph(std::string(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "placed" op: "f" input: "x" }
)") + kBody))
                  .ok());
  Tensor square(DT_FLOAT, TensorShape({2, 2}));
  auto out = session->Run({{"x", square}}, {"placed"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("node 'placed/m' of function 'f' (called by 'placed') (op MatMul): "
                        "requested device '/device:CPU:7' matches no device"));

  absl::Status extended =
      session->Extend(ParseGraph(R"(node { name: "shaped" op: "g" input: "x" })"));
  ASSERT_TRUE(extended.ok()) << extended;
  Tensor row(DT_FLOAT, TensorShape({1, 3}));
  out = session->Run({{"x", row}}, {"shaped"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("node 'shaped/m' of function 'g' (called by 'shaped')"));
  // A library that defines a function twice is refused, at Extend as at
  // Create, even when both definitions are the same.
  const std::string twice = R"(
library {
  function { signature { name: "h" input_arg { name: "x" type: DT_FLOAT }
                         output_arg { name: "y" type: DT_FLOAT } } ret { key: "y" value: "x" } }
  function { signature { name: "h" input_arg { name: "x" type: DT_FLOAT }
                         output_arg { name: "y" type: DT_FLOAT } } ret { key: "y" value: "x" } } })";
  extended = session->Extend(ParseGraph(twice));
  EXPECT_EQ(extended.code(), absl::StatusCode::kInvalidArgument) << extended;
  EXPECT_THAT(extended.message(), HasSubstr("function 'h': defined twice in the library"));
  // The first call's nodes keep their function after the Extend.
  out = session->Run({{"x", square}}, {"placed"});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("of function 'f' (called by 'placed')"));
}

}  // namespace
}  // namespace graphrun
