// TensorSlice, ParseShapeAndSlice, CRC32C and the file names of the
// checkpoint bundle format (docs/checkpoint_format.md). The rest of the
// format lives in checkpoint_io.cc (file access), checkpoint_index.cc (tensor
// and index encoding), checkpoint_writer.cc (BundleWriter, MergeBundles),
// checkpoint_reader.cc (BundleReader) and checkpoint_state.cc (the
// "checkpoint" state file, DeleteCheckpoint).
#include "kernels/io/checkpoint_util.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_internal.h"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace graphrun {
namespace checkpoint {

// ---------------------------------------------------------------------------
// CRC32C.

namespace {
struct Crc32cTable {
  uint32_t t[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
  }
};
}  // namespace

uint32_t Crc32c(uint32_t crc, const char* data, size_t n) {
  uint32_t c = ~crc;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
#if defined(__SSE4_2__)
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  c = static_cast<uint32_t>(c64);
  while (n > 0) {
    c = _mm_crc32_u8(c, *p++);
    --n;
  }
#else
  static const Crc32cTable table;
  while (n > 0) {
    c = table.t[(c ^ *p++) & 0xff] ^ (c >> 8);
    --n;
  }
#endif
  return ~c;
}

// ---------------------------------------------------------------------------
// Names.

std::string IndexFilename(absl::string_view prefix) { return absl::StrCat(prefix, ".index"); }
std::string DataFilename(absl::string_view prefix, int shard, int num_shards) {
  return absl::StrFormat("%s.data-%05d-of-%05d", prefix, shard, num_shards);
}
std::string ShardedFilename(absl::string_view basename, int shard, int num_shards) {
  return absl::StrFormat("%s-%05d-of-%05d", basename, shard, num_shards);
}
std::string ShardedFilespec(absl::string_view basename, int num_shards) {
  return absl::StrFormat(
      "%s-?????"
      "-of-%05d",
      basename, num_shards);
}

// ---------------------------------------------------------------------------
// TensorSlice.

TensorSlice TensorSlice::Full(int rank) {
  TensorSlice s;
  for (int d = 0; d < rank; ++d) s.AddDim(0, -1);
  return s;
}

absl::StatusOr<TensorSlice> TensorSlice::Parse(absl::string_view spec) {
  TensorSlice s;
  if (spec.empty()) return s;
  for (absl::string_view part : absl::StrSplit(spec, ':')) {
    if (part == "-") {
      s.AddDim(0, -1);
      continue;
    }
    std::vector<absl::string_view> sl = absl::StrSplit(part, ',');
    int64_t start, length;
    if (sl.size() != 2 || !absl::SimpleAtoi(sl[0], &start) || !absl::SimpleAtoi(sl[1], &length) ||
        start < 0 || length < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad tensor slice '", spec, "': expected start,length or - per dimension"));
    }
    s.AddDim(start, length);
  }
  if (s.dims() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("bad tensor slice '", spec, "': rank"));
  }
  return s;
}

absl::StatusOr<TensorSlice> TensorSlice::Resolve(const TensorShape& shape) const {
  if (dims() != shape.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("slice ", DebugString(), " has rank ", dims(),
                                                   " but shape ", shape.DebugString(), " rank ",
                                                   shape.dims()));
  }
  TensorSlice r;
  for (int d = 0; d < dims(); ++d) {
    int64_t dim = shape.dim_size(d);
    if (IsFullAt(d)) {
      r.AddDim(0, dim);
    } else if (start(d) < 0 || start(d) > dim || length(d) > dim - start(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice ", DebugString(), " leaves shape ", shape.DebugString()));
    } else {
      r.AddDim(start(d), length(d));
    }
  }
  return r;
}

TensorShape TensorSlice::SliceShape() const { return TensorShape(lengths_); }

bool TensorSlice::Covers(const TensorShape& shape) const {
  if (dims() != shape.dims()) return false;
  for (int d = 0; d < dims(); ++d) {
    if (starts_[d] != 0 || lengths_[d] != shape.dim_size(d)) return false;
  }
  return true;
}

bool TensorSlice::Overlaps(const TensorSlice& o) const {
  if (dims() != o.dims()) return false;
  return IntersectionVolume(*this, o) > 0;
}

std::string TensorSlice::DebugString() const {
  std::vector<std::string> parts;
  for (int d = 0; d < dims(); ++d) {
    parts.push_back(IsFullAt(d) ? "-" : absl::StrCat(starts_[d], ",", lengths_[d]));
  }
  return absl::StrJoin(parts, ":");
}

absl::StatusOr<ShapeAndSlice> ParseShapeAndSlice(absl::string_view spec) {
  ShapeAndSlice r;
  if (spec.empty()) return r;
  r.whole = false;
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ' ', absl::SkipEmpty());
  if (parts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("bad shape_and_slice '", spec, "'"));
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    int64_t d;
    if (!absl::SimpleAtoi(parts[i], &d) || d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad shape_and_slice '", spec, "': '", parts[i], "' is not a dimension"));
    }
    dims.push_back(d);
  }
  // TensorFlow's rule: the dimensions, then the slice ("-" or start,length
  // per dimension). "2 2" is a shape with a slice "2" that says nothing,
  // an error there and here (it once read as the whole of a [2, 2]).
  if (parts.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad shape_and_slice '", spec, "': expected the dimensions, then the slice"));
  }
  TensorSlice slice;
  GR_ASSIGN_OR_RETURN(slice, TensorSlice::Parse(parts.back()));
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrCat("bad shape_and_slice '", spec, "': rank"));
  }
  GR_ASSIGN_OR_RETURN(r.full_shape, TensorShape::Make(dims));
  auto resolved = slice.Resolve(r.full_shape);
  if (!resolved.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad shape_and_slice '", spec, "': ", resolved.status().message()));
  }
  r.slice = *resolved;
  return r;
}

// ---------------------------------------------------------------------------
// Slice geometry.

int64_t IntersectionVolume(const TensorSlice& a, const TensorSlice& b) {
  int64_t v = 1;
  for (int d = 0; d < a.dims(); ++d) {
    int64_t lo = std::max(a.start(d), b.start(d));
    int64_t hi = std::min(a.start(d) + a.length(d), b.start(d) + b.length(d));
    if (hi <= lo) return 0;
    v *= hi - lo;
  }
  return v;
}

absl::StatusOr<std::pair<int64_t, int64_t>> FindOverlap(const std::vector<TensorSlice>& slices,
                                                        absl::string_view what,
                                                        int64_t max_comparisons) {
  const int64_t n = static_cast<int64_t>(slices.size());
  if (n < 2) return std::pair<int64_t, int64_t>{-1, -1};
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  // Equal slices (empty ones too, which share no element) sort together.
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return slices[a] < slices[b]; });
  for (int64_t i = 1; i < n; ++i) {
    if (slices[order[i - 1]] == slices[order[i]]) return std::pair{order[i - 1], order[i]};
  }
  const int rank = slices[0].dims();
  if (rank == 0) return std::pair{order[0], order[1]};  // two scalars
  // The axis the slices are cut along: the most distinct starts.
  int axis = 0;
  size_t most = 0;
  for (int d = 0; d < rank; ++d) {
    std::vector<int64_t> starts(n);
    for (int64_t i = 0; i < n; ++i) starts[i] = slices[i].start(d);
    std::sort(starts.begin(), starts.end());
    const size_t distinct = std::unique(starts.begin(), starts.end()) - starts.begin();
    if (distinct > most) most = distinct, axis = d;
  }
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return slices[a].start(axis) < slices[b].start(axis); });
  // Sweep: `open` holds the slices whose extent along the axis reaches past
  // the current start; only those can share an element with it.
  int64_t comparisons = 0;
  std::vector<int64_t> open;
  for (int64_t i : order) {
    const TensorSlice& s = slices[i];
    if (s.length(axis) == 0) continue;  // no element to share
    const int64_t start = s.start(axis);
    open.erase(std::remove_if(open.begin(), open.end(),
                              [&](int64_t o) {
                                return slices[o].start(axis) + slices[o].length(axis) <= start;
                              }),
               open.end());
    comparisons += static_cast<int64_t>(open.size()) + 1;
    if (comparisons > max_comparisons) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, ": ", n, " slices are too many to check for overlaps"));
    }
    for (int64_t o : open) {
      if (IntersectionVolume(slices[o], s) > 0) return std::pair{o, i};
    }
    open.push_back(i);
  }
  return std::pair<int64_t, int64_t>{-1, -1};
}

}  // namespace checkpoint
}  // namespace graphrun
