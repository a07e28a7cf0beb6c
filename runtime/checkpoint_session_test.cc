// Checkpoints through whole graphs, as TensorFlow's sharded Saver builds
// them: variables on two devices (standing in for two PS tasks), one SaveV2
// per device into a temporary shard prefix named by ShardedFilename, one
// MergeV2Checkpoints; then a fresh session with three devices and another
// partitioning restores with RestoreV2 + Assign.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "kernels/io/checkpoint_util.h"
#include "kernels/io/register.h"
#include "runtime/session.h"

namespace graphrun {
namespace {

using test::ParseGraph;

std::string Dev(int i) { return absl::StrCat(" device: '/device:CPU:", i, "' "); }

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "shape { ";
  for (int64_t d : dims) absl::StrAppend(&s, "dim { size: ", d, " } ");
  return s + "}";
}

std::string Variable(const std::string& name, const std::string& dtype,
                     const std::vector<int64_t>& dims, int dev) {
  return absl::StrCat("node { name: '", name, "' op: 'VariableV2'", Dev(dev),
                      "attr { key: 'dtype' value { type: ", dtype, " } } ",
                      "attr { key: 'shape' value { ", ShapeText(dims), " } } }\n");
}

// A Const of `dtype` with `values` (already formatted "float_val: 1 …").
std::string Const(const std::string& name, const std::string& dtype,
                  const std::vector<int64_t>& dims, const std::string& values, int dev) {
  std::string shape = "tensor_shape { ";
  for (int64_t d : dims) absl::StrAppend(&shape, "dim { size: ", d, " } ");
  shape += "}";
  return absl::StrCat("node { name: '", name, "' op: 'Const'", Dev(dev),
                      "attr { key: 'dtype' value { type: ", dtype, " } } ",
                      "attr { key: 'value' value { tensor { dtype: ", dtype, " ", shape, " ",
                      values, " } } } }\n");
}

std::string Strings(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& e : v) absl::StrAppend(&s, "string_val: '", e, "' ");
  return s;
}

std::string Floats(int n, int first) {
  std::string s;
  for (int i = 0; i < n; ++i) absl::StrAppend(&s, "float_val: ", first + i, " ");
  return s;
}

std::string Assign(const std::string& name, const std::string& var, const std::string& value,
                   const std::string& dtype, int dev) {
  return absl::StrCat("node { name: '", name, "' op: 'Assign' input: '", var, "' input: '", value,
                      "'", Dev(dev), "attr { key: 'T' value { type: ", dtype, " } } }\n");
}

std::string DtypeList(const std::vector<std::string>& dtypes) {
  return absl::StrCat(
      "attr { key: 'dtypes' value { list { type: ", absl::StrJoin(dtypes, " type: "), " } } }");
}

std::unique_ptr<Session> NewSessionWith(int cpus, const std::string& graph) {
  SessionOptions opts;
  (*opts.config.mutable_device_count())["CPU"] = cpus;
  auto s = NewSession(opts);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  absl::Status c = (*s)->Create(ParseGraph(graph));
  EXPECT_TRUE(c.ok()) << c;
  return std::move(*s);
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  std::string cmd = absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

// Variables: w [4,2] in row partitions w/part_0 (rows 0..2, CPU:0) and
// w/part_1 (row 3, CPU:1); b [2] on CPU:1; global_step int64 on CPU:0.
std::string SaveGraph(const std::string& dir) {
  std::string g;
  g += Variable("w/part_0", "DT_FLOAT", {3, 2}, 0);
  g += Variable("w/part_1", "DT_FLOAT", {1, 2}, 1);
  g += Variable("b", "DT_FLOAT", {2}, 1);
  g += Variable("global_step", "DT_INT64", {}, 0);
  g += Const("w0_init", "DT_FLOAT", {3, 2}, Floats(6, 0), 0);
  g += Const("w1_init", "DT_FLOAT", {1, 2}, Floats(2, 6), 1);
  g += Const("b_init", "DT_FLOAT", {2}, Floats(2, -5), 1);
  g += Const("step_init", "DT_INT64", {}, "int64_val: 100", 0);
  g += Assign("init/w0", "w/part_0", "w0_init", "DT_FLOAT", 0);
  g += Assign("init/w1", "w/part_1", "w1_init", "DT_FLOAT", 1);
  g += Assign("init/b", "b", "b_init", "DT_FLOAT", 1);
  g += Assign("init/step", "global_step", "step_init", "DT_INT64", 0);

  // The Saver's sharded save: temporary shard prefixes, one SaveV2 per
  // device, a merge into the real prefix.
  g += Const("save/prefix", "DT_STRING", {}, Strings({dir + "/model.ckpt-100"}), 0);
  g += Const("save/tmp", "DT_STRING", {}, Strings({dir + "/model.ckpt-100_temp_6ba7/part"}), 0);
  g += Const("save/num_shards", "DT_INT32", {}, "int_val: 2", 0);
  for (int k = 0; k < 2; ++k) {
    g += Const(absl::StrCat("save/shard_", k), "DT_INT32", {}, absl::StrCat("int_val: ", k), k);
    g += absl::StrCat("node { name: 'save/ShardedFilename_", k,
                      "' op: 'ShardedFilename' input: 'save/tmp' input: 'save/shard_", k,
                      "' input: 'save/num_shards'", Dev(k), "}\n");
  }
  g += Const("save/names_0", "DT_STRING", {2}, Strings({"global_step", "w"}), 0);
  g += Const("save/slices_0", "DT_STRING", {2}, Strings({"", "4 2 0,3:-"}), 0);
  g += absl::StrCat(
      "node { name: 'save/SaveV2_0' op: 'SaveV2' input: 'save/ShardedFilename_0' "
      "input: 'save/names_0' input: 'save/slices_0' input: 'global_step' "
      "input: 'w/part_0'",
      Dev(0), DtypeList({"DT_INT64", "DT_FLOAT"}), " }\n");
  g += Const("save/names_1", "DT_STRING", {2}, Strings({"b", "w"}), 1);
  g += Const("save/slices_1", "DT_STRING", {2}, Strings({"", "4 2 3,1:-"}), 1);
  g += absl::StrCat(
      "node { name: 'save/SaveV2_1' op: 'SaveV2' input: 'save/ShardedFilename_1' "
      "input: 'save/names_1' input: 'save/slices_1' input: 'b' "
      "input: 'w/part_1'",
      Dev(1), DtypeList({"DT_FLOAT", "DT_FLOAT"}), " }\n");
  g += "node { name: 'save/prefixes' op: 'Pack' input: 'save/ShardedFilename_0' "
       "input: 'save/ShardedFilename_1' input: '^save/SaveV2_0' input: '^save/SaveV2_1' "
       "device: '/device:CPU:0' attr { key: 'N' value { i: 2 } } "
       "attr { key: 'T' value { type: DT_STRING } } attr { key: 'axis' value { i: 0 } } }\n";
  g += "node { name: 'save/MergeV2Checkpoints' op: 'MergeV2Checkpoints' "
       "input: 'save/prefixes' input: 'save/prefix' device: '/device:CPU:0' }\n";
  g += "node { name: 'save/Identity' op: 'Identity' input: 'save/prefix' "
       "input: '^save/MergeV2Checkpoints' device: '/device:CPU:0' "
       "attr { key: 'T' value { type: DT_STRING } } }\n";
  return g;
}

// Three devices; w in three row partitions (rows 0..1, 2, 3), plus an
// unpartitioned copy "w_whole"; each device restores its own variables.
std::string RestoreGraph(const std::string& prefix) {
  std::string g;
  g += Variable("w/part_0", "DT_FLOAT", {2, 2}, 0);
  g += Variable("w/part_1", "DT_FLOAT", {1, 2}, 1);
  g += Variable("w/part_2", "DT_FLOAT", {1, 2}, 2);
  g += Variable("w_whole", "DT_FLOAT", {4, 2}, 1);
  g += Variable("b", "DT_FLOAT", {2}, 2);
  g += Variable("global_step", "DT_INT64", {}, 0);
  struct Part {
    int dev;
    std::vector<std::string> names, slices, dtypes, vars;
  };
  std::vector<Part> parts = {
      {0,
       {"w", "global_step"},
       {"4 2 0,2:-", ""},
       {"DT_FLOAT", "DT_INT64"},
       {"w/part_0", "global_step"}},
      {1, {"w", "w"}, {"4 2 2,1:-", ""}, {"DT_FLOAT", "DT_FLOAT"}, {"w/part_1", "w_whole"}},
      {2, {"w", "b"}, {"4 2 3,1:-", ""}, {"DT_FLOAT", "DT_FLOAT"}, {"w/part_2", "b"}},
  };
  g += Const("save/Const", "DT_STRING", {}, Strings({prefix}), 0);
  std::vector<std::string> restore_all;
  for (const Part& p : parts) {
    std::string r = absl::StrCat("save/RestoreV2_", p.dev);
    int n = static_cast<int>(p.names.size());
    g += Const(r + "/tensor_names", "DT_STRING", {n}, Strings(p.names), p.dev);
    g += Const(r + "/shape_and_slices", "DT_STRING", {n}, Strings(p.slices), p.dev);
    g += absl::StrCat("node { name: '", r, "' op: 'RestoreV2' input: 'save/Const' input: '", r,
                      "/tensor_names' input: '", r, "/shape_and_slices'", Dev(p.dev),
                      DtypeList(p.dtypes), " }\n");
    for (int i = 0; i < n; ++i) {
      std::string a = absl::StrCat("save/Assign_", p.dev, "_", i);
      g += Assign(a, p.vars[i], absl::StrCat(r, ":", i), p.dtypes[i], p.dev);
      restore_all.push_back("input: '^" + a + "'");
    }
  }
  g += absl::StrCat("node { name: 'save/restore_all' op: 'NoOp' ", absl::StrJoin(restore_all, " "),
                    " }\n");
  for (const char* v : {"w/part_0", "w/part_1", "w/part_2", "w_whole", "b"}) {
    g += absl::StrCat("node { name: 'read/", v, "' op: 'Identity' input: '", v,
                      "' attr { key: 'T' value { type: DT_FLOAT } } }\n");
  }
  g += "node { name: 'read/global_step' op: 'Identity' input: 'global_step' "
       "attr { key: 'T' value { type: DT_INT64 } } }\n";
  return g;
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.base<float>(), t.base<float>() + t.NumElements());
}

TEST(CheckpointSessionTest, ShardedSaveMergeThenRestoreOntoOtherPartitioning) {
  std::string dir = TempDir("session_ckpt");
  {
    auto session = NewSessionWith(2, SaveGraph(dir));
    ASSERT_NE(session, nullptr);
    auto init = session->Run({}, {}, {"init/w0", "init/w1", "init/b", "init/step"});
    ASSERT_TRUE(init.ok()) << init.status();
    auto saved = session->Run({}, {"save/Identity"}, {});
    ASSERT_TRUE(saved.ok()) << saved.status();
    std::string prefix = (*saved)[0].scalar<std::string>();
    EXPECT_EQ(prefix, dir + "/model.ckpt-100");
    ASSERT_TRUE(checkpoint::UpdateCheckpointState(dir, prefix, 3).ok());
    ASSERT_TRUE(session->Close().ok());
  }
  auto latest = checkpoint::LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  auto reader = checkpoint::BundleReader::Open(*latest);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->num_shards(), 2);

  auto session = NewSessionWith(3, RestoreGraph(*latest));
  ASSERT_NE(session, nullptr);
  auto restored = session->Run({}, {}, {"save/restore_all"});
  ASSERT_TRUE(restored.ok()) << restored.status();
  auto out = session->Run({}, {"read/w/part_0", "read/w/part_1", "read/w/part_2", "read/w_whole",
                               "read/b", "read/global_step"});
  ASSERT_TRUE(out.ok()) << out.status();
  using ::testing::ElementsAre;
  EXPECT_THAT(Values((*out)[0]), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Values((*out)[1]), ElementsAre(4, 5));
  EXPECT_THAT(Values((*out)[2]), ElementsAre(6, 7));
  EXPECT_EQ((*out)[3].shape(), TensorShape({4, 2}));
  EXPECT_THAT(Values((*out)[3]), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(Values((*out)[4]), ElementsAre(-5, -4));
  EXPECT_EQ((*out)[5].scalar<int64_t>(), 100);
}

TEST(CheckpointSessionTest, RestoreErrorsNameTheTensor) {
  std::string dir = TempDir("session_ckpt_err");
  {
    auto session = NewSessionWith(2, SaveGraph(dir));
    ASSERT_NE(session, nullptr);
    ASSERT_TRUE(session->Run({}, {}, {"init/w0", "init/w1", "init/b", "init/step"}).ok());
    ASSERT_TRUE(session->Run({}, {"save/Identity"}, {}).ok());
  }
  std::string g;
  g += Const("prefix", "DT_STRING", {}, Strings({dir + "/model.ckpt-100"}), 0);
  g += Const("names", "DT_STRING", {1}, Strings({"missing_var"}), 0);
  g += Const("slices", "DT_STRING", {1}, Strings({""}), 0);
  g += absl::StrCat(
      "node { name: 'restore' op: 'RestoreV2' input: 'prefix' input: 'names' "
      "input: 'slices'",
      Dev(0), DtypeList({"DT_FLOAT"}), " }\n");
  auto session = NewSessionWith(1, g);
  ASSERT_NE(session, nullptr);
  auto r = session->Run({}, {"restore:0"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("missing_var"));
}

// A V1 Saver's restore: one Restore op per variable, all of one file. The
// ops of a step share one reader (the file is decoded once per step), and
// the reader goes when the step ends.
TEST(CheckpointSessionTest, V1RestoresOfAStepShareOneReader) {
  const std::string file = TempDir("session_v1") + "/model.ckpt";
  std::vector<checkpoint::V1SliceToSave> saved(2);
  saved[0] = {"w", TensorShape({2}), checkpoint::TensorSlice::Full(1),
              Tensor::FromVector<float>({1, 2})};
  saved[1] = {"v", TensorShape({3}), checkpoint::TensorSlice::Full(1),
              Tensor::FromVector<float>({3, 4, 5})};
  ASSERT_TRUE(checkpoint::WriteTfV1Checkpoint(file, saved).ok());
  std::string g;
  g += Const("file", "DT_STRING", {}, Strings({file}), 0);
  for (const std::string name : {"w", "v"}) {
    g += Const("name_" + name, "DT_STRING", {}, Strings({name}), 0);
    g += absl::StrCat("node { name: 'restore_", name, "' op: 'Restore' input: 'file' input: 'name_",
                      name, "'", Dev(0), "attr { key: 'dt' value { type: DT_FLOAT } } }\n");
  }
  auto session = NewSessionWith(1, g);
  ASSERT_NE(session, nullptr);
  for (int step = 0; step < 2; ++step) {
    const int64_t opens = V1CheckpointOpensForTesting();
    auto out = session->Run({}, {"restore_w", "restore_v"}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(Values((*out)[0]), ::testing::ElementsAre(1, 2));
    EXPECT_THAT(Values((*out)[1]), ::testing::ElementsAre(3, 4, 5));
    EXPECT_EQ(V1CheckpointOpensForTesting() - opens, 1) << "step " << step;
    EXPECT_EQ(V1CheckpointStepsForTesting(), 0u) << "step " << step;
  }
}

}  // namespace
}  // namespace graphrun
