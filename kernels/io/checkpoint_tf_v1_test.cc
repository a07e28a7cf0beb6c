// TensorFlow's first checkpoint format (V1), read by BundleReader when a
// prefix has no .index. The records are written here by hand in protobuf's
// wire format at the field numbers of TensorFlow's saved_tensor_slice.proto
// (SavedTensorSlices: meta 1, data 2; SavedTensorSliceMeta: tensor 1;
// SavedSliceMeta: name 1, shape 2, type 3, slice 4; SavedSlice: name 1,
// slice 2, data 3), with the values in the TensorProto's typed fields only,
// as TensorFlow's TensorSliceWriter leaves them; keys are the slices'
// OrderedCode, and the table is TensorFlow's layout (EncodeTable, whose
// bytes checkpoint_tf_format_test checks).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/io/checkpoint_internal.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  std::string d = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  ::mkdir(d.c_str(), 0755);
  return d;
}
void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// --- protobuf wire format by hand ------------------------------------------

std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
  return s;
}
std::string VarintField(int field, uint64_t v) { return Varint(field << 3 | 0) + Varint(v); }
std::string BytesField(int field, const std::string& v) {
  return Varint(field << 3 | 2) + Varint(v.size()) + v;
}

// TensorShapeProto: dim 2 { size 1 }.
std::string Shape(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += BytesField(2, VarintField(1, static_cast<uint64_t>(d)));
  return s;
}
// TensorSliceProto: extent 1 { start 1, length 2 }; an empty extent is a
// whole dimension. {start, -1}: whole.
std::string Slice(const std::vector<std::pair<int64_t, int64_t>>& extents) {
  std::string s;
  for (auto [start, length] : extents) {
    s += BytesField(1, length < 0 ? std::string()
                                  : VarintField(1, static_cast<uint64_t>(start)) +
                                        VarintField(2, static_cast<uint64_t>(length)));
  }
  return s;
}

struct V1Tensor {
  std::string name;
  std::vector<int64_t> shape;
  int dtype;  // TensorFlow's DataType number
  std::vector<std::vector<std::pair<int64_t, int64_t>>> slices;
};

// The record under "": SavedTensorSlices { meta { tensor {...} ... } }.
std::string MetaRecord(const std::vector<V1Tensor>& tensors) {
  std::string meta;
  for (const V1Tensor& t : tensors) {
    std::string m = BytesField(1, t.name) + BytesField(2, Shape(t.shape)) +
                    VarintField(3, static_cast<uint64_t>(t.dtype));
    for (const auto& s : t.slices) m += BytesField(4, Slice(s));
    meta += BytesField(1, m);
  }
  return BytesField(1, meta);
}

// A data record: SavedTensorSlices { data { name, slice, data } }.
std::string DataRecord(const std::string& name, const std::vector<std::pair<int64_t, int64_t>>& s,
                       const std::string& tensor_proto) {
  return BytesField(2, BytesField(1, name) + BytesField(2, Slice(s)) + BytesField(3, tensor_proto));
}

// TensorProto value fields: float_val 5 (packed), int_val 7 (packed),
// string_val 8.
std::string Floats(const std::vector<float>& v) {
  std::string raw(v.size() * 4, '\0');
  std::memcpy(raw.data(), v.data(), raw.size());
  return BytesField(5, raw);
}
std::string Ints(const std::vector<int32_t>& v) {
  std::string raw;
  for (int32_t x : v) raw += Varint(static_cast<uint64_t>(static_cast<int64_t>(x)));
  return BytesField(7, raw);
}
std::string Strings(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += BytesField(8, x);
  return s;
}

std::string Key(const std::string& name, const std::vector<std::pair<int64_t, int64_t>>& s) {
  checkpoint::TensorSlice slice;
  for (auto [start, length] : s) slice.AddDim(start, length);
  return checkpoint::EncodeTensorNameSlice(name, slice);
}

constexpr int kFloat = 1, kInt32 = 3, kString = 7;
const std::vector<std::pair<int64_t, int64_t>> kWhole2 = {{0, -1}, {0, -1}};
const std::vector<std::pair<int64_t, int64_t>> kWhole1 = {{0, -1}};

// w: float [2,3]; b: int32 [3]; s: string [2]; p: float [4,2] saved as
// rows 0-1 and rows 2-3 (a partitioned variable).
std::map<std::string, std::string> ModelRecords() {
  std::map<std::string, std::string> r;
  r[""] = MetaRecord({{"w", {2, 3}, kFloat, {kWhole2}},
                      {"b", {3}, kInt32, {kWhole1}},
                      {"s", {2}, kString, {kWhole1}},
                      {"p", {4, 2}, kFloat, {{{0, 2}, {0, -1}}, {{2, 2}, {0, -1}}}}});
  r[Key("w", kWhole2)] = DataRecord("w", kWhole2, Floats({1, 2, 3, 4, 5, 6}));
  r[Key("b", kWhole1)] = DataRecord("b", kWhole1, Ints({7, 8, 9}));
  r[Key("s", kWhole1)] = DataRecord("s", kWhole1, Strings({"ab", ""}));
  r[Key("p", {{0, 2}, {0, -1}})] = DataRecord("p", {{0, 2}, {0, -1}}, Floats({0, 1, 2, 3}));
  r[Key("p", {{2, 2}, {0, -1}})] = DataRecord("p", {{2, 2}, {0, -1}}, Floats({4, 5, 6, 7}));
  return r;
}

std::vector<float> FloatsOf(const Tensor& t) {
  return std::vector<float>(t.base<float>(), t.base<float>() + t.NumElements());
}

TEST(TfV1CheckpointTest, ReadsTensorsAndSlicesOfAV1File) {
  const std::string dir = TempDir("v1_read");
  const std::string prefix = dir + "/model.ckpt";
  // Small blocks: several data blocks, as a real file of many tensors.
  WriteAll(prefix, checkpoint::EncodeTable(ModelRecords(), 64));
  EXPECT_TRUE(checkpoint::BundleReader::Exists(prefix));
  auto r = checkpoint::BundleReader::Open(prefix);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> names;
  for (const auto& e : (*r)->entries()) names.push_back(e.name);
  EXPECT_THAT(names, ElementsAre("b", "p", "p", "s", "w"));

  auto w = (*r)->Lookup("w");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->shape().DebugString(), "[2,3]");
  EXPECT_THAT(FloatsOf(*w), ElementsAre(1, 2, 3, 4, 5, 6));
  auto b = (*r)->Restore("b", DT_INT32, "");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->DebugString(), "Tensor<int32, [3]: 7 8 9>");
  auto s = (*r)->Lookup("s");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->flat<std::string>(), ElementsAre("ab", ""));
  // The partitioned tensor whole, and a slice across its two parts.
  auto p = (*r)->Lookup("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(FloatsOf(*p), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  auto rows = (*r)->Restore("p", DT_FLOAT, "4 2 1,2:-");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(FloatsOf(*rows), ElementsAre(2, 3, 4, 5));
  auto wrong = (*r)->Restore("w", DT_INT32, "");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);

  // A checkpoint state naming it: the newest checkpoint of `dir`.
  checkpoint::CheckpointState state;
  state.model_checkpoint_path = prefix;
  state.all_model_checkpoint_paths = {prefix};
  ASSERT_TRUE(checkpoint::WriteCheckpointState(dir, state).ok());
  auto latest = checkpoint::LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, prefix);
}

// A sharded V1 checkpoint ("model.ckpt-00000-of-00002", ...): every shard's
// tensors; a missing shard is DataLoss naming the prefix.
TEST(TfV1CheckpointTest, ReadsEveryShardAndNamesAMissingOne) {
  const std::string dir = TempDir("v1_sharded");
  const std::string prefix = dir + "/model.ckpt-100";
  std::map<std::string, std::string> first, second;
  first[""] = MetaRecord({{"w", {2, 3}, kFloat, {kWhole2}}});
  first[Key("w", kWhole2)] = DataRecord("w", kWhole2, Floats({1, 2, 3, 4, 5, 6}));
  second[""] = MetaRecord({{"b", {3}, kInt32, {kWhole1}}});
  second[Key("b", kWhole1)] = DataRecord("b", kWhole1, Ints({7, 8, 9}));
  WriteAll(prefix + "-00000-of-00002", checkpoint::EncodeTable(first, 4096));
  WriteAll(prefix + "-00001-of-00002", checkpoint::EncodeTable(second, 4096));
  auto r = checkpoint::BundleReader::Open(prefix);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->num_shards(), 2);
  auto b = (*r)->Lookup("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->DebugString(), "Tensor<int32, [3]: 7 8 9>");
  auto w = (*r)->Lookup("w");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_THAT(FloatsOf(*w), ElementsAre(1, 2, 3, 4, 5, 6));

  ASSERT_EQ(::unlink((prefix + "-00001-of-00002").c_str()), 0);
  auto missing = checkpoint::BundleReader::Open(prefix);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDataLoss) << missing.status();
  EXPECT_THAT(missing.status().message(),
              HasSubstr("V1 checkpoint '" + prefix + "': 1 shard files for 2 shards"));
  // No checkpoint at all: NotFound, as before.
  auto none = checkpoint::BundleReader::Open(dir + "/other.ckpt");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
  EXPECT_FALSE(checkpoint::BundleReader::Exists(dir + "/other.ckpt"));
}

// Files that lie are DataLoss naming the file and what is wrong.
TEST(TfV1CheckpointTest, CorruptV1FilesAreDataLoss) {
  const std::string dir = TempDir("v1_corrupt");
  auto open_with = [&](const std::string& name, const std::map<std::string, std::string>& rec) {
    const std::string prefix = dir + "/" + name;
    WriteAll(prefix, checkpoint::EncodeTable(rec, 4096));
    return checkpoint::BundleReader::Open(prefix).status();
  };
  // Five values for six elements.
  std::map<std::string, std::string> rec = ModelRecords();
  rec[Key("w", kWhole2)] = DataRecord("w", kWhole2, Floats({1, 2, 3, 4, 5}));
  absl::Status st = open_with("short", rec);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr("corrupt V1 checkpoint file " + dir + "/short: tensor 'w'"));
  EXPECT_THAT(st.message(), HasSubstr("holds 5 values of float for 6 elements"));
  // A slice the meta lists without its record.
  rec = ModelRecords();
  rec.erase(Key("p", {{2, 2}, {0, -1}}));
  st = open_with("unsaved", rec);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("tensor 'p': slice 2,2:0,2 has no data"));
  // Data for a tensor the meta does not list.
  rec = ModelRecords();
  rec[Key("q", kWhole1)] = DataRecord("q", kWhole1, Floats({1}));
  st = open_with("unlisted", rec);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr("data for tensor 'q', which the meta does not list"));
  // A file at the prefix that is no table at all.
  WriteAll(dir + "/notes.txt", "not a checkpoint\n");
  st = checkpoint::BundleReader::Open(dir + "/notes.txt").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr("is no checkpoint (no " + dir + "/notes.txt.index"));
}

}  // namespace
}  // namespace graphrun
