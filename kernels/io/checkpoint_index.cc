// Tensor and index encoding of the checkpoint bundle format
// (docs/checkpoint_format.md), declared in checkpoint_internal.h.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_internal.h"

namespace graphrun {
namespace checkpoint {

namespace {

constexpr char kIndexMagic[8] = {'G', 'R', 'C', 'K', 'P', 'T', 'I', 'X'};
constexpr uint32_t kFormatVersion = 1;

void PutU32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

// ---------------------------------------------------------------------------
// Tensor encoding. Fixed-size types: the elements' little-endian bytes.
// Strings: TensorFlow's layout (checkpoint_tf_index.cc); in graphrun's
// first format, one u64 length per element, then the bytes of all elements.

bool Storable(DataType dt) { return DataTypeSize(dt) > 0 || dt == DT_STRING; }

// Decodes the bytes of entry `e` into a tensor of the entry's slice shape.
// DataLoss (with `file`) when the bytes do not fit the entry.
absl::StatusOr<Tensor> DecodeTensor(const BundleEntry& e, absl::string_view bytes,
                                    const std::string& file) {
  TensorShape shape = e.slice.SliceShape();
  const int64_t n = shape.num_elements();
  auto corrupt = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("corrupt checkpoint data file ", file, ": tensor '", e.name, "': ", why));
  };
  if (e.dtype == DT_STRING && !e.legacy_strings) {
    auto t = DecodeTfStrings(e, bytes);
    if (!t.ok()) return corrupt(t.status().message());
    return t;
  }
  if (e.dtype == DT_STRING) {
    if (static_cast<uint64_t>(n) > bytes.size() / 8) return corrupt("too short");
    Tensor t(DT_STRING, shape);
    uint64_t pos = 8 * static_cast<uint64_t>(n);
    std::string* out = t.base<std::string>();
    for (int64_t i = 0; i < n; ++i) {
      uint64_t len;
      std::memcpy(&len, bytes.data() + 8 * i, 8);
      if (len > bytes.size() - pos) return corrupt("string length past the end");
      out[i].assign(bytes.data() + pos, len);
      pos += len;
    }
    if (pos != bytes.size()) return corrupt("trailing bytes");
    return t;
  }
  const uint64_t sz = static_cast<uint64_t>(DataTypeSize(e.dtype));
  if (bytes.size() != static_cast<uint64_t>(n) * sz) return corrupt("wrong size");
  Tensor t(e.dtype, shape);
  if (n > 0) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  if (e.big_endian) {
    // Each number's bytes reversed; a complex number's two parts each.
    const uint64_t unit = e.dtype == DT_COMPLEX64 || e.dtype == DT_COMPLEX128 ? sz / 2 : sz;
    char* p = t.raw_data();
    for (uint64_t i = 0; unit > 1 && i < bytes.size(); i += unit) std::reverse(p + i, p + i + unit);
  }
  if (e.dtype == DT_BOOL) {
    // Only 0 and 1 are valid bools.
    auto* p = reinterpret_cast<uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] != 0;
  }
  return t;
}

// ---------------------------------------------------------------------------
// The index: magic "GRCKPTIX", u32 version, u32 num_shards, u64 count, the
// entries (see EncodeEntry), u32 CRC32C of all preceding bytes.

namespace {

void EncodeEntry(const BundleEntry& e, std::string* out) {
  PutU32(out, static_cast<uint32_t>(e.name.size()));
  out->append(e.name);
  PutU32(out, static_cast<uint32_t>(e.dtype));
  PutU32(out, static_cast<uint32_t>(e.shape.dims()));
  for (int d = 0; d < e.shape.dims(); ++d) PutU64(out, e.shape.dim_size(d));
  for (int d = 0; d < e.shape.dims(); ++d) {
    PutU64(out, e.slice.start(d));
    PutU64(out, e.slice.length(d));
  }
  PutU32(out, static_cast<uint32_t>(e.shard));
  PutU64(out, e.offset);
  PutU64(out, e.size);
  PutU32(out, e.crc32c);
}

}  // namespace

std::string EncodeIndex(int num_shards, const std::vector<BundleEntry>& entries) {
  return EncodeTfIndex(num_shards, entries);
}

// graphrun's first index format, kept so that tests can make such files.
std::string EncodeLegacyIndex(int num_shards, const std::vector<BundleEntry>& entries) {
  std::string out(kIndexMagic, sizeof(kIndexMagic));
  PutU32(&out, kFormatVersion);
  PutU32(&out, static_cast<uint32_t>(num_shards));
  PutU64(&out, entries.size());
  for (const BundleEntry& e : entries) EncodeEntry(e, &out);
  PutU32(&out, Crc32c(0, out.data(), out.size()));
  return out;
}

// Bounds-checked reads from a byte string.
namespace {

class Cursor {
 public:
  explicit Cursor(absl::string_view s) : s_(s) {}
  bool U32(uint32_t* v) { return Raw(v, 4); }
  bool U64(uint64_t* v) { return Raw(v, 8); }
  bool I64(int64_t* v) { return Raw(v, 8); }
  bool Bytes(size_t n, std::string* v) {
    if (n > s_.size()) return false;
    v->assign(s_.data(), n);
    s_.remove_prefix(n);
    return true;
  }
  size_t left() const { return s_.size(); }

 private:
  bool Raw(void* v, size_t n) {
    if (n > s_.size()) return false;
    std::memcpy(v, s_.data(), n);
    s_.remove_prefix(n);
    return true;
  }
  absl::string_view s_;
};

// Smallest encoded entry: empty name, rank 0.
constexpr size_t kMinEntryBytes = 4 + 4 + 4 + 4 + 8 + 8 + 4;

absl::StatusOr<BundleEntry> DecodeEntry(Cursor& c, int num_shards) {
  BundleEntry e;
  uint32_t name_len, dtype, rank, shard;
  if (!c.U32(&name_len) || !c.Bytes(name_len, &e.name) || !c.U32(&dtype) || !c.U32(&rank)) {
    return absl::InvalidArgumentError("truncated entry");
  }
  e.dtype = static_cast<DataType>(dtype);
  if (!tensorflow::DataType_IsValid(static_cast<int>(dtype)) || !Storable(e.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", e.name, "': bad dtype ", dtype));
  }
  if (rank > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", e.name, "': rank ", rank));
  }
  std::vector<int64_t> dims(rank);
  for (auto& d : dims) {
    if (!c.I64(&d)) return absl::InvalidArgumentError("truncated entry");
  }
  auto shape = TensorShape::Make(dims);
  if (!shape.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", e.name, "': ", shape.status().message()));
  }
  e.shape = *shape;
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t start, length;
    if (!c.I64(&start) || !c.I64(&length)) {
      return absl::InvalidArgumentError("truncated entry");
    }
    if (start < 0 || length < 0 || start > dims[d] || length > dims[d] - start) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", e.name, "': slice outside its shape"));
    }
    e.slice.AddDim(start, length);
  }
  if (!c.U32(&shard) || !c.U64(&e.offset) || !c.U64(&e.size) || !c.U32(&e.crc32c)) {
    return absl::InvalidArgumentError("truncated entry");
  }
  if (shard >= static_cast<uint32_t>(num_shards)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", e.name, "': shard ", shard, " of ", num_shards));
  }
  e.shard = static_cast<int32_t>(shard);
  if (e.offset > UINT64_MAX - e.size) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", e.name, "': bad offset"));
  }
  const uint64_t n = static_cast<uint64_t>(e.slice.SliceShape().num_elements());
  const bool size_ok = e.dtype == DT_STRING
                           ? n <= e.size / 8
                           : e.size % static_cast<uint64_t>(DataTypeSize(e.dtype)) == 0 &&
                                 e.size / static_cast<uint64_t>(DataTypeSize(e.dtype)) == n;
  if (!size_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", e.name, "': ", e.size, " bytes for ", n, " elements"));
  }
  return e;
}

}  // namespace

bool EntryLess(const BundleEntry& a, const BundleEntry& b) {
  return a.name != b.name ? a.name < b.name : a.slice < b.slice;
}

// Checks that entries sorted by EntryLess agree on dtype and shape per name
// and hold no overlapping slices. InvalidArgument naming the tensor.
absl::Status CheckConsistent(const std::vector<BundleEntry>& entries) {
  for (size_t i = 0; i < entries.size();) {
    size_t j = i + 1;
    while (j < entries.size() && entries[j].name == entries[i].name) ++j;
    for (size_t a = i; a < j; ++a) {
      const BundleEntry& x = entries[a];
      if (x.dtype != entries[i].dtype || x.shape != entries[i].shape) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", x.name, "' saved as both ", DataTypeString(entries[i].dtype),
                         entries[i].shape.DebugString(), " and ", DataTypeString(x.dtype),
                         x.shape.DebugString()));
      }
    }
    std::vector<TensorSlice> slices;
    slices.reserve(j - i);
    for (size_t a = i; a < j; ++a) slices.push_back(entries[a].slice);
    GR_ASSIGN_OR_RETURN(auto overlap,
                        FindOverlap(slices, absl::StrCat("tensor '", entries[i].name, "'")));
    if (overlap.first >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", entries[i].name, "' saved twice: slices ",
                       slices[overlap.first].DebugString(), " and ",
                       slices[overlap.second].DebugString(), " overlap"));
    }
    i = j;
  }
  return absl::OkStatus();
}

absl::Status DecodeIndex(absl::string_view bytes, const std::string& file, int* num_shards,
                         std::vector<BundleEntry>* entries) {
  auto corrupt = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("corrupt checkpoint index ", file, ": ", why));
  };
  const bool legacy = bytes.size() >= sizeof(kIndexMagic) &&
                      std::memcmp(bytes.data(), kIndexMagic, sizeof(kIndexMagic)) == 0;
  if (!legacy) {
    if (!IsTfIndex(bytes)) return corrupt("not a checkpoint index (no table magic number)");
    absl::Status s = DecodeTfIndex(bytes, num_shards, entries);
    if (absl::IsUnimplemented(s)) {  // a version or byte order this reader lacks
      return absl::UnimplementedError(absl::StrCat("checkpoint index ", file, ": ", s.message()));
    }
    if (!s.ok()) return corrupt(s.message());
    std::sort(entries->begin(), entries->end(), EntryLess);
    s = CheckConsistent(*entries);
    if (absl::IsResourceExhausted(s)) return s;
    if (!s.ok()) return corrupt(s.message());
    return absl::OkStatus();
  }
  if (bytes.size() < sizeof(kIndexMagic) + 4 + 4 + 8 + 4) return corrupt("too short");
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  absl::string_view body = bytes.substr(0, bytes.size() - 4);
  if (Crc32c(0, body.data(), body.size()) != stored_crc) {
    return corrupt("checksum mismatch");
  }
  Cursor c(body.substr(sizeof(kIndexMagic)));
  uint32_t version, shards;
  uint64_t count;
  if (!c.U32(&version) || !c.U32(&shards) || !c.U64(&count)) return corrupt("truncated");
  if (version != kFormatVersion) {
    return corrupt(absl::StrCat("unsupported format version ", version));
  }
  if (shards < 1 || shards > kMaxShards) {
    return corrupt(absl::StrCat("bad shard count ", shards));
  }
  if (count > c.left() / kMinEntryBytes) return corrupt("bad entry count");
  *num_shards = static_cast<int>(shards);
  entries->clear();
  entries->reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    auto e = DecodeEntry(c, *num_shards);
    if (!e.ok()) return corrupt(e.status().message());
    e->legacy_strings = true;
    entries->push_back(std::move(*e));
  }
  if (c.left() != 0) return corrupt("trailing bytes");
  std::sort(entries->begin(), entries->end(), EntryLess);
  absl::Status s = CheckConsistent(*entries);
  if (absl::IsResourceExhausted(s)) return s;
  if (!s.ok()) return corrupt(s.message());
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace graphrun
