// TensorFlow's first checkpoint format (V1), read by BundleReader when a
// prefix has no .index. The records are written here by hand in protobuf's
// wire format at the field numbers of TensorFlow's saved_tensor_slice.proto
// (SavedTensorSlices: meta 1, data 2; SavedTensorSliceMeta: tensor 1;
// SavedSliceMeta: name 1, shape 2, type 3, slice 4; SavedSlice: name 1,
// slice 2, data 3), with the values in the TensorProto's typed fields only,
// as TensorFlow's TensorSliceWriter leaves them; keys are the slices'
// OrderedCode, and the table is TensorFlow's layout (EncodeTable, whose
// bytes checkpoint_tf_format_test checks).
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/io/checkpoint_internal.h"
#include "kernels/io/checkpoint_util.h"
#include "kernels/io/tf_format_testlib.h"

namespace graphrun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using tf_format::TempDir;
using tf_format::WriteAll;

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
  EXPECT_THAT(st.message(), HasSubstr("slice -:- holds 5 values of float for 6 elements"));
  // A slice the meta lists without its record.
  rec = ModelRecords();
  rec.erase(Key("p", {{2, 2}, {0, -1}}));
  st = open_with("unsaved", rec);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("tensor 'p': slice 2,2:- has no data"));
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

// What WriteTfV1Checkpoint (the Save and SaveSlices ops) writes, decoded
// by the format's definition (tf_format_testlib.h), not by the reader: the
// table layout, the meta under the empty key (tensor 1 {name 1, shape 2,
// type 3, slice 4}, versions 2 {producer 1}), and one record per slice
// keyed by its OrderedCode, holding SavedSlice {name 1, slice 2, data 3}
// with the values in the typed field only (float_val 5, string_val 8,
// int64_val 10), no dtype (1) and no shape (2).
TEST(TfV1CheckpointTest, WrittenFilesDecodeAsTensorFlowDefinesThem) {
  using tf_format::All;
  using tf_format::Dims;
  using tf_format::Extents;
  using tf_format::Fields;
  using tf_format::One;
  const std::string file = TempDir("v1_written") + "/sub/model.ckpt";
  std::vector<checkpoint::V1SliceToSave> saved(4);
  saved[0] = {"w", TensorShape({2, 3}), checkpoint::TensorSlice::Full(2),
              Tensor::FromVector<float>({1, 2, 3, 4, 5, 6})};
  saved[0].value = *saved[0].value.Reshaped(TensorShape({2, 3}));
  saved[1] = {"s", TensorShape({2}), checkpoint::TensorSlice::Full(1),
              Tensor::FromVector<std::string>({"xy", ""})};
  // Rows 2..3 of p [4,2] ("4 2 2,2:-"), then rows 0..1 given explicitly.
  auto rows23 = checkpoint::TensorSlice::Parse("2,2:-");
  auto rows01 = checkpoint::TensorSlice::Parse("0,2:0,2");
  ASSERT_TRUE(rows23.ok() && rows01.ok());
  saved[2] = {"p", TensorShape({4, 2}), *rows23, Tensor::FromVector<float>({4, 5, 6, 7})};
  saved[2].value = *saved[2].value.Reshaped(TensorShape({2, 2}));
  saved[3] = {"p", TensorShape({4, 2}), *rows01, Tensor::FromVector<float>({0, 1, 2, 3})};
  saved[3].value = *saved[3].value.Reshaped(TensorShape({2, 2}));
  saved.push_back(
      {"step", TensorShape({}), checkpoint::TensorSlice::Full(0), Tensor::Scalar<int64_t>(-300)});
  absl::Status st = checkpoint::WriteTfV1Checkpoint(file, saved);
  ASSERT_TRUE(st.ok()) << st;

  const auto records = tf_format::TableRecords(tf_format::ReadAll(file));
  ASSERT_EQ(records.size(), 6u);
  // Keys in bytewise order: the meta, then OrderedCode(0, name, rank,
  // start and length per dimension; whole = 0, -1).
  EXPECT_EQ(records[0].first, "");
  EXPECT_EQ(records[1].first, std::string("\x00p\x00\x01\x01\x02\x80\x82\x80\x82", 10));
  EXPECT_EQ(records[2].first, std::string("\x00p\x00\x01\x01\x02\x82\x82\x80\x7f", 10));
  EXPECT_EQ(records[3].first, std::string("\x00s\x00\x01\x01\x01\x80\x7f", 8));
  EXPECT_EQ(records[4].first, std::string("\x00step\x00\x01\x00", 8));
  EXPECT_EQ(records[5].first, std::string("\x00w\x00\x01\x01\x02\x80\x7f\x80\x7f", 10));

  // The meta: tensors in the order first saved, each slice as given.
  auto meta = Fields(One(Fields(records[0].second), 1));
  EXPECT_EQ(One(Fields(One(meta, 2)), 1), "1");  // versions.producer
  auto tensors = All(meta, 1);
  ASSERT_EQ(tensors.size(), 4u);
  auto w = Fields(tensors[0]);
  EXPECT_EQ(One(w, 1), "w");
  EXPECT_THAT(Dims(One(w, 2)), ElementsAre(2, 3));
  EXPECT_EQ(One(w, 3), "1");  // DT_FLOAT
  EXPECT_THAT(Extents(One(w, 4)),
              ElementsAre(std::pair<int64_t, int64_t>(0, -1), std::pair<int64_t, int64_t>(0, -1)));
  EXPECT_EQ(One(Fields(tensors[1]), 3), "7");  // DT_STRING
  auto p = Fields(tensors[2]);
  EXPECT_EQ(One(p, 1), "p");
  auto p_slices = All(p, 4);
  ASSERT_EQ(p_slices.size(), 2u);
  EXPECT_THAT(Extents(p_slices[0]),
              ElementsAre(std::pair<int64_t, int64_t>(2, 2), std::pair<int64_t, int64_t>(0, -1)));
  EXPECT_THAT(Extents(p_slices[1]),
              ElementsAre(std::pair<int64_t, int64_t>(0, 2), std::pair<int64_t, int64_t>(0, 2)));
  auto step = Fields(tensors[3]);
  EXPECT_EQ(One(step, 3), "9");  // DT_INT64
  EXPECT_TRUE(Dims(One(step, 2)).empty());
  EXPECT_TRUE(Extents(One(step, 4)).empty());

  // A data record: SavedTensorSlices.data (2).
  auto data = [&](size_t i) { return Fields(One(Fields(records[i].second), 2)); };
  auto wd = data(5);
  EXPECT_EQ(One(wd, 1), "w");
  EXPECT_EQ(Extents(One(wd, 2)).size(), 2u);
  auto wv = Fields(One(wd, 3));
  EXPECT_EQ(wv.size(), 1u) << "only float_val";
  float values[6];
  const std::string packed = One(wv, 5);
  ASSERT_EQ(packed.size(), 24u);
  std::memcpy(values, packed.data(), 24);
  EXPECT_THAT(values, ElementsAre(1, 2, 3, 4, 5, 6));
  auto sv = Fields(One(data(3), 3));
  EXPECT_THAT(All(sv, 8), ElementsAre("xy", ""));
  EXPECT_EQ(sv.size(), 2u);
  // int64_val (10), packed: -300 as a ten-byte varint.
  auto stepv = Fields(One(data(4), 3));
  EXPECT_EQ(stepv.size(), 1u);
  size_t pos = 0;
  const std::string raw = One(stepv, 10);
  EXPECT_EQ(static_cast<int64_t>(tf_format::Varint(raw, &pos)), -300);
  EXPECT_EQ(pos, raw.size());

  // What TensorFlow's V1 readers read, graphrun's reader reads too.
  auto r = checkpoint::BundleReader::Open(file);
  ASSERT_TRUE(r.ok()) << r.status();
  auto whole = (*r)->Lookup("p");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_THAT(FloatsOf(*whole), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

// The writer refuses what a V1 file cannot hold or would hold wrongly.
TEST(TfV1CheckpointTest, WriterErrorsNameTheTensor) {
  const std::string file = TempDir("v1_writer_errors") + "/model.ckpt";
  auto write = [&](std::vector<checkpoint::V1SliceToSave> s) {
    return checkpoint::WriteTfV1Checkpoint(file, s);
  };
  auto slice = [](const std::string& spec) { return *checkpoint::TensorSlice::Parse(spec); };
  Tensor two = Tensor::FromVector<float>({1, 2});
  absl::Status st = write({{"v", TensorShape({3}), slice("0,3"), two}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("tensor 'v': slice 0,3 of [3] has shape [3], the value [2]"));
  st = write({{"v", TensorShape({3}), slice("2,2"), two}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("tensor 'v'"));
  st = write(
      {{"v", TensorShape({4}), slice("0,2"), two}, {"v", TensorShape({4}), slice("1,2"), two}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("tensor 'v' saved twice"));
  st = write({{"v", TensorShape({2}), checkpoint::TensorSlice::Full(1), two},
              {"v", TensorShape({2}), checkpoint::TensorSlice::Full(1), two}});
  EXPECT_THAT(st.message(), HasSubstr("tensor 'v' saved twice"));
  Tensor res(DT_RESOURCE, TensorShape({}));
  st = write({{"h", TensorShape({}), checkpoint::TensorSlice::Full(0), res}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("tensor 'h': a resource tensor cannot be saved"));
  EXPECT_FALSE(checkpoint::BundleReader::Exists(file)) << "nothing written after an error";
}

}  // namespace
}  // namespace graphrun
