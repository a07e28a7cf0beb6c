#include "runtime/direct_session.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace {

using test::ConstNode;
using test::OpNode;
using test::ParseGraph;
using ::testing::HasSubstr;

std::unique_ptr<Session> MakeSession(const std::string& graph_text, int cpus = 1,
                                     bool soft = false) {
  SessionOptions opts;
  (*opts.config.mutable_device_count())["CPU"] = cpus;
  opts.config.set_allow_soft_placement(soft);
  auto s = NewSession(opts);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::Status c = (*s)->Create(ParseGraph(graph_text));
  EXPECT_TRUE(c.ok()) << c;
  return std::move(*s);
}

// tf.while_loop(lambda i, acc: i < 10, lambda i, acc: (i + 1, acc + i), [0, 0])
// exactly as TensorFlow 1.x writes it.
const char kWhileLoop[] = R"(
node { name: "Const" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
node { name: "Const_1" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
node { name: "while/Enter" op: "Enter" input: "Const"
       attr { key: "T" value { type: DT_INT32 } }
       attr { key: "frame_name" value { s: "while/while_context" } }
       attr { key: "is_constant" value { b: false } }
       attr { key: "parallel_iterations" value { i: 10 } } }
node { name: "while/Enter_1" op: "Enter" input: "Const_1"
       attr { key: "T" value { type: DT_INT32 } }
       attr { key: "frame_name" value { s: "while/while_context" } }
       attr { key: "is_constant" value { b: false } }
       attr { key: "parallel_iterations" value { i: 10 } } }
node { name: "while/Merge" op: "Merge" input: "while/Enter" input: "while/NextIteration"
       attr { key: "N" value { i: 2 } } attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/Merge_1" op: "Merge" input: "while/Enter_1" input: "while/NextIteration_1"
       attr { key: "N" value { i: 2 } } attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/Less/y" op: "Const" input: "^while/Merge"
       attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 10 } } } }
node { name: "while/Less" op: "Less" input: "while/Merge" input: "while/Less/y"
       attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/LoopCond" op: "LoopCond" input: "while/Less" }
node { name: "while/Switch" op: "Switch" input: "while/Merge" input: "while/LoopCond"
       attr { key: "T" value { type: DT_INT32 } }
       attr { key: "_class" value { list { s: "loc:@while/Merge" } } } }
node { name: "while/Switch_1" op: "Switch" input: "while/Merge_1" input: "while/LoopCond"
       attr { key: "T" value { type: DT_INT32 } }
       attr { key: "_class" value { list { s: "loc:@while/Merge_1" } } } }
node { name: "while/Identity" op: "Identity" input: "while/Switch:1"
       attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/Identity_1" op: "Identity" input: "while/Switch_1:1"
       attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/add/y" op: "Const" input: "^while/Identity"
       attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
node { name: "while/add" op: "AddV2" input: "while/Identity" input: "while/add/y"
       attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/add_1" op: "AddV2" input: "while/Identity_1" input: "while/Identity"
       attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/NextIteration" op: "NextIteration" input: "while/add"
       attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/NextIteration_1" op: "NextIteration" input: "while/add_1"
       attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/Exit" op: "Exit" input: "while/Switch"
       attr { key: "T" value { type: DT_INT32 } } }
node { name: "while/Exit_1" op: "Exit" input: "while/Switch_1"
       attr { key: "T" value { type: DT_INT32 } } }
versions { producer: 27 }
)";

TEST(DirectSessionTest, WhileLoopSums) {
  auto s = MakeSession(kWhileLoop);
  for (int rep = 0; rep < 3; ++rep) {  // executors are reused across steps
    auto out = s->Run({}, {"while/Exit", "while/Exit_1:0"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), 10);
    EXPECT_EQ((*out)[1].scalar<int32_t>(), 45);
  }
}

TEST(DirectSessionTest, WhileLoopWithOneParallelIteration) {
  std::string g = kWhileLoop;
  size_t pos;
  while ((pos = g.find("i: 10 } }")) != std::string::npos) g.replace(pos, 9, "i: 1 } }");
  auto s = MakeSession(g);
  auto out = s->Run({}, {"while/Exit_1"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 45);
}

TEST(DirectSessionTest, LoopVariableChangesShapeEachIteration) {
  // As in TensorFlow's grappler test data: acc = concat([acc, acc], 0) while i < 3.
  std::string g = kWhileLoop;
  auto replace = [&g](const std::string& from, const std::string& to) {
    size_t pos = g.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    g.replace(pos, from.size(), to);
  };
  replace(R"(node { name: "Const_1" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } })",
          R"(node { name: "Const_1" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } dim { size: 2 } } int_val: 1 } } } }
node { name: "while/concat/axis" op: "Const" input: "^while/Identity" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } })");
  replace(
      R"(node { name: "while/add_1" op: "AddV2" input: "while/Identity_1" input: "while/Identity"
       attr { key: "T" value { type: DT_INT32 } } })",
      R"(node { name: "while/add_1" op: "ConcatV2" input: "while/Identity_1" input: "while/Identity_1"
       input: "while/concat/axis" attr { key: "N" value { i: 2 } }
       attr { key: "T" value { type: DT_INT32 } } attr { key: "Tidx" value { type: DT_INT32 } } })");
  replace("int_val: 10 }", "int_val: 3 }");
  auto s = MakeSession(g);
  auto out = s->Run({}, {"while/Exit_1"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({16, 2}));
  EXPECT_EQ((*out)[0].base<int32_t>()[31], 1);
}

// tf.cond(pred, lambda: x * 2, lambda: x + 10) as TensorFlow 1.x writes it.
const char kCond[] = R"(
node { name: "pred" op: "Placeholder" attr { key: "dtype" value { type: DT_BOOL } }
       attr { key: "shape" value { shape {} } } }
node { name: "x" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 3 } } } }
node { name: "cond/Switch" op: "Switch" input: "pred" input: "pred"
       attr { key: "T" value { type: DT_BOOL } } }
node { name: "cond/switch_t" op: "Identity" input: "cond/Switch:1" attr { key: "T" value { type: DT_BOOL } } }
node { name: "cond/switch_f" op: "Identity" input: "cond/Switch" attr { key: "T" value { type: DT_BOOL } } }
node { name: "cond/pred_id" op: "Identity" input: "pred" attr { key: "T" value { type: DT_BOOL } } }
node { name: "cond/mul/Switch" op: "Switch" input: "x" input: "cond/pred_id"
       attr { key: "T" value { type: DT_FLOAT } } attr { key: "_class" value { list { s: "loc:@x" } } } }
node { name: "cond/mul/y" op: "Const" input: "^cond/switch_t"
       attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 2 } } } }
node { name: "cond/mul" op: "Mul" input: "cond/mul/Switch:1" input: "cond/mul/y"
       attr { key: "T" value { type: DT_FLOAT } } }
node { name: "cond/add/Switch" op: "Switch" input: "x" input: "cond/pred_id"
       attr { key: "T" value { type: DT_FLOAT } } attr { key: "_class" value { list { s: "loc:@x" } } } }
node { name: "cond/add/y" op: "Const" input: "^cond/switch_f"
       attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 10 } } } }
node { name: "cond/add" op: "AddV2" input: "cond/add/Switch" input: "cond/add/y"
       attr { key: "T" value { type: DT_FLOAT } } }
node { name: "cond/Merge" op: "Merge" input: "cond/add" input: "cond/mul"
       attr { key: "N" value { i: 2 } } attr { key: "T" value { type: DT_FLOAT } } }
)";

TEST(DirectSessionTest, CondTakesOneBranch) {
  auto s = MakeSession(kCond);
  auto t = s->Run({{"pred", Tensor::Scalar<bool>(true)}}, {"cond/Merge", "cond/Merge:1"});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FLOAT_EQ((*t)[0].scalar<float>(), 6.0f);
  EXPECT_EQ((*t)[1].scalar<int32_t>(), 1);
  auto f = s->Run({{"pred", Tensor::Scalar<bool>(false)}}, {"cond/Merge"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FLOAT_EQ((*f)[0].scalar<float>(), 13.0f);
}

TEST(DirectSessionTest, FetchOnUntakenBranchIsAnError) {
  auto s = MakeSession(kCond);
  auto r = s->Run({{"pred", Tensor::Scalar<bool>(true)}}, {"cond/add"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("cond/add"));
}

TEST(DirectSessionTest, UnfedPlaceholderNamedOnlyWhenNeeded) {
  auto s = MakeSession(kCond);
  // x does not need pred: pruning keeps the placeholder out.
  auto ok = s->Run({}, {"x"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FLOAT_EQ((*ok)[0].scalar<float>(), 3.0f);
  auto bad = s->Run({}, {"cond/Merge"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'pred'"));
}

TEST(DirectSessionTest, FeedsAnyNodeOutput) {
  auto s = MakeSession(kCond);
  // Feed the Switch output itself: the branch sees 5 instead of x.
  auto r = s->Run(
      {{"cond/mul/Switch:1", Tensor::Scalar<float>(5)}, {"pred", Tensor::Scalar<bool>(true)}},
      {"cond/mul"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ((*r)[0].scalar<float>(), 10.0f);
}

TEST(DirectSessionTest, FeedWrongTypeIsInvalidArgument) {
  auto s = MakeSession(kCond);
  auto r = s->Run({{"pred", Tensor::Scalar<float>(1)}}, {"cond/Merge"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("feed 'pred'"));
}

// The executors cache keys each signature exactly: feeding the empty name
// after a step with no feeds is its own (failing) signature, not the
// cached one's, whose feed types it would index out of range.
TEST(DirectSessionTest, SignaturesAreKeyedExactly) {
  auto s = MakeSession(kCond);
  auto r = s->Run({}, {"x"});
  ASSERT_TRUE(r.ok()) << r.status();
  r = s->Run({{"", Tensor::Scalar<float>(1)}}, {"x"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("feed ''"));
}

TEST(DirectSessionTest, RefVariablesPersistAcrossRuns) {
  auto s = MakeSession(R"(
node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { dim { size: 2 } } } } }
node { name: "init_val" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1 float_val: 2 } } } }
node { name: "v/Assign" op: "Assign" input: "v" input: "init_val" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1 } } } }
node { name: "inc" op: "AssignAdd" input: "v" input: "one" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "read" op: "Identity" input: "v" attr { key: "T" value { type: DT_FLOAT } } }
)");
  auto uninit = s->Run({}, {"read"});
  EXPECT_EQ(uninit.status().code(), absl::StatusCode::kFailedPrecondition) << uninit.status();
  EXPECT_THAT(uninit.status().message(), HasSubstr("v"));
  {
    auto a = s->Run({}, {}, {"v/Assign"});
    ASSERT_TRUE(a.ok()) << a.status();
  }
  ASSERT_TRUE(s->Run({}, {}, {"inc"}).ok());
  ASSERT_TRUE(s->Run({}, {}, {"inc"}).ok());
  auto r = s->Run({}, {"read"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ((*r)[0].base<float>()[0], 3.0f);
  EXPECT_FLOAT_EQ((*r)[0].base<float>()[1], 4.0f);
}

TEST(DirectSessionTest, UninitializedRefVariableAcrossDevicesIsFailedPrecondition) {
  auto s = MakeSession(R"(
node { name: "v" op: "VariableV2" device: "/device:CPU:1" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape {} } } }
node { name: "twice" op: "Add" input: "v" input: "v" device: "/device:CPU:0"
       attr { key: "T" value { type: DT_FLOAT } } }
)",
                       2);
  auto r = s->Run({}, {"twice"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("uninitialized value v"));
}

TEST(DirectSessionTest, ResourceVariables) {
  auto s = MakeSession(R"(
node { name: "w" op: "VarHandleOp" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape {} } } attr { key: "shared_name" value { s: "w" } } }
node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 2.5 } } } }
node { name: "assign" op: "AssignVariableOp" input: "w" input: "c" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "add" op: "AssignAddVariableOp" input: "w" input: "c" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "read" op: "ReadVariableOp" input: "w" attr { key: "dtype" value { type: DT_FLOAT } } }
)");
  auto uninit = s->Run({}, {"read"});
  EXPECT_EQ(uninit.status().code(), absl::StatusCode::kFailedPrecondition) << uninit.status();
  {
    auto a = s->Run({}, {}, {"assign"});
    ASSERT_TRUE(a.ok()) << a.status();
  }
  ASSERT_TRUE(s->Run({}, {}, {"add"}).ok());
  auto r = s->Run({}, {"read"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ((*r)[0].scalar<float>(), 5.0f);
}

const char kTwoDevices[] = R"(
node { name: "a" op: "Const" device: "/device:CPU:0" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1 float_val: 2 } } } }
node { name: "b" op: "Const" device: "/cpu:1" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 10 } } } }
node { name: "sum" op: "AddV2" input: "a" input: "b" device: "/job:localhost/replica:0/task:0/device:CPU:1"
       attr { key: "T" value { type: DT_FLOAT } } }
node { name: "after" op: "NoOp" input: "^sum" device: "/device:CPU:0" }
)";

TEST(DirectSessionTest, TwoCpuDevicesPartitionWithSendRecv) {
  auto s = MakeSession(kTwoDevices, 2);
  tensorflow::RunOptions opts;
  opts.set_output_partition_graphs(true);
  opts.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  tensorflow::RunMetadata md;
  auto r = s->Run(opts, {}, {"sum"}, {"after"}, &md);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ((*r)[0].base<float>()[0], 11.0f);
  EXPECT_FLOAT_EQ((*r)[0].base<float>()[1], 12.0f);
  ASSERT_EQ(md.partition_graphs_size(), 2);
  int sends = 0, recvs = 0;
  for (const auto& g : md.partition_graphs()) {
    for (const auto& n : g.node()) {
      sends += n.op() == "_Send";
      recvs += n.op() == "_Recv";
    }
  }
  EXPECT_GE(sends, 2);  // a -> sum (data), sum -> after (control), sum -> fetch
  EXPECT_EQ(sends, recvs);
  ASSERT_EQ(md.step_stats().dev_stats_size(), 2);
  bool saw_sum_on_cpu1 = false;
  for (const auto& ds : md.step_stats().dev_stats()) {
    for (const auto& ns : ds.node_stats()) {
      if (ns.node_name() == "sum") {
        saw_sum_on_cpu1 = ds.device() == "/job:localhost/replica:0/task:0/device:CPU:1";
        ASSERT_EQ(ns.output_size(), 1);
        EXPECT_EQ(ns.output(0).tensor_description().allocation_description().requested_bytes(), 8);
      }
    }
  }
  EXPECT_TRUE(saw_sum_on_cpu1);
}

TEST(DirectSessionTest, MissingDeviceFailsWithoutSoftPlacement) {
  const std::string g = R"(
node { name: "a" op: "Const" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 7 } } } })";
  auto hard = MakeSession(g);
  auto r = hard->Run({}, {"a"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'a'"));
  EXPECT_THAT(r.status().message(), HasSubstr("GPU:0"));
  auto soft = MakeSession(g, 1, /*soft=*/true);
  auto ok = soft->Run({}, {"a"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FLOAT_EQ((*ok)[0].scalar<float>(), 7.0f);
}

TEST(DirectSessionTest, InfiniteLoopStopsAtDeadline) {
  // LoopCond is always true: only the deadline ends the step.
  const std::string g = R"(
node { name: "t" op: "Const" attr { key: "dtype" value { type: DT_BOOL } }
       attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape {} bool_val: true } } } }
node { name: "x" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
node { name: "w/Enter" op: "Enter" input: "x" attr { key: "T" value { type: DT_INT32 } }
       attr { key: "frame_name" value { s: "w" } } }
node { name: "w/Enter_t" op: "Enter" input: "t" attr { key: "T" value { type: DT_BOOL } }
       attr { key: "frame_name" value { s: "w" } } attr { key: "is_constant" value { b: true } } }
node { name: "w/Merge" op: "Merge" input: "w/Enter" input: "w/Next"
       attr { key: "N" value { i: 2 } } attr { key: "T" value { type: DT_INT32 } } }
node { name: "w/LoopCond" op: "LoopCond" input: "w/Enter_t" input: "^w/Merge" }
node { name: "w/Switch" op: "Switch" input: "w/Merge" input: "w/LoopCond" attr { key: "T" value { type: DT_INT32 } } }
node { name: "w/Next" op: "NextIteration" input: "w/Switch:1" attr { key: "T" value { type: DT_INT32 } } }
node { name: "w/Exit" op: "Exit" input: "w/Switch" attr { key: "T" value { type: DT_INT32 } } }
)";
  auto s = MakeSession(g);
  tensorflow::RunOptions opts;
  opts.set_timeout_in_ms(300);
  auto r = s->Run(opts, {}, {"w/Exit"}, {}, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(DirectSessionTest, ConstantEncodings) {
  // tensor_content (little-endian float32 1.5, -0.0), splat, empty (zeros).
  std::string content;
  float vals[2] = {1.5f, -0.0f};
  content.assign(reinterpret_cast<const char*>(vals), 8);
  std::string escaped;
  for (unsigned char c : content) {
    char buf[8];
    snprintf(buf, sizeof(buf), "\\%03o", c);
    escaped += buf;
  }
  auto s = MakeSession(absl::StrCat(R"(
node { name: "content" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: ")",
                                    escaped, R"(" } } } }
node { name: "splat" op: "Const" attr { key: "dtype" value { type: DT_INT64 } }
       attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { dim { size: 3 } } int64_val: 9007199254740993 } } } }
node { name: "zeros" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } } } } }
)"));
  auto r = s->Run({}, {"content", "splat", "zeros"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ((*r)[0].base<float>()[0], 1.5f);
  EXPECT_TRUE(std::signbit((*r)[0].base<float>()[1]));
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*r)[1].base<int64_t>()[i], 9007199254740993LL);
  EXPECT_EQ((*r)[2].base<int32_t>()[0], 0);
  EXPECT_EQ((*r)[2].base<int32_t>()[1], 0);
}

TEST(DirectSessionTest, BadGraphsFailAtCreateNamingTheNode) {
  SessionOptions opts;
  struct Case {
    std::string text;
    std::string needle;
  } cases[] = {
      {"node { name: 'x' op: 'NoSuchOp' }", "node 'x'"},
      {OpNode("y", "AddV2", "input: 'y' input: 'y'"), "node 'y'"},
      {ConstNode("a", "DT_FLOAT", "float_val", "1") +
           OpNode("b", "AddV2", "input: 'a' input: 'missing'"),
       "node 'b'"},
      {ConstNode("a", "DT_FLOAT", "float_val", "1") + ConstNode("i", "DT_INT32", "int_val", "1") +
           OpNode("c", "AddV2", "input: 'a' input: 'i'"),
       "node 'c'"},
      {ConstNode("a", "DT_FLOAT", "float_val", "1") + ConstNode("a", "DT_FLOAT", "float_val", "2"),
       "node 'a'"},
  };
  for (const auto& c : cases) {
    auto s = NewSession(opts);
    ASSERT_TRUE(s.ok());
    absl::Status st = (*s)->Create(ParseGraph(c.text));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.text << " -> " << st;
    EXPECT_THAT(st.message(), HasSubstr(c.needle)) << c.text;
  }
}

std::string EnterNode(const std::string& name, const std::string& input, const std::string& frame) {
  return OpNode(name, "Enter", absl::StrCat("input: '", input, "'"), "DT_FLOAT",
                absl::StrCat("attr { key: 'frame_name' value { s: '", frame, "' } }"));
}

// Each frame's iterations hold the state of that frame's nodes only: 10000
// frames nested in one another (20001 nodes) once needed state for every
// node in every frame (20 GB at this depth); now a few hundred bytes each.
TEST(DirectSessionTest, DeeplyNestedFramesRun) {
  constexpr int kDepth = 10000;
  std::string text = ConstNode("x", "DT_FLOAT", "float_val", "2.5");
  std::string prev = "x";
  for (int i = 0; i < kDepth; ++i) {
    std::string name = absl::StrCat("e", i);
    text += EnterNode(name, prev, absl::StrCat("f", i));
    prev = name;
  }
  for (int i = 0; i < kDepth; ++i) {
    std::string name = absl::StrCat("q", i);
    text += OpNode(name, "Exit", absl::StrCat("input: '", prev, "'"));
    prev = name;
  }
  auto s = MakeSession(text);
  auto out = s->Run({}, {prev}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 2.5f);
}

TEST(DirectSessionTest, MalformedFramesAreInvalidArgumentNamingTheNodes) {
  struct Case {
    std::string text;
    std::vector<std::string> fetch;
    std::vector<std::string> needles;
  } cases[] = {
      // An Exit that no Enter leads to.
      {ConstNode("a", "DT_FLOAT", "float_val", "1") + OpNode("out", "Exit", "input: 'a'"),
       {"out"},
       {"node 'out' (op Exit) is not inside a frame"}},
      // A loop with no Enter: a NextIteration back to a Merge in the root
      // frame (it would spin for ever).
      {ConstNode("c", "DT_FLOAT", "float_val", "1") +
           OpNode("m", "Merge", "input: 'c' input: 'n' attr { key: 'N' value { i: 2 } }") +
           OpNode("n", "NextIteration", "input: 'm'"),
       {"m"},
       {"node 'n' (op NextIteration) is not inside a frame"}},
      // A node fed from inside a frame and from outside it.
      {ConstNode("a", "DT_FLOAT", "float_val", "1") + EnterNode("in", "a", "f") +
           OpNode("sum", "AddV2", "input: 'in' input: 'a'") + OpNode("out", "Exit", "input: 'sum'"),
       {"out"},
       {"node 'sum' has inputs from different frames", "frame 'f'", "frame (root)"}},
      // One frame entered from the root and from inside another frame.
      {ConstNode("a", "DT_FLOAT", "float_val", "1") + EnterNode("outer", "a", "g") +
           EnterNode("inner", "outer", "f") + EnterNode("direct", "a", "f") +
           OpNode("x1", "Exit", "input: 'inner'") + OpNode("x2", "Exit", "input: 'x1'") +
           OpNode("x3", "Exit", "input: 'direct'"),
       {"x2", "x3"},
       {"enters frame 'f' from frame", "other Enter nodes enter it from frame"}},
  };
  for (const auto& c : cases) {
    SessionOptions opts;
    auto s = NewSession(opts);
    ASSERT_TRUE(s.ok());
    absl::Status st = (*s)->Create(ParseGraph(c.text));
    if (st.ok()) st = (*s)->Run({}, c.fetch, {}).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.text << " -> " << st;
    for (const auto& n : c.needles) EXPECT_THAT(st.message(), HasSubstr(n)) << c.text;
  }
}

TEST(DirectSessionTest, ConcurrentRunsShareExecutors) {
  auto s = MakeSession(kWhileLoop);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto r = s->Run({}, {"while/Exit_1"});
        if (r.ok() && (*r)[0].scalar<int32_t>() == 45) ++good;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 80);
}

}  // namespace
}  // namespace graphrun
