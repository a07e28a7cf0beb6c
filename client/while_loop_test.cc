// WhileLoop (client/while_loop.h) run in a ClientSession, and the stack
// kernels loop gradients use.
#include "client/while_loop.h"

#include "client/client_session.h"
#include "client/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace {

using ::testing::HasSubstr;

// i = 0, acc = 1; while i < n: i += 1, acc = acc * w + i. `w` and `n` come
// from outside the loop; the Const 1 in the body runs in every iteration.
TEST(WhileLoopTest, RunsWithCapturedTensorsAndConstants) {
  Scope s = Scope::NewRootScope();
  auto n = ops::Placeholder(s, DT_INT32);
  auto w = ops::Placeholder(s, DT_FLOAT);
  auto r = WhileLoop(
      s, {ops::Const(s, 0), ops::Const(s, 1.0f)},
      [&](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return Output(ops::Less(c, v[0], n));
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        Output i = ops::Add(b, v[0], 1);
        return std::vector<Output>{i, ops::Add(b, ops::Mul(b, v[1], w), ops::Cast(b, i, DT_FLOAT))};
      });
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  ClientSession session(s);
  for (int k : {0, 1, 5, 100}) {
    float acc = 1;
    for (int i = 1; i <= k; ++i) acc = acc * 0.5f + static_cast<float>(i);
    auto out = session.Run({{n, Tensor::Scalar<int32_t>(k)}, {w, Tensor::Scalar<float>(0.5f)}},
                           {(*r)[0], (*r)[1]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), k);
    EXPECT_FLOAT_EQ((*out)[1].scalar<float>(), acc) << "n=" << k;
  }
}

// An op of the body fed only by captured tensors (here an update of a
// variable from outside) runs once per iteration: n times, none for n = 0.
// The scope's control dependencies gate the loop.
TEST(WhileLoopTest, CapturedOnlyOpsRunOncePerIteration) {
  Scope s = Scope::NewRootScope();
  auto n = ops::Placeholder(s, DT_INT32);
  auto counter = ops::VarHandleOp(s.WithOpName("counter"), DT_FLOAT, PartialShape({}));
  auto reset = ops::AssignVariableOp(s, counter, ops::Const(s, 0.0f));
  auto one = ops::Const(s, 1.0f);  // captured, like the handle
  auto r = WhileLoop(
      s.WithControlDependencies({reset.operation}), {ops::Const(s, 0)},
      [&](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return Output(ops::Less(c, v[0], n));
      },
      [&](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        auto bump = ops::AssignAddVariableOp(b, counter, one);
        return std::vector<Output>{ops::Add(b.WithControlDependencies({bump.operation}), v[0], 1)};
      });
  ASSERT_TRUE(r.ok()) << r.status();
  Output read = ops::ReadVariableOp(s, counter, DT_FLOAT);
  ClientSession session(s);
  for (int k : {3, 0, 5}) {
    auto out = session.Run({{n, Tensor::Scalar<int32_t>(k)}}, {(*r)[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), k);
    auto c = session.Run({read});
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)[0].scalar<float>(), static_cast<float>(k)) << "n=" << k;
  }
}

TEST(WhileLoopTest, BadCondAndBodyAreNamedErrors) {
  auto cond = [](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> {
    return Output(ops::Less(c, v[0], 3));
  };
  {
    Scope s = Scope::NewRootScope();
    auto r = WhileLoop(
        s, {ops::Const(s, 0)}, cond,
        [](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
          return std::vector<Output>{v[0], v[0]};
        },
        WhileLoopOptions{"counted", 10});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("'counted': body returned 2 values for 1"));
    EXPECT_FALSE(s.ok());
  }
  {
    Scope s = Scope::NewRootScope();
    auto r = WhileLoop(
        s, {ops::Const(s, 0)}, cond,
        [](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
          return std::vector<Output>{ops::Cast(b, v[0], DT_FLOAT)};
        });
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(),
                HasSubstr("body returned float for loop variable 0 of type int32"));
  }
  {
    Scope s = Scope::NewRootScope();
    auto r = WhileLoop(
        s, {ops::Const(s, 0)},
        [](const Scope& c, const std::vector<Output>& v) -> absl::StatusOr<Output> { return v[0]; },
        [](const Scope& b, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
          return v;
        });
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("cond returned int32 [], not a bool scalar"));
  }
  {
    Scope s = Scope::NewRootScope();
    auto r = WhileLoop(s, {}, cond, nullptr);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Stacks pop in reverse push order; an empty pop fails naming the node;
// a stack is per run (a second run starts empty).
TEST(StackKernelsTest, PushPopCloseAndEmptyPop) {
  Scope s = Scope::NewRootScope();
  auto stack = internal::OpBuilder(s.WithOpName("st"), "StackV2")
                   .Input(ops::Const(s, -1))
                   .Attr("elem_type", internal::AttrType(DT_FLOAT))
                   .Finalize();
  Output h(stack, 0);
  auto push = [&](float v, const std::vector<Operation>& after) {
    return internal::OpBuilder(s.WithControlDependencies(after), "StackPushV2")
        .Input(h)
        .Input(ops::Const(s, v))
        .Finalize();
  };
  Operation p1 = push(1, {});
  Operation p2 = push(2, {p1});
  Operation p3 = push(3, {p2});
  auto pop = [&](const std::vector<Operation>& after, const char* name) {
    return internal::OpBuilder(s.WithOpName(name).WithControlDependencies(after), "StackPopV2")
        .Input(h)
        .Attr("elem_type", internal::AttrType(DT_FLOAT))
        .Finalize();
  };
  Operation a = pop({p3}, "a");
  Operation b = pop({a}, "b");
  Operation c = pop({b}, "c");
  Operation close =
      internal::OpBuilder(s.WithControlDependencies({c}), "StackCloseV2").Input(h).Finalize();
  // One push, then two pops.
  Operation once = pop({p1}, "once");
  Operation again = pop({once}, "again");
  ASSERT_TRUE(s.ok()) << s.status();
  ClientSession session(s);
  for (int run = 0; run < 2; ++run) {
    auto out = session.Run({}, {Output(a, 0), Output(b, 0), Output(c, 0)}, {close});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<float>(), 3);
    EXPECT_EQ((*out)[1].scalar<float>(), 2);
    EXPECT_EQ((*out)[2].scalar<float>(), 1);
  }
  auto bad = session.Run({}, {Output(again, 0)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("'again'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("is empty"));
}

// A stack lives as long as the run that made it: one whose close never ran
// (a dead backprop loop's, or as here none at all) is gone once the run
// ends, so a later run that reaches it by its handle finds nothing.
TEST(StackKernelsTest, UnclosedStackIsGoneWhenItsRunEnds) {
  Scope s = Scope::NewRootScope();
  auto stack = internal::OpBuilder(s.WithOpName("st"), "StackV2")
                   .Input(ops::Const(s, -1))
                   .Attr("elem_type", internal::AttrType(DT_FLOAT))
                   .Finalize();
  Output h(stack, 0);
  Operation push =
      internal::OpBuilder(s, "StackPushV2").Input(h).Input(ops::Const(s, 7.0f)).Finalize();
  auto fed = ops::Placeholder(s.WithOpName("handle"), DT_RESOURCE);
  Operation pop = internal::OpBuilder(s.WithOpName("late_pop"), "StackPopV2")
                      .Input(fed)
                      .Attr("elem_type", internal::AttrType(DT_FLOAT))
                      .Finalize();
  ASSERT_TRUE(s.ok()) << s.status();
  ClientSession session(s);
  auto first = session.Run({}, {h}, {push});
  ASSERT_TRUE(first.ok()) << first.status();
  auto later = session.Run({{fed, (*first)[0]}}, {Output(pop, 0)});
  EXPECT_EQ(later.status().code(), absl::StatusCode::kNotFound) << later.status();
  EXPECT_THAT(later.status().message(), HasSubstr("'late_pop'"));
  EXPECT_THAT(later.status().message(), HasSubstr("_stacks/st/"));
}

}  // namespace
}  // namespace client
}  // namespace graphrun
