// Writing checkpoint bundles: BundleWriter (one SaveV2) and MergeBundles
// (MergeV2Checkpoints). See checkpoint_util.h.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_internal.h"
#include "kernels/io/checkpoint_util.h"

namespace graphrun {
namespace checkpoint {

// ---------------------------------------------------------------------------
// BundleWriter.

BundleWriter::BundleWriter(std::string prefix) : prefix_(std::move(prefix)) {}

absl::StatusOr<std::unique_ptr<BundleWriter>> BundleWriter::Create(std::string prefix) {
  if (prefix.empty()) return absl::InvalidArgumentError("empty checkpoint prefix");
  GR_RETURN_IF_ERROR(RecursivelyCreateDir(Dirname(prefix)));
  std::unique_ptr<BundleWriter> w(new BundleWriter(std::move(prefix)));
  w->data_tmp_ = TempFilename(DataFilename(w->prefix_, 0, 1));
  w->fd_ = ::open(w->data_tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return IoError("cannot create", w->data_tmp_, errno);
  return w;
}

BundleWriter::~BundleWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(data_tmp_.c_str());
}

absl::Status BundleWriter::Add(absl::string_view name, const Tensor& value) {
  return AddSlice(name, value.shape(), TensorSlice::Full(value.dims()), value);
}

absl::Status BundleWriter::AddSlice(absl::string_view name, const TensorShape& full_shape,
                                    const TensorSlice& slice, const Tensor& value) {
  auto error = [&](absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", msg));
  };
  if (finished_ || fd_ < 0) return absl::FailedPreconditionError("writer finished");
  if (name.empty() || name[0] == '\0') {
    // TensorFlow's index keeps "" for its header and keys starting with a
    // NUL byte for slices: such a tensor would be lost, or read as another.
    return error("a tensor name may not be empty or start with a NUL byte");
  }
  if (!Storable(value.dtype())) {
    return error(absl::StrCat("cannot save a ", DataTypeString(value.dtype()), " tensor"));
  }
  auto resolved = slice.Resolve(full_shape);
  if (!resolved.ok()) return error(resolved.status().message());
  if (resolved->SliceShape() != value.shape()) {
    return error(absl::StrCat("value of shape ", value.shape().DebugString(), " for slice ",
                              resolved->DebugString(), " of shape ", full_shape.DebugString(),
                              " (slice shape ", resolved->SliceShape().DebugString(), ")"));
  }
  BundleEntry e;
  e.name = std::string(name);
  e.dtype = value.dtype();
  e.shape = full_shape;
  e.slice = *resolved;
  e.shard = 0;
  e.offset = offset_;
  auto range = entries_.equal_range(e.name);
  for (auto it = range.first; it != range.second; ++it) {
    const BundleEntry& o = it->second;
    if (o.dtype != e.dtype || o.shape != e.shape) {
      return error(
          absl::StrCat("saved already as ", DataTypeString(o.dtype), o.shape.DebugString()));
    }
    if (o.slice == e.slice || o.slice.Overlaps(e.slice)) {
      return error(absl::StrCat("slice ", e.slice.DebugString(), " overlaps slice ",
                                o.slice.DebugString(), " saved already"));
    }
  }
  if (value.dtype() == DT_STRING) {
    std::string bytes = EncodeStrings(value, &e.crc32c);
    e.size = bytes.size();
    GR_RETURN_IF_ERROR(WriteAll(fd_, bytes.data(), bytes.size(), data_tmp_));
  } else {
    e.size = static_cast<uint64_t>(value.NumElements()) * DataTypeSize(value.dtype());
    e.crc32c = Crc32c(0, value.raw_data(), e.size);
    GR_RETURN_IF_ERROR(WriteAll(fd_, value.raw_data(), e.size, data_tmp_));
  }
  offset_ += e.size;
  entries_.emplace(e.name, std::move(e));
  return absl::OkStatus();
}

absl::Status BundleWriter::Finish() {
  if (finished_ || fd_ < 0) return absl::FailedPreconditionError("writer finished");
  int fd = fd_;
  fd_ = -1;
  GR_RETURN_IF_ERROR(CommitTempFile(fd, data_tmp_, DataFilename(prefix_, 0, 1)));
  finished_ = true;
  std::vector<BundleEntry> entries;
  entries.reserve(entries_.size());
  for (auto& kv : entries_) entries.push_back(kv.second);
  std::sort(entries.begin(), entries.end(), EntryLess);
  return WriteFileAtomically(IndexFilename(prefix_), EncodeIndex(1, entries));
}

// ---------------------------------------------------------------------------
// Merging.

absl::Status MergeBundles(const std::vector<std::string>& sources, const std::string& destination,
                          const MergeOptions& options) {
  std::vector<std::unique_ptr<BundleReader>> readers;
  for (const std::string& src : sources) {
    auto r = BundleReader::Open(src);
    if (!r.ok()) {
      if (absl::IsNotFound(r.status()) && options.allow_missing_files) continue;
      return r.status();
    }
    readers.push_back(std::move(*r));
  }
  if (readers.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "none of the ", sources.size(), " checkpoints to merge into '", destination, "' exists"));
  }
  int total = 0;
  std::vector<BundleEntry> merged;
  std::string first_source;  // of merged.front()
  for (const auto& r : readers) {
    for (BundleEntry e : r->entries()) {
      // The merged index says one byte order for every data file it names.
      if (!merged.empty() && e.big_endian != merged.front().big_endian) {
        return absl::UnimplementedError(
            absl::StrCat("merging into '", destination, "': '", r->prefix(), "' is ",
                         e.big_endian ? "big" : "little", "-endian and '", first_source,
                         "' is not: checkpoints of both byte orders cannot merge"));
      }
      if (merged.empty()) first_source = r->prefix();
      if (e.unreadable) {
        return absl::UnimplementedError(absl::StrCat(
            "merging into '", destination, "': tensor '", e.name, "' of '", r->prefix(),
            "' has dtype ", DataTypeString(e.dtype), ", which graphrun cannot hold"));
      }
      e.shard += total;
      merged.push_back(std::move(e));
    }
    total += r->num_shards();
  }
  if (total > kMaxShards) return absl::InvalidArgumentError("too many shards to merge");
  std::sort(merged.begin(), merged.end(), EntryLess);
  GR_RETURN_IF_ERROR(
      AnnotateStatus(CheckConsistent(merged), absl::StrCat("merging into '", destination, "': ")));

  GR_RETURN_IF_ERROR(RecursivelyCreateDir(Dirname(destination)));
  int base = 0;
  for (const auto& r : readers) {
    for (int j = 0; j < r->num_shards(); ++j) {
      std::string from = DataFilename(r->prefix(), j, r->num_shards());
      std::string to = DataFilename(destination, base + j, total);
      if (from == to) continue;
      if (::rename(from.c_str(), to.c_str()) != 0) {
        if (errno == ENOENT) {
          return absl::DataLossError(absl::StrCat("checkpoint data file ", from, " is missing"));
        }
        return IoError(absl::StrCat("cannot rename ", from, " to"), to, errno);
      }
    }
    base += r->num_shards();
  }
  // The index last: the destination exists only once its data is in place.
  GR_RETURN_IF_ERROR(WriteFileAtomically(IndexFilename(destination), EncodeIndex(total, merged)));
  const std::string dest_index = IndexFilename(destination);
  const std::string dest_dir = Dirname(destination);
  for (const auto& r : readers) {
    std::string index = IndexFilename(r->prefix());
    if (index != dest_index) ::unlink(index.c_str());
    std::string dir = Dirname(r->prefix());
    // Only empty directories go (rmdir refuses others).
    if (options.delete_old_dirs && dir != dest_dir && dir != "." && dir != "/") {
      ::rmdir(dir.c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace graphrun
