// CPU kernels for variables. Both kinds keep a Var in the device's
// ResourceMgr under (container, shared_name or node name):
//   * ref variables: VariableV2 creates the Var on first run and outputs a
//     ref to it; Assign/AssignAdd/AssignSub/Scatter* take that ref.
//   * resource variables: VarHandleOp outputs a ResourceHandle naming the
//     Var; AssignVariableOp creates it on first assignment; readers look it
//     up (missing = uninitialised).
// Update discipline (kernels/framework/variable.h): assignments replace the tensor;
// in-place arithmetic only when the Var holds the sole reference to its
// buffer, otherwise copy-on-write, so earlier reads are stable snapshots.
#include <string>
#include <vector>

#include "kernels/core/register.h"
#include "kernels/framework/array_util.h"

namespace graphrun {
namespace {

using array_util::Annotate;
using array_util::GetInput;
using array_util::IntValues;

// The numeric types variable arithmetic supports.
std::vector<DataType> NumericTypes() {
  return {DT_FLOAT, DT_DOUBLE, DT_INT32,  DT_INT64, DT_UINT8,
          DT_INT8,  DT_INT16,  DT_UINT16, DT_HALF,  DT_BFLOAT16};
}

enum class UpdateKind { kAdd, kSub, kAssign };

template <typename T>
void Combine(T* dst, const T* src, int64_t n, UpdateKind kind) {
  if (kind == UpdateKind::kAdd) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] + src[i]);
  } else if (kind == UpdateKind::kSub) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] - src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

template <typename T, typename ToF, typename FromF>
void Combine16(T* dst, const T* src, int64_t n, UpdateKind kind, ToF to, FromF from) {
  for (int64_t i = 0; i < n; ++i) {
    float a = to(dst[i].bits), b = to(src[i].bits);
    float r = kind == UpdateKind::kAdd ? a + b : kind == UpdateKind::kSub ? a - b : b;
    dst[i].bits = from(r);
  }
}

// dst[dst_off + i] op= src[src_off + i] for i < n. REQUIRES: same dtype.
absl::Status CombineElements(const Tensor& dst, int64_t dst_off, const Tensor& src, int64_t src_off,
                             int64_t n, UpdateKind kind) {
  switch (dst.dtype()) {
#define GR_CASE_(E, T)                                                  \
  case E:                                                               \
    Combine(dst.base<T>() + dst_off, src.base<T>() + src_off, n, kind); \
    return absl::OkStatus();
    GR_CASE_(DT_FLOAT, float)
    GR_CASE_(DT_DOUBLE, double)
    GR_CASE_(DT_INT32, int32_t)
    GR_CASE_(DT_INT64, int64_t)
    GR_CASE_(DT_UINT8, uint8_t)
    GR_CASE_(DT_INT8, int8_t)
    GR_CASE_(DT_INT16, int16_t)
    GR_CASE_(DT_UINT16, uint16_t)
#undef GR_CASE_
    case DT_HALF:
      Combine16(dst.base<Half>() + dst_off, src.base<Half>() + src_off, n, kind, HalfToFloat,
                FloatToHalf);
      return absl::OkStatus();
    case DT_BFLOAT16:
      Combine16(dst.base<BFloat16>() + dst_off, src.base<BFloat16>() + src_off, n, kind,
                BFloat16ToFloat, FloatToBFloat16);
      return absl::OkStatus();
    default:
      if (kind == UpdateKind::kAssign) {
        GR_RETURN_IF_ERROR(array_util::CopyElements(src, src_off, dst, dst_off, n));
        return absl::OkStatus();
      }
      return absl::UnimplementedError(absl::StrCat("arithmetic on ", DataTypeString(dst.dtype())));
  }
}

// Makes var->tensor safe to write in place: copies it when anyone else
// holds its buffer. REQUIRES: var->mu held, var initialised.
void PrepareInPlace(Var* var) {
  if (!var->tensor.RefCountIsOne()) var->tensor = var->tensor.DeepCopy();
}

// Replaces the variable's value with `value`, sharing its buffer: later
// in-place updates copy first while anyone else holds it.
// REQUIRES: var->mu held.
void StoreValue(Var* var, const Tensor& value) {
  var->tensor = value;
  var->initialized = true;
}

// The (container, name) a stateful node's resource lives under.
struct ResourceKey {
  std::string container;
  std::string name;
};
absl::StatusOr<ResourceKey> KeyFromAttrs(OpKernelConstruction* ctx) {
  ResourceKey k;
  GR_RETURN_IF_ERROR(ctx->GetAttr("container", &k.container));
  GR_RETURN_IF_ERROR(ctx->GetAttr("shared_name", &k.name));
  if (k.name.empty()) k.name = ctx->def().name();
  return k;
}

// ---------------------------------------------------------------------------
// Ref variables.

class VariableOp : public OpKernel {
 public:
  explicit VariableOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("shape", &shape_));
    auto k = KeyFromAttrs(ctx);
    GR_CTX_CHECK_OK(ctx, k.status());
    key_ = *k;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    auto var = ctx->resource_manager()->LookupOrCreate<Var>(
        key_.container, key_.name, [this]() -> absl::StatusOr<std::shared_ptr<Var>> {
          return std::make_shared<Var>(key_.name, dtype_, shape_);
        });
    if (!var.ok()) return Annotate(*this, var.status());
    if ((*var)->dtype() != dtype_) {
      return Error(absl::StrCat("variable ", key_.name, " exists with dtype ",
                                DataTypeString((*var)->dtype()), ", not ", DataTypeString(dtype_)));
    }
    ctx->set_output_ref(0, *var);
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
  ResourceKey key_;
};

absl::StatusOr<Var*> RefInput(const OpKernel& k, OpKernelContext* ctx) {
  if (!ctx->input_is_ref(0)) return k.Error("input 0 must be a ref to a variable");
  return ctx->input_ref(0).get();
}

class AssignOp : public OpKernel {
 public:
  explicit AssignOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("validate_shape", &validate_shape_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(Var * var, RefInput(*this, ctx));
    GR_ASSIGN_OR_RETURN(const Tensor* value, GetInput(*this, ctx, 1));
    {
      std::lock_guard<std::mutex> l(var->mu);
      if (validate_shape_) {
        bool ok = var->initialized ? var->tensor.shape() == value->shape()
                                   : var->shape().IsCompatibleWith(value->shape());
        if (!ok) {
          std::string lhs =
              var->initialized ? var->tensor.shape().DebugString() : var->shape().DebugString();
          return Error(absl::StrCat("Assign requires shapes of both tensors to match. lhs shape= ",
                                    lhs, " rhs shape= ", value->shape().DebugString()));
        }
      }
      StoreValue(var, *value);
    }
    ctx->forward_input(0, 0);
    return absl::OkStatus();
  }

 private:
  bool validate_shape_ = true;
};

class DenseUpdateOp : public OpKernel {
 public:
  DenseUpdateOp(OpKernelConstruction* ctx, UpdateKind kind) : OpKernel(ctx), kind_(kind) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(Var * var, RefInput(*this, ctx));
    GR_ASSIGN_OR_RETURN(const Tensor* value, GetInput(*this, ctx, 1));
    {
      std::lock_guard<std::mutex> l(var->mu);
      if (!var->initialized) return Annotate(*this, var->UninitializedError());
      if (var->tensor.shape() != value->shape()) {
        return Error(absl::StrCat(
            "Parameters and update must be the same size: ", var->tensor.shape().DebugString(),
            " vs ", value->shape().DebugString()));
      }
      PrepareInPlace(var);
      absl::Status s = CombineElements(var->tensor, 0, *value, 0, value->NumElements(), kind_);
      if (!s.ok()) return Annotate(*this, s);
    }
    ctx->forward_input(0, 0);
    return absl::OkStatus();
  }

 private:
  UpdateKind kind_;
};
class AssignAddOp : public DenseUpdateOp {
 public:
  explicit AssignAddOp(OpKernelConstruction* ctx) : DenseUpdateOp(ctx, UpdateKind::kAdd) {}
};
class AssignSubOp : public DenseUpdateOp {
 public:
  explicit AssignSubOp(OpKernelConstruction* ctx) : DenseUpdateOp(ctx, UpdateKind::kSub) {}
};

class IsVariableInitializedOp : public OpKernel {
 public:
  explicit IsVariableInitializedOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    bool init;
    if (ctx->input_is_ref(0)) {
      Var* var = ctx->input_ref(0).get();
      std::lock_guard<std::mutex> l(var->mu);
      init = var->initialized;
    } else {
      init = ctx->input(0).IsInitialized();
    }
    ctx->set_output(0, Tensor::Scalar<bool>(init));
    return absl::OkStatus();
  }
};

// Row-wise updates of a variable's value: value[indices[i], ...] op=
// updates[i, ...]. REQUIRES: var->mu held, var initialised.
absl::Status ScatterRows(const OpKernel& k, Var* var, const Tensor& indices_t,
                         const Tensor& updates, UpdateKind kind) {
  const Tensor& params = var->tensor;
  if (params.dims() < 1) return k.Error("params must be at least 1-D");
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> indices, IntValues(k, indices_t, "indices"));
  TensorShape want(indices_t.shape().dim_sizes());
  for (int d = 1; d < params.dims(); ++d) want.AddDim(params.dim_size(d));
  if (updates.shape() != want) {
    return k.Error(
        absl::StrCat("updates.shape = ", updates.shape().DebugString(),
                     " must equal indices.shape + params.shape[1:] = ", want.DebugString()));
  }
  const int64_t rows = params.dim_size(0);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= rows) {
      return k.Error(absl::StrCat("indices[", i, "] = ", indices[i], " is not in [0, ", rows, ")"));
    }
  }
  PrepareInPlace(var);
  const int64_t inner = rows == 0 ? 0 : params.NumElements() / rows;
  for (size_t i = 0; i < indices.size(); ++i) {
    absl::Status s = CombineElements(var->tensor, indices[i] * inner, updates,
                                     static_cast<int64_t>(i) * inner, inner, kind);
    if (!s.ok()) return Annotate(k, s);
  }
  return absl::OkStatus();
}

class ScatterOp : public OpKernel {
 public:
  ScatterOp(OpKernelConstruction* ctx, UpdateKind kind) : OpKernel(ctx), kind_(kind) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(Var * var, RefInput(*this, ctx));
    const Tensor& indices = ctx->input(1);
    GR_ASSIGN_OR_RETURN(const Tensor* updates, GetInput(*this, ctx, 2));
    {
      std::lock_guard<std::mutex> l(var->mu);
      if (!var->initialized) return Annotate(*this, var->UninitializedError());
      GR_RETURN_IF_ERROR(ScatterRows(*this, var, indices, *updates, kind_));
    }
    ctx->forward_input(0, 0);
    return absl::OkStatus();
  }

 private:
  UpdateKind kind_;
};
class ScatterAddOp : public ScatterOp {
 public:
  explicit ScatterAddOp(OpKernelConstruction* ctx) : ScatterOp(ctx, UpdateKind::kAdd) {}
};
class ScatterSubOp : public ScatterOp {
 public:
  explicit ScatterSubOp(OpKernelConstruction* ctx) : ScatterOp(ctx, UpdateKind::kSub) {}
};
class ScatterUpdateOp : public ScatterOp {
 public:
  explicit ScatterUpdateOp(OpKernelConstruction* ctx) : ScatterOp(ctx, UpdateKind::kAssign) {}
};

// ---------------------------------------------------------------------------
// Resource variables.

class VarHandleOp : public OpKernel {
 public:
  explicit VarHandleOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    auto k = KeyFromAttrs(ctx);
    GR_CTX_CHECK_OK(ctx, k.status());
    key_ = *k;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ResourceHandle h;
    h.device = ctx->device()->name();
    h.container =
        key_.container.empty() ? ctx->resource_manager()->default_container() : key_.container;
    h.name = key_.name;
    h.type_name = "Var";
    ctx->set_output(0, Tensor::Scalar<ResourceHandle>(std::move(h)));
    return absl::OkStatus();
  }

 private:
  ResourceKey key_;
};

absl::StatusOr<ResourceHandle> HandleInput(const OpKernel& k, OpKernelContext* ctx) {
  const Tensor& t = ctx->input(0);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return k.Error("input 0 must be a scalar resource handle");
  }
  return t.scalar<ResourceHandle>();
}

// Finds the variable; FailedPrecondition naming it when it does not exist
// (TF1: never initialised, or deleted).
absl::StatusOr<std::shared_ptr<Var>> LookupVar(const OpKernel& k, OpKernelContext* ctx,
                                               const ResourceHandle& h) {
  auto v = ctx->resource_manager()->Lookup<Var>(h.container, h.name);
  if (!v.ok()) {
    return Annotate(
        k, absl::FailedPreconditionError(absl::StrCat(
               "Error while reading resource variable ", h.name, " from Container: ",
               h.container.empty() ? ctx->resource_manager()->default_container() : h.container,
               ". This could mean that the variable was uninitialized. ", v.status().message())));
  }
  return *v;
}

class ReadVariableOp : public OpKernel {
 public:
  explicit ReadVariableOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dtype_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResourceHandle h, HandleInput(*this, ctx));
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(*this, ctx, h));
    auto t = var->Read();
    if (!t.ok()) return Annotate(*this, t.status());
    if (t->dtype() != dtype_) {
      return Error(absl::StrCat("Trying to read variable with wrong dtype. Expected ",
                                DataTypeString(dtype_), " got ", DataTypeString(t->dtype())));
    }
    ctx->set_output(0, *std::move(t));
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_INVALID;
};

class AssignVariableOp : public OpKernel {
 public:
  explicit AssignVariableOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    if (ctx->HasAttr("validate_shape")) {
      GR_CTX_CHECK_OK(ctx, ctx->GetAttr("validate_shape", &validate_shape_));
    }
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResourceHandle h, HandleInput(*this, ctx));
    GR_ASSIGN_OR_RETURN(const Tensor* value, GetInput(*this, ctx, 1));
    auto var = ctx->resource_manager()->LookupOrCreate<Var>(
        h.container, h.name, [&]() -> absl::StatusOr<std::shared_ptr<Var>> {
          return std::make_shared<Var>(h.name, dtype_, PartialShape());
        });
    if (!var.ok()) return Annotate(*this, var.status());
    Var* v = var->get();
    if (v->dtype() != dtype_) {
      return Error(absl::StrCat("Trying to assign variable with wrong dtype. Expected ",
                                DataTypeString(v->dtype()), " got ", DataTypeString(dtype_)));
    }
    std::lock_guard<std::mutex> l(v->mu);
    if (validate_shape_ && v->initialized && v->tensor.shape() != value->shape()) {
      return Error(
          absl::StrCat("Trying to assign to variable with tensor with wrong shape. Expected ",
                       v->tensor.shape().DebugString(), " got ", value->shape().DebugString()));
    }
    StoreValue(v, *value);
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_INVALID;
  bool validate_shape_ = false;
};

class AssignUpdateVariableOp : public OpKernel {
 public:
  AssignUpdateVariableOp(OpKernelConstruction* ctx, UpdateKind kind) : OpKernel(ctx), kind_(kind) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResourceHandle h, HandleInput(*this, ctx));
    GR_ASSIGN_OR_RETURN(const Tensor* value, GetInput(*this, ctx, 1));
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(*this, ctx, h));
    std::lock_guard<std::mutex> l(var->mu);
    if (!var->initialized) return Annotate(*this, var->UninitializedError());
    if (var->tensor.dtype() != value->dtype()) {
      return Error(absl::StrCat("variable has dtype ", DataTypeString(var->tensor.dtype()),
                                " but the update has ", DataTypeString(value->dtype())));
    }
    if (var->tensor.shape() != value->shape()) {
      return Error(absl::StrCat("Cannot update variable with shape ",
                                var->tensor.shape().DebugString(), " using a Tensor with shape ",
                                value->shape().DebugString(), ", shapes must be equal."));
    }
    PrepareInPlace(var.get());
    absl::Status s = CombineElements(var->tensor, 0, *value, 0, value->NumElements(), kind_);
    return s.ok() ? s : Annotate(*this, s);
  }

 private:
  UpdateKind kind_;
};
class AssignAddVariableOp : public AssignUpdateVariableOp {
 public:
  explicit AssignAddVariableOp(OpKernelConstruction* ctx)
      : AssignUpdateVariableOp(ctx, UpdateKind::kAdd) {}
};
class AssignSubVariableOp : public AssignUpdateVariableOp {
 public:
  explicit AssignSubVariableOp(OpKernelConstruction* ctx)
      : AssignUpdateVariableOp(ctx, UpdateKind::kSub) {}
};

class VarIsInitializedOp : public OpKernel {
 public:
  explicit VarIsInitializedOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResourceHandle h, HandleInput(*this, ctx));
    auto var = ctx->resource_manager()->Lookup<Var>(h.container, h.name);
    bool init = false;
    if (var.ok()) {
      std::lock_guard<std::mutex> l((*var)->mu);
      init = (*var)->initialized;
    }
    ctx->set_output(0, Tensor::Scalar<bool>(init));
    return absl::OkStatus();
  }
};

class VariableShapeOp : public OpKernel {
 public:
  explicit VariableShapeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResourceHandle h, HandleInput(*this, ctx));
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(*this, ctx, h));
    auto t = var->Read();
    if (!t.ok()) return Annotate(*this, t.status());
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({t->dims()})));
    for (int i = 0; i < t->dims(); ++i) {
      if (out->dtype() == DT_INT32) {
        out->base<int32_t>()[i] = static_cast<int32_t>(t->dim_size(i));
      } else {
        out->base<int64_t>()[i] = t->dim_size(i);
      }
    }
    return absl::OkStatus();
  }
};

class DestroyResourceOp : public OpKernel {
 public:
  explicit DestroyResourceOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("ignore_lookup_error", &ignore_lookup_error_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResourceHandle h, HandleInput(*this, ctx));
    absl::Status s = ctx->resource_manager()->Delete<Var>(h.container, h.name);
    if (!s.ok() && !(ignore_lookup_error_ && absl::IsNotFound(s))) {
      return Annotate(*this, s);
    }
    return absl::OkStatus();
  }

 private:
  bool ignore_lookup_error_ = true;
};

class ResourceGatherOp : public OpKernel {
 public:
  explicit ResourceGatherOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    int64_t batch_dims = 0;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("batch_dims", &batch_dims));
    if (batch_dims != 0) ctx->SetStatus(ctx->Error("batch_dims != 0 is not supported"));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(ResourceHandle h, HandleInput(*this, ctx));
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(*this, ctx, h));
    auto params = var->Read();
    if (!params.ok()) return Annotate(*this, params.status());
    if (params->dims() < 1) return Error("params must be at least 1-D");
    const Tensor& indices_t = ctx->input(1);
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> indices, IntValues(*this, indices_t, "indices"));
    const int64_t rows = params->dim_size(0);
    const int64_t inner = rows == 0 ? 0 : params->NumElements() / rows;
    TensorShape s = indices_t.shape();
    for (int d = 1; d < params->dims(); ++d) s.AddDim(params->dim_size(d));
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] < 0 || indices[i] >= rows) {
        return Error(absl::StrCat("indices[", i, "] = ", indices[i], " is not in [0, ", rows, ")"));
      }
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, s));
    for (size_t i = 0; i < indices.size(); ++i) {
      GR_RETURN_IF_ERROR(array_util::CopyElements(*params, indices[i] * inner, *out,
                                                  static_cast<int64_t>(i) * inner, inner));
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterStateKernels(KernelRegistry& r) {
  const std::vector<DataType> all = array_util::AllTypes();
  const std::vector<DataType> num = NumericTypes();
  for (const char* op : {"VariableV2", "Variable"}) {
    r.Add(KernelDef(op).Device(kDeviceCpu).TypeConstraint("dtype", all), MakeKernel<VariableOp>());
  }
  r.Add(KernelDef("Assign").Device(kDeviceCpu).TypeConstraint("T", all), MakeKernel<AssignOp>());
  r.Add(KernelDef("AssignAdd").Device(kDeviceCpu).TypeConstraint("T", num),
        MakeKernel<AssignAddOp>());
  r.Add(KernelDef("AssignSub").Device(kDeviceCpu).TypeConstraint("T", num),
        MakeKernel<AssignSubOp>());
  r.Add(KernelDef("IsVariableInitialized").Device(kDeviceCpu).TypeConstraint("dtype", all),
        MakeKernel<IsVariableInitializedOp>());
  r.Add(KernelDef("ScatterAdd").Device(kDeviceCpu).TypeConstraint("T", num),
        MakeKernel<ScatterAddOp>());
  r.Add(KernelDef("ScatterSub").Device(kDeviceCpu).TypeConstraint("T", num),
        MakeKernel<ScatterSubOp>());
  r.Add(KernelDef("ScatterUpdate").Device(kDeviceCpu).TypeConstraint("T", all),
        MakeKernel<ScatterUpdateOp>());

  r.Add(KernelDef("VarHandleOp").Device(kDeviceCpu).TypeConstraint("dtype", all),
        MakeKernel<VarHandleOp>());
  r.Add(KernelDef("ReadVariableOp").Device(kDeviceCpu).TypeConstraint("dtype", all),
        MakeKernel<ReadVariableOp>());
  r.Add(KernelDef("AssignVariableOp").Device(kDeviceCpu).TypeConstraint("dtype", all),
        MakeKernel<AssignVariableOp>());
  r.Add(KernelDef("AssignAddVariableOp").Device(kDeviceCpu).TypeConstraint("dtype", num),
        MakeKernel<AssignAddVariableOp>());
  r.Add(KernelDef("AssignSubVariableOp").Device(kDeviceCpu).TypeConstraint("dtype", num),
        MakeKernel<AssignSubVariableOp>());
  r.Add(KernelDef("VarIsInitializedOp").Device(kDeviceCpu), MakeKernel<VarIsInitializedOp>());
  r.Add(KernelDef("VariableShape").Device(kDeviceCpu), MakeKernel<VariableShapeOp>());
  r.Add(KernelDef("DestroyResourceOp").Device(kDeviceCpu), MakeKernel<DestroyResourceOp>());
  r.Add(KernelDef("ResourceGather").Device(kDeviceCpu).TypeConstraint("dtype", all),
        MakeKernel<ResourceGatherOp>());
}

// The resource-variable kernels that never touch a variable's bytes (the
// handle, reads and assignments share buffers; the rest reads metadata),
// for an accelerator: the variable's tensor lives in the device's memory,
// its handle and metadata on the host.
void RegisterAcceleratorVariableKernels(KernelRegistry& r, const std::string& device_type,
                                        const std::vector<DataType>& types) {
  r.Add(KernelDef("VarHandleOp")
            .Device(device_type)
            .TypeConstraint("dtype", types)
            .HostMemory("resource"),
        MakeKernel<VarHandleOp>());
  r.Add(KernelDef("ReadVariableOp")
            .Device(device_type)
            .TypeConstraint("dtype", types)
            .HostMemory("resource"),
        MakeKernel<ReadVariableOp>());
  r.Add(KernelDef("AssignVariableOp")
            .Device(device_type)
            .TypeConstraint("dtype", types)
            .HostMemory("resource"),
        MakeKernel<AssignVariableOp>());
  r.Add(KernelDef("VarIsInitializedOp")
            .Device(device_type)
            .HostMemory("resource")
            .HostMemory("is_initialized"),
        MakeKernel<VarIsInitializedOp>());
  r.Add(KernelDef("VariableShape").Device(device_type).HostMemory("input").HostMemory("output"),
        MakeKernel<VariableShapeOp>());
  r.Add(KernelDef("DestroyResourceOp").Device(device_type).HostMemory("resource"),
        MakeKernel<DestroyResourceOp>());
}

}  // namespace graphrun
