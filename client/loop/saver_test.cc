#include "client/loop/saver.h"

#include <cstdlib>
#include <filesystem>

#include "client/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace graphrun {
namespace client {
namespace {

std::string TempDir() {
  std::string base = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string dir = base + "/saver_test_XXXXXX";
  return mkdtemp(dir.data());
}

SessionOptions TwoCpus() {
  SessionOptions o;
  (*o.config.mutable_device_count())["CPU"] = 2;
  return o;
}

TEST(SaverTest, ShardsPerDeviceAndRestoresInAFreshSession) {
  Scope root = Scope::NewRootScope();
  Variable a(root.WithOpName("a").WithDevice("/device:CPU:0"), PartialShape({2}), DT_FLOAT);
  Variable b(root.WithOpName("b").WithDevice("/device:CPU:1"), PartialShape({}), DT_INT64);
  Operation set_a = a.Assign(Tensor::FromVector<float>({1.5f, -2.0f}));
  Operation set_b = b.Assign(Tensor::Scalar<int64_t>(int64_t{1} << 40));
  auto saver = Saver::Create(root, {a, b}, SaverOptions{2});
  ASSERT_TRUE(saver.ok()) << saver.status();
  EXPECT_EQ(saver->num_shards(), 2);
  std::string dir = TempDir();
  {
    ClientSession s(root, TwoCpus());
    ASSERT_TRUE(s.Run({}, {}, {set_a, set_b}).ok());
    for (int step : {10, 20, 30}) {
      auto p = saver->Save(s, dir, step);
      ASSERT_TRUE(p.ok()) << p.status();
    }
  }
  auto latest = Saver::LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(Saver::StepOfPrefix(*latest), 30);
  // Keep-last-2: the first checkpoint's index is gone.
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.ckpt-10.index"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.ckpt-20.index"));

  ClientSession fresh(root, TwoCpus());
  auto uninit = fresh.Run({a.Read()});
  EXPECT_EQ(uninit.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(saver->Restore(fresh, *latest).ok());
  auto r = fresh.Run({a.Read(), b.Read()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].base<float>()[0], 1.5f);
  EXPECT_EQ((*r)[0].base<float>()[1], -2.0f);
  EXPECT_EQ((*r)[1].scalar<int64_t>(), int64_t{1} << 40);
}

// After one device's variables lost their values, RestoreShardsOf brings
// back that shard only: the other device's newer value stays.
TEST(SaverTest, RestoreShardsOfRestoresOnlyTheirDevices) {
  Scope root = Scope::NewRootScope();
  Variable a(root.WithOpName("a").WithDevice("/device:CPU:0"), PartialShape({}), DT_FLOAT);
  Variable b(root.WithOpName("b").WithDevice("/device:CPU:1"), PartialShape({}), DT_FLOAT);
  Variable c(root.WithOpName("c").WithDevice("/device:CPU:1"), PartialShape({}), DT_FLOAT);
  Output value = ops::Placeholder(root.WithOpName("value"), DT_FLOAT);
  Operation set_a = a.Assign(value), set_b = b.Assign(value), set_c = c.Assign(value);
  auto saver = Saver::Create(root, {a, b, c});
  ASSERT_TRUE(saver.ok()) << saver.status();
  ClientSession s(root, TwoCpus());
  ASSERT_TRUE(s.Run({{value, Tensor::Scalar<float>(1)}}, {}, {set_a, set_b, set_c}).ok());
  auto prefix = saver->Save(s, TempDir(), 1);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  ASSERT_TRUE(s.Run({{value, Tensor::Scalar<float>(2)}}, {}, {set_a, set_b, set_c}).ok());

  auto devices = saver->RestoreShardsOf(s, *prefix, {"b"});
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(*devices, std::vector<std::string>{"/device:CPU:1"});
  auto r = s.Run({a.Read(), b.Read(), c.Read()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<float>(), 2);  // another shard: kept
  EXPECT_EQ((*r)[1].scalar<float>(), 1);  // restored
  EXPECT_EQ((*r)[2].scalar<float>(), 1);  // b's shard: restored with it

  auto none = saver->RestoreShardsOf(s, *prefix, {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  auto unknown = saver->RestoreShardsOf(s, *prefix, {"b", "zz"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), ::testing::HasSubstr("'zz'"));
}

TEST(SaverTest, RestoreOfMissingVariableIsNotFound) {
  std::string dir = TempDir();
  std::string prefix;
  {
    Scope root = Scope::NewRootScope();
    Variable a(root.WithOpName("a"), PartialShape({}), DT_FLOAT);
    Operation set_a = a.Assign(Tensor::Scalar<float>(3));
    auto saver = Saver::Create(root, {a});
    ASSERT_TRUE(saver.ok());
    ClientSession s(root);
    ASSERT_TRUE(s.Run({}, {}, {set_a}).ok());
    auto p = saver->Save(s, dir, 1);
    ASSERT_TRUE(p.ok()) << p.status();
    prefix = *p;
  }
  Scope root = Scope::NewRootScope();
  Variable other(root.WithOpName("other"), PartialShape({}), DT_FLOAT);
  auto saver = Saver::Create(root, {other});
  ASSERT_TRUE(saver.ok());
  ClientSession s(root);
  absl::Status st = saver->Restore(s, prefix);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_THAT(st.message(), ::testing::HasSubstr("other"));
}

TEST(SaverTest, InconsistentSlicesOfOneTensorAreRejected) {
  Scope root = Scope::NewRootScope();
  Variable p0(root.WithOpName("p0"), {2, 3}, DT_FLOAT);
  Variable p1(root.WithOpName("p1"), {2, 3}, DT_FLOAT);
  Variable p2(root.WithOpName("p2"), {2, 3}, DT_FLOAT);
  Variable w(root.WithOpName("w"), {4, 3}, DT_FLOAT);
  p0.SetSaveSliceInfo({"w", TensorShape({4, 3}), {0, 0}, {2, 3}});
  p1.SetSaveSliceInfo({"w", TensorShape({4, 3}), {1, 0}, {2, 3}});  // overlaps p0
  p2.SetSaveSliceInfo({"w", TensorShape({4, 3}), {2, 0}, {2, 3}});
  ASSERT_TRUE(root.ok()) << root.status();
  auto overlap = Saver::Create(root, {p0, p1});
  EXPECT_EQ(overlap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(overlap.status().message(), ::testing::HasSubstr("'p0' and 'p1' both save 'w'"));
  EXPECT_THAT(overlap.status().message(), ::testing::HasSubstr("overlap"));
  auto whole_and_part = Saver::Create(root, {w, p2});
  EXPECT_EQ(whole_and_part.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(whole_and_part.status().message(), ::testing::HasSubstr("'w' and 'p2'"));
  EXPECT_TRUE(Saver::Create(root, {p0, p2}).ok());
}

}  // namespace
}  // namespace client
}  // namespace graphrun
