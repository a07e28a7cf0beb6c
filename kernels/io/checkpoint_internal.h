// Private helpers shared by the files implementing the checkpoint bundle
// format (docs/checkpoint_format.md); the API is kernels/io/checkpoint_util.h.
//   checkpoint_io.cc      file access: every OS call of the format goes
//                         through these helpers (atomic tempstate writes);
//   checkpoint_index.cc   tensor encoding and the index file's encoding;
//   checkpoint_util.cc    slice geometry (and the public TensorSlice, CRC32C,
//                         file names).
// Not for use outside the checkpoint implementation.
#ifndef GRAPHRUN_KERNELS_IO_CHECKPOINT_INTERNAL_H_
#define GRAPHRUN_KERNELS_IO_CHECKPOINT_INTERNAL_H_

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/proto/tensor_bundle.pb.h"
#include "graph/tensor.h"
#include "kernels/io/checkpoint_util.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the checkpoint format stores little-endian values");

namespace graphrun {
namespace checkpoint {

constexpr int kMaxRank = 64;
constexpr int64_t kMaxShards = 1 << 20;
// Marks temporary files: "<file>.tempstate<random>".
constexpr char kTempMarker[] = ".tempstate";

// --- Files (checkpoint_io.cc) ----------------------------------------------

// An error status for errno `err` of operation `what` on `path`: NotFound,
// PermissionDenied, ResourceExhausted or Internal.
absl::Status IoError(absl::string_view what, const std::string& path, int err);

// Closes a file descriptor on scope exit.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// "." for a bare name, "/" for a file in the root.
std::string Dirname(absl::string_view path);
std::string Basename(absl::string_view path);
// `name` itself when absolute or `dir` is empty.
std::string JoinPath(absl::string_view dir, absl::string_view name);
// mkdir -p. FailedPrecondition when a component is not a directory.
absl::Status RecursivelyCreateDir(const std::string& dir);
// "<path>.tempstate<random hex>".
std::string TempFilename(const std::string& path);
// Writes all `n` bytes to `fd` (written at `path`, for messages).
absl::Status WriteAll(int fd, const char* data, size_t n, const std::string& path);
absl::Status FsyncDir(const std::string& dir);
// fsync + close `fd` (written at `tmp`), then renames tmp over `path`.
// Removes `tmp` on failure.
absl::Status CommitTempFile(int fd, const std::string& tmp, const std::string& path);
// Writes `contents` to `path` so that readers see the old file or the new
// one, never a part: tempstate file, fsync, rename, fsync the directory.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);
// NotFound when `path` does not exist.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);
// OK when the open `fd` is a regular file (not a FIFO that would block, nor
// a device) no larger than the per-allocation cap: InvalidArgument or
// ResourceExhausted naming `path` otherwise.
absl::Status CheckRegularFile(int fd, const std::string& path);
bool FileExists(const std::string& path);

// --- Encoding (checkpoint_index.cc) ----------------------------------------

// True for the dtypes a checkpoint can hold: fixed-size types and strings.
bool Storable(DataType dt);
// A string tensor's bytes, as TensorFlow writes them: a varint64 length per
// element, a masked CRC32C of the lengths (each as a 4-byte little-endian
// integer, 8 bytes past 2^32 - 1), then the bytes of all elements. `crc`
// gets the entry's checksum, TensorFlow's: that CRC continued over the
// length checksum's 4 bytes and the elements' bytes (never the varints).
std::string EncodeStrings(const Tensor& t, uint32_t* crc);
// Decodes the bytes of entry `e` into a tensor of the entry's slice shape.
// DataLoss (with `file`) when the bytes do not fit the entry.
absl::StatusOr<Tensor> DecodeTensor(const BundleEntry& e, absl::string_view bytes,
                                    const std::string& file);
// The index file's bytes: TensorFlow's table (EncodeTfIndex).
std::string EncodeIndex(int num_shards, const std::vector<BundleEntry>& entries);
// The index in graphrun's first format (magic "GRCKPTIX"), which readers
// still accept; for tests.
std::string EncodeLegacyIndex(int num_shards, const std::vector<BundleEntry>& entries);
// Parses and verifies index bytes read from `file`; `entries` come out
// sorted by EntryLess. DataLoss naming `file` when corrupt.
absl::Status DecodeIndex(absl::string_view bytes, const std::string& file, int* num_shards,
                         std::vector<BundleEntry>* entries);
// Orders entries by name, then slice.
bool EntryLess(const BundleEntry& a, const BundleEntry& b);
// Checks that entries sorted by EntryLess agree on dtype and shape per name
// and hold no overlapping slices. InvalidArgument naming the tensor.
absl::Status CheckConsistent(const std::vector<BundleEntry>& entries);

// --- TensorFlow's index (checkpoint_tf_index.cc) ---------------------------

// LevelDB's CRC masking, used by TensorFlow's tables and bundle entries.
uint32_t MaskCrc(uint32_t crc);
uint32_t UnmaskCrc(uint32_t masked);
// The key of a slice of tensor `name` (TensorFlow's EncodeTensorNameSlice:
// OrderedCode of 0, name, rank, then start and length per dimension, with
// 0 and -1 for a whole dimension).
std::string EncodeTensorNameSlice(absl::string_view name, const TensorSlice& slice);
// The .index table for `entries` (sorted by EntryLess), data blocks of
// about `block_size` bytes, uncompressed.
std::string EncodeTfIndex(int num_shards, const std::vector<BundleEntry>& entries,
                          size_t block_size = 256 * 1024);
// A table (LevelDB's layout, as TensorFlow writes it) of `records`, data
// blocks of about `block_size` bytes, uncompressed.
std::string EncodeTable(const std::map<std::string, std::string>& records, size_t block_size);
// True when `bytes` end with the table magic number.
bool IsTfIndex(absl::string_view bytes);
// Calls fn(key, value) for each record of a table, in key order, checking
// the footer, every block's checksum (snappy blocks decompressed) and the
// keys' order. InvalidArgument saying what is wrong, or fn's error.
absl::Status ForEachTableRecord(
    absl::string_view bytes,
    const std::function<absl::Status(const std::string&, absl::string_view)>& fn);
// Parses a TensorFlow .index table (snappy-compressed blocks too) into
// entries, unsorted; partitioned tensors come out as one entry per slice.
// InvalidArgument saying what is wrong (the caller names the file);
// Unimplemented for a header this reader cannot read (big-endian, a
// version that needs a newer reader).
absl::Status DecodeTfIndex(absl::string_view bytes, int* num_shards,
                           std::vector<BundleEntry>* entries);
// The shape and the (resolved) slice of tensor `name` as a table record
// gives them; InvalidArgument naming the tensor for an unknown or too
// large rank, bad dimensions, or a slice of another rank or leaving the
// shape. `unresolved`, when given, gets the slice as written ("-" for a
// whole dimension), which its OrderedCode key is made of.
absl::StatusOr<TensorShape> ShapeFromProto(const std::string& name,
                                           const tensorflow::TensorShapeProto& p);
absl::StatusOr<TensorSlice> SliceFromProto(const std::string& name,
                                           const tensorflow::TensorSliceProto& p,
                                           const TensorShape& shape,
                                           TensorSlice* unresolved = nullptr);
// Decodes a string tensor in TensorFlow's layout (EncodeStrings), checking
// the length checksum and the entry's `crc32c` as TensorFlow does. Strings
// graphrun wrote before it checksummed them so (the length checksum over
// the varint bytes, the entry's over the raw bytes) are accepted too.
absl::StatusOr<Tensor> DecodeTfStrings(const BundleEntry& e, absl::string_view bytes);

// --- TensorFlow's V1 checkpoints (checkpoint_tf_v1.cc) ----------------------

// Parses one file of a V1 checkpoint (a table of SavedTensorSlices),
// appending an entry per saved slice (BundleEntry::v1_value indexing the
// slice's values, appended to `values`). InvalidArgument saying what is
// wrong (the caller names the file).
absl::Status DecodeTfV1Checkpoint(absl::string_view bytes, std::vector<BundleEntry>* entries,
                                  std::vector<Tensor>* values);
// The files of the V1 checkpoint at `prefix`: `prefix` itself when it is a
// regular file, otherwise its shards "prefix-NNNNN-of-MMMMM" (in order);
// empty when there are none. DataLoss naming the prefix when shards are
// missing or disagree on their count.
absl::StatusOr<std::vector<std::string>> TfV1Files(const std::string& prefix);

// --- Slice geometry (checkpoint_util.cc) -----------------------------------

// The number of elements two resolved slices of equal rank share.
int64_t IntersectionVolume(const TensorSlice& a, const TensorSlice& b);

// Two of `slices` (resolved, of equal rank) that share an element or are
// equal, as indices into `slices`; {-1, -1} when none do. A sweep along
// the dimension with the most distinct starts: a partition along any one
// axis takes O(n log n), where comparing every pair took an hour for a
// million slices. ResourceExhausted naming `what` when the slices would
// still need more than `max_comparisons`.
absl::StatusOr<std::pair<int64_t, int64_t>> FindOverlap(const std::vector<TensorSlice>& slices,
                                                        absl::string_view what,
                                                        int64_t max_comparisons = 100'000'000);

}  // namespace checkpoint
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_IO_CHECKPOINT_INTERNAL_H_
