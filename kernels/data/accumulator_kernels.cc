// CPU kernels for conditional accumulators, the stateful resources that
// gather gradients in the SyncReplicasOptimizer scheme (docs/distributed.md,
// "Synchronous replication"); the queues are in queue_kernels.cc. The dense
// accumulator (ResourceConditionalAccumulator) lives in the device's
// ResourceMgr under (container, shared_name or node name) and is named by
// DT_RESOURCE handles, so every session and client that names it on a PS
// shares it. The sparse accumulator (SparseConditionalAccumulator,
// TensorFlow's, which has only a ref handle) is named by a ref to a variable
// holding the string [container, name] that the accumulator owns; its ops
// look it up by that. TakeGradient below num_required waits without holding
// a thread (see blocking_resource_internal.h).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "kernels/data/register.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/blocking_resource_internal.h"
#include "kernels/framework/variable.h"

namespace graphrun {
namespace queue_internal {
namespace {

using array_util::Annotate;
using array_util::GetInput;

// ---------------------------------------------------------------------------
// Conditional accumulator.

template <typename T>
void AddInto(const Tensor& dst, const Tensor& src) {
  T* d = dst.base<T>();
  const T* s = src.base<T>();
  for (int64_t i = 0, n = dst.NumElements(); i < n; ++i) d[i] = static_cast<T>(d[i] + s[i]);
}
template <typename T>
void DivideInto(const Tensor& dst, const Tensor& src, int64_t count) {
  T* d = dst.base<T>();
  const T* s = src.base<T>();
  const T c = static_cast<T>(count);
  for (int64_t i = 0, n = dst.NumElements(); i < n; ++i) d[i] = static_cast<T>(s[i] / c);
}

#define GR_ACCUM_TYPES_(M) \
  M(DT_FLOAT, float) M(DT_DOUBLE, double) M(DT_INT32, int32_t) M(DT_INT64, int64_t)

// What both accumulators share: ops that may wait, and under mu_ the number
// of gradients accumulated since the last take and the global step (a
// gradient whose local_step is older is dropped). Thread-safe.
class AccumulatorBase : public BlockingResource {
 public:
  absl::Status SetGlobalStep(int64_t step) {
    return Mutate([&] {
      global_step_ = step;
      return absl::OkStatus();
    });
  }

  int64_t num_accumulated() const {
    std::lock_guard<std::mutex> l(mu_);
    return count_;
  }

  // The ref-handle ops' handle: a variable holding [container, name]
  // (`container` resolved, never empty); made on first use.
  std::shared_ptr<Var> RefHandle(const std::string& container, const std::string& name) {
    std::lock_guard<std::mutex> l(handle_mu_);
    if (handle_ == nullptr) {
      handle_ = std::make_shared<Var>(name, DT_STRING, PartialShape({2}));
      handle_->tensor = Tensor::FromVector<std::string>({container, name});
      handle_->initialized = true;
    }
    return handle_;
  }

 protected:
  int64_t count_ = 0;        // guarded by mu_
  int64_t global_step_ = 0;  // guarded by mu_

 private:
  std::mutex handle_mu_;
  std::shared_ptr<Var> handle_;  // guarded by handle_mu_
};

class Accumulator : public AccumulatorBase {
 public:
  Accumulator(std::string name, DataType dtype, PartialShape shape, bool mean)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)), mean_(mean) {}

  std::string DebugString() const override { return absl::StrCat("Accumulator ", name_); }
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }

  // Adds `grad` unless local_step < the global step (then drops it: OK).
  absl::Status Apply(int64_t local_step, const Tensor& grad) {
    return Mutate([&]() -> absl::Status {
      if (local_step < global_step_) return absl::OkStatus();  // stale
      if (grad.dtype() != dtype_) {
        return absl::InvalidArgumentError(absl::StrCat("accumulator '", name_, "' holds ",
                                                       DataTypeString(dtype_), ", got a ",
                                                       DataTypeString(grad.dtype()), " gradient"));
      }
      if (!shape_.IsCompatibleWith(grad.shape()) || (count_ > 0 && sum_.shape() != grad.shape())) {
        return absl::InvalidArgumentError(
            absl::StrCat("accumulator '", name_, "' of shape ",
                         count_ > 0 ? sum_.shape().DebugString() : shape_.DebugString(),
                         " got a gradient of shape ", grad.shape().DebugString()));
      }
      if (count_ == 0) {
        sum_ = grad.DeepCopy();
      } else {
        switch (dtype_) {
#define GR_CASE_(E, T)      \
  case E:                   \
    AddInto<T>(sum_, grad); \
    break;
          GR_ACCUM_TYPES_(GR_CASE_)
#undef GR_CASE_
          default:
            return absl::UnimplementedError(DataTypeString(dtype_));
        }
      }
      ++count_;
      return absl::OkStatus();
    });
  }

  // Waits for num_required gradients; outputs their mean (or sum) as
  // output 0, clears and increments the global step.
  void Take(OpKernelContext* ctx, int64_t num_required, DoneCallback done) {
    Wait(
        ctx, /*kind=*/0, /*timeout_ms=*/0,
        [this, ctx, num_required]() -> std::optional<absl::Status> {
          if (count_ < num_required) return std::nullopt;
          Tensor out = sum_;
          if (mean_ && count_ > 1) {
            out = Tensor(dtype_, sum_.shape());
            switch (dtype_) {
#define GR_CASE_(E, T)                \
  case E:                             \
    DivideInto<T>(out, sum_, count_); \
    break;
              GR_ACCUM_TYPES_(GR_CASE_)
#undef GR_CASE_
              default:
                return absl::UnimplementedError(DataTypeString(dtype_));
            }
          }
          ctx->set_output(0, std::move(out));
          sum_ = Tensor();
          count_ = 0;
          ++global_step_;
          return absl::OkStatus();
        },
        std::move(done));
  }

 private:
  const std::string name_;
  const DataType dtype_;
  const PartialShape shape_;
  const bool mean_;
  Tensor sum_;  // guarded by mu_
};

// ---------------------------------------------------------------------------
// Sparse conditional accumulator.
//
// Holds the sum of IndexedSlices gradients as rows at sorted, unique
// indices, with per index the number of gradients that had it. A gradient's
// repeated indices are first summed (in their order in the gradient), so
// each counts once. MEAN divides each row by its own count (TensorFlow's
// "average element-wise": a row only one worker touched is that worker's
// row, not half of it); SUM returns the sums.

// One row of a merged sum: the accumulated row it extends (-1: none) and
// the gradient rows order[first, last) added to it (none when equal).
struct MergedRow {
  int64_t acc_row;
  int64_t first, last;
};

template <typename T>
void SumRows(const std::vector<MergedRow>& plan, const std::vector<int64_t>& order,
             const Tensor& acc, const Tensor& grad, int64_t row, const Tensor& out) {
  const T* a = acc.IsInitialized() ? acc.base<T>() : nullptr;
  const T* g = grad.base<T>();
  T* o = out.base<T>();
  for (size_t r = 0; r < plan.size(); ++r) {
    const MergedRow& m = plan[r];
    T* d = o + static_cast<int64_t>(r) * row;
    const T* ar = m.acc_row >= 0 ? a + m.acc_row * row : nullptr;
    if (m.first == m.last) {
      for (int64_t k = 0; k < row; ++k) d[k] = ar[k];
      continue;
    }
    const T* first = g + order[m.first] * row;
    for (int64_t k = 0; k < row; ++k) d[k] = first[k];
    for (int64_t p = m.first + 1; p < m.last; ++p) {
      const T* s = g + order[p] * row;
      for (int64_t k = 0; k < row; ++k) d[k] = static_cast<T>(d[k] + s[k]);
    }
    if (ar != nullptr) {
      for (int64_t k = 0; k < row; ++k) d[k] = static_cast<T>(ar[k] + d[k]);
    }
  }
}

template <typename T>
void DivideRows(const Tensor& sum, const std::vector<int64_t>& counts, int64_t row,
                const Tensor& out) {
  const T* s = sum.base<T>();
  T* d = out.base<T>();
  for (size_t r = 0; r < counts.size(); ++r) {
    const T c = static_cast<T>(counts[r]);
    const int64_t base = static_cast<int64_t>(r) * row;
    for (int64_t k = 0; k < row; ++k) d[base + k] = static_cast<T>(s[base + k] / c);
  }
}

class SparseAccumulator : public AccumulatorBase {
 public:
  SparseAccumulator(std::string name, DataType dtype, PartialShape shape, bool mean)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)), mean_(mean) {}

  std::string DebugString() const override { return absl::StrCat("SparseAccumulator ", name_); }
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }

  // Adds the rows `values` at `indices` unless local_step < the global step
  // (then drops them: OK). `dense_shape` (null: unknown) is checked against
  // the accumulator's shape. A malformed gradient is InvalidArgument even
  // when stale, so a bug does not hide behind timing.
  absl::Status Apply(int64_t local_step, const Tensor& indices, const Tensor& values,
                     const Tensor* dense_shape) {
    GR_RETURN_IF_ERROR(CheckGradient(indices, values, dense_shape));
    return Mutate([&]() -> absl::Status {
      TensorShape row_shape = values.shape();
      row_shape.RemoveDim(0);
      if (count_ > 0 && row_shape != row_shape_) {
        return Error(absl::StrCat("holds rows of shape ", row_shape_.DebugString(),
                                  " but got gradient_values of shape ",
                                  values.shape().DebugString()));
      }
      if (dense_shape != nullptr && !KnownDim0()) {
        const int64_t dim0 = dense_shape->base<int64_t>()[0];
        if (dense_dim0_ >= 0 && dim0 != dense_dim0_) {
          return Error(absl::StrCat("gradient_shape[0] is ", dim0, " but earlier gradients had ",
                                    dense_dim0_));
        }
        dense_dim0_ = dim0;
      }
      if (local_step < global_step_) return absl::OkStatus();  // stale
      Merge(indices, values, row_shape);
      ++count_;
      return absl::OkStatus();
    });
  }

  // Waits for num_required gradients; outputs (indices, values, dense
  // shape), clears and increments the global step.
  void Take(OpKernelContext* ctx, int64_t num_required, DoneCallback done) {
    Wait(
        ctx, /*kind=*/0, /*timeout_ms=*/0,
        [this, ctx, num_required]() -> std::optional<absl::Status> {
          if (count_ < num_required) return std::nullopt;
          Tensor out = values_;
          const int64_t row = row_shape_.num_elements();
          if (mean_ && count_ > 1) {
            out = Tensor(dtype_, values_.shape());
            switch (dtype_) {
#define GR_CASE_(E, T)                         \
  case E:                                      \
    DivideRows<T>(values_, counts_, row, out); \
    break;
              GR_ACCUM_TYPES_(GR_CASE_)
#undef GR_CASE_
              default:
                return absl::UnimplementedError(DataTypeString(dtype_));
            }
          }
          Tensor dense_shape(DT_INT64, TensorShape({row_shape_.dims() + 1}));
          int64_t* ds = dense_shape.base<int64_t>();
          ds[0] = KnownDim0() ? shape_.dim(0) : dense_dim0_;
          for (int i = 0; i < row_shape_.dims(); ++i) ds[i + 1] = row_shape_.dim_size(i);
          ctx->set_output(0, Tensor::FromVector<int64_t>(indices_));
          ctx->set_output(1, std::move(out));
          ctx->set_output(2, std::move(dense_shape));
          indices_.clear();
          counts_.clear();
          values_ = Tensor();
          count_ = 0;
          ++global_step_;
          return absl::OkStatus();
        },
        std::move(done));
  }

 private:
  bool KnownDim0() const { return shape_.known_rank() && shape_.rank() >= 1 && shape_.dim(0) >= 0; }
  absl::Status Error(absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat("sparse accumulator '", name_, "': ", msg));
  }

  // The checks that need no state.
  absl::Status CheckGradient(const Tensor& indices, const Tensor& values,
                             const Tensor* dense_shape) const {
    if (indices.dtype() != DT_INT64 || indices.dims() != 1) {
      return Error(absl::StrCat("gradient_indices must be an int64 vector, got ",
                                DataTypeString(indices.dtype()), " of shape ",
                                indices.shape().DebugString()));
    }
    if (values.dtype() != dtype_) {
      return Error(absl::StrCat("holds ", DataTypeString(dtype_), ", got ",
                                DataTypeString(values.dtype()), " gradient_values"));
    }
    const int64_t n = indices.dim_size(0);
    if (values.dims() < 1 || values.dim_size(0) != n) {
      return Error(absl::StrCat("gradient_values must have one row per index: ", n,
                                " indices but values of shape ", values.shape().DebugString()));
    }
    if (shape_.known_rank()) {
      bool fits = values.dims() == shape_.rank();
      for (int i = 1; fits && i < shape_.rank(); ++i) {
        fits = shape_.dim(i) < 0 || shape_.dim(i) == values.dim_size(i);
      }
      if (!fits) {
        return Error(absl::StrCat("gradient_values of shape ", values.shape().DebugString(),
                                  " are not rows of the accumulator's shape ",
                                  shape_.DebugString()));
      }
    }
    int64_t limit = KnownDim0() ? shape_.dim(0) : -1;
    if (dense_shape != nullptr) {
      if (dense_shape->dtype() != DT_INT64 || dense_shape->dims() != 1) {
        return Error(absl::StrCat("gradient_shape must be an int64 vector, got ",
                                  DataTypeString(dense_shape->dtype()), " of shape ",
                                  dense_shape->shape().DebugString()));
      }
      const int64_t* ds = dense_shape->base<int64_t>();
      bool fits = dense_shape->dim_size(0) == values.dims() && ds[0] >= 0;
      for (int i = 1; fits && i < values.dims(); ++i) fits = ds[i] == values.dim_size(i);
      if (fits && shape_.known_rank()) {
        fits = shape_.IsCompatibleWith(PartialShape(absl::Span<const int64_t>(ds, values.dims())));
      }
      if (!fits) {
        std::vector<int64_t> dims(ds, ds + dense_shape->dim_size(0));
        return Error(absl::StrCat("gradient_shape [", absl::StrJoin(dims, ","),
                                  "] does not fit gradient_values of shape ",
                                  values.shape().DebugString(), " and the accumulator's shape ",
                                  shape_.DebugString()));
      }
      if (limit < 0) limit = ds[0];
    }
    const int64_t* idx = indices.base<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (idx[i] < 0 || (limit >= 0 && idx[i] >= limit)) {
        return Error(absl::StrCat("gradient_indices[", i, "] = ", idx[i], " is out of range [0, ",
                                  limit >= 0 ? absl::StrCat(limit) : std::string("inf"), ")"));
      }
    }
    return absl::OkStatus();
  }

  // Adds the gradient to the sums. REQUIRES: mu_ held, CheckGradient passed
  // and the rows are of row_shape_ (or count_ == 0).
  void Merge(const Tensor& indices, const Tensor& values, const TensorShape& row_shape) {
    const int64_t n = indices.dim_size(0);
    const int64_t* idx = indices.base<int64_t>();
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [idx](int64_t a, int64_t b) { return idx[a] < idx[b]; });
    std::vector<MergedRow> plan;
    std::vector<int64_t> merged, counts;
    plan.reserve(indices_.size() + n);
    merged.reserve(indices_.size() + n);
    counts.reserve(indices_.size() + n);
    size_t i = 0;
    int64_t j = 0;
    while (i < indices_.size() || j < n) {
      int64_t j_end = j, g = 0;
      if (j < n) {
        g = idx[order[j]];
        while (j_end < n && idx[order[j_end]] == g) ++j_end;
      }
      const int64_t ai = static_cast<int64_t>(i);
      if (j == n || (i < indices_.size() && indices_[i] < g)) {
        plan.push_back({ai, 0, 0});
        merged.push_back(indices_[i]);
        counts.push_back(counts_[i]);
        ++i;
      } else if (i < indices_.size() && indices_[i] == g) {
        plan.push_back({ai, j, j_end});
        merged.push_back(g);
        counts.push_back(counts_[i] + 1);
        ++i;
        j = j_end;
      } else {
        plan.push_back({-1, j, j_end});
        merged.push_back(g);
        counts.push_back(1);
        j = j_end;
      }
    }
    TensorShape out_shape = row_shape;
    out_shape.InsertDim(0, static_cast<int64_t>(plan.size()));
    Tensor out(dtype_, out_shape);
    const int64_t row = row_shape.num_elements();
    switch (dtype_) {
#define GR_CASE_(E, T)                                  \
  case E:                                               \
    SumRows<T>(plan, order, values_, values, row, out); \
    break;
      GR_ACCUM_TYPES_(GR_CASE_)
#undef GR_CASE_
      default:
        break;  // the kernel is registered for GR_ACCUM_TYPES_ only
    }
    indices_ = std::move(merged);
    counts_ = std::move(counts);
    values_ = std::move(out);
    row_shape_ = row_shape;
  }

  const std::string name_;
  const DataType dtype_;
  const PartialShape shape_;
  const bool mean_;
  std::shared_ptr<Var> handle_;
  // Guarded by mu_: the sums (values_ rows at indices_, counts_ gradients
  // each).
  std::vector<int64_t> indices_;
  std::vector<int64_t> counts_;
  Tensor values_;
  TensorShape row_shape_;
  int64_t dense_dim0_ = -1;  // from gradient_shape when shape_'s is unknown
};

// ---------------------------------------------------------------------------
// Kernels.

// ResourceConditionalAccumulator (a resource handle) and
// ConditionalAccumulator (TensorFlow 1.x's form: a ref to [container, name]).
class AccumulatorOp : public OpKernel {
 public:
  explicit AccumulatorOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), ref_(ctx->def().op() == "ConditionalAccumulator") {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("shape", &shape_));
    std::string reduction;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("reduction_type", &reduction));
    mean_ = reduction != "SUM";
    auto k = KeyFromAttrs(ctx);
    GR_CTX_CHECK_OK(ctx, k.status());
    key_ = *k;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    auto a = ctx->resource_manager()->LookupOrCreate<Accumulator>(
        key_.container, key_.name, [this]() -> absl::StatusOr<std::shared_ptr<Accumulator>> {
          return std::make_shared<Accumulator>(key_.name, dtype_, shape_, mean_);
        });
    if (!a.ok()) return Annotate(*this, a.status());
    if ((*a)->dtype() != dtype_ || !((*a)->shape() == shape_)) {
      return Error(absl::StrCat("accumulator '", key_.name, "' exists with dtype ",
                                DataTypeString((*a)->dtype()), " and shape ",
                                (*a)->shape().DebugString()));
    }
    if (ref_) {
      const std::string& container =
          key_.container.empty() ? ctx->resource_manager()->default_container() : key_.container;
      ctx->set_output_ref(0, (*a)->RefHandle(container, key_.name));
    } else {
      ctx->set_output(0, MakeHandle(ctx, key_, "ConditionalAccumulator"));
    }
    return absl::OkStatus();
  }

 private:
  const bool ref_;
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
  bool mean_ = true;
  ResourceKey key_;
};

// The accumulator named by a ref (or plain) string handle [container, name]
// at input 0; NotFound naming it.
template <typename R>
absl::StatusOr<std::shared_ptr<R>> LookupRefHandle(const OpKernel& k, OpKernelContext* ctx) {
  const Tensor& t = ctx->input(0);
  if (!t.IsInitialized() || t.dtype() != DT_STRING || t.NumElements() != 2) {
    return k.Error("input 0 must be an accumulator handle: a string [container, name]");
  }
  const std::string* h = t.base<std::string>();
  auto r = ctx->resource_manager()->Lookup<R>(h[0], h[1]);
  if (!r.ok()) return Annotate(k, r.status());
  return *r;
}

// How a kernel finds its accumulator at input 0: the dense one by its
// resource handle or by its ref string handle, the sparse one by its ref;
// AccumulatorNumAccumulated and AccumulatorSetGlobalStep take either ref.
template <typename R>
struct HandleAccess {
  using Resource = R;
  static absl::StatusOr<std::shared_ptr<R>> Lookup(const OpKernel& k, OpKernelContext* ctx) {
    return LookupHandle<R>(k, ctx);
  }
};
template <typename R>
struct RefAccess {
  using Resource = R;
  static absl::StatusOr<std::shared_ptr<R>> Lookup(const OpKernel& k, OpKernelContext* ctx) {
    return LookupRefHandle<R>(k, ctx);
  }
};
using DenseAccess = HandleAccess<Accumulator>;
using DenseRefAccess = RefAccess<Accumulator>;
using SparseAccess = RefAccess<SparseAccumulator>;
struct AnyRefAccess {
  using Resource = AccumulatorBase;
  static absl::StatusOr<std::shared_ptr<AccumulatorBase>> Lookup(const OpKernel& k,
                                                                 OpKernelContext* ctx) {
    auto sparse = LookupRefHandle<SparseAccumulator>(k, ctx);
    if (sparse.ok()) return std::shared_ptr<AccumulatorBase>(*std::move(sparse));
    if (sparse.status().code() != absl::StatusCode::kNotFound) return sparse.status();
    auto dense = LookupRefHandle<Accumulator>(k, ctx);
    if (!dense.ok()) return dense.status();
    return std::shared_ptr<AccumulatorBase>(*std::move(dense));
  }
};

template <typename Access>
class AccumulatorApplyOp : public OpKernel {
 public:
  explicit AccumulatorApplyOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> a, Access::Lookup(*this, ctx));
    GR_ASSIGN_OR_RETURN(int64_t local_step, ScalarInt(*this, ctx->input(1), "local_step"));
    GR_ASSIGN_OR_RETURN(const Tensor* grad, GetInput(*this, ctx, 2));
    absl::Status s = a->Apply(local_step, *grad);
    return s.ok() ? s : Annotate(*this, s);
  }
};

class SparseAccumulatorOp : public OpKernel {
 public:
  explicit SparseAccumulatorOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("shape", &shape_));
    if (shape_.known_rank() && shape_.rank() < 1) {
      ctx->SetStatus(
          ctx->Error(absl::StrCat("shape must have rank >= 1 (rows of the gradient), "
                                  "got ",
                                  shape_.DebugString())));
      return;
    }
    std::string reduction;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("reduction_type", &reduction));
    mean_ = reduction != "SUM";
    auto k = KeyFromAttrs(ctx);
    GR_CTX_CHECK_OK(ctx, k.status());
    key_ = *k;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string container =
        key_.container.empty() ? ctx->resource_manager()->default_container() : key_.container;
    auto a = ctx->resource_manager()->LookupOrCreate<SparseAccumulator>(
        container, key_.name, [this]() -> absl::StatusOr<std::shared_ptr<SparseAccumulator>> {
          return std::make_shared<SparseAccumulator>(key_.name, dtype_, shape_, mean_);
        });
    if (!a.ok()) return Annotate(*this, a.status());
    if ((*a)->dtype() != dtype_ || !((*a)->shape() == shape_)) {
      return Error(absl::StrCat("sparse accumulator '", key_.name, "' exists with dtype ",
                                DataTypeString((*a)->dtype()), " and shape ",
                                (*a)->shape().DebugString()));
    }
    ctx->set_output_ref(0, (*a)->RefHandle(container, key_.name));
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
  bool mean_ = true;
  ResourceKey key_;
};

class SparseAccumulatorApplyOp : public OpKernel {
 public:
  explicit SparseAccumulatorApplyOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("has_known_shape", &has_known_shape_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<SparseAccumulator> a,
                        LookupRefHandle<SparseAccumulator>(*this, ctx));
    GR_ASSIGN_OR_RETURN(int64_t local_step, ScalarInt(*this, ctx->input(1), "local_step"));
    GR_ASSIGN_OR_RETURN(const Tensor* indices, GetInput(*this, ctx, 2));
    GR_ASSIGN_OR_RETURN(const Tensor* values, GetInput(*this, ctx, 3));
    GR_ASSIGN_OR_RETURN(const Tensor* shape, GetInput(*this, ctx, 4));
    absl::Status s = a->Apply(local_step, *indices, *values, has_known_shape_ ? shape : nullptr);
    return s.ok() ? s : Annotate(*this, s);
  }

 private:
  bool has_known_shape_ = false;
};

template <typename Access>
class TakeGradientOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto a = Access::Lookup(*this, ctx);
    GR_ASYNC_RETURN_IF_ERROR(a.status());
    auto n = ScalarInt(*this, ctx->input(1), "num_required");
    GR_ASYNC_RETURN_IF_ERROR(n.status());
    if (*n < 1) {
      done(Error(absl::StrCat("num_required must be >= 1, got ", *n)));
      return;
    }
    std::shared_ptr<typename Access::Resource> keep = *a;
    keep->Take(ctx, *n, [this, keep, done = std::move(done)](absl::Status s) {
      done(s.ok() ? s : Annotate(*this, s));
    });
  }
};

template <typename Access>
class NumAccumulatedOp : public OpKernel {
 public:
  explicit NumAccumulatedOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<typename Access::Resource> a, Access::Lookup(*this, ctx));
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(a->num_accumulated())));
    return absl::OkStatus();
  }
};

template <typename Access>
class SetGlobalStepOp : public OpKernel {
 public:
  explicit SetGlobalStepOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<typename Access::Resource> a, Access::Lookup(*this, ctx));
    GR_ASSIGN_OR_RETURN(int64_t step, ScalarInt(*this, ctx->input(1), "new_global_step"));
    return a->SetGlobalStep(step);
  }
};

}  // namespace

void RegisterAccumulatorKernels(KernelRegistry& r) {
  const std::vector<DataType> types = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
  auto typed = [&](const char* op) {
    return KernelDef(op).Device(kDeviceCpu).TypeConstraint("dtype", types);
  };
  auto untyped = [&](const char* op) { return KernelDef(op).Device(kDeviceCpu); };
  r.Add(typed("ResourceConditionalAccumulator"), MakeKernel<AccumulatorOp>());
  r.Add(typed("ResourceAccumulatorApplyGradient"), MakeKernel<AccumulatorApplyOp<DenseAccess>>());
  r.Add(typed("ResourceAccumulatorTakeGradient"), MakeKernel<TakeGradientOp<DenseAccess>>());
  r.Add(untyped("ResourceAccumulatorNumAccumulated"), MakeKernel<NumAccumulatedOp<DenseAccess>>());
  r.Add(untyped("ResourceAccumulatorSetGlobalStep"), MakeKernel<SetGlobalStepOp<DenseAccess>>());
  r.Add(typed("ConditionalAccumulator"), MakeKernel<AccumulatorOp>());
  r.Add(typed("AccumulatorApplyGradient"), MakeKernel<AccumulatorApplyOp<DenseRefAccess>>());
  r.Add(typed("AccumulatorTakeGradient"), MakeKernel<TakeGradientOp<DenseRefAccess>>());
  r.Add(typed("SparseConditionalAccumulator"), MakeKernel<SparseAccumulatorOp>());
  r.Add(typed("SparseAccumulatorApplyGradient"), MakeKernel<SparseAccumulatorApplyOp>());
  r.Add(typed("SparseAccumulatorTakeGradient"), MakeKernel<TakeGradientOp<SparseAccess>>());
  r.Add(untyped("AccumulatorNumAccumulated"), MakeKernel<NumAccumulatedOp<AnyRefAccess>>());
  r.Add(untyped("AccumulatorSetGlobalStep"), MakeKernel<SetGlobalStepOp<AnyRefAccess>>());
}

}  // namespace queue_internal
}  // namespace graphrun
