// FreezeGraph: variables become constants holding the given values, the
// graph is pruned to the outputs, and the frozen graph computes with those
// values in a fresh session (no initializer, no checkpoint).
#include "client/freeze_graph.h"

#include "absl/container/flat_hash_set.h"
#include "client/client_session.h"
#include "client/ops.h"
#include "client/variables.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/session.h"

namespace graphrun {
namespace client {
namespace {

using ::testing::HasSubstr;

// y = x * w + b; a loss and a training update hang off y.
struct Model {
  Scope root = Scope::NewRootScope();
  Output x, y;
  std::unique_ptr<Variable> w, b;
  Model() {
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
    w = std::make_unique<Variable>(root.WithOpName("w"), PartialShape({2}), DT_FLOAT,
                                   init::Constant({1.f, 1.f}));
    b = std::make_unique<Variable>(root.WithOpName("b"), PartialShape({}), DT_FLOAT,
                                   init::Constant(0.f));
    y = ops::Add(root.WithOpName("y"), ops::Mul(root, x, w->Read()), b->Read());
    auto loss = ops::Sum(root.WithOpName("loss"), ops::Square(root, y), int32_t{0});
    w->AssignAdd(ops::Fill(root, ops::Shape(root, w->Read()), loss));
    GlobalVariablesInitializer(root);
  }
};

TEST(FreezeGraphTest, VariablesBecomeTheirValuesAndTheRestIsPruned) {
  Model m;
  auto gd = m.root.ToGraphDef();
  ASSERT_TRUE(gd.ok()) << gd.status();
  absl::flat_hash_map<std::string, Tensor> values = {{"w", Tensor::FromVector<float>({3.f, -4.f})},
                                                     {"b", Tensor::Scalar<float>(0.5f)}};
  auto frozen = FreezeGraph(*gd, {"y:0"}, values);
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  absl::flat_hash_set<std::string> ops;
  for (const auto& n : frozen->node()) ops.insert(n.op());
  EXPECT_THAT(ops, ::testing::UnorderedElementsAre("Placeholder", "Const", "Mul", "Add"));
  EXPECT_EQ(frozen->node_size(), 5);  // x, the two reads as Consts, Mul, y

  auto session = NewSession(SessionOptions());
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Create(*frozen).ok());
  auto out = (*session)->Run({{"x", Tensor::FromVector<float>({2.f, 0.25f})}}, {"y:0"});
  ASSERT_TRUE(out.ok()) << out.status();
  auto f = (*out)[0].flat<float>();
  ASSERT_EQ(f.size(), 2);
  EXPECT_EQ(f[0], 6.5f);   // 2 * 3 + 0.5
  EXPECT_EQ(f[1], -0.5f);  // 0.25 * -4 + 0.5
}

// An ordering edge on a variable's handle is dropped with the variable;
// the function library is kept (frozen nodes may call functions).
TEST(FreezeGraphTest, ControlEdgesOnVariablesDropAndTheLibraryStays) {
  Model m;
  ops::Identity(m.root.WithOpName("z").WithControlDependencies({m.w->handle().op()}), m.x);
  auto gd = m.root.ToGraphDef();
  ASSERT_TRUE(gd.ok()) << gd.status();
  gd->mutable_library()->add_function()->mutable_signature()->set_name("helper");
  auto frozen = FreezeGraph(*gd, {"z"}, {});
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  ASSERT_EQ(frozen->node_size(), 2);  // x and z
  for (const auto& n : frozen->node()) {
    if (n.name() == "z") {
      EXPECT_THAT(n.input(), ::testing::ElementsAre("x"));
    }
  }
  ASSERT_EQ(frozen->library().function_size(), 1);
  EXPECT_EQ(frozen->library().function(0).signature().name(), "helper");
}

TEST(FreezeGraphTest, ErrorsNameTheOutputVariableOrNode) {
  Model m;
  auto gd = m.root.ToGraphDef();
  ASSERT_TRUE(gd.ok()) << gd.status();
  absl::flat_hash_map<std::string, Tensor> only_w = {{"w", Tensor::FromVector<float>({3, 4})}};
  auto missing = FreezeGraph(*gd, {"y"}, only_w);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("variable 'b'"));

  auto no_output = FreezeGraph(*gd, {"logits"}, only_w);
  EXPECT_EQ(no_output.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(no_output.status().message()), HasSubstr("'logits'"));

  absl::flat_hash_map<std::string, Tensor> wrong_type = {{"w", Tensor::FromVector<int32_t>({3, 4})},
                                                         {"b", Tensor::Scalar<float>(0)}};
  auto mistyped = FreezeGraph(*gd, {"y"}, wrong_type);
  EXPECT_EQ(mistyped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mistyped.status().message()), HasSubstr("'w' holds float"));

  // The update writes the variable: it cannot be frozen.
  std::string update;
  for (const auto& n : gd->node()) {
    if (n.op() == "AssignAddVariableOp") update = n.name();
  }
  ASSERT_FALSE(update.empty());
  auto writes = FreezeGraph(*gd, {update}, only_w);
  EXPECT_EQ(writes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(writes.status().message()),
      HasSubstr(absl::StrCat("node '", update, "' (op AssignAddVariableOp) uses variable 'w'")));
}

}  // namespace
}  // namespace client
}  // namespace graphrun
