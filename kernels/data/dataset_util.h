// Datasets: the input pipeline's model (TensorFlow's tf.data, C++ side).
//
// A dataset is an immutable description of a sequence of elements; an
// element is a fixed number of components (one Tensor each) with the
// dataset's dtypes and (possibly partial) shapes. Datasets travel through
// graphs as scalar DT_VARIANT tensors holding a DatasetBase, so a dataset
// op only builds a description: nothing is read until an iterator asks.
//
// An iterator walks one pass over a dataset. Transformation iterators own
// the iterators of their inputs, so a pipeline is a chain of iterators that
// pull elements from their inputs on demand (Prefetch alone pulls ahead on
// its own thread).
//
// Ownership: every dataset lives in a std::shared_ptr (the Make*Dataset
// factories and the kernels guarantee it); an iterator keeps its dataset
// alive, and a dataset keeps its inputs alive.
//
// Thread-safety: datasets are immutable and safe to share. GetNext() is
// thread-safe: concurrent callers receive distinct elements.
#ifndef GRAPHRUN_KERNELS_DATA_DATASET_UTIL_H_
#define GRAPHRUN_KERNELS_DATA_DATASET_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/node_def_util.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/variant.h"
#include "kernels/framework/cancellation.h"

namespace graphrun {
namespace data {

// What an iterator sees of its caller.
struct IteratorContext {
  // The calling step's cancellation; null outside a step. Iterators that
  // block (Prefetch) register with it and return Cancelled when it fires.
  CancellationManager* cancellation_manager = nullptr;
};

class IteratorBase {
 public:
  virtual ~IteratorBase() = default;
  IteratorBase() = default;
  IteratorBase(const IteratorBase&) = delete;
  IteratorBase& operator=(const IteratorBase&) = delete;

  // Produces the next element: fills `out` (one tensor per component) and
  // sets *end_of_sequence = false; or, when the pass is over, sets
  // *end_of_sequence = true and leaves `out` untouched (and keeps doing so).
  // Errors: InvalidArgument / DataLoss for bad data, naming the file;
  // Cancelled when ctx's step is cancelled while waiting. Thread-safe.
  virtual absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out,
                               bool* end_of_sequence) = 0;
};

class DatasetBase : public VariantValue, public std::enable_shared_from_this<DatasetBase> {
 public:
  // REQUIRES: dtypes.size() == shapes.size().
  DatasetBase(DataTypeVector dtypes, std::vector<PartialShape> shapes)
      : dtypes_(std::move(dtypes)), shapes_(std::move(shapes)) {}

  const DataTypeVector& output_dtypes() const { return dtypes_; }
  const std::vector<PartialShape>& output_shapes() const { return shapes_; }
  int num_components() const { return static_cast<int>(dtypes_.size()); }

  // The kind, as the op name without "Dataset": "Batch", "Idx", …
  virtual std::string name() const = 0;
  std::string TypeName() const override { return "Dataset"; }
  std::string DebugString() const override;

  // A new iterator positioned before the first element; it keeps this
  // dataset alive. Errors are those of opening the data (missing file, …).
  virtual absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const = 0;

 private:
  DataTypeVector dtypes_;
  std::vector<PartialShape> shapes_;
};

using DatasetPtr = std::shared_ptr<const DatasetBase>;

// Base for iterators: holds the dataset (typed) so it outlives the iterator.
template <typename D>
class DatasetIterator : public IteratorBase {
 public:
  explicit DatasetIterator(const D* dataset)
      : dataset_(std::static_pointer_cast<const D>(dataset->shared_from_this())) {}
  const D& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const D> dataset_;
};

// A scalar DT_VARIANT tensor holding `dataset`.
Tensor DatasetToTensor(DatasetPtr dataset);
// The dataset held by a scalar DT_VARIANT tensor; InvalidArgument otherwise.
absl::StatusOr<DatasetPtr> DatasetFromTensor(const Tensor& t);

// InvalidArgument (with `what` in the message) unless the dtypes are equal
// and every shape of `actual` is compatible with the one in `expected`.
absl::Status VerifySignature(const DataTypeVector& expected_dtypes,
                             const std::vector<PartialShape>& expected_shapes,
                             const DataTypeVector& actual_dtypes,
                             const std::vector<PartialShape>& actual_shapes,
                             absl::string_view what);

// Reads the `output_types` and `output_shapes` attrs (output_shapes may be
// absent or empty: every shape unknown). InvalidArgument naming the node
// when the two lists differ in length.
absl::Status GetOutputSignature(const tensorflow::NodeDef& def, DataTypeVector* dtypes,
                                std::vector<PartialShape>* shapes,
                                absl::string_view types_attr = "output_types");

// The per-replica batch of a global batch split evenly over `num_replicas`
// (global 512 over 8 replicas = 64 each). InvalidArgument when either is
// not positive or the global batch is not divisible by the replicas.
absl::StatusOr<int64_t> PerReplicaBatchSize(int64_t global_batch_size, int64_t num_replicas);

}  // namespace data
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_DATA_DATASET_UTIL_H_
