// ClientSession end to end: incremental Extend, feeds and targets, device
// placement, errors, and a seeded 4-8-3 MLP whose ToGraphDef export runs in
// the `graphrun` binary with the same numbers.
#include "client/client_session.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/ops.h"
#include "client/variables.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tools/cli_testlib.h"
#include "util/json.h"

namespace graphrun {
namespace client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<float> Values(const Tensor& t) {
  auto f = t.flat<float>();
  return std::vector<float>(f.begin(), f.end());
}

TEST(ClientSessionTest, RunsAndExtends) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  auto y = ops::AddV2(root, x, 1.0f);
  ClientSession session(root);
  auto r = session.Run({{x, {1.f, 2.f}}}, {y});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values((*r)[0]), ElementsAre(2.f, 3.f));
  // Nodes added after the first run are sent on the next one.
  auto z = ops::Mul(root, y, 10);
  r = session.Run({{x, 4}}, {z, y});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values((*r)[0]), ElementsAre(50.f));
  EXPECT_THAT(Values((*r)[1]), ElementsAre(5.f));
}

TEST(ClientSessionTest, ReportsTheScopeError) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  ops::MatMul(root.WithOpName("bad"), x, ops::Const(root, 1));
  ClientSession session(root);
  auto r = session.Run({x});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("node 'bad' (op MatMul)"));
}

TEST(ClientSessionTest, UnknownTargetIsAnError) {
  Scope root = Scope::NewRootScope();
  auto c = ops::Const(root, 1.0f);
  SessionOptions options;
  options.target = "bogus://nowhere";
  ClientSession session(root, options);
  EXPECT_FALSE(session.Run({c}).ok());
}

TEST(ClientSessionTest, ExplicitDeviceScopeRunsOnCpu1) {
  Scope root = Scope::NewRootScope();
  auto a = ops::Const(root.WithOpName("a"), {1.f, 2.f});
  auto b = ops::Mul(root.WithDevice("/device:CPU:1").WithOpName("b"), a, 3.0f);
  auto c = ops::AddV2(root.WithOpName("c"), b, 1.0f);
  SessionOptions options;
  (*options.config.mutable_device_count())["CPU"] = 2;
  ClientSession session(root, options);
  tensorflow::RunOptions run_options;
  run_options.set_output_partition_graphs(true);
  tensorflow::RunMetadata metadata;
  auto r = session.Run({}, {c}, {}, run_options, &metadata);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values((*r)[0]), ElementsAre(4.f, 7.f));
  EXPECT_EQ(metadata.partition_graphs_size(), 2);
  bool found = false;
  for (const auto& g : metadata.partition_graphs()) {
    for (const auto& n : g.node()) {
      if (n.name() == "b") {
        found = true;
        EXPECT_THAT(n.device(), HasSubstr("CPU:1"));
      }
    }
  }
  EXPECT_TRUE(found);
}

// ---- The MLP and the graphrun binary. ----

using tools::TempPath;

// Runs graphrun with `args`; returns stdout, failing the test on a nonzero exit.
std::string GraphrunOk(const std::vector<std::string>& args) {
  tools::Result r = tools::Graphrun(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// The "values" of fetch `name` in graphrun's JSON output, as floats.
std::vector<float> JsonValues(const std::string& json, const std::string& name) {
  auto v = ParseJson(json);
  EXPECT_TRUE(v.ok()) << v.status() << "\n" << json;
  if (!v.ok()) return {};
  const JsonValue* f = v->Find("fetches");
  const JsonValue* t = f ? f->Find(name) : nullptr;
  const JsonValue* vals = t ? t->Find("values") : nullptr;
  EXPECT_NE(vals, nullptr) << name << " in " << json;
  std::vector<float> out;
  if (vals == nullptr) return out;
  for (const auto& x : vals->items()) out.push_back(std::strtof(x.number_text().c_str(), nullptr));
  return out;
}

// A tensor as a nested JSON array with round-trip float text.
std::string ToJson(const Tensor& t) {
  auto f = t.flat<float>();
  std::vector<std::string> rows;
  const int64_t cols = t.dims() == 2 ? t.dim_size(1) : t.NumElements();
  for (int64_t r = 0; r < t.NumElements() / cols; ++r) {
    std::vector<std::string> row;
    for (int64_t c = 0; c < cols; ++c) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(f[r * cols + c]));
      row.push_back(buf);
    }
    rows.push_back(absl::StrCat("[", absl::StrJoin(row, ","), "]"));
  }
  return t.dims() == 2 ? absl::StrCat("[", absl::StrJoin(rows, ","), "]") : rows[0];
}

TEST(ClientSessionTest, MlpRunsHereAndInGraphrunWithTheSameNumbers) {
  Scope root = Scope::NewRootScope();
  root.SetGraphSeed(1234);
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, ops::Placeholder::Shape({-1, 4}));
  Scope d1 = root.NewSubScope("dense");
  Variable w1(d1.WithOpName("kernel"), {4, 8}, DT_FLOAT, init::GlorotUniform());
  Variable b1(d1.WithOpName("bias"), {8}, DT_FLOAT, init::Constant(0.1f));
  Output r_w1 = w1.Read(), r_b1 = b1.Read();
  auto h = ops::Relu(d1, ops::BiasAdd(d1, ops::MatMul(d1, x, r_w1), r_b1));
  Scope d2 = root.NewSubScope("dense");
  Variable w2(d2.WithOpName("kernel"), {8, 3}, DT_FLOAT, init::GlorotNormal());
  Variable b2(d2.WithOpName("bias"), {3}, DT_FLOAT, init::Zeros());
  Output r_w2 = w2.Read(), r_b2 = b2.Read();
  auto logits = ops::BiasAdd(d2, ops::MatMul(d2, h, r_w2), r_b2);
  auto probs = ops::Softmax(root, logits);
  auto init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(h.node()->name(), "dense/Relu");
  EXPECT_EQ(logits.node()->name(), "dense_1/BiasAdd");
  EXPECT_EQ(probs.softmax.shape(), PartialShape({-1, 3}));

  ClientSession session(root);
  ASSERT_TRUE(session.Run({}, {}, {init}).ok());
  const Input::Initializer batch = {{1.f, 2.f, 3.f, 4.f}, {-1.f, 0.5f, 2.f, -2.f}};
  auto r = session.Run({{x, batch}}, {h, probs, r_w1, r_b1, r_w2, r_b2});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<Tensor>& got = *r;
  EXPECT_THAT(Values(got[3]), ::testing::Each(0.1f));
  for (float p : Values(got[1])) EXPECT_GT(p, 0.f);
  EXPECT_NE(Values(got[0]), std::vector<float>(16, 0.f));

  // Export and run through the CLI: variables come in as feeds of their
  // reads, so the same step computes the same numbers.
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(*def, &text));
  const std::string path = TempPath("mlp.pbtxt");
  std::ofstream(path) << text;
  std::string out = GraphrunOk(
      {"run", path, "--format=json", "--feed", "x=[[1,2,3,4],[-1,0.5,2,-2]]", "--feed",
       r_w1.node()->name() + "=" + ToJson(got[2]), "--feed",
       r_b1.node()->name() + "=" + ToJson(got[3]), "--feed",
       r_w2.node()->name() + "=" + ToJson(got[4]), "--feed",
       r_b2.node()->name() + "=" + ToJson(got[5]), "--fetch", "dense/Relu", "--fetch", "Softmax"});
  EXPECT_EQ(JsonValues(out, "dense/Relu:0"), Values(got[0]));
  EXPECT_EQ(JsonValues(out, "Softmax:0"), Values(got[1]));

  // The seeded initial values are the same in a fresh process.
  out = GraphrunOk({"run", path, "--format=json", "--fetch", w1.initial_value().name(), "--fetch",
                    w2.initial_value().name()});
  EXPECT_EQ(JsonValues(out, w1.initial_value().name()), Values(got[2]));
  EXPECT_EQ(JsonValues(out, w2.initial_value().name()), Values(got[4]));
}

}  // namespace
}  // namespace client
}  // namespace graphrun
