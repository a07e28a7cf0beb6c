// The datasets behind the dataset ops (kernels/data/dataset_kernels.cc), as C++
// factories. Each returns a dataset in a shared_ptr (see dataset_util.h);
// arguments are validated here, so kernels only translate inputs and
// attrs. Semantics and the on-disk cache format: docs/datasets.md.
#ifndef GRAPHRUN_KERNELS_DATA_DATASET_INTERNAL_H_
#define GRAPHRUN_KERNELS_DATA_DATASET_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/data/dataset_util.h"

namespace graphrun {
namespace data {

// --- Sources (dataset_sources.cc) -----------------------------------------

// One element: the components themselves.
DatasetPtr MakeTensorDataset(std::vector<Tensor> components);
// One element per row of dimension 0 of every component. InvalidArgument
// for scalars or differing dim-0 sizes.
absl::StatusOr<DatasetPtr> MakeTensorSliceDataset(std::vector<Tensor> components);
// One element per record of an IDX file already decoded into `records`
// (shape [N, ...]): a tensor of shape [...] (a scalar for 1-D files).
// `filename` is for messages.
absl::StatusOr<DatasetPtr> MakeIdxDataset(std::string filename, Tensor records);

struct FixedLengthRecordOptions {
  std::vector<std::string> filenames;
  int64_t header_bytes = 0;
  int64_t record_bytes = 0;  // > 0
  int64_t footer_bytes = 0;
  int64_t buffer_size = 0;       // read chunk; <= 0 = 256 KiB
  std::string compression_type;  // "" or "GZIP"
};
// Scalar string records; see docs/datasets.md for the file layout checks.
absl::StatusOr<DatasetPtr> MakeFixedLengthRecordDataset(FixedLengthRecordOptions options);

// --- Element-wise transforms (dataset_map.cc) ------------------------------

// One parsed transform of MapTransformDataset: "[i=]name[:args]".
struct Transform {
  enum Kind { kCast, kScale, kNormalize, kReshape, kOneHot, kDecodeRaw, kSlice };
  std::string spec;    // as written, for messages
  int component = -1;  // -1: every component
  Kind kind = kCast;
  DataType dtype = DT_INVALID;   // cast, decode_raw
  double a = 0, b = 0;           // scale: a; normalize: mean a, std b
  int64_t begin = 0, size = -1;  // slice (size -1: to the end)
  std::vector<int64_t> dims;     // reshape
  int64_t depth = 0;             // one_hot
};
// InvalidArgument quoting `spec` when it does not parse.
absl::StatusOr<Transform> ParseTransform(absl::string_view spec);
// Applies `transforms` in order to every element of `input`. InvalidArgument
// when a transform cannot apply to the input's dtypes or shapes.
absl::StatusOr<DatasetPtr> MakeMapTransformDataset(DatasetPtr input,
                                                   std::vector<Transform> transforms);

// --- Transformations (dataset_transforms.cc) -------------------------------

struct ShuffleOptions {
  int64_t buffer_size = 1;      // > 0
  int64_t seed = 0, seed2 = 0;  // both 0: a fresh random seed per dataset
  bool reshuffle_each_iteration = true;
  // Counts the iterators made, so that each pass gets a new order; shared
  // by the datasets one kernel makes (a re-run initialiser reshuffles too).
  // Null: a counter private to the dataset.
  std::shared_ptr<std::atomic<int64_t>> epoch_counter;
};
absl::StatusOr<DatasetPtr> MakeShuffleDataset(DatasetPtr input, ShuffleOptions options);
absl::StatusOr<DatasetPtr> MakeBatchDataset(DatasetPtr input, int64_t batch_size,
                                            bool drop_remainder);
// count -1: forever.
absl::StatusOr<DatasetPtr> MakeRepeatDataset(DatasetPtr input, int64_t count);
// count -1: everything.
absl::StatusOr<DatasetPtr> MakeTakeDataset(DatasetPtr input, int64_t count);
// count -1: everything is skipped.
absl::StatusOr<DatasetPtr> MakeSkipDataset(DatasetPtr input, int64_t count);
// Element i: the components of element i of every input, in order; ends
// with the shortest input. InvalidArgument for no inputs.
absl::StatusOr<DatasetPtr> MakeZipDataset(std::vector<DatasetPtr> inputs);
// Elements i with i % num_shards == index.
absl::StatusOr<DatasetPtr> MakeShardDataset(DatasetPtr input, int64_t num_shards, int64_t index,
                                            bool require_non_empty);

// --- Cache and prefetch (dataset_cache_prefetch.cc) -----------------------

// filename "": in memory, filled by the first complete pass. Otherwise a
// file written once by the first complete pass (atomically, via rename) and
// read by every later iterator.
absl::StatusOr<DatasetPtr> MakeCacheDataset(DatasetPtr input, std::string filename);
// A background thread keeps up to `buffer_size` elements ready
// (-1: kAutotunePrefetch; 0: no prefetching).
inline constexpr int64_t kAutotunePrefetch = 4;
absl::StatusOr<DatasetPtr> MakePrefetchDataset(DatasetPtr input, int64_t buffer_size);

}  // namespace data
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_DATA_DATASET_INTERNAL_H_
