// CPU kernels for DynamicPartition and DynamicStitch, TensorFlow's
// semantics: a "row" is the slice of data below the partitions' (or
// indices') dimensions, moved whole with the type-generic CopyElements.
// And Unique over integer vectors (the indices of sparse gradients).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "kernels/framework/array_util.h"
#include "kernels/math/register.h"

namespace graphrun {
namespace {

using array_util::AllTypes;
using array_util::CopyElements;
using array_util::GetInput;
using array_util::Prod;

// "[i,j]": the multi-index of flat element `flat` of `shape` ("" for a
// scalar), as TensorFlow prints slices in its errors.
std::string IndexString(const TensorShape& shape, int64_t flat) {
  if (shape.dims() == 0) return "";
  std::vector<int64_t> idx(shape.dims());
  for (int d = shape.dims() - 1; d >= 0; --d) {
    const int64_t size = shape.dim_size(d);
    idx[d] = size == 0 ? 0 : flat % size;
    flat = size == 0 ? 0 : flat / size;
  }
  return absl::StrCat("[", absl::StrJoin(idx, ","), "]");
}

// True when `shape` begins with the dimensions of `prefix`.
bool StartsWith(const TensorShape& shape, const TensorShape& prefix) {
  if (shape.dims() < prefix.dims()) return false;
  for (int d = 0; d < prefix.dims(); ++d) {
    if (shape.dim_size(d) != prefix.dim_size(d)) return false;
  }
  return true;
}

// outputs[p] = the rows data[js, ...] with partitions[js] == p, in the
// order of js.
class DynamicPartitionOp : public OpKernel {
 public:
  explicit DynamicPartitionOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("num_partitions", &num_partitions_));
    if (num_partitions_ < 1) ctx->SetStatus(ctx->Error("num_partitions must be at least 1"));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* data, GetInput(*this, ctx, 0));
    const Tensor& partitions = ctx->input(1);
    if (!StartsWith(data->shape(), partitions.shape())) {
      return Error(absl::StrCat("data.shape must start with partitions.shape, got data.shape = ",
                                data->shape().DebugString(),
                                ", partitions.shape = ", partitions.shape().DebugString()));
    }
    const absl::Span<const int32_t> p = partitions.flat<int32_t>();
    std::vector<int64_t> counts(static_cast<size_t>(num_partitions_), 0);
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] < 0 || p[i] >= num_partitions_) {
        return Error(absl::StrCat("partitions", IndexString(partitions.shape(), i), " = ", p[i],
                                  " is not in [0, ", num_partitions_, ")"));
      }
      ++counts[p[i]];
    }
    const auto dims = data->shape().dim_sizes();
    const int prank = partitions.dims();
    const int64_t row = Prod(dims, prank, data->dims());
    std::vector<Tensor*> outs(counts.size());
    for (size_t k = 0; k < counts.size(); ++k) {
      TensorShape s({counts[k]});
      for (int d = prank; d < data->dims(); ++d) s.AddDim(dims[d]);
      GR_ASSIGN_OR_RETURN(outs[k], ctx->allocate_output(static_cast<int>(k), s));
    }
    std::vector<int64_t> next(counts.size(), 0);
    for (size_t i = 0; i < p.size(); ++i) {
      GR_RETURN_IF_ERROR(
          CopyElements(*data, static_cast<int64_t>(i) * row, *outs[p[i]], next[p[i]]++ * row, row));
    }
    return absl::OkStatus();
  }

 private:
  int64_t num_partitions_ = 1;
};

// merged[indices[m][i], ...] = data[m][i, ...], in order of (m, i), so a
// later index overwrites an earlier equal one; max(indices) + 1 rows. Rows
// that no index names are zeros (TensorFlow leaves them unspecified).
class DynamicStitchOp : public OpKernel {
 public:
  explicit DynamicStitchOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs() / 2;
    std::vector<const Tensor*> data(n);
    for (int m = 0; m < n; ++m) {
      GR_ASSIGN_OR_RETURN(data[m], GetInput(*this, ctx, n + m));
    }
    const Tensor& indices0 = ctx->input(0);
    if (!StartsWith(data[0]->shape(), indices0.shape())) {
      return Error(
          absl::StrCat("data[0].shape = ", data[0]->shape().DebugString(),
                       " does not start with indices[0].shape = ", indices0.shape().DebugString()));
    }
    const auto dims0 = data[0]->shape().dim_sizes();
    const absl::Span<const int64_t> suffix = dims0.subspan(static_cast<size_t>(indices0.dims()));
    int64_t max_index = -1;
    for (int m = 0; m < n; ++m) {
      const Tensor& indices = ctx->input(m);
      const auto dims = data[m]->shape().dim_sizes();
      if (!StartsWith(data[m]->shape(), indices.shape()) ||
          dims.subspan(static_cast<size_t>(indices.dims())) != suffix) {
        return Error(absl::StrCat("need data[", m, "].shape = indices[", m,
                                  "].shape + data[0].shape[", indices0.dims(),
                                  ":], got data[0].shape = ", data[0]->shape().DebugString(),
                                  ", data[", m, "].shape = ", data[m]->shape().DebugString(),
                                  ", indices[0].shape = ", indices0.shape().DebugString(),
                                  ", indices[", m, "].shape = ", indices.shape().DebugString()));
      }
      const absl::Span<const int32_t> idx = indices.flat<int32_t>();
      for (size_t i = 0; i < idx.size(); ++i) {
        if (idx[i] < 0) {
          return Error(absl::StrCat("indices[", m, "]", IndexString(indices.shape(), i), " = ",
                                    idx[i], " is negative"));
        }
        max_index = std::max<int64_t>(max_index, idx[i]);
      }
    }
    TensorShape merged_shape({max_index + 1});
    for (int64_t d : suffix) merged_shape.AddDim(d);
    GR_ASSIGN_OR_RETURN(Tensor * merged, ctx->allocate_output(0, merged_shape));
    const int64_t row = Prod(dims0, indices0.dims(), data[0]->dims());
    const int64_t elem = DataTypeSize(merged->dtype());
    if (elem > 0) {
      std::memset(merged->raw_data(), 0, static_cast<size_t>(merged->NumElements() * elem));
    }
    for (int m = 0; m < n; ++m) {
      const absl::Span<const int32_t> idx = ctx->input(m).flat<int32_t>();
      for (size_t i = 0; i < idx.size(); ++i) {
        GR_RETURN_IF_ERROR(
            CopyElements(*data[m], static_cast<int64_t>(i) * row, *merged, idx[i] * row, row));
      }
    }
    return absl::OkStatus();
  }
};

// y = the distinct values of x in order of first appearance, idx[i] =
// the position of x[i] in y.
class UniqueOp : public OpKernel {
 public:
  explicit UniqueOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("out_idx", &out_idx_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* x, GetInput(*this, ctx, 0));
    if (x->dims() != 1) {
      return Error(absl::StrCat("x must be a vector, got shape ", x->shape().DebugString()));
    }
    return x->dtype() == DT_INT32 ? Run<int32_t>(ctx, *x) : Run<int64_t>(ctx, *x);
  }

 private:
  template <typename T>
  absl::Status Run(OpKernelContext* ctx, const Tensor& x) {
    const absl::Span<const T> in = x.flat<T>();
    absl::flat_hash_map<T, int64_t> position;
    position.reserve(in.size());
    std::vector<T> distinct;
    std::vector<int64_t> idx(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      auto [it, inserted] = position.try_emplace(in[i], static_cast<int64_t>(distinct.size()));
      if (inserted) distinct.push_back(in[i]);
      idx[i] = it->second;
    }
    GR_ASSIGN_OR_RETURN(
        Tensor * y, ctx->allocate_output(0, TensorShape({static_cast<int64_t>(distinct.size())})));
    std::copy(distinct.begin(), distinct.end(), y->base<T>());
    GR_ASSIGN_OR_RETURN(Tensor * out_idx, ctx->allocate_output(1, x.shape()));
    if (out_idx_ == DT_INT32) {
      std::copy(idx.begin(), idx.end(), out_idx->base<int32_t>());
    } else {
      std::copy(idx.begin(), idx.end(), out_idx->base<int64_t>());
    }
    return absl::OkStatus();
  }

  DataType out_idx_ = DT_INT32;
};

}  // namespace

void RegisterDynamicPartitionKernels(KernelRegistry& r) {
  r.Add(KernelDef("Unique").Device(kDeviceCpu).TypeConstraint("T", {DT_INT32, DT_INT64}),
        MakeKernel<UniqueOp>());
  const std::vector<DataType> all = AllTypes();
  r.Add(KernelDef("DynamicPartition").Device(kDeviceCpu).TypeConstraint("T", all),
        MakeKernel<DynamicPartitionOp>());
  r.Add(KernelDef("DynamicStitch").Device(kDeviceCpu).TypeConstraint("T", all),
        MakeKernel<DynamicStitchOp>());
}

}  // namespace graphrun
