// TensorFlow's checkpoint format, checked against the format's definition
// rather than against our own reader: the test decodes the .index table
// and the data file byte by byte (footer, block handles, block trailers
// with masked CRC32C, prefix-compressed records, protobuf wire format at
// TensorFlow's field numbers, OrderedCode slice keys, string layout), and
// builds a snappy-compressed table by hand for the reader.
#include <algorithm>
#include <complex>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/io/checkpoint_internal.h"
#include "kernels/io/checkpoint_util.h"
#include "kernels/io/tf_format_testlib.h"
#include "snappy.h"

namespace graphrun {
namespace {

using ::testing::ElementsAre;

using namespace tf_format;  // NOLINT: the format's helpers

Tensor Floats(std::vector<float> v, TensorShape shape) {
  Tensor t(DT_FLOAT, shape);
  for (size_t i = 0; i < v.size(); ++i) t.flat<float>()[i] = v[i];
  return t;
}

TEST(TfCheckpointFormatTest, WrittenBytesDecodeAsTensorFlowDefinesThem) {
  const std::string prefix = TempDir("written") + "/model.ckpt-7";
  {
    auto w = checkpoint::BundleWriter::Create(prefix);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Add("a", Floats({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}))).ok());
    Tensor s(DT_STRING, TensorShape({2}));
    s.flat<std::string>()[0] = "xy";
    s.flat<std::string>()[1] = "z";
    ASSERT_TRUE((*w)->Add("s", s).ok());
    // Rows 2..3 of a [4,3] partitioned variable.
    auto slice = checkpoint::TensorSlice::Parse("2,2:-");
    ASSERT_TRUE(slice.ok());
    auto resolved = slice->Resolve(TensorShape({4, 3}));
    ASSERT_TRUE(resolved.ok());
    ASSERT_TRUE((*w)->AddSlice("p", TensorShape({4, 3}), *resolved,
                               Floats({7, 8, 9, 10, 11, 12}, TensorShape({2, 3})))
                    .ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  const std::string index = ReadAll(prefix + ".index");
  const std::string data = ReadAll(prefix + ".data-00000-of-00001");

  const std::vector<std::pair<std::string, std::string>> records = TableRecords(index);
  // Keys in bytewise order: the header, the slice key, then the names.
  const std::string slice_key("\x00p\x00\x01\x01\x02\x82\x82\x80\x7f", 10);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[0].first, "");
  EXPECT_EQ(records[1].first, slice_key);
  EXPECT_EQ(records[2].first, "a");
  EXPECT_EQ(records[3].first, "p");
  EXPECT_EQ(records[4].first, "s");

  // BundleHeaderProto: num_shards = 1 (field 1), version.producer = 1 (3.1).
  auto header = Fields(records[0].second);
  EXPECT_EQ(One(header, 1), "1");
  EXPECT_EQ(One(Fields(One(header, 3)), 1), "1");

  // BundleEntryProto "a": dtype 1 (DT_FLOAT), shape [2,3], shard 0
  // (default, absent), offset, size 24, masked CRC32C of the bytes.
  auto check_data = [&](const std::multimap<int, std::string>& e, uint64_t size,
                        bool raw_crc = true) {
    uint64_t offset = e.count(4) ? std::stoull(One(e, 4)) : 0;
    EXPECT_EQ(One(e, 5), std::to_string(size));
    EXPECT_EQ(e.count(3), 0u);
    const std::string crc = One(e, 6);
    if (raw_crc) {
      EXPECT_EQ(Fixed32(crc, 0), Mask(checkpoint::Crc32c(0, data.data() + offset, size)));
    }
    return data.substr(offset, size);
  };
  auto a = Fields(records[2].second);
  EXPECT_EQ(One(a, 1), "1");
  EXPECT_THAT(Dims(One(a, 2)), ElementsAre(2, 3));
  std::string a_bytes = check_data(a, 24);
  float a_values[6];
  std::memcpy(a_values, a_bytes.data(), 24);
  EXPECT_THAT(a_values, ElementsAre(1, 2, 3, 4, 5, 6));

  // "s": DT_STRING (7); varint lengths 2, 1; the masked CRC of the lengths
  // as 4-byte little-endian integers (not of the varint bytes); then "xyz".
  // The entry's CRC continues that CRC over the length checksum's 4 bytes
  // and the strings' bytes (TensorFlow's WriteStringTensor).
  auto s = Fields(records[4].second);
  EXPECT_EQ(One(s, 1), "7");
  std::string s_bytes = check_data(s, 2 + 4 + 3, /*raw_crc=*/false);
  EXPECT_EQ(s_bytes.substr(0, 2), std::string("\x02\x01", 2));
  const uint32_t lengths_crc =
      checkpoint::Crc32c(0, std::string("\x02\0\0\0\x01\0\0\0", 8).data(), 8);
  EXPECT_EQ(Fixed32(s_bytes, 2), Mask(lengths_crc));
  EXPECT_EQ(s_bytes.substr(6), "xyz");
  const uint32_t entry_crc =
      checkpoint::Crc32c(checkpoint::Crc32c(lengths_crc, s_bytes.data() + 2, 4), "xyz", 3);
  EXPECT_EQ(Fixed32(One(s, 6), 0), Mask(entry_crc));

  // "p": the full tensor's entry, shape [4,3], no data, one slice (field 7)
  // whose extents are {start 2, length 2} and {} (the whole dimension).
  auto p = Fields(records[3].second);
  EXPECT_EQ(One(p, 1), "1");
  EXPECT_THAT(Dims(One(p, 2)), ElementsAre(4, 3));
  EXPECT_EQ(p.count(5), 0u);
  auto extents = All(Fields(One(p, 7)), 1);
  ASSERT_EQ(extents.size(), 2u);
  auto e0 = Fields(extents[0]);
  EXPECT_EQ(One(e0, 1), "2");
  EXPECT_EQ(One(e0, 2), "2");
  EXPECT_TRUE(extents[1].empty());
  // The slice's own entry: shape [2,3] and its 24 bytes.
  auto ps = Fields(records[1].second);
  EXPECT_THAT(Dims(One(ps, 2)), ElementsAre(2, 3));
  std::string p_bytes = check_data(ps, 24);
  float p_values[6];
  std::memcpy(p_values, p_bytes.data(), 24);
  EXPECT_THAT(p_values, ElementsAre(7, 8, 9, 10, 11, 12));
}

// A table as recent TensorFlow writes it, with a snappy-compressed data
// block, made here without the writer; the reader restores from it. Its
// string tensor is checksummed as TensorFlow's WriteStringTensor does: the
// lengths as 4-byte little-endian integers (not their varint bytes), then
// the entry's CRC over the length checksum and the strings' bytes. A
// tensor of a dtype graphrun cannot hold fails only its own lookup.
// Protobuf wire format by hand: a varint field, a length-delimited one.
void FieldVarint(std::string* m, int field, uint64_t v) {
  PutVarint(m, static_cast<uint64_t>(field) << 3);
  PutVarint(m, v);
}
void FieldBytes(std::string* m, int field, const std::string& v) {
  PutVarint(m, (static_cast<uint64_t>(field) << 3) | 2);
  PutVarint(m, v.size());
  m->append(v);
}

// One table block of `recs` (no shared key prefixes, one restart point).
std::string TableBlock(const std::vector<std::pair<std::string, std::string>>& recs) {
  std::string b;
  for (const auto& [k, v] : recs) {
    PutVarint(&b, 0);
    PutVarint(&b, k.size());
    PutVarint(&b, v.size());
    b += k + v;
  }
  PutFixed32(&b, 0);
  PutFixed32(&b, 1);
  return b;
}

// A whole .index table of one data block holding `recs` (sorted),
// snappy-compressed or not: block trailers, the metaindex, the index
// block, the footer.
// `lie`, when given, stands in for the compressed data block.
std::string TableFile(const std::vector<std::pair<std::string, std::string>>& recs, bool compress,
                      const std::string& lie = "") {
  std::string file;
  auto append = [&](const std::string& contents, char type) {
    std::string handle;
    PutVarint(&handle, file.size());
    PutVarint(&handle, contents.size());
    file += contents;
    file.push_back(type);
    std::string with_type = contents + type;
    PutFixed32(&file, Mask(checkpoint::Crc32c(0, with_type.data(), with_type.size())));
    return handle;
  };
  std::string records = TableBlock(recs);
  if (compress) {
    std::string compressed;
    snappy::Compress(records.data(), records.size(), &compressed);
    records = lie.empty() ? compressed : lie;
  }
  std::string data_handle = append(records, compress ? 1 : 0);
  std::string footer = append(TableBlock({}), 0);
  footer += append(TableBlock({{recs.back().first, data_handle}}), 0);
  footer.resize(40, '\0');
  PutFixed32(&footer, 0x8b80fb57u);
  PutFixed32(&footer, 0xdb477524u);
  return file + footer;
}

TEST(TfCheckpointFormatTest, ReadsSnappyCompressedIndexBlocks) {
  const std::string prefix = TempDir("snappy") + "/tf.ckpt";
  // Data file: w = [0.5, -2] (float32).
  float w[2] = {0.5f, -2.0f};
  const std::string data(reinterpret_cast<const char*>(w), 8);
  // s = ["ab", "c"] after it, at offset 8.
  const uint32_t lengths_crc =
      checkpoint::Crc32c(0, std::string("\x02\0\0\0\x01\0\0\0", 8).data(), 8);
  std::string s_data("\x02\x01", 2);
  PutFixed32(&s_data, Mask(lengths_crc));
  s_data += "abc";
  const uint32_t s_crc =
      checkpoint::Crc32c(checkpoint::Crc32c(lengths_crc, s_data.data() + 2, 4), "abc", 3);
  WriteAll(prefix + ".data-00000-of-00001", data + s_data);

  auto field_varint = FieldVarint;
  auto field_bytes = FieldBytes;
  std::string header, version, entry, shape, dim;
  field_varint(&version, 1, 1);
  field_varint(&header, 1, 1);
  field_bytes(&header, 3, version);
  field_varint(&dim, 1, 2);
  field_bytes(&shape, 2, dim);
  field_varint(&entry, 1, 1);  // DT_FLOAT
  field_bytes(&entry, 2, shape);
  field_varint(&entry, 5, 8);
  PutVarint(&entry, (6 << 3) | 5);
  PutFixed32(&entry, Mask(checkpoint::Crc32c(0, data.data(), data.size())));
  std::string s_entry, s_shape;
  field_bytes(&s_shape, 2, dim);
  field_varint(&s_entry, 1, 7);  // DT_STRING
  field_bytes(&s_entry, 2, s_shape);
  field_varint(&s_entry, 4, 8);
  field_varint(&s_entry, 5, s_data.size());
  PutVarint(&s_entry, (6 << 3) | 5);
  PutFixed32(&s_entry, Mask(s_crc));

  // "v": a DT_VARIANT (21) scalar, as tf.data iterator state is saved:
  // listed, but only its own lookup fails.
  std::string v_entry;
  field_varint(&v_entry, 1, 21);
  field_bytes(&v_entry, 2, "");
  field_varint(&v_entry, 5, 3);
  auto write_index = [&](const std::string& header) {
    WriteAll(prefix + ".index",
             TableFile({{"", header}, {"s", s_entry}, {"v", v_entry}, {"w", entry}},
                       /*compress=*/true));
  };

  // A block that claims to decompress to 1 GiB from one literal byte is
  // refused before anything is allocated for it.
  std::string lie;
  PutVarint(&lie, uint64_t{1} << 30);
  lie += std::string("\0x", 2);  // a literal of one byte
  WriteAll(prefix + ".index", TableFile({{"", header}, {"w", entry}}, true, lie));
  auto lying = checkpoint::BundleReader::Open(prefix);
  EXPECT_EQ(lying.status().code(), absl::StatusCode::kDataLoss) << lying.status();
  EXPECT_THAT(std::string(lying.status().message()), ::testing::HasSubstr("bad snappy data"));

  write_index(header);
  auto reader = checkpoint::BundleReader::Open(prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto t = (*reader)->Lookup("w");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->flat<float>(), ElementsAre(0.5f, -2.0f));
  auto strings = (*reader)->Lookup("s");
  ASSERT_TRUE(strings.ok()) << strings.status();
  EXPECT_THAT(strings->flat<std::string>(), ElementsAre("ab", "c"));
  auto variant = (*reader)->Lookup("v");
  EXPECT_EQ(variant.status().code(), absl::StatusCode::kUnimplemented) << variant.status();
  EXPECT_THAT(std::string(variant.status().message()),
              ::testing::HasSubstr("tensor 'v' in checkpoint '" + prefix + "' has dtype"));

  // The header's VersionDef (field 3: producer 1, min_consumer 2,
  // bad_consumers 3), checked as TensorFlow's CheckVersions does against
  // the bundle format's version 1: a checkpoint for newer readers, or one
  // that bans version 1, is refused naming the file; a newer producer that
  // still accepts version 1 is read.
  auto header_with = [&](uint64_t producer, uint64_t min_consumer, uint64_t bad) {
    std::string v, h;
    field_varint(&v, 1, producer);
    if (min_consumer > 0) field_varint(&v, 2, min_consumer);
    if (bad > 0) field_varint(&v, 3, bad);
    field_varint(&h, 1, 1);
    field_bytes(&h, 3, v);
    return h;
  };
  write_index(header_with(2, 2, 0));
  auto newer = checkpoint::BundleReader::Open(prefix);
  ASSERT_EQ(newer.status().code(), absl::StatusCode::kUnimplemented) << newer.status();
  EXPECT_THAT(std::string(newer.status().message()),
              ::testing::HasSubstr("needs a reader of version 2 or later"));
  EXPECT_THAT(std::string(newer.status().message()), ::testing::HasSubstr(prefix + ".index"));
  write_index(header_with(2, 0, 1));
  auto banned = checkpoint::BundleReader::Open(prefix);
  ASSERT_EQ(banned.status().code(), absl::StatusCode::kUnimplemented) << banned.status();
  EXPECT_THAT(std::string(banned.status().message()),
              ::testing::HasSubstr("bans readers of version 1"));
  write_index(header_with(3, 1, 2));
  auto accepted = checkpoint::BundleReader::Open(prefix);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_THAT((*accepted)->Lookup("w")->flat<float>(), ElementsAre(0.5f, -2.0f));
}

// A bundle written on a big-endian machine (BundleHeaderProto.endianness =
// BIG, field 2 = 1): every number's bytes reversed in the data file, the
// entries' checksums over those bytes, a string tensor's length checksum
// taken over its lengths as big-endian 4-byte integers and stored
// big-endian. Read as TensorFlow's BundleReader reads it: the values
// swapped back. Merged, it stays big-endian; merged with a little-endian
// checkpoint, it is refused.
TEST(TfCheckpointFormatTest, ReadsBigEndianBundles) {
  const std::string dir = TempDir("big_endian");
  const std::string prefix = dir + "/be.ckpt";
  std::string data;
  std::vector<std::pair<std::string, std::string>> recs;
  std::string header, version;
  FieldVarint(&version, 1, 1);
  FieldVarint(&header, 1, 1);
  FieldVarint(&header, 2, 1);  // BIG
  FieldBytes(&header, 3, version);
  recs.push_back({"", header});
  // An entry for `bytes` (as stored) of dtype `dtype` and shape `dims`,
  // checksummed as `crc`.
  auto add = [&](const std::string& name, int dtype, std::vector<uint64_t> dims,
                 const std::string& bytes, uint32_t crc) {
    std::string shape, entry;
    for (uint64_t d : dims) {
      std::string dim;
      FieldVarint(&dim, 1, d);
      FieldBytes(&shape, 2, dim);
    }
    FieldVarint(&entry, 1, static_cast<uint64_t>(dtype));
    FieldBytes(&entry, 2, shape);
    FieldVarint(&entry, 4, data.size());  // offset (shard 0)
    FieldVarint(&entry, 5, bytes.size());
    PutVarint(&entry, (6 << 3) | 5);
    PutFixed32(&entry, Mask(crc));
    recs.push_back({name, entry});
    data += bytes;
  };
  auto numbers = [&](const std::string& name, int dtype, std::vector<uint64_t> dims,
                     const std::string& bytes) {
    add(name, dtype, dims, bytes, checkpoint::Crc32c(0, bytes.data(), bytes.size()));
  };
  // Sorted keys: c, h, i, s, w.
  // c: complex64 [1.5 - 0.25i]: each part big-endian.
  numbers("c", 8, {1}, std::string("\x3f\xc0\x00\x00\xbe\x80\x00\x00", 8));
  // h: half [1, -2] (0x3c00, 0xc000).
  numbers("h", 19, {2}, std::string("\x3c\x00\xc0\x00", 4));
  // i: int64 [1, -3].
  numbers("i", 9, {2}, std::string("\0\0\0\0\0\0\0\x01\xff\xff\xff\xff\xff\xff\xff\xfd", 16));
  // s: ["ab", "c"]: varint lengths (no byte order), then the length
  // checksum over 00000002 00000001, stored big-endian.
  {
    const uint32_t lengths_crc =
        checkpoint::Crc32c(0, std::string("\0\0\0\x02\0\0\0\x01", 8).data(), 8);
    const uint32_t masked = Mask(lengths_crc);
    std::string bytes("\x02\x01", 2);
    for (int b = 3; b >= 0; --b) bytes.push_back(static_cast<char>((masked >> (8 * b)) & 0xff));
    bytes += "abc";
    const uint32_t crc = checkpoint::Crc32c(checkpoint::Crc32c(lengths_crc, bytes.data() + 2, 4),
                                            bytes.data() + 6, 3);
    add("s", 7, {2}, bytes, crc);
  }
  // w: float32 [[0.5, -2]].
  numbers("w", 1, {1, 2}, std::string("\x3f\x00\x00\x00\xc0\x00\x00\x00", 8));
  WriteAll(prefix + ".data-00000-of-00001", data);
  WriteAll(prefix + ".index", TableFile(recs, /*compress=*/false));

  auto check = [](const std::string& p) {
    auto reader = checkpoint::BundleReader::Open(p);
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto w = (*reader)->Lookup("w");
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_THAT(w->flat<float>(), ElementsAre(0.5f, -2.0f));
    auto i = (*reader)->Lookup("i");
    ASSERT_TRUE(i.ok()) << i.status();
    EXPECT_THAT(i->flat<int64_t>(), ElementsAre(1, -3));
    auto c = (*reader)->Lookup("c");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->flat<std::complex<float>>()[0], std::complex<float>(1.5f, -0.25f));
    auto h = (*reader)->Lookup("h");
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(reinterpret_cast<const uint16_t*>(h->raw_data())[0], 0x3c00);
    EXPECT_EQ(reinterpret_cast<const uint16_t*>(h->raw_data())[1], 0xc000);
    auto s = (*reader)->Lookup("s");
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_THAT(s->flat<std::string>(), ElementsAre("ab", "c"));
  };
  check(prefix);
  // A flipped byte is still caught (the checksum is over the stored bytes).
  {
    std::string bad = data;
    bad[bad.size() - 1] ^= 1;
    WriteAll(prefix + ".data-00000-of-00001", bad);
    auto reader = checkpoint::BundleReader::Open(prefix);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->Lookup("w").status().code(), absl::StatusCode::kDataLoss);
    WriteAll(prefix + ".data-00000-of-00001", data);
  }
  // Merged alone, the index still says BIG (field 2 of the header).
  ASSERT_TRUE(checkpoint::MergeBundles({prefix}, dir + "/merged").ok());
  check(dir + "/merged");
  // With a little-endian checkpoint: refused, naming both.
  WriteAll(prefix + ".data-00000-of-00001", data);
  WriteAll(prefix + ".index", TableFile(recs, /*compress=*/false));
  const std::string little = dir + "/little.ckpt";
  {
    auto w = checkpoint::BundleWriter::Create(little);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Add("z", Floats({1}, TensorShape({1}))).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto mixed = checkpoint::MergeBundles({prefix, little}, dir + "/mixed");
  EXPECT_EQ(mixed.code(), absl::StatusCode::kUnimplemented) << mixed;
  EXPECT_THAT(
      std::string(mixed.message()),
      ::testing::HasSubstr("'" + little + "' is little-endian and '" + prefix + "' is not"));
}

// Checkpoints graphrun wrote in its first format (index magic "GRCKPTIX",
// strings as 8-byte lengths then bytes, no length checksum) stay readable:
// a float tensor, a string tensor and two slices of a partitioned one.
TEST(TfCheckpointFormatTest, GraphrunsFirstFormatStaysReadable) {
  const std::string prefix = TempDir("legacy") + "/old.ckpt";
  std::string data;
  std::vector<checkpoint::BundleEntry> entries;
  auto add = [&](const std::string& name, DataType dt, TensorShape shape,
                 checkpoint::TensorSlice slice, const std::string& bytes) {
    checkpoint::BundleEntry e;
    e.name = name;
    e.dtype = dt;
    e.shape = shape;
    e.slice = slice;
    e.offset = data.size();
    e.size = bytes.size();
    e.crc32c = checkpoint::Crc32c(0, bytes.data(), bytes.size());
    data += bytes;
    entries.push_back(e);
  };
  auto floats = [](std::vector<float> v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  auto whole = [](const TensorShape& shape) {
    return *checkpoint::TensorSlice::Full(shape.dims()).Resolve(shape);
  };
  add("a", DT_FLOAT, TensorShape({2, 3}), whole(TensorShape({2, 3})), floats({1, 2, 3, 4, 5, 6}));
  std::string strings;
  for (uint64_t len : {uint64_t{2}, uint64_t{1}}) {
    strings.append(reinterpret_cast<const char*>(&len), 8);
  }
  strings += "abc";
  add("s", DT_STRING, TensorShape({2}), whole(TensorShape({2})), strings);
  auto rows = [](int64_t start) {
    checkpoint::TensorSlice out;  // rows start..start+1 of [4, 1], resolved
    out.AddDim(start, 2);
    out.AddDim(0, 1);
    return out;
  };
  add("p", DT_FLOAT, TensorShape({4, 1}), rows(0), floats({7, 8}));
  add("p", DT_FLOAT, TensorShape({4, 1}), rows(2), floats({9, 10}));
  std::sort(entries.begin(), entries.end(), checkpoint::EntryLess);
  WriteAll(prefix + ".data-00000-of-00001", data);
  const std::string index = checkpoint::EncodeLegacyIndex(1, entries);
  ASSERT_EQ(index.substr(0, 8), "GRCKPTIX");
  WriteAll(prefix + ".index", index);

  auto reader = checkpoint::BundleReader::Open(prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto a = (*reader)->Lookup("a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->flat<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  auto s = (*reader)->Lookup("s");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->flat<std::string>(), ElementsAre("ab", "c"));
  auto p = (*reader)->Lookup("p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->flat<float>(), ElementsAre(7, 8, 9, 10));
  // A flipped data byte is caught by the legacy entry's checksum.
  data[3] ^= 1;
  WriteAll(prefix + ".data-00000-of-00001", data);
  auto flipped = checkpoint::BundleReader::Open(prefix);
  ASSERT_TRUE(flipped.ok()) << flipped.status();
  EXPECT_EQ((*flipped)->Lookup("a").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace graphrun
