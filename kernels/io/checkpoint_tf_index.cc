// TensorFlow's checkpoint index (the tensor-bundle format), declared in
// checkpoint_internal.h:
//
// - The .index file is a LevelDB-style table: data blocks of prefix-
//   compressed key/value records with restart points, each followed by a
//   one-byte compression type (0 none, 1 snappy) and a masked CRC32C; a
//   (empty) metaindex block; an index block mapping each data block's last
//   key to its handle (varint64 offset, varint64 size); and a 48-byte
//   footer: the two handles padded to 40 bytes, then the magic number
//   0xdb4775248b80fb57 (little-endian).
// - Keys sort bytewise. The empty key holds a BundleHeaderProto; every
//   other key a BundleEntryProto (graph/proto/tensor_bundle.proto). A
//   partitioned tensor's entry lists its slices and holds no data; each
//   slice is an entry under an OrderedCode key (0, name, rank, then start
//   and length per dimension, -1 for "all of it").
// - String tensors in data files: a varint64 length per element, a masked
//   CRC32C of those length bytes, then the bytes of all elements.
#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "graph/proto/tensor_bundle.pb.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_internal.h"
#include "snappy.h"

namespace graphrun {
namespace checkpoint {

namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
// TensorFlow's kTensorBundleVersion: the format version graphrun writes
// (as producer) and reads (as consumer).
constexpr int kBundleVersion = 1;
constexpr size_t kFooterSize = 48;
constexpr size_t kBlockTrailerSize = 5;
constexpr int kRestartInterval = 16;
// A snappy block may not claim to decompress to more than this.
constexpr size_t kMaxBlockBytes = size_t{1} << 30;

void PutFixed32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void PutVarint64(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}

// Reads a varint64 from the front of `s`; false when truncated or too long.
bool GetVarint64(absl::string_view* s, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && !s->empty(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>((*s)[0]);
    s->remove_prefix(1);
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}
bool GetVarint32(absl::string_view* s, uint32_t* v) {
  uint64_t x;
  if (!GetVarint64(s, &x) || x > UINT32_MAX) return false;
  *v = static_cast<uint32_t>(x);
  return true;
}
uint32_t DecodeFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// --- OrderedCode (the slice keys) ----------------------------------------

void WriteNumIncreasing(std::string* dest, uint64_t v) {
  unsigned char buf[9];
  int n = 0;
  while (v > 0) {
    buf[8 - n++] = static_cast<unsigned char>(v & 0xff);
    v >>= 8;
  }
  dest->push_back(static_cast<char>(n));
  dest->append(reinterpret_cast<const char*>(buf + 9 - n), n);
}

void WriteOrderedString(std::string* dest, absl::string_view s) {
  for (char c : s) {
    if (c == '\0') {
      dest->append("\x00\xff", 2);
    } else if (c == '\xff') {
      dest->append("\xff\x00", 2);
    } else {
      dest->push_back(c);
    }
  }
  dest->append("\x00\x01", 2);
}

void WriteSignedNumIncreasing(std::string* dest, int64_t val) {
  static constexpr unsigned char kHeader[11][2] = {{0, 0},    {0x80, 0},    {0xc0, 0},   {0xe0, 0},
                                                   {0xf0, 0}, {0xf8, 0},    {0xfc, 0},   {0xfe, 0},
                                                   {0xff, 0}, {0xff, 0x80}, {0xff, 0xc0}};
  const uint64_t x = val < 0 ? ~static_cast<uint64_t>(val) : static_cast<uint64_t>(val);
  if (x < 64) {
    dest->push_back(static_cast<char>(kHeader[1][0] ^ static_cast<unsigned char>(val)));
    return;
  }
  // Significant bits of x, then 7 payload bits per byte (10 bytes for 63).
  int bits = 64 - __builtin_clzll(x);
  const int len = bits == 63 ? 10 : bits / 7 + 1;
  unsigned char buf[10];
  const unsigned char sign = val < 0 ? 0xff : 0x00;
  buf[0] = buf[1] = sign;
  for (int i = 0; i < 8; ++i) {
    buf[2 + i] = static_cast<unsigned char>(static_cast<uint64_t>(val) >> (56 - 8 * i));
  }
  unsigned char* begin = buf + sizeof(buf) - len;
  begin[0] ^= kHeader[len][0];
  begin[1] ^= kHeader[len][1];
  dest->append(reinterpret_cast<const char*>(begin), len);
}

// --- Blocks ----------------------------------------------------------------

class BlockBuilder {
 public:
  void Add(absl::string_view key, absl::string_view value) {
    size_t shared = 0;
    if (counter_ < kRestartInterval) {
      const size_t n = std::min(last_key_.size(), key.size());
      while (shared < n && last_key_[shared] == key[shared]) ++shared;
    } else {
      restarts_.push_back(static_cast<uint32_t>(buf_.size()));
      counter_ = 0;
    }
    PutVarint64(&buf_, shared);
    PutVarint64(&buf_, key.size() - shared);
    PutVarint64(&buf_, value.size());
    buf_.append(key.data() + shared, key.size() - shared);
    buf_.append(value.data(), value.size());
    last_key_.assign(key.data(), key.size());
    ++counter_;
    ++entries_;
  }
  size_t SizeEstimate() const { return buf_.size() + 4 * restarts_.size() + 4; }
  bool empty() const { return entries_ == 0; }
  const std::string& last_key() const { return last_key_; }
  std::string Finish() {
    std::string out = std::move(buf_);
    for (uint32_t r : restarts_) PutFixed32(&out, r);
    PutFixed32(&out, static_cast<uint32_t>(restarts_.size()));
    *this = BlockBuilder();
    return out;
  }

 private:
  std::string buf_;
  std::vector<uint32_t> restarts_ = {0};
  std::string last_key_;
  int counter_ = 0;
  int entries_ = 0;
};

// Appends a block and its trailer (uncompressed); returns its handle.
std::string AppendBlock(std::string* file, const std::string& contents) {
  std::string handle;
  PutVarint64(&handle, file->size());
  PutVarint64(&handle, contents.size());
  file->append(contents);
  const char type = 0;
  uint32_t crc = Crc32c(0, contents.data(), contents.size());
  crc = Crc32c(crc, &type, 1);
  file->push_back(type);
  PutFixed32(file, MaskCrc(crc));
  return handle;
}

// The contents of the block at `handle` (checked, decompressed).
absl::StatusOr<std::string> ReadBlock(absl::string_view file, absl::string_view* handle) {
  uint64_t offset, size;
  if (!GetVarint64(handle, &offset) || !GetVarint64(handle, &size)) {
    return absl::InvalidArgumentError("bad block handle");
  }
  if (offset > file.size() || size > file.size() - offset ||
      kBlockTrailerSize > file.size() - offset - size) {
    return absl::InvalidArgumentError(
        absl::StrCat("block at ", offset, " of ", size, " bytes is past the end of the file"));
  }
  const char* p = file.data() + offset;
  const uint32_t stored = UnmaskCrc(DecodeFixed32(p + size + 1));
  if (Crc32c(0, p, size + 1) != stored) {
    return absl::InvalidArgumentError(absl::StrCat("block at ", offset, ": checksum mismatch"));
  }
  switch (p[size]) {
    case 0:
      return std::string(p, size);
    case 1: {
      size_t n = 0;
      // Snappy expands at most about 22-fold (a 3-byte op copies 64): a
      // longer claim is a lie, which allocated 1 GiB for a 70-byte index.
      if (!snappy::GetUncompressedLength(p, size, &n) || n > kMaxBlockBytes ||
          n > 32 * static_cast<size_t>(size) + 64) {
        return absl::InvalidArgumentError(absl::StrCat("block at ", offset, ": bad snappy data"));
      }
      std::string out;
      if (!snappy::Uncompress(p, size, &out)) {
        return absl::InvalidArgumentError(absl::StrCat("block at ", offset, ": bad snappy data"));
      }
      return out;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("block at ", offset, ": unknown compression type ", int{p[size]}));
  }
}

// Calls fn(key, value) for each record of a block, in order.
template <typename Fn>
absl::Status ForEachRecord(absl::string_view block, Fn fn) {
  if (block.size() < 4) return absl::InvalidArgumentError("block too short");
  const uint32_t num_restarts = DecodeFixed32(block.data() + block.size() - 4);
  if (num_restarts > (block.size() - 4) / 4) {
    return absl::InvalidArgumentError("bad restart count");
  }
  absl::string_view s = block.substr(0, block.size() - 4 - 4 * size_t{num_restarts});
  std::string key;
  while (!s.empty()) {
    uint32_t shared, non_shared, value_len;
    if (!GetVarint32(&s, &shared) || !GetVarint32(&s, &non_shared) ||
        !GetVarint32(&s, &value_len) || shared > key.size() || non_shared > s.size() ||
        value_len > s.size() - non_shared) {
      return absl::InvalidArgumentError("corrupt record");
    }
    key.resize(shared);
    key.append(s.data(), non_shared);
    GR_RETURN_IF_ERROR(fn(key, s.substr(non_shared, value_len)));
    s.remove_prefix(size_t{non_shared} + value_len);
  }
  return absl::OkStatus();
}

bool IsWholeDim(const BundleEntry& e, int d) {
  return e.slice.start(d) == 0 && e.slice.length(d) == e.shape.dim_size(d);
}

// The key and TensorSliceProto of a stored slice: whole dimensions are
// written as "all of it", as TensorFlow writes them.
void SliceToProto(const BundleEntry& e, tensorflow::TensorSliceProto* p) {
  for (int d = 0; d < e.slice.dims(); ++d) {
    auto* ext = p->add_extent();
    if (IsWholeDim(e, d)) continue;
    ext->set_start(e.slice.start(d));
    ext->set_length(e.slice.length(d));
  }
}

std::string SliceKey(const BundleEntry& e) {
  TensorSlice s;
  for (int d = 0; d < e.slice.dims(); ++d) {
    if (IsWholeDim(e, d)) {
      s.AddDim(0, -1);
    } else {
      s.AddDim(e.slice.start(d), e.slice.length(d));
    }
  }
  return EncodeTensorNameSlice(e.name, s);
}

void SetShape(const TensorShape& shape, tensorflow::TensorShapeProto* p) {
  for (int d = 0; d < shape.dims(); ++d) p->add_dim()->set_size(shape.dim_size(d));
}

std::string DataEntry(const BundleEntry& e, const TensorShape& shape) {
  tensorflow::BundleEntryProto p;
  p.set_dtype(static_cast<tensorflow::DataType>(e.dtype));
  SetShape(shape, p.mutable_shape());
  p.set_shard_id(e.shard);
  p.set_offset(static_cast<int64_t>(e.offset));
  p.set_size(static_cast<int64_t>(e.size));
  p.set_crc32c(MaskCrc(e.crc32c));
  return p.SerializeAsString();
}

}  // namespace

uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

std::string EncodeTensorNameSlice(absl::string_view name, const TensorSlice& slice) {
  std::string key;
  WriteNumIncreasing(&key, 0);
  WriteOrderedString(&key, name);
  WriteNumIncreasing(&key, static_cast<uint64_t>(slice.dims()));
  for (int d = 0; d < slice.dims(); ++d) {
    WriteSignedNumIncreasing(&key, slice.IsFullAt(d) ? 0 : slice.start(d));
    WriteSignedNumIncreasing(&key, slice.IsFullAt(d) ? -1 : slice.length(d));
  }
  return key;
}

namespace {

// Extends `crc` over a string length as TensorFlow's bundle checksums it:
// the length's 4 little-endian bytes, or 8 when it does not fit in 32 bits.
// TensorFlow checksums each string length as the writer's integer: 4
// bytes (8 above 2^32 - 1), in its byte order.
uint32_t ExtendLength(uint32_t crc, uint64_t len, bool big_endian = false) {
  char b[8];
  const size_t n = len <= 0xffffffffu ? 4 : 8;
  for (size_t i = 0; i < n; ++i) {
    b[big_endian ? n - 1 - i : i] = static_cast<char>((len >> (8 * i)) & 0xff);
  }
  return Crc32c(crc, b, n);
}

}  // namespace

std::string EncodeStrings(const Tensor& t, uint32_t* crc) {
  absl::Span<std::string> v = t.flat<std::string>();
  std::string out;
  size_t total = 4;
  for (const std::string& e : v) total += 10 + e.size();
  out.reserve(total);
  uint32_t c = 0;
  for (const std::string& e : v) {
    PutVarint64(&out, e.size());
    c = ExtendLength(c, e.size());
  }
  const size_t lengths_end = out.size();
  PutFixed32(&out, MaskCrc(c));
  c = Crc32c(c, out.data() + lengths_end, 4);
  for (const std::string& e : v) {
    out += e;
    c = Crc32c(c, e.data(), e.size());
  }
  *crc = c;
  return out;
}

absl::StatusOr<Tensor> DecodeTfStrings(const BundleEntry& e, absl::string_view bytes) {
  const TensorShape shape = e.slice.SliceShape();
  const int64_t n = shape.num_elements();
  if (static_cast<uint64_t>(n) > bytes.size()) {
    return absl::InvalidArgumentError("too short for its string lengths");
  }
  absl::string_view s = bytes;
  std::vector<uint64_t> lengths(n);
  uint32_t crc = 0;
  for (auto& len : lengths) {
    if (!GetVarint64(&s, &len)) return absl::InvalidArgumentError("truncated string lengths");
    crc = ExtendLength(crc, len, e.big_endian);
  }
  const size_t header = bytes.size() - s.size();
  if (s.size() < 4) return absl::InvalidArgumentError("no checksum of the string lengths");
  uint32_t stored = DecodeFixed32(s.data());
  if (e.big_endian) stored = __builtin_bswap32(stored);
  if (stored == MaskCrc(crc)) {
    // TensorFlow's checksums: the entry's covers the lengths as integers,
    // the length checksum's bytes and the strings' bytes.
    crc = Crc32c(crc, s.data(), 4);
    uint64_t left = s.size() - 4;
    for (uint64_t len : lengths) {
      if (len > left) return absl::InvalidArgumentError("string length past the end");
      left -= len;
    }
    crc = Crc32c(crc, s.data() + 4, s.size() - 4);
    if (crc != e.crc32c) return absl::InvalidArgumentError("checksum mismatch");
  } else if (!e.big_endian && UnmaskCrc(stored) == Crc32c(0, bytes.data(), header) &&
             Crc32c(0, bytes.data(), bytes.size()) == e.crc32c) {
    // Written by graphrun before it checksummed strings as TensorFlow does
    // (the varint bytes, and the entry over the raw bytes).
  } else {
    return absl::InvalidArgumentError("checksum of the string lengths does not match");
  }
  s.remove_prefix(4);
  Tensor t(DT_STRING, shape);
  std::string* out = t.base<std::string>();
  for (int64_t i = 0; i < n; ++i) {
    if (lengths[i] > s.size()) return absl::InvalidArgumentError("string length past the end");
    out[i].assign(s.data(), lengths[i]);
    s.remove_prefix(lengths[i]);
  }
  if (!s.empty()) return absl::InvalidArgumentError("trailing bytes");
  return t;
}

std::string EncodeTfIndex(int num_shards, const std::vector<BundleEntry>& entries,
                          size_t block_size) {
  std::map<std::string, std::string> records;
  tensorflow::BundleHeaderProto header;
  header.set_num_shards(num_shards);
  // (Entries read from a big-endian bundle keep their bytes: merged, they
  // are still big-endian.)
  const bool big = !entries.empty() && entries.front().big_endian;
  header.set_endianness(big ? tensorflow::BundleHeaderProto::BIG
                            : tensorflow::BundleHeaderProto::LITTLE);
  header.mutable_version()->set_producer(kBundleVersion);
  records[""] = header.SerializeAsString();
  for (size_t i = 0; i < entries.size();) {
    size_t j = i + 1;
    while (j < entries.size() && entries[j].name == entries[i].name) ++j;
    const BundleEntry& first = entries[i];
    if (j == i + 1 && first.slice.Covers(first.shape)) {
      records[first.name] = DataEntry(first, first.shape);
    } else {
      tensorflow::BundleEntryProto full;
      full.set_dtype(static_cast<tensorflow::DataType>(first.dtype));
      SetShape(first.shape, full.mutable_shape());
      for (size_t k = i; k < j; ++k) {
        SliceToProto(entries[k], full.add_slices());
        records[SliceKey(entries[k])] = DataEntry(entries[k], entries[k].slice.SliceShape());
      }
      records[first.name] = full.SerializeAsString();
    }
    i = j;
  }
  return EncodeTable(records, block_size);
}

std::string EncodeTable(const std::map<std::string, std::string>& records, size_t block_size) {
  std::string file;
  BlockBuilder data, index;
  auto flush = [&]() {
    const std::string last = data.last_key();
    index.Add(last, AppendBlock(&file, data.Finish()));
  };
  for (const auto& [key, value] : records) {
    data.Add(key, value);
    if (data.SizeEstimate() >= block_size) flush();
  }
  if (!data.empty()) flush();
  std::string footer = AppendBlock(&file, BlockBuilder().Finish());  // metaindex
  footer += AppendBlock(&file, index.Finish());
  footer.resize(40, '\0');
  PutFixed32(&footer, static_cast<uint32_t>(kTableMagic & 0xffffffffu));
  PutFixed32(&footer, static_cast<uint32_t>(kTableMagic >> 32));
  return file + footer;
}

bool IsTfIndex(absl::string_view bytes) {
  if (bytes.size() < kFooterSize) return false;
  const char* m = bytes.data() + bytes.size() - 8;
  return DecodeFixed32(m) == static_cast<uint32_t>(kTableMagic & 0xffffffffu) &&
         DecodeFixed32(m + 4) == static_cast<uint32_t>(kTableMagic >> 32);
}

absl::Status ForEachTableRecord(
    absl::string_view bytes,
    const std::function<absl::Status(const std::string&, absl::string_view)>& fn) {
  if (!IsTfIndex(bytes)) return absl::InvalidArgumentError("no table footer (bad magic)");
  absl::string_view footer = bytes.substr(bytes.size() - kFooterSize, 40);
  // The footer is not checksummed: both blocks must read back (their own
  // checksums), and the padding after the handles must be zeros.
  absl::string_view handles = footer;
  GR_ASSIGN_OR_RETURN(std::string meta, ReadBlock(bytes, &handles));
  GR_RETURN_IF_ERROR(
      ForEachRecord(meta, [](const std::string&, absl::string_view) { return absl::OkStatus(); }));
  GR_ASSIGN_OR_RETURN(std::string index, ReadBlock(bytes, &handles));
  if (handles.find_first_not_of('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("bad footer padding");
  }
  bool first = true;
  std::string last_key;
  return ForEachRecord(index, [&](const std::string&, absl::string_view handle) -> absl::Status {
    GR_ASSIGN_OR_RETURN(std::string block, ReadBlock(bytes, &handle));
    return ForEachRecord(block,
                         [&](const std::string& key, absl::string_view value) -> absl::Status {
                           if (!first && key <= last_key) {
                             return absl::InvalidArgumentError("keys out of order");
                           }
                           first = false;
                           last_key = key;
                           return fn(key, value);
                         });
  });
}

absl::StatusOr<TensorShape> ShapeFromProto(const std::string& name,
                                           const tensorflow::TensorShapeProto& p) {
  if (p.unknown_rank() || p.dim_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': bad shape"));
  }
  std::vector<int64_t> dims;
  for (const auto& d : p.dim()) dims.push_back(d.size());
  auto s = TensorShape::Make(dims);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", s.status().message()));
  }
  return *s;
}

absl::StatusOr<TensorSlice> SliceFromProto(const std::string& name,
                                           const tensorflow::TensorSliceProto& p,
                                           const TensorShape& shape, TensorSlice* unresolved) {
  if (p.extent_size() != shape.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': a slice of rank ",
                                                   p.extent_size(), " for shape ",
                                                   shape.DebugString()));
  }
  TensorSlice s;
  for (const auto& e : p.extent()) {
    if (e.has_length_case() == tensorflow::TensorSliceProto::Extent::kLength) {
      s.AddDim(e.start(), e.length());
    } else {
      s.AddDim(0, -1);
    }
  }
  auto resolved = s.Resolve(shape);
  if (!resolved.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': ", resolved.status().message()));
  }
  if (unresolved != nullptr) *unresolved = std::move(s);
  return *resolved;
}

absl::Status DecodeTfIndex(absl::string_view bytes, int* num_shards,
                           std::vector<BundleEntry>* entries) {
  std::map<std::string, tensorflow::BundleEntryProto> protos;
  bool have_header = false;
  bool big_endian = false;
  GR_RETURN_IF_ERROR(ForEachTableRecord(
      bytes, [&](const std::string& key, absl::string_view value) -> absl::Status {
        if (key.empty()) {
          tensorflow::BundleHeaderProto h;
          if (!h.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
            return absl::InvalidArgumentError("unparsable header");
          }
          // A big-endian writer's values are swapped when they are read
          // (TensorFlow's BundleReader does the same).
          if (h.endianness() == tensorflow::BundleHeaderProto::BIG) {
            big_endian = true;
          } else if (h.endianness() != tensorflow::BundleHeaderProto::LITTLE) {
            return absl::UnimplementedError(
                absl::StrCat("unknown byte order ", static_cast<int>(h.endianness())));
          }
          // TensorFlow's CheckVersions against the bundle format's
          // version (kTensorBundleVersion, 1; any producer is read).
          if (h.version().min_consumer() > kBundleVersion) {
            return absl::UnimplementedError(absl::StrCat(
                "the checkpoint needs a reader of version ", h.version().min_consumer(),
                " or later (its min_consumer); this reader is version ", kBundleVersion));
          }
          for (int bad : h.version().bad_consumers()) {
            if (bad == kBundleVersion) {
              return absl::UnimplementedError(
                  absl::StrCat("the checkpoint bans readers of version ", kBundleVersion,
                               " (its bad_consumers)"));
            }
          }
          if (h.num_shards() < 1 || h.num_shards() > kMaxShards) {
            return absl::InvalidArgumentError(absl::StrCat("bad shard count ", h.num_shards()));
          }
          *num_shards = h.num_shards();
          have_header = true;
          return absl::OkStatus();
        }
        tensorflow::BundleEntryProto p;
        if (!p.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          return absl::InvalidArgumentError("unparsable entry");
        }
        protos.emplace(key, std::move(p));
        return absl::OkStatus();
      }));
  if (!have_header) return absl::InvalidArgumentError("no header entry");

  // Fills the data fields of `e` from `p`, checking them.
  auto data_of = [&](const tensorflow::BundleEntryProto& p, BundleEntry* e) -> absl::Status {
    if (p.shard_id() < 0 || p.shard_id() >= *num_shards || p.offset() < 0 || p.size() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", e->name, "': bad shard ", p.shard_id(), ", offset or size"));
    }
    e->shard = p.shard_id();
    e->offset = static_cast<uint64_t>(p.offset());
    e->size = static_cast<uint64_t>(p.size());
    e->crc32c = UnmaskCrc(p.crc32c());
    const uint64_t n = static_cast<uint64_t>(e->slice.SliceShape().num_elements());
    const bool size_ok = e->dtype == DT_STRING
                             ? e->size >= n + 4
                             : e->size / static_cast<uint64_t>(DataTypeSize(e->dtype)) == n &&
                                   e->size % static_cast<uint64_t>(DataTypeSize(e->dtype)) == 0;
    if (!size_ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", e->name, "': ", e->size, " bytes for ", n, " elements"));
    }
    return absl::OkStatus();
  };

  entries->clear();
  for (const auto& [key, p] : protos) {
    if (!key.empty() && key[0] == '\0') continue;  // a slice, found through its tensor
    BundleEntry e;
    e.name = key;
    e.dtype = static_cast<DataType>(p.dtype());
    GR_ASSIGN_OR_RETURN(e.shape, ShapeFromProto(key, p.shape()));
    if (!Storable(e.dtype)) {
      // Kept as a name only: looking it up is the error (BundleReader).
      e.unreadable = true;
      GR_ASSIGN_OR_RETURN(e.slice, TensorSlice::Full(e.shape.dims()).Resolve(e.shape));
      entries->push_back(std::move(e));
      continue;
    }
    if (p.slices_size() == 0) {
      e.slice = TensorSlice::Full(e.shape.dims());
      GR_ASSIGN_OR_RETURN(e.slice, e.slice.Resolve(e.shape));
      GR_RETURN_IF_ERROR(data_of(p, &e));
      entries->push_back(std::move(e));
      continue;
    }
    for (const auto& sp : p.slices()) {
      TensorSlice s;
      BundleEntry part = e;
      GR_ASSIGN_OR_RETURN(part.slice, SliceFromProto(key, sp, e.shape, &s));
      auto it = protos.find(EncodeTensorNameSlice(key, s));
      if (it == protos.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", key, "': slice ", s.DebugString(), " has no entry"));
      }
      GR_RETURN_IF_ERROR(data_of(it->second, &part));
      entries->push_back(std::move(part));
    }
  }
  for (BundleEntry& e : *entries) e.big_endian = big_endian;
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace graphrun
