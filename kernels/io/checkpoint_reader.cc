// Reading checkpoint bundles: BundleReader, which verifies the index and
// data and assembles requested slices from the saved ones. See
// checkpoint_util.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "graph/memory_budget.h"
#include "graph/status.h"
#include "kernels/framework/array_util.h"
#include "kernels/io/checkpoint_internal.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace checkpoint {

namespace {

// ---------------------------------------------------------------------------
// Slice assembly.

// Copies the intersection of resolved slices `src_slice` (data `src`) and
// `dst_slice` (data `dst`) from src to dst; returns its element count.
// REQUIRES: same rank and dtype; tensors shaped like their slices.
absl::StatusOr<int64_t> CopyIntersection(const TensorSlice& src_slice, const Tensor& src,
                                         const TensorSlice& dst_slice, const Tensor& dst) {
  const int rank = src_slice.dims();
  if (rank == 0) {
    GR_RETURN_IF_ERROR(array_util::CopyElements(src, 0, dst, 0, 1));
    return 1;
  }
  std::vector<int64_t> lo(rank), len(rank);
  int64_t volume = 1;
  for (int d = 0; d < rank; ++d) {
    lo[d] = std::max(src_slice.start(d), dst_slice.start(d));
    int64_t hi = std::min(src_slice.start(d) + src_slice.length(d),
                          dst_slice.start(d) + dst_slice.length(d));
    len[d] = std::max<int64_t>(0, hi - lo[d]);
    volume *= len[d];
  }
  if (volume == 0) return 0;
  // Row-major strides of both tensors.
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) {
    src_stride[d] = src_stride[d + 1] * src_slice.length(d + 1);
    dst_stride[d] = dst_stride[d + 1] * dst_slice.length(d + 1);
  }
  std::vector<int64_t> idx(rank, 0);  // position within the intersection
  while (true) {
    int64_t so = 0, doff = 0;
    for (int d = 0; d < rank; ++d) {
      so += (lo[d] + idx[d] - src_slice.start(d)) * src_stride[d];
      doff += (lo[d] + idx[d] - dst_slice.start(d)) * dst_stride[d];
    }
    GR_RETURN_IF_ERROR(array_util::CopyElements(src, so, dst, doff, len[rank - 1]));
    int d = rank - 2;
    while (d >= 0 && ++idx[d] == len[d]) idx[d--] = 0;
    if (d < 0) break;
  }
  return volume;
}

}  // namespace

// ---------------------------------------------------------------------------
// BundleReader.

bool BundleReader::Exists(const std::string& prefix) {
  if (FileExists(IndexFilename(prefix))) return true;
  absl::StatusOr<std::vector<std::string>> v1 = TfV1Files(prefix);
  return !v1.ok() || !v1->empty();  // a broken one: Open says how
}

absl::StatusOr<std::unique_ptr<BundleReader>> BundleReader::Open(std::string prefix) {
  std::string file = IndexFilename(prefix);
  auto bytes = ReadFileToString(file);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status())) {
      GR_ASSIGN_OR_RETURN(std::vector<std::string> v1, TfV1Files(prefix));
      if (!v1.empty()) return OpenV1(std::move(prefix), v1);
      return absl::NotFoundError(
          absl::StrCat("checkpoint '", prefix, "' not found: no file ", file));
    }
    return bytes.status();
  }
  std::unique_ptr<BundleReader> r(new BundleReader());
  r->prefix_ = std::move(prefix);
  GR_RETURN_IF_ERROR(DecodeIndex(*bytes, file, &r->num_shards_, &r->entries_));
  return r;
}

absl::StatusOr<std::unique_ptr<BundleReader>> BundleReader::OpenV1(
    std::string prefix, const std::vector<std::string>& files) {
  std::unique_ptr<BundleReader> r(new BundleReader());
  r->prefix_ = std::move(prefix);
  r->num_shards_ = static_cast<int>(files.size());
  for (const std::string& file : files) {
    GR_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(file));
    if (!IsTfIndex(bytes)) {
      return absl::DataLossError(absl::StrCat("checkpoint '", r->prefix_, "': ", file,
                                              " is no checkpoint (no ", IndexFilename(r->prefix_),
                                              ", and not a TensorFlow V1 checkpoint file)"));
    }
    absl::Status s = DecodeTfV1Checkpoint(bytes, &r->entries_, &r->v1_values_);
    if (absl::IsResourceExhausted(s)) {  // the file may be fine: the budget is not
      return absl::ResourceExhaustedError(
          absl::StrCat("V1 checkpoint file ", file, ": ", s.message()));
    }
    if (!s.ok()) {
      return absl::DataLossError(
          absl::StrCat("corrupt V1 checkpoint file ", file, ": ", s.message()));
    }
  }
  std::sort(r->entries_.begin(), r->entries_.end(), EntryLess);
  absl::Status consistent = CheckConsistent(r->entries_);
  if (absl::IsResourceExhausted(consistent)) return consistent;
  if (!consistent.ok()) {
    return absl::DataLossError(
        absl::StrCat("V1 checkpoint '", r->prefix_, "': ", consistent.message()));
  }
  return r;
}

std::pair<const BundleEntry*, const BundleEntry*> BundleReader::Range(
    absl::string_view name) const {
  auto lo = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const BundleEntry& e, absl::string_view n) { return e.name < n; });
  auto hi = std::upper_bound(lo, entries_.end(), name,
                             [](absl::string_view n, const BundleEntry& e) { return n < e.name; });
  return {entries_.data() + (lo - entries_.begin()), entries_.data() + (hi - entries_.begin())};
}

bool BundleReader::Contains(absl::string_view name) const {
  auto r = Range(name);
  return r.first != r.second;
}

absl::StatusOr<std::pair<DataType, TensorShape>> BundleReader::LookupDtypeAndShape(
    absl::string_view name) const {
  auto r = Range(name);
  if (r.first == r.second) {
    return absl::NotFoundError(
        absl::StrCat("tensor '", name, "' not found in checkpoint '", prefix_, "'"));
  }
  return std::make_pair(r.first->dtype, r.first->shape);
}

absl::StatusOr<Tensor> BundleReader::ReadEntry(const BundleEntry& e) const {
  if (e.v1_value >= 0) return v1_values_[static_cast<size_t>(e.v1_value)];
  std::string file = DataFilename(prefix_, e.shard, num_shards_);
  ScopedFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return absl::DataLossError(
          absl::StrCat("checkpoint data file ", file, " is missing (tensor '", e.name, "')"));
    }
    return IoError("cannot open", file, errno);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return IoError("cannot stat", file, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint data file ", file, " is not a regular file"));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (e.offset > file_size || e.size > file_size - e.offset) {
    return absl::DataLossError(
        absl::StrCat("checkpoint data file ", file, " is truncated: tensor '", e.name,
                     "' needs bytes up to ", e.offset + e.size, ", the file has ", file_size));
  }
  // The raw bytes count in the memory budget while they are decoded (a
  // sparse 1 GB file was read whole under a 256 MiB cap before the tensor
  // they make was refused).
  GR_RETURN_IF_ERROR(memory_internal::ReserveMore(
      static_cast<int64_t>(e.size), static_cast<int64_t>(e.size),
      absl::StrCat("reading tensor '", e.name, "' (", e.size, " bytes) from ", file)));
  struct Unreserve {
    int64_t n;
    ~Unreserve() { memory_internal::ReleaseMore(n); }
  } unreserve{static_cast<int64_t>(e.size)};
  std::string bytes(e.size, '\0');
  uint64_t done = 0;
  while (done < e.size) {
    ssize_t r = ::pread(fd.get(), &bytes[done], e.size - done, static_cast<off_t>(e.offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError("cannot read", file, errno);
    if (r == 0) {
      return absl::DataLossError(
          absl::StrCat("checkpoint data file ", file, " is truncated (tensor '", e.name, "')"));
    }
    done += static_cast<uint64_t>(r);
  }
  // TensorFlow's string entries are checksummed over their lengths as
  // integers, not their raw bytes: DecodeTensor checks those.
  const bool tf_strings = e.dtype == DT_STRING && !e.legacy_strings;
  if (!tf_strings && Crc32c(0, bytes.data(), bytes.size()) != e.crc32c) {
    return absl::DataLossError(absl::StrCat("checksum mismatch in checkpoint data file ", file,
                                            " for tensor '", e.name, "'"));
  }
  return DecodeTensor(e, bytes, file);
}

absl::StatusOr<Tensor> BundleReader::LookupSlice(absl::string_view name,
                                                 const TensorSlice& slice) const {
  auto range = Range(name);
  if (range.first == range.second) {
    return absl::NotFoundError(
        absl::StrCat("tensor '", name, "' not found in checkpoint '", prefix_, "'"));
  }
  const BundleEntry& first = *range.first;
  if (first.unreadable) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor '", name, "' in checkpoint '", prefix_, "' has dtype ", DataTypeString(first.dtype),
        " (", static_cast<int>(first.dtype), "), which graphrun cannot restore"));
  }
  if (slice.dims() != first.shape.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': slice ",
                                                   slice.DebugString(), " does not fit shape ",
                                                   first.shape.DebugString()));
  }
  // Saved exactly as requested: no assembly.
  for (const BundleEntry* e = range.first; e != range.second; ++e) {
    if (e->slice == slice) return ReadEntry(*e);
  }
  // Otherwise check from the index alone that the saved slices (which do
  // not overlap) cover the request, then read them and copy the parts.
  const int64_t want = slice.SliceShape().num_elements();
  int64_t covered = 0;
  std::vector<const BundleEntry*> parts;
  for (const BundleEntry* e = range.first; e != range.second; ++e) {
    int64_t v = IntersectionVolume(e->slice, slice);
    if (v > 0) {
      parts.push_back(e);
      covered += v;
    }
  }
  if (covered != want) {
    return absl::NotFoundError(absl::StrCat("checkpoint '", prefix_, "' holds only part of slice ",
                                            slice.DebugString(), " of tensor '", name, "' (",
                                            covered, " of ", want, " elements)"));
  }
  std::vector<Tensor> values;
  for (const BundleEntry* e : parts) {
    GR_ASSIGN_OR_RETURN(Tensor t, ReadEntry(*e));
    values.push_back(std::move(t));
  }
  Tensor out(first.dtype, slice.SliceShape());
  for (size_t i = 0; i < parts.size(); ++i) {
    GR_RETURN_IF_ERROR(CopyIntersection(parts[i]->slice, values[i], slice, out).status());
  }
  return out;
}

absl::StatusOr<Tensor> BundleReader::Lookup(absl::string_view name) const {
  GR_ASSIGN_OR_RETURN(auto dtype_and_shape, LookupDtypeAndShape(name));
  TensorSlice whole = TensorSlice::Full(dtype_and_shape.second.dims());
  GR_ASSIGN_OR_RETURN(whole, whole.Resolve(dtype_and_shape.second));
  return LookupSlice(name, whole);
}

absl::StatusOr<Tensor> BundleReader::Restore(absl::string_view name, DataType dtype,
                                             absl::string_view shape_and_slice) const {
  auto spec = ParseShapeAndSlice(shape_and_slice);
  if (!spec.ok()) return AnnotateStatus(spec.status(), absl::StrCat("tensor '", name, "': "));
  GR_ASSIGN_OR_RETURN(auto saved, LookupDtypeAndShape(name));
  if (saved.first != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' in checkpoint '", prefix_, "' has dtype ", DataTypeString(saved.first),
        " but ", DataTypeString(dtype), " was requested"));
  }
  if (spec->whole) return Lookup(name);
  if (spec->full_shape != saved.second) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "' in checkpoint '", prefix_, "' has shape ",
                     saved.second.DebugString(), " but shape_and_slice '", shape_and_slice,
                     "' requests shape ", spec->full_shape.DebugString()));
  }
  return LookupSlice(name, spec->slice);
}

}  // namespace checkpoint
}  // namespace graphrun
