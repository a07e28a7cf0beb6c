#include "graph/tensor_shape.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace graphrun {

absl::StatusOr<TensorShape> TensorShape::Make(absl::Span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape has ", dims.size(), " dimensions, more than the ", kMaxDims, " a tensor may have"));
  }
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dimension ", d, " is negative in shape [", absl::StrJoin(dims, ","), "]"));
    }
    if (d != 0 && n > (int64_t{1} << 62) / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape [", absl::StrJoin(dims, ","), "] has too many elements"));
    }
    n *= d;
  }
  return TensorShape(dims);
}

absl::StatusOr<TensorShape> TensorShape::FromProto(const tensorflow::TensorShapeProto& proto) {
  if (proto.unknown_rank()) {
    return absl::InvalidArgumentError("shape has unknown rank");
  }
  DimVector dims;
  for (const auto& d : proto.dim()) dims.push_back(d.size());
  return Make(dims);
}

void TensorShape::AsProto(tensorflow::TensorShapeProto* proto) const {
  proto->Clear();
  for (int64_t d : dims_) proto->add_dim()->set_size(d);
}

std::string TensorShape::DebugString() const {
  return absl::StrCat("[", absl::StrJoin(dims_, ","), "]");
}

PartialShape PartialShape::FromProto(const tensorflow::TensorShapeProto& proto) {
  if (proto.unknown_rank()) return PartialShape();
  DimVector dims;
  for (const auto& d : proto.dim()) dims.push_back(d.size() < 0 ? -1 : d.size());
  return PartialShape(std::move(dims));
}

bool PartialShape::fully_defined() const {
  if (rank_ < 0) return false;
  for (int64_t d : dims_) {
    if (d < 0) return false;
  }
  return true;
}

int64_t PartialShape::num_elements() const {
  if (!fully_defined()) return -1;
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (__builtin_mul_overflow(n, d, &n)) return -1;  // no tensor has that many
  }
  return n;
}

bool PartialShape::IsCompatibleWith(const TensorShape& s) const {
  return IsCompatibleWith(PartialShape(s));
}

bool PartialShape::IsCompatibleWith(const PartialShape& s) const {
  if (rank_ < 0 || s.rank_ < 0) return true;
  if (rank_ != s.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] >= 0 && s.dims_[i] >= 0 && dims_[i] != s.dims_[i]) return false;
  }
  return true;
}

absl::StatusOr<PartialShape> PartialShape::Merge(const PartialShape& o) const {
  if (!IsCompatibleWith(o)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shapes ", DebugString(), " and ", o.DebugString(), " are incompatible"));
  }
  if (rank_ < 0) return o;
  if (o.rank_ < 0) return *this;
  DimVector dims(dims_);
  for (int i = 0; i < rank_; ++i) {
    if (dims[i] < 0) dims[i] = o.dims_[i];
  }
  return PartialShape(std::move(dims));
}

void PartialShape::AsProto(tensorflow::TensorShapeProto* proto) const {
  proto->Clear();
  if (rank_ < 0) {
    proto->set_unknown_rank(true);
    return;
  }
  for (int64_t d : dims_) proto->add_dim()->set_size(d);
}

std::string PartialShape::DebugString() const {
  if (rank_ < 0) return "<unknown>";
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ",";
    s += dims_[i] < 0 ? std::string("?") : absl::StrCat(dims_[i]);
  }
  return s + "]";
}

absl::StatusOr<int64_t> IntegerRangeSize(int64_t start, int64_t limit, int64_t delta) {
  if (delta == 0) return absl::InvalidArgumentError("Requires delta != 0");
  if (delta > 0 && start > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("Requires start <= limit when delta > 0: ", start, "/", limit));
  }
  if (delta < 0 && start < limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("Requires start >= limit when delta < 0: ", start, "/", limit));
  }
  // |limit - start| and |delta| as unsigned: each fits in 64 bits.
  const uint64_t span = delta > 0 ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                                  : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
  const uint64_t step = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
  const uint64_t n = span / step + (span % step != 0 ? 1 : 0);
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("Range from ", start, " to ", limit, " by ",
                                                   delta, " has more than 2^63 - 1 elements"));
  }
  return static_cast<int64_t>(n);
}

}  // namespace graphrun
