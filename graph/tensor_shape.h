// Tensor shapes. TensorShape is fully defined (every dimension >= 0);
// PartialShape allows unknown dimensions (-1) and unknown rank, for shape
// inference and placement estimates.
#ifndef GRAPHRUN_GRAPH_TENSOR_SHAPE_H_
#define GRAPHRUN_GRAPH_TENSOR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/proto/tensor_shape.pb.h"

namespace graphrun {

using DimVector = absl::InlinedVector<int64_t, 4>;

class TensorShape {
 public:
  TensorShape() = default;  // a scalar
  TensorShape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit TensorShape(absl::Span<const int64_t> dims) : dims_(dims.begin(), dims.end()) {}

  // The most dimensions a tensor may have (TensorFlow's limit).
  static constexpr int kMaxDims = 254;
  // InvalidArgument for negative dimensions, element-count overflow, or
  // more than kMaxDims dimensions.
  static absl::StatusOr<TensorShape> Make(absl::Span<const int64_t> dims);
  // InvalidArgument for unknown rank or dimensions.
  static absl::StatusOr<TensorShape> FromProto(const tensorflow::TensorShapeProto& proto);

  int dims() const { return static_cast<int>(dims_.size()); }
  int64_t dim_size(int i) const { return dims_[i]; }
  absl::Span<const int64_t> dim_sizes() const { return dims_; }
  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  void AddDim(int64_t d) { dims_.push_back(d); }
  void set_dim(int i, int64_t d) { dims_[i] = d; }
  void RemoveDim(int i) { dims_.erase(dims_.begin() + i); }
  void InsertDim(int i, int64_t d) { dims_.insert(dims_.begin() + i, d); }

  void AsProto(tensorflow::TensorShapeProto* proto) const;
  // "[2,3]"; "[]" for a scalar.
  std::string DebugString() const;

  bool operator==(const TensorShape& o) const { return dims_ == o.dims_; }
  bool operator!=(const TensorShape& o) const { return dims_ != o.dims_; }

 private:
  DimVector dims_;
};

// A shape that may be partly unknown: rank -1 means unknown rank; a
// dimension of -1 is unknown.
class PartialShape {
 public:
  PartialShape() : rank_(-1) {}  // unknown rank
  PartialShape(std::initializer_list<int64_t> dims)
      : rank_(static_cast<int>(dims.size())), dims_(dims) {}
  explicit PartialShape(absl::Span<const int64_t> dims)
      : rank_(static_cast<int>(dims.size())), dims_(dims.begin(), dims.end()) {}
  explicit PartialShape(const TensorShape& s) : PartialShape(s.dim_sizes()) {}
  static PartialShape Unknown() { return PartialShape(); }
  static PartialShape UnknownOfRank(int rank) { return PartialShape(DimVector(rank, -1)); }
  static PartialShape FromProto(const tensorflow::TensorShapeProto& proto);

  bool known_rank() const { return rank_ >= 0; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[i]; }
  absl::Span<const int64_t> dims() const { return dims_; }
  bool fully_defined() const;
  // Product of dimensions, or -1 if any is unknown.
  int64_t num_elements() const;
  // REQUIRES: fully_defined().
  TensorShape ToTensorShape() const { return TensorShape(dims_); }
  // True if `s` could be a value of this shape.
  bool IsCompatibleWith(const TensorShape& s) const;
  bool IsCompatibleWith(const PartialShape& s) const;
  // The most specific shape compatible with both, or InvalidArgument.
  absl::StatusOr<PartialShape> Merge(const PartialShape& other) const;
  void AsProto(tensorflow::TensorShapeProto* proto) const;
  // "[2,?]" or "<unknown>".
  std::string DebugString() const;
  bool operator==(const PartialShape& o) const { return rank_ == o.rank_ && dims_ == o.dims_; }

 private:
  explicit PartialShape(DimVector dims)
      : rank_(static_cast<int>(dims.size())), dims_(std::move(dims)) {}
  int rank_;
  DimVector dims_;
};

// The number of elements of Range(start, limit, delta) over integers:
// ceil(|limit - start| / |delta|), computed without overflow for any
// int64 operands. InvalidArgument when delta is 0 or points away from
// limit.
absl::StatusOr<int64_t> IntegerRangeSize(int64_t start, int64_t limit, int64_t delta);

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_TENSOR_SHAPE_H_
