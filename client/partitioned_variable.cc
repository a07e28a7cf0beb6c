#include "client/partitioned_variable.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/ops.h"
#include "placement/partitioners.h"

namespace graphrun {
namespace client {

PartitionedVariable::PartitionedVariable(const Scope& scope, const PartialShape& shape,
                                         DataType dtype, int num_parts)
    : scope_(scope), shape_(shape), dtype_(dtype) {
  Build(scope, num_parts, {}, nullptr);
}

PartitionedVariable::PartitionedVariable(const Scope& scope, const PartialShape& shape,
                                         DataType dtype, int num_parts,
                                         const Initializer& initializer)
    : scope_(scope), shape_(shape), dtype_(dtype) {
  Build(scope, num_parts, {}, &initializer);
}

PartitionedVariable::PartitionedVariable(const Scope& scope, const PartialShape& shape,
                                         DataType dtype, std::vector<int64_t> part_sizes,
                                         const Initializer& initializer)
    : scope_(scope), shape_(shape), dtype_(dtype) {
  const int n = static_cast<int>(part_sizes.size());
  Build(scope, n, std::move(part_sizes), &initializer);
}

void PartitionedVariable::Build(const Scope& scope, int num_parts, std::vector<int64_t> sizes,
                                const Initializer* initializer) {
  if (!scope.ok()) return;
  name_ = scope.GetUniqueNameForOp("PartitionedVariable");
  if (!shape_.fully_defined() || shape_.rank() < 1) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("partitioned variable '", name_,
                     "': needs a fully defined shape of rank >= 1, not ", shape_.DebugString())));
    return;
  }
  if (num_parts < 1) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "partitioned variable '", name_, "': num_parts must be >= 1, not ", num_parts)));
    return;
  }
  const TensorShape full = shape_.ToTensorShape();
  if (!sizes.empty()) {
    int64_t sum = 0;
    bool positive = true;
    for (int64_t n : sizes) {
      sum += n;
      positive = positive && n >= 1;
    }
    if (!positive || sum != full.dim_size(0)) {
      scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          "partitioned variable '", name_, "': part sizes [", absl::StrJoin(sizes, ","),
          "] do not split ", full.dim_size(0), " rows into parts of at least one row")));
      return;
    }
  } else {
    const int k_parts =
        static_cast<int>(std::min<int64_t>(num_parts, std::max<int64_t>(1, full.dim_size(0))));
    sizes = full.dim_size(0) == 0 ? std::vector<int64_t>{0}
                                  : placement::ShardSizes(full.dim_size(0), k_parts);
  }
  scope_ = scope.WithNameScope(name_).WithNoControlDependencies();

  // The full initial value, split by rows.
  std::vector<Output> pieces;
  if (initializer != nullptr) {
    Scope is = scope_.NewSubScope("Initializer");
    Output value = (*initializer)(is, full, dtype_);
    if (value.node() == nullptr) return;
    if (sizes.size() == 1) {
      pieces.push_back(value);
    } else {
      pieces = ops::SplitV(is.WithOpName("split"), value, Tensor::FromVector<int64_t>(sizes),
                           Tensor::Scalar<int32_t>(0), static_cast<int64_t>(sizes.size()))
                   .output;
      if (pieces.size() != sizes.size()) return;
    }
  }

  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> dims(full.dim_sizes().begin(), full.dim_sizes().end());
    dims[0] = sizes[k];
    PartialShape part_shape{absl::MakeConstSpan(dims)};
    Scope ps = scope_.WithOpName(absl::StrCat("part_", k));
    std::optional<Variable> part;
    if (initializer != nullptr) {
      Output piece = pieces[k];
      Initializer take("split",
                       [piece](const Scope&, const TensorShape&, DataType) { return piece; });
      part.emplace(ps, part_shape, dtype_, take);
    } else {
      part.emplace(ps, part_shape, dtype_);
    }
    if (part->handle().node() == nullptr) {
      parts_.clear();
      offsets_.clear();
      return;
    }
    SaveSliceInfo info;
    info.full_name = name_;
    info.full_shape = full;
    info.var_offset.assign(dims.size(), 0);
    info.var_offset[0] = offset;
    info.var_shape = dims;
    part->SetSaveSliceInfo(std::move(info));
    parts_.push_back(*part);
    offsets_.push_back(offset);
    offset += sizes[k];
  }
  if (!scope.ok()) {
    parts_.clear();
    offsets_.clear();
  }
}

Output PartitionedVariable::Read() const {
  return Read(scope_.NewSubScope("Read").WithOpName("concat"));
}

Output PartitionedVariable::Read(const Scope& scope) const {
  if (parts_.empty()) return Output();
  if (parts_.size() == 1) return parts_[0].Read(scope);
  std::vector<Input> reads;
  Scope rs = scope.WithOpName("");
  for (const Variable& p : parts_) reads.push_back(p.Read(rs));
  Output v = ops::ConcatV2(scope, InputList(reads), Tensor::Scalar<int32_t>(0));
  if (v.node() != nullptr) v.node()->set_output_shape(0, shape_);
  return v;
}

namespace {

// `v` as a vector Const of the ids' type (int32 or int64).
Output IdsConst(const Scope& scope, DataType ids_type, const std::vector<int64_t>& v) {
  if (ids_type == DT_INT64) return ops::Const(scope, Tensor::FromVector<int64_t>(v));
  std::vector<int32_t> v32(v.begin(), v.end());
  return ops::Const(scope, Tensor::FromVector<int32_t>(v32));
}

}  // namespace

Output PartitionedVariable::Gather(const Scope& scope, const Output& ids) const {
  if (parts_.empty() || ids.node() == nullptr) return Output();
  if (ids.type() != DT_INT32 && ids.type() != DT_INT64) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("partitioned variable '", name_, "': ids must be int32 or int64, not ",
                     DataTypeString(ids.type()))));
    return Output();
  }
  // The static result shape: ids' shape, then the rows' dimensions.
  PartialShape out_shape;
  const PartialShape ids_shape = ids.shape();
  std::vector<int64_t> row_dims;
  for (int d = 1; d < shape_.rank(); ++d) row_dims.push_back(shape_.dim(d));
  if (ids_shape.known_rank()) {
    std::vector<int64_t> dims(ids_shape.dims().begin(), ids_shape.dims().end());
    dims.insert(dims.end(), row_dims.begin(), row_dims.end());
    out_shape = PartialShape(absl::MakeConstSpan(dims));
  }
  if (parts_.size() == 1) {
    Output rows =
        ops::ResourceGather(scope.ColocateWith(parts_[0].op()), parts_[0].handle(), ids, dtype_);
    if (rows.node() != nullptr) rows.node()->set_output_shape(0, out_shape);
    return rows;
  }
  const int64_t k_parts = static_cast<int64_t>(parts_.size());
  Scope ls = scope.WithOpName("").NewSubScope("embedding_lookup");
  Output flat = ops::Reshape(ls, ids, Tensor::FromVector<int32_t>({-1}));
  // Each id's part: how many parts start at or before it. The parts'
  // offsets make this right for any part sizes (TensorFlow's "div"
  // arithmetic assumes its own even sizes). Ids below 0 land in part 0 and
  // ids from N on in the last part, whose gather rejects them.
  const std::vector<int64_t> starts(offsets_.begin() + 1, offsets_.end());
  Output started = ops::GreaterEqual(ls, ops::ExpandDims(ls, flat, Tensor::Scalar<int32_t>(1)),
                                     IdsConst(ls, ids.type(), starts));
  Output part = ops::Sum(ls, ops::Cast(ls, started, DT_INT32), Tensor::Scalar<int32_t>(1));
  Output local = ops::Sub(
      ls, flat,
      ops::GatherV2(ls, IdsConst(ls, ids.type(), offsets_), part, Tensor::Scalar<int32_t>(0)));
  OutputList local_ids = ops::DynamicPartition(ls, local, part, k_parts).outputs;
  Output positions =
      ops::Range(ls, Tensor::Scalar<int32_t>(0), ops::Size(ls, flat), Tensor::Scalar<int32_t>(1));
  OutputList part_positions = ops::DynamicPartition(ls, positions, part, k_parts).outputs;
  if (local_ids.size() != parts_.size() || part_positions.size() != parts_.size()) {
    return Output();
  }
  std::vector<Input> rows;
  for (size_t k = 0; k < parts_.size(); ++k) {
    Scope ks = ls.NewSubScope(absl::StrCat("part_", k)).ColocateWith(parts_[k].op());
    rows.push_back(ops::ResourceGather(ks, parts_[k].handle(), local_ids[k], dtype_));
  }
  std::vector<Input> positions_list(part_positions.begin(), part_positions.end());
  Output stitched = ops::DynamicStitch(ls, InputList(positions_list), InputList(rows));
  // [ids..., rows...]: static when ids' shape is.
  Output target;
  if (out_shape.fully_defined()) {
    std::vector<int64_t> dims(out_shape.dims().begin(), out_shape.dims().end());
    target = ops::Const(ls, Tensor::FromVector<int64_t>(dims));
  } else {
    target = ops::ConcatV2(ls,
                           InputList({ops::Shape(ls, ids, ops::Shape::OutType(DT_INT64)),
                                      ops::Const(ls, Tensor::FromVector<int64_t>(row_dims))}),
                           Tensor::Scalar<int32_t>(0));
  }
  Output result = ops::Reshape(scope, stitched, target);
  if (result.node() != nullptr) result.node()->set_output_shape(0, out_shape);
  return result;
}

Operation PartitionedVariable::Assign(const Scope& scope, const Input& value) const {
  if (parts_.empty()) return Operation();
  Input v = value;
  if (value.is_literal() && value.status().ok()) {
    auto t = internal::CastLiteral(value.tensor(), dtype_);
    if (!t.ok()) {
      scope.UpdateStatus(absl::InvalidArgumentError(
          absl::StrCat("partitioned variable '", name_, "': ", t.status().message())));
      return Operation();
    }
    v = Input(*t);
  }
  std::vector<Operation> assigns;
  if (parts_.size() == 1) {
    assigns.push_back(parts_[0].Assign(scope, v));
  } else {
    std::vector<int64_t> sizes;
    for (const Variable& p : parts_) sizes.push_back(p.shape().dim(0));
    OutputList pieces = ops::SplitV(scope, v, Tensor::FromVector<int64_t>(sizes),
                                    Tensor::Scalar<int32_t>(0), static_cast<int64_t>(sizes.size()))
                            .output;
    if (pieces.size() != parts_.size()) return Operation();
    for (size_t k = 0; k < parts_.size(); ++k)
      assigns.push_back(parts_[k].Assign(scope, pieces[k]));
  }
  return ops::NoOp(scope.WithControlDependencies(assigns)).operation;
}

}  // namespace client
}  // namespace graphrun
