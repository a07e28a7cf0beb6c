// Call frames: functions marked `_noinline` stay calls after lowering and
// run in executors of their own (runtime/function_call.h,
// kernels/core/function_call_kernels.cc).
#include "runtime/function_call.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/function_lowering.h"
#include "graph/ops/all_ops.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "runtime/direct_session.h"

namespace graphrun {
namespace {

using test::ParseGraph;
using ::testing::HasSubstr;

// poly(a) = (a * a, a * a + 1.5), never inlined; called through
// StatefulPartitionedCall (c1), as an op (c2), and from `outer`, itself a
// call frame that calls poly through PartitionedCall and adds 1.
const char kGraph[] = R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c1" op: "StatefulPartitionedCall" input: "x"
       attr { key: "f" value { func { name: "poly" } } }
       attr { key: "Tin" value { list { type: DT_FLOAT } } }
       attr { key: "Tout" value { list { type: DT_FLOAT type: DT_FLOAT } } } }
node { name: "c2" op: "poly" input: "c1:0" }
node { name: "c3" op: "outer" input: "c2:1" }
library {
  function {
    signature { name: "poly" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "sq" type: DT_FLOAT } output_arg { name: "plus" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "m" op: "Mul" input: "a" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "k" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
               attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1.5 } } } }
    node_def { name: "p" op: "AddV2" input: "m:z:0" input: "k:output:0"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "sq" value: "m:z:0" } ret { key: "plus" value: "p:z:0" }
  }
  function {
    signature { name: "outer" input_arg { name: "b" type: DT_FLOAT }
                output_arg { name: "out" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "call" op: "PartitionedCall" input: "b"
               attr { key: "f" value { func { name: "poly" } } }
               attr { key: "Tin" value { list { type: DT_FLOAT } } }
               attr { key: "Tout" value { list { type: DT_FLOAT type: DT_FLOAT } } } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
               attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
    node_def { name: "s" op: "AddV2" input: "call:output:0" input: "one:output:0"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "s:z:0" }
  }
}
)";

TEST(CallFrameTest, NoInlineFunctionsStayCallsAndKeepTheLibrary) {
  auto def = CanonicalizeGraphDef(ParseGraph(kGraph), DefaultOpRegistry(), nullptr);
  ASSERT_TRUE(def.ok()) << def.status();
  std::map<std::string, std::string> ops;
  for (const auto& n : def->node()) ops[n.name()] = n.op();
  EXPECT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops["c1"], "StatefulPartitionedCall");
  EXPECT_EQ(ops["c2"], "StatefulPartitionedCall");
  EXPECT_EQ(ops["c3"], "StatefulPartitionedCall");
  EXPECT_EQ(def->library().function_size(), 2);
  EXPECT_FALSE(NeedsLowering(*def));
  // Lowering again changes nothing.
  auto again = CanonicalizeGraphDef(*def, DefaultOpRegistry(), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->node_size(), def->node_size());
  for (int i = 0; i < def->node_size(); ++i) {
    EXPECT_EQ(again->node(i).DebugString(), def->node(i).DebugString());
  }
  EXPECT_EQ(again->library().function_size(), 2);
}

TEST(CallFrameTest, RunsBodiesInTheirOwnExecutors) {
  SessionOptions opts;
  auto s = NewSession(opts);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::Status created = (*s)->Create(ParseGraph(kGraph));
  ASSERT_TRUE(created.ok()) << created;
  for (float x : {2.0f, -1.0f, 0.5f}) {
    auto r = (*s)->Run({{"x", Tensor::Scalar<float>(x)}}, {"c1:0", "c1:1", "c2:1", "c3"});
    ASSERT_TRUE(r.ok()) << r.status();
    const float sq = x * x, c2 = sq * sq + 1.5f;
    EXPECT_EQ((*r)[0].scalar<float>(), sq);
    EXPECT_EQ((*r)[1].scalar<float>(), sq + 1.5f);
    EXPECT_EQ((*r)[2].scalar<float>(), c2);
    EXPECT_EQ((*r)[3].scalar<float>(), c2 * c2 + 1);
  }
}

// A traced step's stats hold the bodies' nodes under their calls, nested
// calls under both, on the caller's device.
TEST(CallFrameTest, TracedStepsNameBodyNodesUnderTheirCalls) {
  SessionOptions opts;
  auto s = NewSession(opts);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::Status created = (*s)->Create(ParseGraph(kGraph));
  ASSERT_TRUE(created.ok()) << created;
  tensorflow::RunOptions ro;
  ro.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  tensorflow::RunMetadata md;
  auto r = (*s)->Run(ro, {{"x", Tensor::Scalar<float>(2.0f)}}, {"c3"}, {}, &md);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<float>(), (16.0f + 1.5f) * (16.0f + 1.5f) + 1);
  std::map<std::string, int> seen;
  for (const auto& ds : md.step_stats().dev_stats()) {
    for (const auto& ns : ds.node_stats()) ++seen[ns.node_name()];
  }
  // c1 and c2 run poly; c3 runs outer, whose "call" runs poly again. A
  // body names its nodes FUNCTION/NODE.
  std::string all;
  for (const auto& [name, count] : seen) all += name + " ";
  for (const char* name :
       {"c1", "c1/poly/m", "c1/poly/p", "c2/poly/m", "c2/poly/k", "c3", "c3/outer/s",
        "c3/outer/call", "c3/outer/call/poly/m", "c3/outer/call/poly/p"}) {
    auto it = seen.find(name);
    EXPECT_TRUE(it != seen.end() && it->second == 1) << name << " in: " << all;
  }
  // Without tracing, nothing is collected.
  tensorflow::RunMetadata none;
  ASSERT_TRUE((*s)->Run({}, {{"x", Tensor::Scalar<float>(2.0f)}}, {"c3"}, {}, &none).ok());
  EXPECT_EQ(none.step_stats().dev_stats_size(), 0);
}

TEST(CallFrameTest, ErrorsNameTheCallAndTheFunction) {
  // A body that fails at run time: Reshape to 3 elements of a 2-vector.
  const char kBad[] = R"(
node { name: "v" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "call" op: "bad" input: "v" }
library {
  function {
    signature { name: "bad" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "r" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "shape" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } } int_val: 3 } } } }
    node_def { name: "reshaped" op: "Reshape" input: "a" input: "shape:output:0"
               attr { key: "T" value { type: DT_FLOAT } } attr { key: "Tshape" value { type: DT_INT32 } } }
    ret { key: "r" value: "reshaped:output:0" }
  }
}
)";
  SessionOptions opts;
  auto s = NewSession(opts);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::Status created = (*s)->Create(ParseGraph(kBad));
  ASSERT_TRUE(created.ok()) << created;
  auto r = (*s)->Run({{"v", Tensor::FromVector<float>({1, 2}, TensorShape({2}))}}, {"call"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("node 'call'"));
  EXPECT_THAT(r.status().message(), HasSubstr("in function 'bad'"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("node 'bad/reshaped' (op Reshape)"))
      << r.status();

  // Recursion through a call frame: f (never inlined) -> g -> f.
  const char kRecursive[] = R"(
node { name: "v" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "call" op: "f" input: "v" }
library {
  function {
    signature { name: "f" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "r" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "inner" op: "g" input: "a" }
    ret { key: "r" value: "inner:r:0" }
  }
  function {
    signature { name: "g" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "r" type: DT_FLOAT } }
    node_def { name: "back" op: "f" input: "a" }
    ret { key: "r" value: "back:r:0" }
  }
}
)";
  auto rec = CanonicalizeGraphDef(ParseGraph(kRecursive), DefaultOpRegistry(), nullptr);
  EXPECT_EQ(rec.status().code(), absl::StatusCode::kInvalidArgument) << rec.status();
  EXPECT_THAT(rec.status().message(), HasSubstr("function 'f' calls itself (f -> g -> f)"));

  // A graph whose calls are all call frames already is not lowered again;
  // the recursion is found when the session instantiates the body.
  const char kSelf[] = R"(
node { name: "v" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "call" op: "StatefulPartitionedCall" input: "v"
       attr { key: "f" value { func { name: "self" } } }
       attr { key: "Tin" value { list { type: DT_FLOAT } } }
       attr { key: "Tout" value { list { type: DT_FLOAT } } } }
library {
  function {
    signature { name: "self" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "r" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "again" op: "StatefulPartitionedCall" input: "a"
               attr { key: "f" value { func { name: "self" } } }
               attr { key: "Tin" value { list { type: DT_FLOAT } } }
               attr { key: "Tout" value { list { type: DT_FLOAT } } } }
    ret { key: "r" value: "again:output:0" }
  }
}
)";
  auto s2 = NewSession(opts);
  ASSERT_TRUE(s2.ok()) << s2.status();
  absl::Status self = (*s2)->Create(ParseGraph(kSelf));
  if (self.ok()) {
    // Sessions may build executors at the first run.
    self = (*s2)->Run({{"v", Tensor::Scalar<float>(1)}}, {"call"}).status();
  }
  EXPECT_EQ(self.code(), absl::StatusCode::kInvalidArgument) << self;
  EXPECT_THAT(std::string(self.message()), HasSubstr("function 'self' calls itself"));
}

// f24 calls f23 twice, ..., f1 calls f0 twice, all never inlined: 2^24
// bodies if nothing stopped it. The session fails fast instead.
TEST(CallFrameTest, ExponentialCallFramesAreResourceExhausted) {
  std::string lib;
  for (int k = 1; k <= 24; ++k) {
    const std::string callee = k == 1 ? "f0" : absl::StrCat("f", k - 1);
    lib += absl::StrCat(
        R"(
  function {
    signature { name: "f)",
        k, R"(" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "r" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "x" op: ")",
        callee, R"(" input: "a" }
    node_def { name: "y" op: ")",
        callee, R"(" input: "a" }
    node_def { name: "s" op: "AddV2" input: "x:r:0" input: "y:r:0" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "r" value: "s:z:0" }
  })");
  }
  const std::string graph = absl::StrCat(R"(
node { name: "v" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "call" op: "f24" input: "v" }
library {
  function {
    signature { name: "f0" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "r" type: DT_FLOAT } }
    attr { key: "_noinline" value { b: true } }
    node_def { name: "i" op: "Identity" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "r" value: "i:output:0" }
  })",
                                         lib, "\n}\n");
  SessionOptions opts;
  auto s = NewSession(opts);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::Status st = (*s)->Create(ParseGraph(graph));
  if (st.ok()) st = (*s)->Run({{"v", Tensor::Scalar<float>(1)}}, {"call"}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("more than 1024 function bodies"));
}

}  // namespace
}  // namespace graphrun
