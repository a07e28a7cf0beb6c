// CPU kernels for the training ops of graph/ops/training_ops.cc: optimizer
// updates (dense and sparse, on ref and resource variables), resource
// scatter updates and UnsortedSegmentSum.
//
// Update discipline (kernels/framework/variable.h): an update locks the mutexes of all
// its variables (in address order, so ops sharing variables cannot
// deadlock), copies a variable's buffer first if anyone else holds it
// (copy-on-write: a value read earlier stays a stable snapshot), then
// updates in place. The lock is held for the update whatever `use_locking`
// says: Var::mu is an exclusive mutex, and updating outside it would let a
// concurrent reader take a snapshot that is then written under it. The
// cost is that updates of one variable never overlap, which on a parameter
// server serialises workers' updates per variable, not across variables.
//
// Speed: each update rule is a block function over cwise::kBlock elements
// with __restrict parameters (so gcc vectorises it, see cwise_util.h);
// square roots go through SqrtBlock, since std::sqrt with errno semantics
// does not vectorise. Dense updates of large variables are sharded on the
// intra-op pool; sparse updates run row by row in index order (duplicate
// indices apply one after the other, as in TensorFlow).
//
// Denormals: updates run with flush-to-zero and denormals-are-zero set (as
// TensorFlow's threads do). Adam's first moment decays by beta1 every step
// where a gradient is zero (dead ReLU units), reaching the denormal range
// in some 700 steps; every SSE/AVX operation on a denormal then takes a
// microcode assist (~100 cycles). Measured on a PS training an MLP: Adam
// fell from 31% to under 5% of the cluster's CPU samples (~4x per step).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/denormal.h"
#include "kernels/math/cwise_util.h"
#include "kernels/nn/register.h"

namespace graphrun {
namespace {

using array_util::Annotate;
using array_util::GetInput;
using array_util::IntValues;
using cwise::kBlock;

// ---------------------------------------------------------------------------
// Variables of an update.

// The variable behind input `i`: the Var of a Ref(T) input, or the one a
// resource handle names (FailedPrecondition naming it when it does not
// exist, i.e. was never initialised).
absl::StatusOr<std::shared_ptr<Var>> VarInput(const OpKernel& k, OpKernelContext* ctx, int i) {
  if (ctx->input_is_ref(i)) return ctx->input_ref(i);
  const Tensor& t = ctx->input(i);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return k.Error(absl::StrCat("input ", i, " must be a ref to a variable or a resource handle"));
  }
  const ResourceHandle& h = t.base<ResourceHandle>()[0];
  auto v = ctx->resource_manager()->Lookup<Var>(h.container, h.name);
  if (!v.ok()) {
    return Annotate(k, absl::FailedPreconditionError(absl::StrCat(
                           "attempting to use uninitialized value ", h.name,
                           " (resource variable not found: ", v.status().message(), ")")));
  }
  return *v;
}

// Holds the mutexes of a set of variables, taken in address order.
class VarLocks {
 public:
  explicit VarLocks(const std::vector<std::shared_ptr<Var>>& vars) {
    std::vector<Var*> order;
    for (const auto& v : vars) order.push_back(v.get());
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end()), order.end());
    for (Var* v : order) locks_.emplace_back(v->mu);
  }

 private:
  std::vector<std::unique_lock<std::mutex>> locks_;
};

// Checks that every variable is initialised, holds `dtype` and has the
// first one's shape, then makes each safe to update in place (copying it
// when its buffer is shared). REQUIRES: the variables' mutexes held.
absl::Status PrepareVars(const OpKernel& k, const std::vector<std::shared_ptr<Var>>& vars,
                         const std::vector<std::string>& names, DataType dtype) {
  for (size_t i = 0; i < vars.size(); ++i) {
    Var* v = vars[i].get();
    for (size_t j = 0; j < i; ++j) {
      if (vars[j].get() == v) {
        return k.Error(absl::StrCat(names[j], " and ", names[i], " must be different variables"));
      }
    }
    if (!v->initialized) return Annotate(k, v->UninitializedError());
    if (v->tensor.dtype() != dtype) {
      return k.Error(absl::StrCat(names[i], " (variable ", v->name(), ") holds ",
                                  DataTypeString(v->tensor.dtype()), ", expected ",
                                  DataTypeString(dtype)));
    }
    if (i > 0 && v->tensor.shape() != vars[0]->tensor.shape()) {
      return k.Error(absl::StrCat(names[0], " and ", names[i], " do not have the same shape: ",
                                  vars[0]->tensor.shape().DebugString(), " vs ",
                                  v->tensor.shape().DebugString()));
    }
  }
  for (const auto& v : vars) {
    if (!v->tensor.RefCountIsOne()) v->tensor = v->tensor.DeepCopy();
  }
  return absl::OkStatus();
}

// A scalar T input (an error naming it otherwise).
template <typename T>
absl::StatusOr<T> ScalarInput(const OpKernel& k, OpKernelContext* ctx, int i,
                              const std::string& name) {
  GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(k, ctx, i));
  if (t->dims() != 0 || t->dtype() != DataTypeToEnum<T>::value) {
    return k.Error(absl::StrCat(name, " is not a scalar of type ",
                                DataTypeString(DataTypeToEnum<T>::value), ": got ",
                                DataTypeString(t->dtype()), " ", t->shape().DebugString()));
  }
  return t->base<T>()[0];
}

// ---------------------------------------------------------------------------
// Update rules. Each rule's Fn<T>::Block updates kBlock elements of the
// variable `v` and its slots `s1`, `s2` from the gradient `g`.

// out[k] = sqrt(in[k]) for one block, vectorised.
inline void SqrtBlock(const float* __restrict in, float* __restrict out) {
#if defined(__AVX__)
  for (int k = 0; k < kBlock; k += 8) {
    _mm256_storeu_ps(out + k, _mm256_sqrt_ps(_mm256_loadu_ps(in + k)));
  }
#else
  for (int k = 0; k < kBlock; ++k) out[k] = std::sqrt(in[k]);
#endif
}
inline void SqrtBlock(const double* __restrict in, double* __restrict out) {
#if defined(__AVX__)
  for (int k = 0; k < kBlock; k += 4) {
    _mm256_storeu_pd(out + k, _mm256_sqrt_pd(_mm256_loadu_pd(in + k)));
  }
#else
  for (int k = 0; k < kBlock; ++k) out[k] = std::sqrt(in[k]);
#endif
}

// Boolean attrs of the update ops.
struct Flags {
  bool use_nesterov = false;
  bool update_slots = true;
};

// var -= alpha * delta.
struct GradientDescentRule {
  static std::vector<std::string> VarNames() { return {"var"}; }
  template <typename T>
  struct Fn {
    T lr;
    void Block(T* __restrict v, T* __restrict, T* __restrict, const T* __restrict g) const {
      for (int k = 0; k < kBlock; ++k) v[k] -= lr * g[k];
    }
  };
  template <typename T>
  static Fn<T> Make(const T* s, const Flags&) {
    return {s[0]};
  }
};

// accum = accum * momentum + grad; var -= lr * accum (Nesterov:
// var -= grad * lr + accum * momentum * lr).
struct MomentumRule {
  static std::vector<std::string> VarNames() { return {"var", "accum"}; }
  template <typename T>
  struct Fn {
    T lr, momentum;
    bool nesterov;
    void Block(T* __restrict v, T* __restrict a, T* __restrict, const T* __restrict g) const {
      for (int k = 0; k < kBlock; ++k) a[k] = a[k] * momentum + g[k];
      if (nesterov) {
        for (int k = 0; k < kBlock; ++k) {
          v[k] -= g[k] * lr + a[k] * momentum * lr;
        }
      } else {
        for (int k = 0; k < kBlock; ++k) v[k] -= lr * a[k];
      }
    }
  };
  // Scalars in input order: lr, momentum.
  template <typename T>
  static Fn<T> Make(const T* s, const Flags& f) {
    return {s[0], s[1], f.use_nesterov};
  }
};

// Keras: accum = accum * momentum - lr * grad; var += accum (Nesterov:
// var += accum * momentum - lr * grad).
struct KerasMomentumRule {
  static std::vector<std::string> VarNames() { return {"var", "accum"}; }
  template <typename T>
  struct Fn {
    T lr, momentum;
    bool nesterov;
    void Block(T* __restrict v, T* __restrict a, T* __restrict, const T* __restrict g) const {
      for (int k = 0; k < kBlock; ++k) a[k] = a[k] * momentum - lr * g[k];
      if (nesterov) {
        for (int k = 0; k < kBlock; ++k) v[k] += a[k] * momentum - lr * g[k];
      } else {
        for (int k = 0; k < kBlock; ++k) v[k] += a[k];
      }
    }
  };
  template <typename T>
  static Fn<T> Make(const T* s, const Flags& f) {
    return {s[0], s[1], f.use_nesterov};
  }
};

// lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power);
// m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2);
// var -= lr_t * m / (sqrt(v) + epsilon)  (Nesterov: m replaced by
// m * beta1 + (1 - beta1) * grad).
struct AdamRule {
  static std::vector<std::string> VarNames() { return {"var", "m", "v"}; }
  template <typename T>
  struct Fn {
    T lr_t, beta1, one_minus_beta1, one_minus_beta2, epsilon;
    bool nesterov;
    void Block(T* __restrict var, T* __restrict m, T* __restrict v, const T* __restrict g) const {
      T root[kBlock];
      for (int k = 0; k < kBlock; ++k) {
        m[k] += (g[k] - m[k]) * one_minus_beta1;
        v[k] += (g[k] * g[k] - v[k]) * one_minus_beta2;
      }
      SqrtBlock(v, root);
      if (nesterov) {
        for (int k = 0; k < kBlock; ++k) {
          var[k] -= (m[k] * beta1 + one_minus_beta1 * g[k]) * lr_t / (root[k] + epsilon);
        }
      } else {
        for (int k = 0; k < kBlock; ++k) {
          var[k] -= m[k] * lr_t / (root[k] + epsilon);
        }
      }
    }
  };
  // Scalars: beta1_power, beta2_power, lr, beta1, beta2, epsilon.
  template <typename T>
  static Fn<T> Make(const T* s, const Flags& f) {
    const T lr_t = s[2] * std::sqrt(T{1} - s[1]) / (T{1} - s[0]);
    return {lr_t, s[3], T{1} - s[3], T{1} - s[4], s[5], f.use_nesterov};
  }
};

// accum += grad^2 (when update_slots); var -= lr * grad / (sqrt(accum) +
// epsilon), epsilon = 0 for Adagrad (V1).
template <bool kV2>
struct AdagradRuleT {
  static std::vector<std::string> VarNames() { return {"var", "accum"}; }
  template <typename T>
  struct Fn {
    T lr, epsilon;
    bool update_slots;
    void Block(T* __restrict v, T* __restrict a, T* __restrict, const T* __restrict g) const {
      T root[kBlock];
      if (update_slots) {
        for (int k = 0; k < kBlock; ++k) a[k] += g[k] * g[k];
      }
      SqrtBlock(a, root);
      for (int k = 0; k < kBlock; ++k) v[k] -= lr * g[k] / (root[k] + epsilon);
    }
  };
  template <typename T>
  static Fn<T> Make(const T* s, const Flags& f) {
    return {s[0], kV2 ? s[1] : T{0}, f.update_slots};
  }
};
using AdagradRule = AdagradRuleT<false>;
using AdagradV2Rule = AdagradRuleT<true>;

// ms += (grad^2 - ms) * (1 - rho);
// mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom.
struct RMSPropRule {
  static std::vector<std::string> VarNames() { return {"var", "ms", "mom"}; }
  template <typename T>
  struct Fn {
    T lr, one_minus_rho, momentum, epsilon;
    void Block(T* __restrict v, T* __restrict ms, T* __restrict mom, const T* __restrict g) const {
      T shifted[kBlock], root[kBlock];
      for (int k = 0; k < kBlock; ++k) {
        ms[k] += (g[k] * g[k] - ms[k]) * one_minus_rho;
        shifted[k] = ms[k] + epsilon;
      }
      SqrtBlock(shifted, root);
      for (int k = 0; k < kBlock; ++k) {
        mom[k] = mom[k] * momentum + lr * g[k] / root[k];
        v[k] -= mom[k];
      }
    }
  };
  template <typename T>
  static Fn<T> Make(const T* s, const Flags&) {
    return {s[0], T{1} - s[1], s[2], s[3]};
  }
};

// Applies `fn` to elements [0, n) of up to three variables and the
// gradient: whole blocks in place, the tail through zero-padded copies.
// Unused slot pointers are null.
template <typename T, typename Fn>
void RunBlocks(const Fn& fn, T* v, T* s1, T* s2, const T* g, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    fn.Block(v + i, s1 ? s1 + i : nullptr, s2 ? s2 + i : nullptr, g + i);
  }
  const int64_t tail = n - i;
  if (tail == 0) return;
  T buf[4][kBlock] = {};
  T* arrays[3] = {v, s1, s2};
  for (int a = 0; a < 3; ++a) {
    if (arrays[a] != nullptr) std::copy(arrays[a] + i, arrays[a] + n, buf[a]);
  }
  std::copy(g + i, g + n, buf[3]);
  fn.Block(buf[0], buf[1], buf[2], buf[3]);
  for (int a = 0; a < 3; ++a) {
    if (arrays[a] != nullptr) std::copy(buf[a], buf[a] + tail, arrays[a] + i);
  }
}

// ---------------------------------------------------------------------------
// Kernels.

// What the update kernels share: input layout and attrs.
template <typename Rule>
class ApplyBase : public OpKernel {
 public:
  explicit ApplyBase(OpKernelConstruction* c) : OpKernel(c), var_names_(Rule::VarNames()) {
    if (c->HasAttr("use_nesterov")) {
      GR_CTX_CHECK_OK(c, c->GetAttr("use_nesterov", &flags_.use_nesterov));
    }
    if (c->HasAttr("update_slots")) {
      GR_CTX_CHECK_OK(c, c->GetAttr("update_slots", &flags_.update_slots));
    }
    // The layout comes from the op: the variables, then T inputs that are
    // scalars in the order Rule::Make reads them, the gradient and (sparse
    // ops) the indices.
    const auto& op = c->op_def();
    for (int i = static_cast<int>(var_names_.size()); i < op.input_arg_size(); ++i) {
      const std::string& name = op.input_arg(i).name();
      if (name == "grad" || name == "delta") {
        grad_input_ = i;
      } else if (name == "indices") {
        indices_input_ = i;
      } else {
        scalar_inputs_.push_back(i);
        scalar_names_.push_back(name);
      }
    }
    if (grad_input_ < 0 || scalar_inputs_.size() > kMaxScalars) {
      c->SetStatus(c->Error("unexpected inputs for an update op"));
    }
  }

 protected:
  static constexpr size_t kMaxScalars = 8;

  // Resolves the variables and reads the scalar inputs (before any
  // variable lock is taken: reading a ref input locks its variable).
  template <typename T>
  absl::Status ReadInputs(OpKernelContext* ctx, std::vector<std::shared_ptr<Var>>* vars,
                          T* scalars) {
    for (int i = 0; i < static_cast<int>(var_names_.size()); ++i) {
      GR_ASSIGN_OR_RETURN(std::shared_ptr<Var> v, VarInput(*this, ctx, i));
      vars->push_back(std::move(v));
    }
    for (size_t j = 0; j < scalar_inputs_.size(); ++j) {
      GR_ASSIGN_OR_RETURN(scalars[j],
                          ScalarInput<T>(*this, ctx, scalar_inputs_[j], scalar_names_[j]));
    }
    return absl::OkStatus();
  }

  std::vector<std::string> var_names_;
  std::vector<int> scalar_inputs_;
  std::vector<std::string> scalar_names_;
  int grad_input_ = -1;
  int indices_input_ = -1;
  Flags flags_;
};

template <typename T, typename Rule>
class ApplyOp : public ApplyBase<Rule> {
 public:
  using ApplyBase<Rule>::ApplyBase;

  absl::Status Compute(OpKernelContext* ctx) override {
    std::vector<std::shared_ptr<Var>> vars;
    T scalars[8] = {};
    GR_RETURN_IF_ERROR(this->template ReadInputs<T>(ctx, &vars, scalars));
    GR_ASSIGN_OR_RETURN(const Tensor* grad, GetInput(*this, ctx, this->grad_input_));
    const auto fn = Rule::template Make<T>(scalars, this->flags_);
    {
      VarLocks locks(vars);
      GR_RETURN_IF_ERROR(PrepareVars(*this, vars, this->var_names_, DataTypeToEnum<T>::value));
      const Tensor& var = vars[0]->tensor;
      if (grad->shape() != var.shape() || grad->dtype() != var.dtype()) {
        return this->Error(
            absl::StrCat("var and grad do not have the same shape: ", var.shape().DebugString(),
                         " vs ", grad->shape().DebugString()));
      }
      T* p[3] = {nullptr, nullptr, nullptr};
      for (size_t i = 0; i < vars.size(); ++i) p[i] = vars[i]->tensor.base<T>();
      const T* g = grad->base<T>();
      cwise::ParallelFor(ctx, var.NumElements(), 4 * static_cast<int64_t>(vars.size()),
                         [&](int64_t b, int64_t e) {
                           ScopedFlushDenormal flush;
                           RunBlocks(fn, p[0] + b, p[1] ? p[1] + b : nullptr,
                                     p[2] ? p[2] + b : nullptr, g + b, e - b);
                         });
    }
    if (this->num_outputs() > 0) ctx->forward_input(0, 0);
    return absl::OkStatus();
  }
};

// The validated indices of a sparse update: one per row of `grad`, each in
// [0, var.dim_size(0)); grad is [N] + var.shape[1:].
absl::StatusOr<std::vector<int64_t>> SparseIndices(const OpKernel& k, const Tensor& var,
                                                   const Tensor& grad, const Tensor& indices_t) {
  if (var.dims() < 1) return k.Error("var must be at least 1 dimensional");
  if (indices_t.dims() != 1) {
    return k.Error(
        absl::StrCat("indices must be one-dimensional, got ", indices_t.shape().DebugString()));
  }
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> indices, IntValues(k, indices_t, "indices"));
  bool shape_ok =
      grad.dims() == var.dims() && grad.dim_size(0) == static_cast<int64_t>(indices.size());
  for (int d = 1; shape_ok && d < var.dims(); ++d) {
    shape_ok = grad.dim_size(d) == var.dim_size(d);
  }
  if (!shape_ok || grad.dtype() != var.dtype()) {
    return k.Error(absl::StrCat("grad ", grad.shape().DebugString(), " must be [", indices.size(),
                                "] + var.shape[1:] for var ", var.shape().DebugString()));
  }
  const int64_t rows = var.dim_size(0);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= rows) {
      return k.Error(absl::StrCat("index ", indices[i], " at offset ", i,
                                  " in indices is out of range [0, ", rows, ")"));
    }
  }
  return indices;
}

template <typename T, typename Rule>
class SparseApplyOp : public ApplyBase<Rule> {
 public:
  using ApplyBase<Rule>::ApplyBase;

  absl::Status Compute(OpKernelContext* ctx) override {
    std::vector<std::shared_ptr<Var>> vars;
    T scalars[8] = {};
    GR_RETURN_IF_ERROR(this->template ReadInputs<T>(ctx, &vars, scalars));
    GR_ASSIGN_OR_RETURN(const Tensor* grad, GetInput(*this, ctx, this->grad_input_));
    GR_ASSIGN_OR_RETURN(const Tensor* indices_t, GetInput(*this, ctx, this->indices_input_));
    const auto fn = Rule::template Make<T>(scalars, this->flags_);
    {
      VarLocks locks(vars);
      GR_RETURN_IF_ERROR(PrepareVars(*this, vars, this->var_names_, DataTypeToEnum<T>::value));
      const Tensor& var = vars[0]->tensor;
      GR_ASSIGN_OR_RETURN(std::vector<int64_t> indices,
                          SparseIndices(*this, var, *grad, *indices_t));
      const int64_t inner = var.dim_size(0) == 0 ? 0 : var.NumElements() / var.dim_size(0);
      T* p[3] = {nullptr, nullptr, nullptr};
      for (size_t i = 0; i < vars.size(); ++i) p[i] = vars[i]->tensor.base<T>();
      const T* g = grad->base<T>();
      ScopedFlushDenormal flush;
      for (size_t i = 0; i < indices.size(); ++i) {
        const int64_t off = indices[i] * inner;
        RunBlocks(fn, p[0] + off, p[1] ? p[1] + off : nullptr, p[2] ? p[2] + off : nullptr,
                  g + static_cast<int64_t>(i) * inner, inner);
      }
    }
    if (this->num_outputs() > 0) ctx->forward_input(0, 0);
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Resource scatter updates.

enum class ScatterKind { kAdd, kSub, kUpdate };

struct SubFn {
  template <typename T>
  static T Apply(T a, T b) {
    return a - b;
  }
};

// row[0..n) op= src[0..n), or op= src[0] for every element when `scalar`.
template <typename T>
void ScatterRow(ScatterKind kind, T* row, const T* src, int64_t n, bool scalar) {
  if (scalar) {
    const T s = src[0];
    for (int64_t j = 0; j < n; ++j) {
      row[j] = kind == ScatterKind::kAdd   ? static_cast<T>(row[j] + s)
               : kind == ScatterKind::kSub ? static_cast<T>(row[j] - s)
                                           : s;
    }
    return;
  }
  switch (kind) {
    case ScatterKind::kAdd:
      cwise::Accumulate<T, cwise::AddFn>(row, src, n);
      break;
    case ScatterKind::kSub:
      cwise::Accumulate<T, SubFn>(row, src, n);
      break;
    case ScatterKind::kUpdate:
      std::copy(src, src + n, row);
      break;
  }
}

// ResourceScatter{Add,Sub,Update}: var[indices[i], ...] op= updates[i, ...];
// updates may also be a scalar applied to every named row. `T` = void is
// the type-erased ResourceScatterUpdate for any dtype.
template <typename T, ScatterKind kKind>
class ResourceScatterOp : public OpKernel {
 public:
  explicit ResourceScatterOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, VarInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* indices_t, GetInput(*this, ctx, 1));
    GR_ASSIGN_OR_RETURN(const Tensor* updates, GetInput(*this, ctx, 2));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> indices, IntValues(*this, *indices_t, "indices"));
    std::lock_guard<std::mutex> l(var->mu);
    if (!var->initialized) return Annotate(*this, var->UninitializedError());
    const Tensor& params = var->tensor;
    if (params.dtype() != updates->dtype()) {
      return Error(absl::StrCat("variable ", var->name(), " holds ", DataTypeString(params.dtype()),
                                " but updates are ", DataTypeString(updates->dtype())));
    }
    if (params.dims() < 1) return Error("params must be at least 1-D");
    TensorShape want(indices_t->shape().dim_sizes());
    for (int d = 1; d < params.dims(); ++d) want.AddDim(params.dim_size(d));
    const bool scalar = updates->dims() == 0;
    if (!scalar && updates->shape() != want) {
      return Error(absl::StrCat("updates.shape ", updates->shape().DebugString(),
                                " must be indices.shape + params.shape[1:] = ", want.DebugString(),
                                " or []"));
    }
    const int64_t rows = params.dim_size(0);
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] < 0 || indices[i] >= rows) {
        return Error(absl::StrCat("indices[", i, "] = ", indices[i], " is not in [0, ", rows, ")"));
      }
    }
    if (!var->tensor.RefCountIsOne()) var->tensor = var->tensor.DeepCopy();
    const int64_t inner = rows == 0 ? 0 : var->tensor.NumElements() / rows;
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t src = scalar ? 0 : static_cast<int64_t>(i) * inner;
      if constexpr (std::is_void_v<T>) {
        if (scalar) {
          for (int64_t j = 0; j < inner; ++j) {
            GR_RETURN_IF_ERROR(
                array_util::CopyElements(*updates, 0, var->tensor, indices[i] * inner + j, 1));
          }
        } else {
          GR_RETURN_IF_ERROR(
              array_util::CopyElements(*updates, src, var->tensor, indices[i] * inner, inner));
        }
      } else {
        ScatterRow<T>(kKind, var->tensor.base<T>() + indices[i] * inner, updates->base<T>() + src,
                      inner, scalar);
      }
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// UnsortedSegmentSum.

template <typename T>
class UnsortedSegmentSumOp : public OpKernel {
 public:
  explicit UnsortedSegmentSumOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* data, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* ids_t, GetInput(*this, ctx, 1));
    GR_ASSIGN_OR_RETURN(const Tensor* num_t, GetInput(*this, ctx, 2));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> num, IntValues(*this, *num_t, "num_segments"));
    if (num_t->dims() != 0 || num[0] < 0) {
      return Error(
          absl::StrCat("num_segments must be a non-negative scalar, got ", num_t->DebugString()));
    }
    bool prefix = ids_t->dims() <= data->dims();
    for (int d = 0; prefix && d < ids_t->dims(); ++d) {
      prefix = ids_t->dim_size(d) == data->dim_size(d);
    }
    if (!prefix) {
      return Error(absl::StrCat("segment_ids.shape ", ids_t->shape().DebugString(),
                                " must be a prefix of data.shape ", data->shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> ids, IntValues(*this, *ids_t, "segment_ids"));
    TensorShape out_shape({num[0]});
    for (int d = ids_t->dims(); d < data->dims(); ++d) {
      out_shape.AddDim(data->dim_size(d));
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    T* o = out->base<T>();
    std::fill(o, o + out->NumElements(), T{0});
    const int64_t inner = ids.empty() ? 0 : data->NumElements() / static_cast<int64_t>(ids.size());
    const T* in = data->base<T>();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0) continue;  // dropped, as in TensorFlow
      if (ids[i] >= num[0]) {
        return Error(
            absl::StrCat("segment_ids[", i, "] = ", ids[i], " is out of range [0, ", num[0], ")"));
      }
      cwise::Accumulate<T, cwise::AddFn>(o + ids[i] * inner, in + static_cast<int64_t>(i) * inner,
                                         inner);
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Registration.

template <typename Rule, typename T>
void AddApply(KernelRegistry& r, const std::string& name, bool sparse) {
  const std::string prefix = sparse ? "SparseApply" : "Apply";
  for (const std::string& op : {prefix + name, "Resource" + prefix + name}) {
    if (sparse) {
      r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint<T>("T"),
            MakeKernel<SparseApplyOp<T, Rule>>());
    } else {
      r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint<T>("T"),
            MakeKernel<ApplyOp<T, Rule>>());
    }
  }
}

template <typename T>
void AddTrainingKernels(KernelRegistry& r) {
  AddApply<GradientDescentRule, T>(r, "GradientDescent", false);
  AddApply<MomentumRule, T>(r, "Momentum", false);
  AddApply<AdamRule, T>(r, "Adam", false);
  AddApply<AdagradRule, T>(r, "Adagrad", false);
  AddApply<AdagradV2Rule, T>(r, "AdagradV2", false);
  AddApply<RMSPropRule, T>(r, "RMSProp", false);
  AddApply<AdagradRule, T>(r, "Adagrad", true);
  AddApply<MomentumRule, T>(r, "Momentum", true);
  AddApply<RMSPropRule, T>(r, "RMSProp", true);
  r.Add(KernelDef("ResourceApplyKerasMomentum").Device(kDeviceCpu).TypeConstraint<T>("T"),
        MakeKernel<ApplyOp<T, KerasMomentumRule>>());
}

template <typename T>
void AddNumericKernels(KernelRegistry& r) {
  r.Add(KernelDef("ResourceScatterAdd").Device(kDeviceCpu).TypeConstraint<T>("dtype"),
        MakeKernel<ResourceScatterOp<T, ScatterKind::kAdd>>());
  r.Add(KernelDef("ResourceScatterSub").Device(kDeviceCpu).TypeConstraint<T>("dtype"),
        MakeKernel<ResourceScatterOp<T, ScatterKind::kSub>>());
  r.Add(KernelDef("UnsortedSegmentSum").Device(kDeviceCpu).TypeConstraint<T>("T"),
        MakeKernel<UnsortedSegmentSumOp<T>>());
}

}  // namespace

void RegisterTrainingKernels(KernelRegistry& r) {
  AddTrainingKernels<float>(r);
  AddTrainingKernels<double>(r);
  AddNumericKernels<float>(r);
  AddNumericKernels<double>(r);
  AddNumericKernels<int32_t>(r);
  AddNumericKernels<int64_t>(r);
  r.Add(KernelDef("ResourceScatterUpdate")
            .Device(kDeviceCpu)
            .TypeConstraint("dtype", array_util::AllTypes()),
        MakeKernel<ResourceScatterOp<void, ScatterKind::kUpdate>>());
}

}  // namespace graphrun
