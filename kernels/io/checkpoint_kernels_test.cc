// Tests of the checkpoint ops and of the bundle format behind them: round
// trips of every dtype, sliced and sharded saves restored whole and
// re-sliced, errors, corrupt files, atomicity and the checkpoint state file.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/memory_budget.h"
#include "gtest/gtest.h"
#include "kernels/io/checkpoint_util.h"
#include "kernels/io/tf_format_testlib.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
// Test-side file access and table decoding.
using tf_format::ReadAll;
using tf_format::Varint;
using tf_format::WriteAll;

#define ASSERT_OK(expr)         \
  do {                          \
    absl::Status s_ = (expr);   \
    ASSERT_TRUE(s_.ok()) << s_; \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                                \
  auto GR_CONCAT_(res_, __LINE__) = (expr);                                            \
  ASSERT_TRUE(GR_CONCAT_(res_, __LINE__).ok()) << GR_CONCAT_(res_, __LINE__).status(); \
  lhs = std::move(GR_CONCAT_(res_, __LINE__)).value()

void ExpectStatus(const absl::Status& s, absl::StatusCode code, const std::string& substr) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(substr));
}

// A fresh directory under the test's temporary directory.
std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  std::string cmd = absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) names.push_back(e->d_name);
  ::closedir(d);
  return names;
}

Tensor Strings(std::vector<std::string> v) { return Tensor::FromVector<std::string>(v); }
Tensor Str(const std::string& s) { return Tensor::Scalar<std::string>(s); }

// Equal dtype, shape and elements (bytes for fixed-size types).
std::string Diff(const Tensor& e, const Tensor& a) {
  if (e.dtype() != a.dtype()) return "dtype differs";
  if (e.shape() != a.shape()) {
    return absl::StrCat("shape ", a.shape().DebugString(), " vs ", e.shape().DebugString());
  }
  if (e.dtype() == DT_STRING) {
    for (int64_t i = 0; i < e.NumElements(); ++i) {
      if (e.base<std::string>()[i] != a.base<std::string>()[i]) {
        return absl::StrCat("string element ", i, " differs");
      }
    }
    return "";
  }
  size_t n = e.NumElements() * DataTypeSize(e.dtype());
  return std::memcmp(e.raw_data(), a.raw_data(), n) == 0 ? "" : "bytes differ";
}

// A [rows, cols] float tensor with element (r, c) = 100 r + c.
Tensor Grid(int64_t rows, int64_t cols, int64_t row0 = 0, int64_t col0 = 0) {
  Tensor t(DT_FLOAT, TensorShape({rows, cols}));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      t.base<float>()[r * cols + c] = static_cast<float>(100 * (r + row0) + c + col0);
    }
  }
  return t;
}

absl::Status Save(const std::string& prefix, const std::vector<std::string>& names,
                  const std::vector<std::string>& slices, const std::vector<Tensor>& values) {
  OpTester t("SaveV2", "save");
  DataTypeVector dtypes;
  for (const Tensor& v : values) dtypes.push_back(v.dtype());
  t.Attr("dtypes", MakeAttr(absl::Span<const DataType>(dtypes.data(), dtypes.size())));
  t.Input(Str(prefix)).Input(Strings(names)).Input(Strings(slices));
  for (const Tensor& v : values) t.Input(v);
  return t.Run().status();
}

absl::StatusOr<std::vector<Tensor>> Restore(const std::string& prefix,
                                            const std::vector<std::string>& names,
                                            const std::vector<std::string>& slices,
                                            const std::vector<DataType>& dtypes) {
  OpTester t("RestoreV2", "restore");
  t.Attr("dtypes", MakeAttr(absl::Span<const DataType>(dtypes)));
  t.Input(Str(prefix)).Input(Strings(names)).Input(Strings(slices));
  return t.Run();
}

absl::Status Merge(const std::vector<std::string>& sources, const std::string& dest,
                   bool allow_missing = false) {
  OpTester t("MergeV2Checkpoints", "merge");
  t.Attr("allow_missing_files", allow_missing);
  t.Input(Strings(sources)).Input(Str(dest));
  return t.Run().status();
}

// One tensor of every storable dtype, with awkward values.
std::vector<Tensor> EveryDtype() {
  std::vector<Tensor> v;
  v.push_back(Tensor::FromVector<float>({1.5f, -0.0f, 3e38f, 1e-40f}, {2, 2}));
  v.push_back(Tensor::FromVector<double>({-2.25, 1e300}));
  v.push_back(Tensor::FromVector<int32_t>({INT32_MIN, 0, INT32_MAX}));
  v.push_back(Tensor::FromVector<int64_t>({INT64_MIN, 7, INT64_MAX}));
  v.push_back(Tensor::FromVector<uint8_t>({0, 255, 7}));
  v.push_back(Tensor::FromVector<int8_t>({-128, 127}));
  v.push_back(Tensor::FromVector<int16_t>({-32768, 32767}));
  v.push_back(Tensor::FromVector<uint16_t>({0, 65535}));
  v.push_back(Tensor::FromVector<uint32_t>({0, 4000000000u}));
  v.push_back(Tensor::FromVector<uint64_t>({0, 18000000000000000000ull}));
  v.push_back(Tensor::FromVector<bool>({true, false, true}, {3, 1}));
  v.push_back(Tensor::FromVector<Half>({{FloatToHalf(1.5f)}, {FloatToHalf(-2.0f)}}));
  v.push_back(Tensor::FromVector<BFloat16>({{FloatToBFloat16(3.0f)}}));
  v.push_back(Tensor::FromVector<std::string>(
      {"", "hello", std::string("a\0b", 3), std::string(1000, 'x')}, {2, 2}));
  v.push_back(Tensor::Scalar<float>(42.0f));           // rank 0
  v.push_back(Tensor(DT_INT32, TensorShape({0, 3})));  // empty
  return v;
}

TEST(CheckpointTest, Crc32cKnownValue) {
  EXPECT_EQ(checkpoint::Crc32c(0, "123456789", 9), 0xE3069283u);
  // Incremental equals one shot.
  uint32_t c = checkpoint::Crc32c(0, "1234", 4);
  EXPECT_EQ(checkpoint::Crc32c(c, "56789", 5), 0xE3069283u);
  std::string long_input(1000, 'z');
  EXPECT_EQ(checkpoint::Crc32c(checkpoint::Crc32c(0, long_input.data(), 333),
                               long_input.data() + 333, 667),
            checkpoint::Crc32c(0, long_input.data(), 1000));
}

TEST(CheckpointTest, RoundTripEveryDtype) {
  std::string prefix = TempDir("every_dtype") + "/model.ckpt-1";
  std::vector<Tensor> values = EveryDtype();
  std::vector<std::string> names, slices;
  std::vector<DataType> dtypes;
  for (size_t i = 0; i < values.size(); ++i) {
    names.push_back(absl::StrCat("v", i, "_", DataTypeString(values[i].dtype())));
    slices.push_back("");
    dtypes.push_back(values[i].dtype());
  }
  ASSERT_OK(Save(prefix, names, slices, values));
  EXPECT_TRUE(Exists(prefix + ".index"));
  EXPECT_TRUE(Exists(prefix + ".data-00000-of-00001"));
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, Restore(prefix, names, slices, dtypes));
  ASSERT_EQ(out.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(Diff(values[i], out[i]), "") << names[i];
  }
  // Restoring a subset in another order.
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> two,
                       Restore(prefix, {names[13], names[0]}, {"", ""}, {DT_STRING, DT_FLOAT}));
  EXPECT_EQ(Diff(values[13], two[0]), "");
  EXPECT_EQ(Diff(values[0], two[1]), "");
}

TEST(CheckpointTest, ParseShapeAndSlice) {
  ASSERT_OK_AND_ASSIGN(auto s, checkpoint::ParseShapeAndSlice("4 10 0,2:-"));
  EXPECT_FALSE(s.whole);
  EXPECT_EQ(s.full_shape, TensorShape({4, 10}));
  EXPECT_EQ(s.slice.DebugString(), "0,2:0,10");
  EXPECT_EQ(s.slice.SliceShape(), TensorShape({2, 10}));
  ASSERT_OK_AND_ASSIGN(auto whole, checkpoint::ParseShapeAndSlice(""));
  EXPECT_TRUE(whole.whole);
  for (const char* bad : {"4 10 0,5:-", "4 10 0,2", "x 10 -:-", "4 10 0,2:-:-", "4 -1 -:-",
                          "4 10 a,b:-", "4 10 -3,1:-", "2 2", "4", "4 10 ", "0,2:-"}) {
    EXPECT_EQ(checkpoint::ParseShapeAndSlice(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// A [6, 4] variable partitioned into rows 0..3 and 4..5, each slice saved
// by its own SaveV2 into its own shard, merged, then restored whole, as
// three row partitions, and as a column slice.
TEST(CheckpointTest, SlicesInTwoShardsRestoredWholeAndResliced) {
  std::string dir = TempDir("sliced");
  std::string tmp = dir + "/model.ckpt-7_temp_abc/part";
  std::string p0 = checkpoint::ShardedFilename(tmp, 0, 2);
  std::string p1 = checkpoint::ShardedFilename(tmp, 1, 2);
  ASSERT_OK(Save(p0, {"w", "b"}, {"6 4 0,4:-", ""}, {Grid(4, 4), Strings({"bias"})}));
  ASSERT_OK(
      Save(p1, {"w", "step"}, {"6 4 4,2:-", ""}, {Grid(2, 4, 4), Tensor::Scalar<int64_t>(7)}));
  std::string prefix = dir + "/model.ckpt-7";
  ASSERT_OK(Merge({p0, p1}, prefix));
  EXPECT_TRUE(Exists(prefix + ".index"));
  EXPECT_TRUE(Exists(prefix + ".data-00000-of-00002"));
  EXPECT_TRUE(Exists(prefix + ".data-00001-of-00002"));
  // The temporary directory is gone with its files.
  EXPECT_FALSE(Exists(dir + "/model.ckpt-7_temp_abc"));

  ASSERT_OK_AND_ASSIGN(auto reader, checkpoint::BundleReader::Open(prefix));
  EXPECT_EQ(reader->num_shards(), 2);
  EXPECT_EQ(reader->entries().size(), 4u);

  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> whole, Restore(prefix, {"w"}, {""}, {DT_FLOAT}));
  EXPECT_EQ(Diff(Grid(6, 4), whole[0]), "");

  // Three partitions of two rows: the middle one spans both shards.
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> parts,
                       Restore(prefix, {"w", "w", "w"}, {"6 4 0,2:-", "6 4 2,2:-", "6 4 4,2:-"},
                               {DT_FLOAT, DT_FLOAT, DT_FLOAT}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Diff(Grid(2, 4, 2 * i), parts[i]), "") << i;

  // Columns 1..2 of rows 3..4 (crosses the shard boundary in two dims).
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> box,
                       Restore(prefix, {"w"}, {"6 4 3,2:1,2"}, {DT_FLOAT}));
  EXPECT_EQ(Diff(Grid(2, 2, 3, 1), box[0]), "");

  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> rest,
                       Restore(prefix, {"b", "step"}, {"", ""}, {DT_STRING, DT_INT64}));
  EXPECT_EQ(rest[0].flat<std::string>()[0], "bias");
  EXPECT_EQ(rest[1].scalar<int64_t>(), 7);
}

// Resharding the other way: saved whole, restored as column partitions;
// saved by columns in three shards, restored by rows.
TEST(CheckpointTest, ColumnSlicesAndStrings) {
  std::string dir = TempDir("columns");
  std::vector<std::string> prefixes;
  for (int k = 0; k < 3; ++k) {
    prefixes.push_back(checkpoint::ShardedFilename(dir + "/tmp/part", k, 3));
    Tensor s(DT_STRING, TensorShape({3, 1}));
    for (int r = 0; r < 3; ++r) s.base<std::string>()[r] = absl::StrCat("r", r, "c", k);
    ASSERT_OK(Save(prefixes[k], {"words", "g"},
                   {absl::StrCat("3 3 -:", k, ",1"), absl::StrCat("5 3 -:", k, ",1")},
                   {s, Grid(5, 1, 0, k)}));
  }
  std::string prefix = dir + "/ckpt";
  ASSERT_OK(Merge(prefixes, prefix));
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                       Restore(prefix, {"words", "g", "g"}, {"3 3 1,2:-", "", "5 3 1,3:-"},
                               {DT_STRING, DT_FLOAT, DT_FLOAT}));
  ASSERT_EQ(out[0].shape(), TensorShape({2, 3}));
  EXPECT_EQ(out[0].base<std::string>()[0], "r1c0");
  EXPECT_EQ(out[0].base<std::string>()[5], "r2c2");
  EXPECT_EQ(Diff(Grid(5, 3), out[1]), "");
  EXPECT_EQ(Diff(Grid(3, 3, 1), out[2]), "");
}

TEST(CheckpointTest, Errors) {
  std::string dir = TempDir("errors");
  std::string prefix = dir + "/ckpt";
  ASSERT_OK(Save(prefix, {"w", "part"}, {"", "4 2 0,2:-"}, {Grid(2, 3), Grid(2, 2)}));

  ExpectStatus(Restore(prefix, {"nope"}, {""}, {DT_FLOAT}).status(), absl::StatusCode::kNotFound,
               "tensor 'nope' not found in checkpoint '" + prefix);
  ExpectStatus(Restore(prefix, {"w"}, {""}, {DT_INT32}).status(),
               absl::StatusCode::kInvalidArgument, "tensor 'w'");
  ExpectStatus(Restore(prefix, {"w"}, {"3 3 0,1:-"}, {DT_FLOAT}).status(),
               absl::StatusCode::kInvalidArgument, "tensor 'w'");
  // Only rows 0..1 of "part" were saved.
  ExpectStatus(Restore(prefix, {"part"}, {""}, {DT_FLOAT}).status(), absl::StatusCode::kNotFound,
               "tensor 'part'");
  ASSERT_OK_AND_ASSIGN(auto ok, Restore(prefix, {"part"}, {"4 2 1,1:-"}, {DT_FLOAT}));
  EXPECT_EQ(Diff(Grid(1, 2, 1), ok[0]), "");
  ExpectStatus(Restore(dir + "/missing", {"w"}, {""}, {DT_FLOAT}).status(),
               absl::StatusCode::kNotFound, "missing");

  // Save-side errors name the tensor.
  ExpectStatus(Save(dir + "/bad", {"x"}, {"4 2 0,3:-"}, {Grid(2, 2)}),
               absl::StatusCode::kInvalidArgument, "tensor 'x'");
  ExpectStatus(Save(dir + "/bad", {"x", "x"}, {"4 2 0,3:-", "4 2 2,2:-"}, {Grid(3, 2), Grid(2, 2)}),
               absl::StatusCode::kInvalidArgument, "tensor 'x'");
  ExpectStatus(Save(dir + "/bad", {"x", "y"}, {""}, {Grid(1, 1)}),
               absl::StatusCode::kInvalidArgument, "tensor_names");
  EXPECT_FALSE(Exists(dir + "/bad.index"));

  // Overlapping slices from two shards cannot be merged.
  ASSERT_OK(Save(dir + "/a", {"x"}, {"4 2 0,3:-"}, {Grid(3, 2)}));
  ASSERT_OK(Save(dir + "/b", {"x"}, {"4 2 2,2:-"}, {Grid(2, 2)}));
  ExpectStatus(Merge({dir + "/a", dir + "/b"}, dir + "/ab"), absl::StatusCode::kInvalidArgument,
               "tensor 'x'");
  ExpectStatus(Merge({dir + "/nothing"}, dir + "/ab"), absl::StatusCode::kNotFound, "nothing");
}

// Names the index keeps for itself are refused, not silently lost (a name
// starting with NUL was saved, then not found, or found as another's slice).
TEST(CheckpointTest, ReservedNamesAreRefused) {
  std::string dir = TempDir("reserved");
  for (const std::string& name : {std::string(), std::string("\0", 1), std::string("\0k", 2)}) {
    ExpectStatus(Save(dir + "/r", {"x", name}, {"", ""}, {Grid(1, 1), Grid(1, 2)}),
                 absl::StatusCode::kInvalidArgument, "may not be empty or start with a NUL byte");
  }
  EXPECT_FALSE(Exists(dir + "/r.index"));
}

// A checkpoint file that is a FIFO (no writer) is refused, not waited on
// forever; an entry larger than the per-allocation cap is refused before
// its bytes are read.
TEST(CheckpointTest, FifosAndEntriesOverTheCap) {
  std::string dir = TempDir("fifo");
  ASSERT_OK(Save(dir + "/c", {"w"}, {""}, {Grid(64, 64)}));
  ASSERT_EQ(::rename((dir + "/c.data-00000-of-00001").c_str(), (dir + "/c.bak").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/c.data-00000-of-00001").c_str(), 0600), 0);
  ExpectStatus(Restore(dir + "/c", {"w"}, {""}, {DT_FLOAT}).status(),
               absl::StatusCode::kInvalidArgument, "c.data-00000-of-00001 is not a regular file");
  ASSERT_EQ(::unlink((dir + "/c.data-00000-of-00001").c_str()), 0);
  ASSERT_EQ(::rename((dir + "/c.bak").c_str(), (dir + "/c.data-00000-of-00001").c_str()), 0);

  SetMemoryLimits(int64_t{64} << 20, int64_t{8} << 10);  // 8 KiB per allocation
  ExpectStatus(Restore(dir + "/c", {"w"}, {""}, {DT_FLOAT}).status(),
               absl::StatusCode::kResourceExhausted, "reading tensor 'w' (16384 bytes)");
  SetMemoryLimits(0, 0);
  ASSERT_OK_AND_ASSIGN(auto back, Restore(dir + "/c", {"w"}, {""}, {DT_FLOAT}));
  EXPECT_EQ(Diff(Grid(64, 64), back[0]), "");

  ASSERT_EQ(::rename((dir + "/c.index").c_str(), (dir + "/c.bak").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/c.index").c_str(), 0600), 0);
  ExpectStatus(Restore(dir + "/c", {"w"}, {""}, {DT_FLOAT}).status(),
               absl::StatusCode::kInvalidArgument, "c.index is not a regular file");
}

TEST(CheckpointTest, MergeAllowMissingFiles) {
  std::string dir = TempDir("merge_missing");
  ASSERT_OK(Save(dir + "/s0", {"x"}, {""}, {Grid(1, 2)}));
  ASSERT_OK(Merge({dir + "/s0", dir + "/s1"}, dir + "/out", /*allow_missing=*/true));
  ASSERT_OK_AND_ASSIGN(auto out, Restore(dir + "/out", {"x"}, {""}, {DT_FLOAT}));
  EXPECT_EQ(Diff(Grid(1, 2), out[0]), "");
  EXPECT_FALSE(Exists(dir + "/s0.index"));
}

TEST(CheckpointTest, ShardedNamesAndStringJoin) {
  {
    OpTester t("ShardedFilename");
    t.Input(Str("/d/model")).Input(Tensor::Scalar<int32_t>(1)).Input(Tensor::Scalar<int32_t>(2));
    ASSERT_OK_AND_ASSIGN(auto out, t.Run());
    EXPECT_EQ(out[0].scalar<std::string>(), "/d/model-00001-of-00002");
  }
  {
    OpTester t("ShardedFilename");
    t.Input(Str("m")).Input(Tensor::Scalar<int32_t>(2)).Input(Tensor::Scalar<int32_t>(2));
    EXPECT_EQ(t.Run().status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    OpTester t("ShardedFilespec");
    t.Input(Str("m")).Input(Tensor::Scalar<int32_t>(3));
    ASSERT_OK_AND_ASSIGN(auto out, t.Run());
    EXPECT_EQ(out[0].scalar<std::string>(),
              "m-?????"
              "-of-00003");
  }
  {
    OpTester t("StringJoin");
    t.Attr("N", 3).Attr("separator", "/");
    t.Input(Str("dir")).Input(Strings({"a", "b"})).Input(Str("part"));
    ASSERT_OK_AND_ASSIGN(auto out, t.Run());
    ASSERT_EQ(out[0].NumElements(), 2);
    EXPECT_EQ(out[0].base<std::string>()[0], "dir/a/part");
    EXPECT_EQ(out[0].base<std::string>()[1], "dir/b/part");
  }
  {
    OpTester t("StringJoin");
    t.Attr("N", 2).Input(Strings({"a"})).Input(Strings({"b", "c"}));
    EXPECT_EQ(t.Run().status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Corrupt files: every truncation and many byte flips of the index and of
// the data give DataLoss naming the file, never a crash.
TEST(CheckpointTest, CorruptFilesAreDataLossNeverCrash) {
  std::string dir = TempDir("corrupt");
  std::string prefix = dir + "/ckpt";
  ASSERT_OK(Save(prefix, {"a", "s", "p"}, {"", "", "4 3 2,2:-"},
                 {Grid(3, 3), Strings({"xy", "z"}), Grid(2, 3, 2)}));
  const std::string index_file = prefix + ".index";
  const std::string data_file = prefix + ".data-00000-of-00001";
  const std::string index = ReadAll(index_file);
  const std::string data = ReadAll(data_file);
  auto restore_all = [&]() {
    return Restore(prefix, {"a", "s", "p"}, {"", "", "4 3 2,2:-"}, {DT_FLOAT, DT_STRING, DT_FLOAT})
        .status();
  };
  ASSERT_OK(restore_all());

  for (size_t len = 0; len < index.size(); ++len) {
    WriteAll(index_file, index.substr(0, len));
    absl::Status s = restore_all();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << len << " " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(index_file));
  }
  for (size_t i = 0; i < index.size(); ++i) {
    std::string bad = index;
    bad[i] ^= 0x40;
    WriteAll(index_file, bad);
    absl::Status s = restore_all();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << i << " " << s;
  }
  WriteAll(index_file, index);

  for (size_t len = 0; len < data.size(); len += 7) {
    WriteAll(data_file, data.substr(0, len));
    absl::Status s = restore_all();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << len << " " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(data_file));
  }
  for (size_t i = 0; i < data.size(); ++i) {
    std::string bad = data;
    bad[i] ^= 0x01;
    WriteAll(data_file, bad);
    absl::Status s = restore_all();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << i << " " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(data_file));
  }
  WriteAll(data_file, data);
  ::unlink(data_file.c_str());
  ExpectStatus(restore_all(), absl::StatusCode::kDataLoss, data_file);
  WriteAll(data_file, data);
  ASSERT_OK(restore_all());
}

// An adversary who fixes up the checksum: random mutations of the index's
// first data block, with its block checksum recomputed, must still never
// crash the reader.
TEST(CheckpointTest, MutatedIndexWithValidChecksumNeverCrashes) {
  std::string dir = TempDir("fuzz");
  std::string prefix = dir + "/ckpt";
  ASSERT_OK(Save(prefix, {"a", "s", "p"}, {"", "", "4 3 2,2:-"},
                 {Grid(3, 3), Strings({"xy", "z"}), Grid(2, 3, 2)}));
  const std::string index_file = prefix + ".index";
  const std::string index = ReadAll(index_file);
  // Footer: metaindex handle, index handle; the index block's first record
  // (shared 0, key length, value length, key, handle) names data block 0.
  size_t pos = index.size() - 48;
  Varint(index, &pos);
  Varint(index, &pos);
  pos = Varint(index, &pos);
  ASSERT_EQ(Varint(index, &pos), 0u);
  const uint64_t key_len = Varint(index, &pos);
  Varint(index, &pos);
  pos += key_len;
  ASSERT_EQ(Varint(index, &pos), 0u);
  const uint64_t block_size = Varint(index, &pos);
  ASSERT_GT(block_size, 8u);

  std::mt19937 rng(1234);
  int opened = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = index;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      size_t at = rng() % block_size;
      bad[at] = static_cast<char>(rng() % 4 == 0 ? 0xff : rng());
    }
    uint32_t crc = checkpoint::Crc32c(0, bad.data(), block_size + 1);
    uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
    bad.replace(block_size + 1, 4, reinterpret_cast<const char*>(&masked), 4);
    WriteAll(index_file, bad);
    auto reader = checkpoint::BundleReader::Open(prefix);
    if (!reader.ok()) {
      EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss) << reader.status();
      continue;
    }
    ++opened;
    for (const auto& e : (*reader)->entries()) {
      auto t = (*reader)->Lookup(e.name);  // any status, no crash
      (void)t;
    }
  }
  EXPECT_GT(opened, 0);
}

// A crash mid-save leaves tempstate files and maybe a data file without an
// index; the previous checkpoint and the state file are unaffected.
TEST(CheckpointTest, AtomicityStaleTempFilesIgnored) {
  std::string dir = TempDir("atomic");
  std::string c1 = dir + "/model.ckpt-1";
  ASSERT_OK(Save(c1, {"w"}, {""}, {Grid(2, 2)}));
  ASSERT_OK(checkpoint::UpdateCheckpointState(dir, c1, 5));

  // Leftovers of a crashed save of step 2 and of a crashed rewrite of the
  // state file and of step 1's index.
  WriteAll(dir + "/model.ckpt-2.data-00000-of-00001.tempstate1234", "partial");
  WriteAll(dir + "/model.ckpt-1.index.tempstate99", "garbage");
  WriteAll(dir + "/checkpoint.tempstate77", "model_checkpoint_path: \"model.ckpt-2\"");
  {
    // A writer abandoned before Finish() leaves nothing visible.
    ASSERT_OK_AND_ASSIGN(auto w, checkpoint::BundleWriter::Create(dir + "/model.ckpt-3"));
    ASSERT_OK(w->Add("w", Grid(2, 2)));
  }
  EXPECT_FALSE(Exists(dir + "/model.ckpt-3.index"));
  EXPECT_FALSE(Exists(dir + "/model.ckpt-3.data-00000-of-00001"));

  ASSERT_OK_AND_ASSIGN(std::string latest, checkpoint::LatestCheckpoint(dir));
  EXPECT_EQ(latest, c1);
  ASSERT_OK_AND_ASSIGN(auto out, Restore(latest, {"w"}, {""}, {DT_FLOAT}));
  EXPECT_EQ(Diff(Grid(2, 2), out[0]), "");

  // No tempstate file of ours survives a successful save.
  std::string c4 = dir + "/model.ckpt-4";
  ASSERT_OK(Save(c4, {"w"}, {""}, {Grid(1, 1)}));
  ASSERT_OK(checkpoint::UpdateCheckpointState(dir, c4, 5));
  ASSERT_OK_AND_ASSIGN(latest, checkpoint::LatestCheckpoint(dir));
  EXPECT_EQ(latest, c4);
  int temps = 0;
  for (const std::string& f : ListDir(dir)) temps += f.find("tempstate") != std::string::npos;
  EXPECT_EQ(temps, 3);  // only the three planted above
}

TEST(CheckpointTest, KeepLastNDeletesOlderCheckpoints) {
  std::string dir = TempDir("keep");
  // Deleting "model.ckpt-1" must not touch "model.ckpt-10".
  WriteAll(dir + "/model.ckpt-10.index", "x");
  WriteAll(dir + "/model.ckpt-10.data-00000-of-00001", "x");
  std::vector<std::string> prefixes;
  for (int step = 1; step <= 5; ++step) {
    std::string tmp = dir + "/tmp" + std::to_string(step) + "/part";
    std::string p0 = checkpoint::ShardedFilename(tmp, 0, 2);
    std::string p1 = checkpoint::ShardedFilename(tmp, 1, 2);
    ASSERT_OK(Save(p0, {"a"}, {""}, {Grid(1, step)}));
    ASSERT_OK(Save(p1, {"b"}, {""}, {Grid(step, 1)}));
    std::string prefix = dir + "/model.ckpt-" + std::to_string(step);
    ASSERT_OK(Merge({p0, p1}, prefix));
    ASSERT_OK(checkpoint::UpdateCheckpointState(dir, prefix, 2));
    prefixes.push_back(prefix);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(Exists(prefixes[i] + ".index")) << i;
    EXPECT_FALSE(Exists(prefixes[i] + ".data-00000-of-00002")) << i;
    EXPECT_FALSE(Exists(prefixes[i] + ".data-00001-of-00002")) << i;
  }
  for (int i = 3; i < 5; ++i) {
    EXPECT_TRUE(Exists(prefixes[i] + ".index")) << i;
    EXPECT_TRUE(Exists(prefixes[i] + ".data-00001-of-00002")) << i;
  }
  ASSERT_OK_AND_ASSIGN(auto state, checkpoint::ReadCheckpointState(dir));
  EXPECT_EQ(state.model_checkpoint_path, prefixes[4]);
  EXPECT_THAT(state.all_model_checkpoint_paths, UnorderedElementsAre(prefixes[3], prefixes[4]));
  // Stored relative to the directory, as TensorFlow does.
  EXPECT_THAT(ReadAll(dir + "/checkpoint"), HasSubstr("model_checkpoint_path: \"model.ckpt-5\""));
  ASSERT_OK_AND_ASSIGN(std::string latest, checkpoint::LatestCheckpoint(dir));
  ASSERT_OK_AND_ASSIGN(auto out, Restore(latest, {"a", "b"}, {"", ""}, {DT_FLOAT, DT_FLOAT}));
  EXPECT_EQ(Diff(Grid(1, 5), out[0]), "");
  EXPECT_EQ(Diff(Grid(5, 1), out[1]), "");
  EXPECT_TRUE(Exists(dir + "/model.ckpt-10.index"));
  EXPECT_TRUE(Exists(dir + "/model.ckpt-10.data-00000-of-00001"));
  EXPECT_FALSE(Exists(dir + "/tmp5"));  // merged temporary directories go
}

// The final mark: a comment line in the state file (TensorFlow's parser
// skips it), cleared by the next checkpoint; only the newest can be final.
TEST(CheckpointTest, FinalCheckpointMark) {
  std::string dir = TempDir("final");
  ASSERT_OK(checkpoint::UpdateCheckpointState(dir, dir + "/model.ckpt-1", 0));
  ASSERT_OK(checkpoint::UpdateCheckpointState(dir, dir + "/model.ckpt-2", 0));
  ASSERT_OK_AND_ASSIGN(auto before, checkpoint::ReadCheckpointState(dir));
  EXPECT_FALSE(before.final);
  absl::Status older = checkpoint::MarkFinalCheckpoint(dir, dir + "/model.ckpt-1");
  EXPECT_EQ(older.code(), absl::StatusCode::kFailedPrecondition) << older;
  ASSERT_OK(checkpoint::MarkFinalCheckpoint(dir, dir + "/model.ckpt-2"));
  EXPECT_EQ(ReadAll(dir + "/checkpoint"),
            "model_checkpoint_path: \"model.ckpt-2\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-1\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-2\"\n"
            "# graphrun: final\n");
  ASSERT_OK_AND_ASSIGN(auto marked, checkpoint::ReadCheckpointState(dir));
  EXPECT_TRUE(marked.final);
  EXPECT_EQ(marked.model_checkpoint_path, dir + "/model.ckpt-2");
  EXPECT_EQ(marked.all_model_checkpoint_paths.size(), 2u);
  ASSERT_OK(checkpoint::UpdateCheckpointState(dir, dir + "/model.ckpt-3", 0));
  ASSERT_OK_AND_ASSIGN(auto after, checkpoint::ReadCheckpointState(dir));
  EXPECT_FALSE(after.final);
}

TEST(CheckpointTest, LatestCheckpointErrors) {
  std::string dir = TempDir("latest");
  EXPECT_EQ(checkpoint::LatestCheckpoint(dir).status().code(), absl::StatusCode::kNotFound);
  WriteAll(dir + "/checkpoint", "model_checkpoint_path: \"gone\"\n");
  ExpectStatus(checkpoint::LatestCheckpoint(dir).status(), absl::StatusCode::kNotFound,
               "gone.index");
  WriteAll(dir + "/checkpoint", "model_checkpoint_path: unquoted\n");
  EXPECT_EQ(checkpoint::LatestCheckpoint(dir).status().code(), absl::StatusCode::kDataLoss);
}

// The ops TensorFlow 2's savers add around SaveV2: StaticRegexFullMatch
// on the prefix ("^s3://.*"), RegexFullMatch with a pattern input, and
// DisableCopyOnRead (nothing to do). A bad pattern names the node.
TEST(CheckpointTest, SaverStringOps) {
  OpTester st("StaticRegexFullMatch", "is_s3");
  st.Attr("pattern", std::string("^s3://.*"));
  st.Input(Tensor::FromVector<std::string>({"s3://bucket/ckpt", "/tmp/s3://x", "", "s3://"}));
  auto out = st.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<bool>(), ElementsAre(true, false, false, true));

  OpTester dyn("RegexFullMatch", "digits");
  dyn.Input(Tensor::FromVector<std::string>({"123", "12a", ""}, {3, 1})).Input(Str("[0-9]+"));
  out = dyn.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({3, 1}));
  EXPECT_THAT((*out)[0].flat<bool>(), ElementsAre(true, false, false));  // full, not partial

  OpTester bad("RegexFullMatch", "bad_re");
  bad.Input(Str("x")).Input(Str("(unclosed"));
  out = bad.Run();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("node 'bad_re'"));
  EXPECT_THAT(out.status().message(), HasSubstr("invalid pattern '(unclosed'"));

  OpTester bad_static("StaticRegexFullMatch", "bad_static");
  bad_static.Attr("pattern", std::string("a**(")).Input(Str("a"));
  EXPECT_EQ(bad_static.Run().status().code(), absl::StatusCode::kInvalidArgument);

  Tensor handle = Tensor::Scalar<ResourceHandle>(ResourceHandle());
  OpTester off("DisableCopyOnRead", "no_copy");
  off.Input(handle);
  out = off.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->empty());
}

}  // namespace
}  // namespace graphrun
