// Checkpoint bundles: graphrun's on-disk format for saved variables
// (docs/checkpoint_format.md), written by SaveV2/MergeV2Checkpoints and read
// by RestoreV2, and usable by tools.
//
// A checkpoint is named by a prefix P and consists of
//   P.index                         every saved tensor (slice) with its dtype,
//                                   full shape, slice, shard, offset, length
//                                   and CRC32C; itself CRC32C-protected;
//   P.data-0000k-of-0000n           the tensors' bytes, one file per shard.
// One SaveV2 (BundleWriter) writes a one-shard checkpoint; sharded saving
// runs one SaveV2 per parameter-server task into temporary prefixes and
// MergeV2Checkpoints (MergeBundles) renames their data files to
// P.data-k-of-n and writes the single P.index. Partitioned variables are
// saved as several slices of one name, possibly in different shards; a
// reader assembles any requested slice from whatever slices were saved.
//
// Crash safety: every file is written to "<file>.tempstate<random>", fsynced
// and renamed into place; the index is renamed last, so a checkpoint exists
// only once complete and a crash mid-save leaves earlier checkpoints (and
// the "checkpoint" state file) untouched. Readers ignore tempstate files.
//
// Errors: a missing tensor is NotFound naming the tensor and checkpoint; a
// dtype or shape mismatch is InvalidArgument naming the tensor; a corrupt
// or truncated file is DataLoss naming the file. Corrupt input never
// crashes the reader.
//
// Thread-safety: BundleWriter is not thread-safe. BundleReader's const
// methods may be called concurrently. Writing two checkpoints with the same
// prefix concurrently is not supported.
#ifndef GRAPHRUN_KERNELS_IO_CHECKPOINT_UTIL_H_
#define GRAPHRUN_KERNELS_IO_CHECKPOINT_UTIL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/tensor.h"

namespace graphrun {
namespace checkpoint {

// CRC32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
uint32_t Crc32c(uint32_t crc, const char* data, size_t n);

// "P.index".
std::string IndexFilename(absl::string_view prefix);
// "P.data-0000k-of-0000n".
std::string DataFilename(absl::string_view prefix, int shard, int num_shards);
// TensorFlow's sharded names: "base-0000k-of-0000n" and "base-?????-of-0000n".
std::string ShardedFilename(absl::string_view basename, int shard, int num_shards);
std::string ShardedFilespec(absl::string_view basename, int num_shards);

// A box in a tensor: per dimension a start and a length, as in TensorFlow's
// slice syntax "0,2:-" (start 0 length 2 in dimension 0; "-" = all of
// dimension 1). A length of -1 ("-") means the whole dimension until
// Resolve()d against a shape.
class TensorSlice {
 public:
  TensorSlice() = default;
  // `rank` dimensions, each whole.
  static TensorSlice Full(int rank);
  // Parses "0,2:-"; "" is a rank-0 slice. InvalidArgument on bad syntax or
  // negative starts/lengths.
  static absl::StatusOr<TensorSlice> Parse(absl::string_view spec);

  int dims() const { return static_cast<int>(starts_.size()); }
  int64_t start(int d) const { return starts_[d]; }
  int64_t length(int d) const { return lengths_[d]; }
  bool IsFullAt(int d) const { return lengths_[d] < 0; }
  void AddDim(int64_t start, int64_t length) {
    starts_.push_back(start);
    lengths_.push_back(length);
  }

  // The slice with every "-" replaced by the dimension's extent.
  // InvalidArgument when the rank differs or the box leaves `shape` (a
  // negative start too: a table record may hold one).
  absl::StatusOr<TensorSlice> Resolve(const TensorShape& shape) const;
  // REQUIRES: resolved (no "-").
  TensorShape SliceShape() const;
  // True when this resolved slice covers all of `shape`.
  bool Covers(const TensorShape& shape) const;
  // True when two resolved slices of equal rank share an element.
  bool Overlaps(const TensorSlice& o) const;
  // "0,2:-" (resolved slices print numbers everywhere).
  std::string DebugString() const;

  bool operator==(const TensorSlice& o) const {
    return starts_ == o.starts_ && lengths_ == o.lengths_;
  }
  bool operator<(const TensorSlice& o) const {
    return starts_ != o.starts_ ? starts_ < o.starts_ : lengths_ < o.lengths_;
  }

 private:
  std::vector<int64_t> starts_, lengths_;
};

// One element of SaveV2/RestoreV2's shape_and_slices: "" is the whole
// tensor; "4 10 0,2:-" is full shape [4,10], slice rows 0..1, all columns.
struct ShapeAndSlice {
  bool whole = true;       // "" given
  TensorShape full_shape;  // when !whole
  TensorSlice slice;       // when !whole; resolved against full_shape
};
// InvalidArgument on bad syntax or a slice outside the shape.
absl::StatusOr<ShapeAndSlice> ParseShapeAndSlice(absl::string_view spec);

// One saved tensor or slice of a tensor, as listed in the index.
struct BundleEntry {
  std::string name;
  DataType dtype = DT_INVALID;
  TensorShape shape;    // the full tensor's shape
  TensorSlice slice;    // the part stored (resolved; the whole when unsliced)
  int32_t shard = 0;    // data file number
  uint64_t offset = 0;  // in the data file
  uint64_t size = 0;    // bytes
  uint32_t crc32c = 0;  // of those bytes
  // Strings in graphrun's first format (u64 lengths, no checksum), read
  // from an index in that format.
  bool legacy_strings = false;
  // A dtype graphrun cannot hold (variant, quantized types, a type newer
  // than it knows), read from a TensorFlow index: listed, and an error only
  // when it is looked up, so the checkpoint's other tensors still restore.
  bool unreadable = false;
  // Written big-endian (a TensorFlow bundle whose header says BIG): the
  // checksums cover the bytes as stored; the values are swapped on reading.
  bool big_endian = false;
  // A slice of a TensorFlow V1 checkpoint, whose values lie in its table:
  // their index among the reader's decoded values (-1: in a data file).
  int64_t v1_value = -1;
};

// Writes a one-shard checkpoint at a prefix: Add() streams each tensor to
// "P.data-00000-of-00001.tempstate…"; Finish() makes it durable and visible.
// Destroying an unfinished writer removes its temporary files.
class BundleWriter {
 public:
  // Creates the prefix's directory if needed. An I/O error (with the path)
  // when the temporary data file cannot be created.
  static absl::StatusOr<std::unique_ptr<BundleWriter>> Create(std::string prefix);
  ~BundleWriter();
  BundleWriter(const BundleWriter&) = delete;
  BundleWriter& operator=(const BundleWriter&) = delete;

  // Saves `value` whole under `name`. InvalidArgument naming the tensor for
  // an unsupported dtype (resource, variant) or a name saved already.
  absl::Status Add(absl::string_view name, const Tensor& value);
  // Saves `value` as slice `slice` of a tensor of shape `full_shape`.
  // InvalidArgument naming the tensor when `value`'s shape is not the
  // slice's, the slice leaves the shape, or it overlaps a slice of the same
  // name saved earlier (or disagrees with its dtype or full shape).
  absl::Status AddSlice(absl::string_view name, const TensorShape& full_shape,
                        const TensorSlice& slice, const Tensor& value);
  // Fsyncs and renames the data file, then writes the index the same way.
  // After an error the checkpoint does not exist (earlier files at the same
  // prefix may have been replaced; use fresh prefixes).
  absl::Status Finish();

 private:
  explicit BundleWriter(std::string prefix);
  std::string prefix_;
  std::string data_tmp_;
  int fd_ = -1;
  uint64_t offset_ = 0;
  bool finished_ = false;
  std::multimap<std::string, BundleEntry> entries_;
};

// Reads a checkpoint: parses and verifies its index on Open(); reads and
// verifies tensor data on each lookup.
class BundleReader {
 public:
  // NotFound naming the checkpoint when P.index does not exist; DataLoss
  // naming the file when it is corrupt. Without P.index, a checkpoint in
  // TensorFlow's first format (V1) is read instead: the file P itself, or
  // its shards P-00000-of-0000N (all N of them), or every file a pattern
  // (with *, ? or [) matches, as TensorFlow's V1 readers take
  // "P-?????-of-0000N".
  static absl::StatusOr<std::unique_ptr<BundleReader>> Open(std::string prefix);
  // True when Open(prefix) would find a checkpoint: P.index or a V1 file.
  static bool Exists(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  int num_shards() const { return num_shards_; }
  // Every entry, sorted by name then slice.
  const std::vector<BundleEntry>& entries() const { return entries_; }
  bool Contains(absl::string_view name) const;
  // The dtype and full shape of `name`; NotFound naming tensor and checkpoint.
  absl::StatusOr<std::pair<DataType, TensorShape>> LookupDtypeAndShape(
      absl::string_view name) const;

  // The whole tensor `name`, assembled from its saved slices.
  absl::StatusOr<Tensor> Lookup(absl::string_view name) const;
  // Restores `name` as RestoreV2 does: `shape_and_slice` as in
  // ParseShapeAndSlice; `dtype` must match the saved dtype and a given full
  // shape the saved one (InvalidArgument naming the tensor otherwise).
  // NotFound when the tensor, or a part of the requested slice, was not
  // saved; DataLoss naming the file when data is missing or corrupt.
  absl::StatusOr<Tensor> Restore(absl::string_view name, DataType dtype,
                                 absl::string_view shape_and_slice) const;
  // Slice `slice` (resolved) of `name`.
  absl::StatusOr<Tensor> LookupSlice(absl::string_view name, const TensorSlice& slice) const;

 private:
  BundleReader() = default;
  // Reads the V1 checkpoint whose shard files are `files`.
  static absl::StatusOr<std::unique_ptr<BundleReader>> OpenV1(
      std::string prefix, const std::vector<std::string>& files);
  absl::StatusOr<Tensor> ReadEntry(const BundleEntry& e) const;
  // [first, last) entries named `name`.
  std::pair<const BundleEntry*, const BundleEntry*> Range(absl::string_view name) const;

  std::string prefix_;
  int num_shards_ = 0;
  std::vector<BundleEntry> entries_;
  // A V1 checkpoint's values (BundleEntry::v1_value).
  std::vector<Tensor> v1_values_;
};

// One tensor, or a slice of one, for a TensorFlow V1 checkpoint file.
struct V1SliceToSave {
  std::string name;
  TensorShape full_shape;
  // As given: a "-" (whole) dimension is keyed and listed as whole, as
  // TensorFlow's TensorSliceWriter does; TensorSlice::Full for a tensor.
  TensorSlice slice;
  Tensor value;  // of the slice's shape
};

// Writes the TensorFlow V1 checkpoint file `filename`, as TensorFlow's Save
// and SaveSlices ops do (docs/checkpoint_format.md): one table whose empty
// key holds the meta (each tensor's name, shape, dtype and slices) and
// whose other records hold one slice each, its values in the TensorProto's
// typed fields. Written atomically (tempstate file and rename); the
// directory is created. InvalidArgument naming the tensor for a dtype that
// cannot be saved, a value whose shape is not its slice's, a slice that
// leaves the shape, slices of one name that overlap or disagree on dtype or
// shape, or a slice too large for one record (2 GiB).
absl::Status WriteTfV1Checkpoint(const std::string& filename,
                                 const std::vector<V1SliceToSave>& slices);

struct MergeOptions {
  // Also remove the (then empty) directories holding the source prefixes.
  bool delete_old_dirs = true;
  // Skip source prefixes without an index instead of failing (at least one
  // must exist).
  bool allow_missing_files = false;
};

// Merges the checkpoints at `sources` into one at `destination`: their data
// files become destination's shards (in source order) and one index lists
// every entry; the sources' index files are then deleted. NotFound for a
// missing source; InvalidArgument naming the tensor when two sources saved
// overlapping slices of it or disagree on its dtype or shape.
absl::Status MergeBundles(const std::vector<std::string>& sources, const std::string& destination,
                          const MergeOptions& options = {});

// Deletes P.index and P.data-*-of-* (and their stale tempstate files).
// Missing files are not an error.
absl::Status DeleteCheckpoint(const std::string& prefix);

// The "checkpoint" state file of a directory, TensorFlow's text format:
//   model_checkpoint_path: "model.ckpt-200"
//   all_model_checkpoint_paths: "model.ckpt-100"
//   all_model_checkpoint_paths: "model.ckpt-200"
// Paths inside the directory are stored relative to it; in this struct
// they are as given (ReadCheckpointState returns them joined with `dir`).
// A run that ended marks its last checkpoint final with a comment line
// ("# graphrun: final", which TensorFlow's text-format parser skips):
// an evaluator stops after evaluating it.
struct CheckpointState {
  std::string model_checkpoint_path;
  std::vector<std::string> all_model_checkpoint_paths;  // oldest first
  bool final = false;                                   // model_checkpoint_path is the run's last
};

// NotFound when `dir` has no state file; DataLoss naming it when it cannot
// be parsed.
absl::StatusOr<CheckpointState> ReadCheckpointState(const std::string& dir);
// Writes the state file atomically (tempstate + fsync + rename).
absl::Status WriteCheckpointState(const std::string& dir, const CheckpointState& state);
// The newest checkpoint's prefix in `dir`; NotFound when there is none or
// its index is missing.
absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir);
// Records `prefix` as the newest checkpoint of `dir`, keeping the last
// `keep_last_n` (all when <= 0): writes the state file first, then deletes
// the files of the checkpoints that fell off the list.
absl::Status UpdateCheckpointState(const std::string& dir, const std::string& prefix,
                                   int keep_last_n);
// Marks `prefix`, which must be the newest checkpoint of `dir`, final.
// FailedPrecondition when a newer one exists.
absl::Status MarkFinalCheckpoint(const std::string& dir, const std::string& prefix);

}  // namespace checkpoint
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_IO_CHECKPOINT_UTIL_H_
