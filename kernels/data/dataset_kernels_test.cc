#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data/dataset_internal.h"
#include "kernels/data/dataset_io_util.h"
#include "kernels/data/dataset_util.h"
#include "kernels/kernel_test_util.h"

namespace graphrun {
namespace data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Helpers.

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Gzip(const std::string& raw) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, raw.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void PutBigEndian32(std::string* s, uint32_t v) {
  for (int b = 3; b >= 0; --b) s->push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

// IDX bytes of uint8 data with the given dims.
std::string IdxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) PutBigEndian32(&s, d);
  s.append(data.begin(), data.end());
  return s;
}

std::vector<uint8_t> Iota8(int n, int start = 0) {
  std::vector<uint8_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i);
  return v;
}

tensorflow::AttrValue UnknownShapes(int n) {
  tensorflow::AttrValue v;
  for (int i = 0; i < n; ++i) v.mutable_list()->add_shape()->set_unknown_rank(true);
  return v;
}
tensorflow::AttrValue Types(std::vector<DataType> t) { return MakeAttr(absl::MakeConstSpan(t)); }

using Elements = std::vector<std::vector<Tensor>>;

// Every element of the dataset in a scalar variant tensor.
absl::StatusOr<Elements> Drain(const Tensor& dataset, int64_t limit = 1 << 20) {
  GR_ASSIGN_OR_RETURN(DatasetPtr d, DatasetFromTensor(dataset));
  GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> it, d->MakeIterator());
  Elements all;
  IteratorContext ctx;
  for (int64_t i = 0; i < limit; ++i) {
    std::vector<Tensor> e;
    bool end = false;
    GR_RETURN_IF_ERROR(it->GetNext(&ctx, &e, &end));
    if (end) break;
    all.push_back(std::move(e));
  }
  return all;
}

// Component `c` of every element, as int64 scalars.
std::vector<int64_t> Scalars(const Elements& e, int c = 0) {
  std::vector<int64_t> v;
  for (const auto& x : e) {
    const Tensor& t = x[c];
    v.push_back(t.dtype() == DT_INT64   ? t.scalar<int64_t>()
                : t.dtype() == DT_UINT8 ? t.scalar<uint8_t>()
                                        : t.scalar<int32_t>());
  }
  return v;
}

absl::StatusOr<Tensor> RunOp(OpTester& t) {
  GR_ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  return out[0];
}

// A dataset op with the usual signature attrs (types given, shapes unknown).
OpTester DatasetOp(const std::string& op, std::vector<DataType> types,
                   const std::string& name = "ds") {
  OpTester t(op, name);
  t.Attr("output_types", Types(types)).Attr("output_shapes", UnknownShapes(types.size()));
  return t;
}

// TensorSliceDataset over 0..n-1 (int64).
Tensor Range(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  OpTester t("TensorSliceDataset", "range");
  t.Attr("Toutput_types", Types({DT_INT64})).Attr("output_shapes", UnknownShapes(1));
  t.Input(Tensor::FromVector<int64_t>(v));
  auto r = RunOp(t);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Tensor();
}

Tensor Unary(const std::string& op, const Tensor& in, std::vector<Tensor> args,
             std::vector<DataType> types = {DT_INT64}) {
  OpTester t = DatasetOp(op, types);
  t.Input(in);
  for (Tensor& a : args) t.Input(a);
  auto r = RunOp(t);
  EXPECT_TRUE(r.ok()) << op << ": " << r.status();
  return r.ok() ? *r : Tensor();
}

Tensor I64(int64_t v) { return Tensor::Scalar<int64_t>(v); }

#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                            \
  auto GR_CONCAT_(r_, __LINE__) = (expr);                                          \
  ASSERT_TRUE(GR_CONCAT_(r_, __LINE__).ok()) << GR_CONCAT_(r_, __LINE__).status(); \
  lhs = std::move(GR_CONCAT_(r_, __LINE__)).value()

// ---------------------------------------------------------------------------
// IDX.

Tensor IdxDataset(const std::string& path, DataType dt = DT_UINT8) {
  OpTester t("IdxDataset", "idx");
  t.Attr("output_types", Types({dt})).Input(Tensor::Scalar<std::string>(path));
  auto r = RunOp(t);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Tensor();
}

TEST(IdxDatasetTest, RawAndGzippedImagesAndLabels) {
  const std::string raw = IdxBytes({3, 2, 2}, Iota8(12, 10));
  WriteFile(TempPath("img.idx"), raw);
  WriteFile(TempPath("img.idx.gz"), Gzip(raw));
  WriteFile(TempPath("lbl.idx.gz"), Gzip(IdxBytes({3}, {7, 0, 9})));
  for (const char* name : {"img.idx", "img.idx.gz"}) {
    ASSERT_OK_AND_ASSIGN(Elements e, Drain(IdxDataset(TempPath(name))));
    ASSERT_EQ(e.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(TensorDiff(Tensor::FromVector<uint8_t>(Iota8(4, 10 + 4 * i), {2, 2}), e[i][0]), "");
    }
  }
  ASSERT_OK_AND_ASSIGN(Elements labels, Drain(IdxDataset(TempPath("lbl.idx.gz"))));
  EXPECT_EQ(labels[0][0].dims(), 0);
  EXPECT_THAT(Scalars(labels), ElementsAre(7, 0, 9));
}

TEST(IdxDatasetTest, OtherTypesAreBigEndian) {
  std::string s = {0, 0, 0x0C, 1};  // int32 [2]
  PutBigEndian32(&s, 2);
  PutBigEndian32(&s, 0x01020304);
  PutBigEndian32(&s, 0xFFFFFFFE);
  ASSERT_OK_AND_ASSIGN(Tensor t, ParseIdx(s, "x"));
  EXPECT_EQ(TensorDiff(Tensor::FromVector<int32_t>({0x01020304, -2}), t), "");
}

TEST(IdxDatasetTest, MalformedFilesAreInvalidArgumentNamingTheFile) {
  std::string overflow = {0, 0, 0x08, 3};
  for (int i = 0; i < 3; ++i) PutBigEndian32(&overflow, 0xFFFFFFFF);
  overflow += "abcd";
  std::string truncated = IdxBytes({3, 2, 2}, Iota8(11));
  std::string bad_gzip = Gzip(IdxBytes({3, 2, 2}, Iota8(12)));
  bad_gzip.resize(bad_gzip.size() - 10);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad_magic.idx", std::string("\x01\x02\x08\x01\0\0\0\0", 8)},
      {"bad_type.idx", std::string("\0\0\x07\x01\0\0\0\0", 8)},
      {"truncated.idx", truncated},
      {"long.idx", IdxBytes({2}, {1, 2, 3})},
      {"short_header.idx", std::string("\0\0\x08\x03\0\0\0\x01", 8)},
      {"overflow.idx", overflow},
      {"truncated.idx.gz", bad_gzip},
      {"empty.idx", ""},
  };
  for (const auto& [name, bytes] : cases) {
    const std::string path = TempPath(name);
    WriteFile(path, bytes);
    OpTester t("IdxDataset", "idx");
    t.Input(Tensor::Scalar<std::string>(path));
    auto r = t.Run();
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(path));
    EXPECT_THAT(r.status().message(), HasSubstr("node 'idx'"));
  }
  OpTester missing("IdxDataset", "idx");
  missing.Input(Tensor::Scalar<std::string>(TempPath("nope.idx")));
  auto r = missing.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("nope.idx"));
}

TEST(IdxDatasetTest, WrongDeclaredTypeIsInvalidArgument) {
  WriteFile(TempPath("t.idx"), IdxBytes({2}, {1, 2}));
  OpTester t("IdxDataset", "idx");
  t.Attr("output_types", Types({DT_FLOAT})).Input(Tensor::Scalar<std::string>(TempPath("t.idx")));
  auto r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// The real data, when the Debian package is installed.
TEST(IdxDatasetTest, FashionMnistTrainingSet) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  const std::string images = dir + "train-images-idx3-ubyte.gz";
  const std::string labels = dir + "train-labels-idx1-ubyte.gz";
  if (!std::ifstream(images).good()) GTEST_SKIP() << images << " is not installed";
  // The label file's header and first label, read with zlib directly.
  gzFile gz = gzopen(labels.c_str(), "rb");
  ASSERT_NE(gz, nullptr);
  unsigned char head[9];
  ASSERT_EQ(gzread(gz, head, 9), 9);
  gzclose(gz);
  ASSERT_EQ(head[2], 0x08);
  ASSERT_EQ(head[3], 0x01);
  EXPECT_EQ((head[4] << 24) | (head[5] << 16) | (head[6] << 8) | head[7], 60000);

  ASSERT_OK_AND_ASSIGN(Elements img, Drain(IdxDataset(images)));
  ASSERT_EQ(img.size(), 60000u);
  EXPECT_EQ(img[0][0].shape(), TensorShape({28, 28}));
  EXPECT_EQ(img[59999][0].shape(), TensorShape({28, 28}));
  ASSERT_OK_AND_ASSIGN(Elements lbl, Drain(IdxDataset(labels)));
  ASSERT_EQ(lbl.size(), 60000u);
  EXPECT_EQ(lbl[0][0].scalar<uint8_t>(), head[8]);
}

// ---------------------------------------------------------------------------
// Tensors, batch, repeat, take, skip, shard, zip.

TEST(TensorDatasetTest, OneElementAndSlices) {
  OpTester t("TensorDataset");
  t.Attr("Toutput_types", Types({DT_FLOAT, DT_STRING})).Attr("output_shapes", UnknownShapes(2));
  t.Input(Tensor::FromVector<float>({1, 2})).Input(Tensor::Scalar<std::string>("a"));
  ASSERT_OK_AND_ASSIGN(Tensor d, RunOp(t));
  ASSERT_OK_AND_ASSIGN(Elements e, Drain(d));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0][1].scalar<std::string>(), "a");

  OpTester s("TensorSliceDataset");
  s.Attr("Toutput_types", Types({DT_INT32, DT_STRING})).Attr("output_shapes", UnknownShapes(2));
  s.Input(Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2}));
  s.Input(Tensor::FromVector<std::string>({"x", "y", "z"}));
  ASSERT_OK_AND_ASSIGN(Tensor sd, RunOp(s));
  ASSERT_OK_AND_ASSIGN(Elements se, Drain(sd));
  ASSERT_EQ(se.size(), 3u);
  EXPECT_EQ(TensorDiff(Tensor::FromVector<int32_t>({5, 6}), se[2][0]), "");
  EXPECT_EQ(se[2][1].scalar<std::string>(), "z");

  OpTester bad("TensorSliceDataset", "bad");
  bad.Attr("Toutput_types", Types({DT_INT32, DT_INT32})).Attr("output_shapes", UnknownShapes(2));
  bad.Input(Tensor::FromVector<int32_t>({1, 2})).Input(Tensor::FromVector<int32_t>({1}));
  EXPECT_THAT(bad.Run().status().message(), HasSubstr("dimension 0"));
}

TEST(BatchDatasetTest, WithAndWithoutDropRemainder) {
  const Tensor r = Range(10);
  ASSERT_OK_AND_ASSIGN(Elements keep,
                       Drain(Unary("BatchDatasetV2", r, {I64(4), Tensor::Scalar<bool>(false)})));
  ASSERT_EQ(keep.size(), 3u);
  EXPECT_EQ(TensorDiff(Tensor::FromVector<int64_t>({4, 5, 6, 7}), keep[1][0]), "");
  EXPECT_EQ(TensorDiff(Tensor::FromVector<int64_t>({8, 9}), keep[2][0]), "");
  ASSERT_OK_AND_ASSIGN(Elements drop,
                       Drain(Unary("BatchDatasetV2", r, {I64(4), Tensor::Scalar<bool>(true)})));
  ASSERT_EQ(drop.size(), 2u);
  ASSERT_OK_AND_ASSIGN(Elements v1, Drain(Unary("BatchDataset", r, {I64(5)})));
  EXPECT_EQ(v1.size(), 2u);
}

TEST(BatchDatasetTest, DifferentShapesAreInvalidArgument) {
  // The first element has shape [2], the next ones [3].
  class Mixed : public DatasetBase {
   public:
    Mixed() : DatasetBase({DT_INT64}, {PartialShape()}) {}
    std::string name() const override { return "Mixed"; }
    absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
      return std::unique_ptr<IteratorBase>(new It());
    }

   private:
    class It : public IteratorBase {
     public:
      absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
        *end = false;
        *out = {n_++ == 0 ? Tensor::FromVector<int64_t>({1, 2})
                          : Tensor::FromVector<int64_t>({1, 2, 3})};
        return absl::OkStatus();
      }
      int n_ = 0;
    };
  };
  ASSERT_OK_AND_ASSIGN(DatasetPtr batched, MakeBatchDataset(std::make_shared<Mixed>(), 2, false));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<IteratorBase> it, batched->MakeIterator());
  std::vector<Tensor> out;
  bool end;
  absl::Status s = it->GetNext(nullptr, &out, &end);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("different shapes in component 0"));
}

TEST(RepeatTakeSkipTest, Counts) {
  const Tensor r = Range(3);
  ASSERT_OK_AND_ASSIGN(Elements twice, Drain(Unary("RepeatDataset", r, {I64(2)})));
  EXPECT_THAT(Scalars(twice), ElementsAre(0, 1, 2, 0, 1, 2));
  const Tensor forever = Unary("RepeatDataset", r, {I64(-1)});
  ASSERT_OK_AND_ASSIGN(Elements seven, Drain(Unary("TakeDataset", forever, {I64(7)})));
  EXPECT_THAT(Scalars(seven), ElementsAre(0, 1, 2, 0, 1, 2, 0));
  ASSERT_OK_AND_ASSIGN(Elements skipped, Drain(Unary("SkipDataset", forever, {I64(2)}), 4));
  EXPECT_THAT(Scalars(skipped), ElementsAre(2, 0, 1, 2));
  ASSERT_OK_AND_ASSIGN(Elements none, Drain(Unary("SkipDataset", r, {I64(-1)})));
  EXPECT_TRUE(none.empty());
  ASSERT_OK_AND_ASSIGN(Elements zero, Drain(Unary("RepeatDataset", r, {I64(0)})));
  EXPECT_TRUE(zero.empty());
  // An empty input repeated forever ends instead of spinning.
  const Tensor empty = Unary("TakeDataset", r, {I64(0)});
  ASSERT_OK_AND_ASSIGN(Elements e, Drain(Unary("RepeatDataset", empty, {I64(-1)})));
  EXPECT_TRUE(e.empty());
}

TEST(ShardDatasetTest, ShardsAreDisjointAndCover) {
  const Tensor r = Range(10);
  std::multiset<int64_t> all;
  std::vector<std::vector<int64_t>> shards;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(Elements e, Drain(Unary("ShardDataset", r, {I64(3), I64(i)})));
    shards.push_back(Scalars(e));
    all.insert(shards.back().begin(), shards.back().end());
  }
  EXPECT_THAT(shards[0], ElementsAre(0, 3, 6, 9));
  EXPECT_THAT(shards[1], ElementsAre(1, 4, 7));
  EXPECT_THAT(shards[2], ElementsAre(2, 5, 8));
  EXPECT_EQ(all, std::multiset<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  OpTester bad = DatasetOp("ShardDataset", {DT_INT64}, "shard");
  bad.Input(r).Input(I64(3)).Input(I64(3));
  EXPECT_THAT(bad.Run().status().message(), HasSubstr("index must be in [0, 3)"));

  OpTester strict = DatasetOp("ShardDataset", {DT_INT64}, "shard");
  strict.Attr("require_non_empty", true).Input(Range(2)).Input(I64(4)).Input(I64(3));
  ASSERT_OK_AND_ASSIGN(Tensor sd, RunOp(strict));
  auto drained = Drain(sd);
  ASSERT_FALSE(drained.ok());
  EXPECT_EQ(drained.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(drained.status().message(), HasSubstr("shard 3 of 4 is empty"));
}

TEST(ZipDatasetTest, PairsComponentsAndEndsWithTheShortest) {
  OpTester z = DatasetOp("ZipDataset", {DT_INT64, DT_INT64});
  z.Attr("N", 2).Input(Range(3)).Input(Range(5));
  ASSERT_OK_AND_ASSIGN(Tensor zd, RunOp(z));
  ASSERT_OK_AND_ASSIGN(Elements e, Drain(zd));
  ASSERT_EQ(e.size(), 3u);
  EXPECT_THAT(Scalars(e, 1), ElementsAre(0, 1, 2));
}

// ---------------------------------------------------------------------------
// Shuffle.

std::vector<int64_t> ShuffleOrder(const Tensor& input, int64_t buffer, int64_t seed, int64_t seed2,
                                  bool reshuffle = true, int passes = 1) {
  OpTester t = DatasetOp("ShuffleDataset", {DT_INT64});
  t.Attr("reshuffle_each_iteration", reshuffle);
  t.Input(input).Input(I64(buffer)).Input(I64(seed)).Input(I64(seed2));
  auto d = RunOp(t);
  EXPECT_TRUE(d.ok()) << d.status();
  std::vector<int64_t> order;
  for (int p = 0; p < passes; ++p) {
    auto e = Drain(*d);
    EXPECT_TRUE(e.ok()) << e.status();
    for (int64_t v : Scalars(*e)) order.push_back(v);
  }
  return order;
}

TEST(ShuffleDatasetTest, SeededOrderIsFixedOnEveryMachine) {
  const Tensor r = Range(10);
  // SplitMix64-based (docs/datasets.md): this exact order is a property of
  // the algorithm, not of the platform's std:: library; it was checked
  // against an independent Python re-implementation of the documented steps.
  const std::vector<int64_t> expected = ShuffleOrder(r, 4, 42, 7);
  EXPECT_THAT(expected, ElementsAre(2, 1, 3, 6, 5, 7, 9, 4, 8, 0));
  EXPECT_EQ(ShuffleOrder(r, 4, 42, 7), expected);
  EXPECT_NE(ShuffleOrder(r, 4, 43, 7), expected);
  std::vector<int64_t> sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_THAT(sorted, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  // buffer 1 keeps the order.
  EXPECT_THAT(ShuffleOrder(r, 1, 42, 7), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
}

TEST(ShuffleDatasetTest, ReshuffleEachIteration) {
  const Tensor r = Range(20);
  std::vector<int64_t> two = ShuffleOrder(r, 20, 5, 6, true, 2);
  std::vector<int64_t> first(two.begin(), two.begin() + 20), second(two.begin() + 20, two.end());
  EXPECT_NE(first, second);
  std::vector<int64_t> same = ShuffleOrder(r, 20, 5, 6, false, 2);
  EXPECT_EQ(std::vector<int64_t>(same.begin(), same.begin() + 20),
            std::vector<int64_t>(same.begin() + 20, same.end()));
}

// ---------------------------------------------------------------------------
// Map transforms.

absl::StatusOr<Tensor> Map(const Tensor& in, std::vector<std::string> transforms,
                           std::vector<DataType> out_types) {
  OpTester t = DatasetOp("MapTransformDataset", out_types, "map");
  t.Attr("transforms", MakeAttr(absl::MakeConstSpan(transforms))).Input(in);
  return RunOp(t);
}

TEST(MapTransformDatasetTest, CastScaleNormalizeReshapeOneHot) {
  WriteFile(TempPath("m_img.idx"), IdxBytes({2, 2, 2}, {0, 51, 102, 255, 0, 0, 0, 0}));
  WriteFile(TempPath("m_lbl.idx"), IdxBytes({2}, {3, 1}));
  OpTester z = DatasetOp("ZipDataset", {DT_UINT8, DT_UINT8});
  z.Attr("N", 2).Input(IdxDataset(TempPath("m_img.idx"))).Input(IdxDataset(TempPath("m_lbl.idx")));
  ASSERT_OK_AND_ASSIGN(Tensor zd, RunOp(z));
  ASSERT_OK_AND_ASSIGN(Tensor m, Map(zd,
                                     {"0=cast:float", "0=scale:0.00392156862745098",
                                      "0=normalize:0.2,0.5", "0=reshape:-1", "1=one_hot:4"},
                                     {DT_FLOAT, DT_FLOAT}));
  ASSERT_OK_AND_ASSIGN(DatasetPtr md, DatasetFromTensor(m));
  EXPECT_EQ(md->output_shapes()[0], PartialShape({4}));
  EXPECT_EQ(md->output_shapes()[1], PartialShape({4}));
  ASSERT_OK_AND_ASSIGN(Elements e, Drain(m));
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(TensorDiff(Tensor::FromVector<float>({-0.4f, 0.0f, 0.4f, 1.6f}), e[0][0], 1e-6), "");
  EXPECT_EQ(TensorDiff(Tensor::FromVector<float>({0, 0, 0, 1}), e[0][1]), "");
  EXPECT_EQ(TensorDiff(Tensor::FromVector<float>({0, 1, 0, 0}), e[1][1]), "");

  // A transform for every component, and casts between integer types.
  ASSERT_OK_AND_ASSIGN(Tensor all, Map(zd, {"cast:int32"}, {DT_INT32, DT_INT32}));
  ASSERT_OK_AND_ASSIGN(Elements ae, Drain(all));
  EXPECT_EQ(ae[0][1].scalar<int32_t>(), 3);
}

TEST(MapTransformDatasetTest, DecodeRawOfFixedLengthRecords) {
  std::string bytes = "HH";  // header
  for (int i = 0; i < 12; ++i) bytes.push_back(static_cast<char>(i));
  bytes += "F";  // footer
  WriteFile(TempPath("rec.bin"), bytes);
  WriteFile(TempPath("rec.bin.gz"), Gzip(bytes));
  for (const char* comp : {"", "GZIP"}) {
    OpTester f("FixedLengthRecordDatasetV2", "flr");
    f.Input(Tensor::FromVector<std::string>(
        {TempPath(std::string("rec.bin") + (comp[0] ? ".gz" : ""))}));
    f.Input(I64(2)).Input(I64(3)).Input(I64(1)).Input(I64(0));
    f.Input(Tensor::Scalar<std::string>(comp));
    ASSERT_OK_AND_ASSIGN(Tensor fd, RunOp(f));
    ASSERT_OK_AND_ASSIGN(Tensor m, Map(fd, {"decode_raw:uint8", "cast:float"}, {DT_FLOAT}));
    ASSERT_OK_AND_ASSIGN(Elements e, Drain(m));
    ASSERT_EQ(e.size(), 4u) << comp;
    EXPECT_EQ(TensorDiff(Tensor::FromVector<float>({9, 10, 11}), e[3][0]), "");
    // CIFAR-style split of a record: label byte, then the rest.
    ASSERT_OK_AND_ASSIGN(Tensor label,
                         Map(fd, {"decode_raw:uint8", "slice:0,1", "reshape:"}, {DT_UINT8}));
    ASSERT_OK_AND_ASSIGN(Tensor rest, Map(fd, {"decode_raw:uint8", "slice:1"}, {DT_UINT8}));
    ASSERT_OK_AND_ASSIGN(Elements le, Drain(label));
    ASSERT_OK_AND_ASSIGN(Elements re, Drain(rest));
    EXPECT_EQ(le[3][0].dims(), 0);
    EXPECT_EQ(le[3][0].scalar<uint8_t>(), 9);
    EXPECT_EQ(TensorDiff(Tensor::FromVector<uint8_t>({10, 11}), re[3][0]), "");
  }
  // A body that is not a whole number of records.
  OpTester f("FixedLengthRecordDataset", "flr");
  f.Input(Tensor::Scalar<std::string>(TempPath("rec.bin")));
  f.Input(I64(2)).Input(I64(5)).Input(I64(1)).Input(I64(0));
  ASSERT_OK_AND_ASSIGN(Tensor fd, RunOp(f));
  auto e = Drain(fd);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("partial record of 2 bytes"));
}

TEST(MapTransformDatasetTest, BadTransformsAreInvalidArgument) {
  const Tensor r = Range(3);
  auto unknown = Map(r, {"blur:3"}, {DT_INT64});
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown transform 'blur'"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("node 'map'"));
  auto scale_int = Map(r, {"scale:2"}, {DT_INT64});
  EXPECT_EQ(scale_int.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scale_int.status().message(), HasSubstr("cast first"));
  auto bad_component = Map(r, {"1=cast:float"}, {DT_FLOAT});
  EXPECT_THAT(bad_component.status().message(), HasSubstr("component 1 does not exist"));
  auto wrong_types = Map(r, {"cast:float"}, {DT_INT64});
  EXPECT_THAT(wrong_types.status().message(), HasSubstr("dataset signature"));
  auto slice = Map(r, {"slice:0,1"}, {DT_INT64});
  EXPECT_THAT(slice.status().message(), HasSubstr("needs rank >= 1"));
  auto reshape = Map(r, {"reshape:2"}, {DT_INT64});
  EXPECT_THAT(reshape.status().message(), HasSubstr("cannot reshape 1 elements"));
}

// ---------------------------------------------------------------------------
// Cache and prefetch.

TEST(CacheDatasetTest, MemoryCacheServesLaterPasses) {
  ASSERT_OK_AND_ASSIGN(DatasetPtr r, MakeTensorSliceDataset({Tensor::FromVector<int64_t>({4, 5})}));
  ASSERT_OK_AND_ASSIGN(DatasetPtr c, MakeCacheDataset(r, ""));
  ASSERT_OK_AND_ASSIGN(DatasetPtr rep, MakeRepeatDataset(c, 3));
  ASSERT_OK_AND_ASSIGN(Elements e, Drain(DatasetToTensor(rep)));
  EXPECT_THAT(Scalars(e), ElementsAre(4, 5, 4, 5, 4, 5));
}

TEST(CacheDatasetTest, FileCacheRoundTrip) {
  const std::string path = TempPath("cache.bin");
  std::remove(path.c_str());
  auto make = [&](std::vector<int64_t> v) {
    std::vector<std::string> s;
    for (int64_t x : v) s.push_back(std::string(x, 'x'));
    auto d = MakeTensorSliceDataset({Tensor::FromVector<int64_t>(v), Tensor::FromVector(s)});
    EXPECT_TRUE(d.ok());
    auto c = MakeCacheDataset(*d, path);
    EXPECT_TRUE(c.ok());
    return DatasetToTensor(*c);
  };
  // A partial pass leaves no cache file.
  ASSERT_OK_AND_ASSIGN(Elements partial, Drain(make({1, 2, 3}), 2));
  EXPECT_EQ(partial.size(), 2u);
  EXPECT_FALSE(std::ifstream(path).good());
  // A complete pass writes it ...
  ASSERT_OK_AND_ASSIGN(Elements first, Drain(make({1, 2, 3})));
  EXPECT_TRUE(std::ifstream(path).good());
  // ... and later datasets read it instead of their input.
  ASSERT_OK_AND_ASSIGN(Elements cached, Drain(make({7, 8})));
  EXPECT_THAT(Scalars(cached), ElementsAre(1, 2, 3));
  EXPECT_EQ(cached[2][1].scalar<std::string>(), "xxx");

  // A corrupt cache file is DataLoss naming it.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  WriteFile(path, bytes.substr(0, bytes.size() - 12));
  auto bad = Drain(make({1}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr(path));
}

TEST(PrefetchDatasetTest, DeliversEverythingInOrderAndEnds) {
  const Tensor r = Range(100);
  ASSERT_OK_AND_ASSIGN(Elements e, Drain(Unary("PrefetchDataset", r, {I64(3)})));
  ASSERT_EQ(e.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(e[i][0].scalar<int64_t>(), i);
  ASSERT_OK_AND_ASSIGN(Elements a, Drain(Unary("PrefetchDataset", r, {I64(-1)})));
  EXPECT_EQ(a.size(), 100u);
}

TEST(PrefetchDatasetTest, DestroyingAnIteratorMidStreamStopsTheProducer) {
  const Tensor forever = Unary("RepeatDataset", Range(5), {I64(-1)});
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(Elements e, Drain(Unary("PrefetchDataset", forever, {I64(2)}), i));
    EXPECT_EQ(e.size(), static_cast<size_t>(i));
  }
}

// Blocks in GetNext until its caller's cancellation fires.
class BlockingDataset : public DatasetBase {
 public:
  BlockingDataset() : DatasetBase({DT_INT64}, {PartialShape({})}) {}
  std::string name() const override { return "Blocking"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    return std::unique_ptr<IteratorBase>(new It());
  }
  static std::atomic<int> cancelled;

 private:
  class It : public IteratorBase {
   public:
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>*, bool*) override {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      CancellationManager* cm = ctx->cancellation_manager;
      CancellationToken tok = cm->NewToken();
      if (cm->RegisterCallback(tok, [&] {
            std::lock_guard<std::mutex> l(mu);
            done = true;
            cv.notify_all();
          })) {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return done; });
      }
      ++cancelled;
      return absl::CancelledError("blocking input cancelled");
    }
  };
};
std::atomic<int> BlockingDataset::cancelled{0};

TEST(PrefetchDatasetTest, WaitEndsWhenTheStepIsCancelledAndTheProducerStops) {
  ASSERT_OK_AND_ASSIGN(DatasetPtr p, MakePrefetchDataset(std::make_shared<BlockingDataset>(), 2));
  const int before = BlockingDataset::cancelled.load();
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<IteratorBase> it, p->MakeIterator());
    CancellationManager step;
    IteratorContext ctx;
    ctx.cancellation_manager = &step;
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      step.StartCancel();
    });
    std::vector<Tensor> out;
    bool end = false;
    absl::Status s = it->GetNext(&ctx, &out, &end);
    canceller.join();
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
    // A cancelled step manager refuses new waits at once.
    EXPECT_EQ(it->GetNext(&ctx, &out, &end).code(), absl::StatusCode::kCancelled);
  }  // the iterator's destructor cancels and joins the blocked producer
  EXPECT_EQ(BlockingDataset::cancelled.load(), before + 1);
}

// ---------------------------------------------------------------------------
// Iterator ops.

class IteratorOpsTest : public ::testing::Test {
 protected:
  std::shared_ptr<TestCpuDevice> dev_ = std::make_shared<TestCpuDevice>();

  absl::StatusOr<Tensor> Handle(std::vector<DataType> types, const std::string& name = "it") {
    OpTester t("IteratorV2", name);
    t.UseDevice(dev_)
        .Attr("output_types", Types(types))
        .Attr("output_shapes", UnknownShapes(types.size()));
    return RunOp(t);
  }
  absl::Status Init(const Tensor& dataset, const Tensor& handle) {
    OpTester t("MakeIterator", "init");
    t.UseDevice(dev_).Input(dataset).Input(handle);
    return t.Run().status();
  }
  absl::StatusOr<std::vector<Tensor>> GetNext(const Tensor& handle, std::vector<DataType> types) {
    OpTester t("IteratorGetNext", "IteratorGetNext");
    t.UseDevice(dev_)
        .Attr("output_types", Types(types))
        .Attr("output_shapes", UnknownShapes(types.size()));
    t.Input(handle);
    return t.Run();
  }
};

TEST_F(IteratorOpsTest, GetNextUntilOutOfRangeThenReinitialize) {
  ASSERT_OK_AND_ASSIGN(Tensor h, Handle({DT_INT64}));
  EXPECT_EQ(h.scalar<ResourceHandle>().type_name, "Iterator");
  auto uninit = GetNext(h, {DT_INT64});
  EXPECT_EQ(uninit.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(uninit.status().message(), HasSubstr("not been initialized"));

  const Tensor batched = Unary("BatchDatasetV2", Range(5), {I64(2), Tensor::Scalar<bool>(false)});
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE(Init(batched, h).ok());
    std::vector<int64_t> sizes;
    while (true) {
      auto r = GetNext(h, {DT_INT64});
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
        EXPECT_THAT(r.status().message(), HasSubstr("End of sequence"));
        EXPECT_THAT(r.status().message(), HasSubstr("node 'IteratorGetNext'"));
        break;
      }
      sizes.push_back((*r)[0].dim_size(0));
    }
    EXPECT_THAT(sizes, ElementsAre(2, 2, 1));
  }
}

TEST_F(IteratorOpsTest, SignatureMismatchesAreInvalidArgument) {
  ASSERT_OK_AND_ASSIGN(Tensor h, Handle({DT_FLOAT}));
  absl::Status s = Init(Range(3), h);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'init'"));
  EXPECT_THAT(s.message(), HasSubstr("expected elements (float<unknown>)"));
}

TEST(PerReplicaBatchSizeTest, SplitsEvenly) {
  EXPECT_EQ(*PerReplicaBatchSize(512, 8), 64);
  EXPECT_EQ(*PerReplicaBatchSize(256, 2), 128);
  EXPECT_EQ(PerReplicaBatchSize(512, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PerReplicaBatchSize(0, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PerReplicaBatchSize(4, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace data
}  // namespace graphrun
