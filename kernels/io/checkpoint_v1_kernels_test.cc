// The first checkpoint format's ops, as a V1 tf.train.Saver runs them:
// Save and SaveSlices write a V1 file, Restore and RestoreSlice (and
// RestoreV2, as TensorFlow's falls back) read it back, a sharded V1 save
// restores through its filespec pattern, and errors name the tensor or
// the pattern. The bytes themselves are checked in checkpoint_tf_v1_test.
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/io/checkpoint_util.h"
#include "kernels/io/tf_format_testlib.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tf_format::TempDir;

Tensor Str(const std::string& s) { return Tensor::Scalar<std::string>(s); }
Tensor Strs(const std::vector<std::string>& v) { return Tensor::FromVector<std::string>(v); }

DataTypeVector DtypesOf(const std::vector<Tensor>& values) {
  DataTypeVector dtypes;
  for (const Tensor& v : values) dtypes.push_back(v.dtype());
  return dtypes;
}

// Save (specs empty) or SaveSlices.
absl::Status SaveV1(const std::string& file, const std::vector<std::string>& names,
                    const std::vector<Tensor>& values, const std::vector<std::string>& specs = {}) {
  OpTester t(specs.empty() ? "Save" : "SaveSlices", "save");
  const DataTypeVector dtypes = DtypesOf(values);
  t.Attr("T", MakeAttr(absl::Span<const DataType>(dtypes.data(), dtypes.size())));
  t.Input(Str(file)).Input(Strs(names));
  if (!specs.empty()) t.Input(Strs(specs));
  for (const Tensor& v : values) t.Input(v);
  return t.Run().status();
}

// Restore (spec empty) or RestoreSlice.
absl::StatusOr<Tensor> RestoreV1(const std::string& pattern, const std::string& name, DataType dt,
                                 const std::string& spec = "") {
  OpTester t(spec.empty() ? "Restore" : "RestoreSlice", "restore");
  t.Attr("dt", dt).Attr("preferred_shard", int64_t{-1});
  t.Input(Str(pattern)).Input(Str(name));
  if (!spec.empty()) t.Input(Str(spec));
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  return out.at(0);
}

// RestoreV2 of whole tensors `names` of `dtypes` from `prefix`.
absl::StatusOr<std::vector<Tensor>> RestoreV2Whole(const std::string& prefix,
                                                   const std::vector<std::string>& names,
                                                   const DataTypeVector& dtypes) {
  OpTester t("RestoreV2", "restore_v2");
  t.Attr("dtypes", MakeAttr(absl::Span<const DataType>(dtypes.data(), dtypes.size())));
  t.Input(Str(prefix)).Input(Strs(names)).Input(Strs(std::vector<std::string>(names.size())));
  return t.Run();
}

Tensor Shaped(const Tensor& t, const TensorShape& shape) {
  auto r = t.Reshaped(shape);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : t;
}

// Every dtype a V1 file holds, through Save and Restore.
TEST(CheckpointV1OpsTest, SaveAndRestoreEveryDtype) {
  const std::string file = TempDir("v1_ops_dtypes") + "/model.ckpt";
  Tensor half(DT_HALF, TensorShape({2}));
  half.base<uint16_t>()[0] = 0x3c00;  // 1.0
  half.base<uint16_t>()[1] = 0xc000;  // -2.0
  Tensor c64(DT_COMPLEX64, TensorShape({1}));
  c64.base<float>()[0] = 1.5f;
  c64.base<float>()[1] = -2.5f;
  const std::vector<std::string> names = {"f", "d", "i32", "i64", "u8", "i8", "b", "s", "h", "c"};
  const std::vector<Tensor> values = {
      Shaped(Tensor::FromVector<float>({1.5f, -2, 3, 4e30f, 0, -0.25f}), TensorShape({2, 3})),
      Tensor::FromVector<double>({1e-300, -7}),
      Tensor::FromVector<int32_t>({-2147483647 - 1, 5}),
      Tensor::FromVector<int64_t>({-(int64_t{1} << 62), 9}),
      Tensor::FromVector<uint8_t>({255, 0}),
      Tensor::FromVector<int8_t>({-128, 127}),
      Tensor::FromVector<bool>({true, false, true}),
      Tensor::FromVector<std::string>({"", std::string("a\0b", 3)}),
      half,
      c64};
  absl::Status st = SaveV1(file, names, values);
  ASSERT_TRUE(st.ok()) << st;
  for (size_t i = 0; i < names.size(); ++i) {
    auto t = RestoreV1(file, names[i], values[i].dtype());
    ASSERT_TRUE(t.ok()) << names[i] << ": " << t.status();
    EXPECT_EQ(TensorDiff(values[i], *t), "") << names[i];
  }
  // RestoreV2 on the same file, as TensorFlow's falls back to V1.
  auto out = RestoreV2Whole(file, {"f", "s"}, {DT_FLOAT, DT_STRING});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TensorDiff(values[0], (*out)[0]), "");
  EXPECT_EQ(TensorDiff(values[7], (*out)[1]), "");
}

// A partitioned variable saved in two slices, restored whole and as a
// slice across both parts.
TEST(CheckpointV1OpsTest, SaveSlicesThenRestoreSlice) {
  const std::string file = TempDir("v1_ops_slices") + "/model.ckpt";
  absl::Status st =
      SaveV1(file, {"p", "p", "b"},
             {Shaped(Tensor::FromVector<float>({0, 1, 2, 10, 11, 12}), TensorShape({2, 3})),
              Shaped(Tensor::FromVector<float>({20, 21, 22, 30, 31, 32}), TensorShape({2, 3})),
              Tensor::FromVector<int32_t>({7, 8})},
             {"4 3 0,2:-", "4 3 2,2:-", ""});
  ASSERT_TRUE(st.ok()) << st;
  auto whole = RestoreV1(file, "p", DT_FLOAT);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->shape().DebugString(), "[4,3]");
  EXPECT_EQ(whole->SummarizeValue(12), "0 1 2 10 11 12 20 21 22 30 31 32");
  auto rows = RestoreV1(file, "p", DT_FLOAT, "4 3 1,2:1,2");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->DebugString(), "Tensor<float, [2,2]: 11 12 21 22>");
  auto b = RestoreV1(file, "b", DT_INT32, "2 -");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->DebugString(), "Tensor<int32, [2]: 7 8>");
}

// A sharded V1 Saver: each shard's Save writes ShardedFilename(base, k, n);
// its save returns ShardedFilespec(base, n), "base-?????" "-of-0000n", which
// Restore and RestoreV2 take as a file pattern.
TEST(CheckpointV1OpsTest, ShardedSaveRestoresThroughItsFilespec) {
  const std::string base = TempDir("v1_ops_sharded") + "/model.ckpt-5";
  ASSERT_TRUE(
      SaveV1(checkpoint::ShardedFilename(base, 0, 2), {"w"}, {Tensor::FromVector<float>({1, 2, 3})})
          .ok());
  ASSERT_TRUE(SaveV1(checkpoint::ShardedFilename(base, 1, 2), {"global_step"},
                     {Tensor::Scalar<int64_t>(500)})
                  .ok());
  const std::string spec = checkpoint::ShardedFilespec(base, 2);
  EXPECT_EQ(spec, base +
                      "-?????"
                      "-of-00002");
  auto w = RestoreV1(spec, "w", DT_FLOAT);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->DebugString(), "Tensor<float, [3]: 1 2 3>");
  auto step = RestoreV1(spec, "global_step", DT_INT64);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->DebugString(), "Tensor<int64, []: 500>");
  auto out = RestoreV2Whole(spec, {"global_step", "w"}, {DT_INT64, DT_FLOAT});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].DebugString(), "Tensor<int64, []: 500>");
  // The prefix itself names the same shards.
  auto by_prefix = RestoreV1(base, "global_step", DT_INT64);
  ASSERT_TRUE(by_prefix.ok()) << by_prefix.status();
}

// Saving again at the same name replaces the file, and the next Restore
// reads the new values. (Readers are shared only within an executor's step,
// CheckpointSessionTest.V1RestoresOfAStepShareOneReader; OpTester runs
// have no step to share them in.)
TEST(CheckpointV1OpsTest, RestoreSeesAFileSavedAgain) {
  const std::string file = TempDir("v1_ops_again") + "/model.ckpt";
  ASSERT_TRUE(SaveV1(file, {"v"}, {Tensor::FromVector<float>({1, 2})}).ok());
  auto first = RestoreV1(file, "v", DT_FLOAT);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->DebugString(), "Tensor<float, [2]: 1 2>");
  ASSERT_TRUE(SaveV1(file, {"v"}, {Tensor::FromVector<float>({3, 4})}).ok());
  auto second = RestoreV1(file, "v", DT_FLOAT);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->DebugString(), "Tensor<float, [2]: 3 4>");
}

TEST(CheckpointV1OpsTest, ErrorsNameTheNodeTensorAndPattern) {
  const std::string dir = TempDir("v1_ops_errors");
  const std::string file = dir + "/model.ckpt";
  ASSERT_TRUE(SaveV1(file, {"v"}, {Tensor::FromVector<float>({1, 2})}).ok());
  // Two names for one tensor.
  absl::Status st = SaveV1(file, {"a", "b"}, {Tensor::FromVector<float>({1})});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("node 'save' (op Save): tensor_names must be a string "
                                      "vector of 1, got string[2]"));
  // A slice spec whose shape is not the value's.
  st = SaveV1(file, {"p"}, {Tensor::FromVector<float>({1, 2})}, {"4 0,3"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("tensor 'p': slice 0,3 of [4] has shape [3], the value [2]"));
  st = SaveV1(file, {"p"}, {Tensor::FromVector<float>({1, 2})}, {"4 x"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("tensor 'p': shape_and_slice '4 x'"));
  // The file saved first is intact.
  auto v = RestoreV1(file, "v", DT_FLOAT);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->DebugString(), "Tensor<float, [2]: 1 2>");
  // A tensor the file lacks, a dtype it was not saved as, no file at all.
  auto missing = RestoreV1(file, "w", DT_FLOAT);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("'w'"));
  auto wrong = RestoreV1(file, "v", DT_INT32);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument) << wrong.status();
  EXPECT_THAT(wrong.status().message(), HasSubstr("node 'restore' (op Restore)"));
  auto none = RestoreV1(dir +
                            "/other-?????"
                            "-of-00002",
                        "v", DT_FLOAT);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
  EXPECT_THAT(none.status().message(), HasSubstr("no checkpoint file matches '" + dir +
                                                 "/other-?????"
                                                 "-of-00002'"));
  // A slice outside the saved shape.
  auto outside = RestoreV1(file, "v", DT_FLOAT, "2 1,2");
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument) << outside.status();
}

}  // namespace
}  // namespace graphrun
