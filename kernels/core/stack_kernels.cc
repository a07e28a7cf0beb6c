// CPU kernels for stacks (StackV2, StackPushV2, StackPopV2, StackCloseV2):
// a loop's gradient pushes the values its backprop needs in every forward
// iteration and pops them in reverse in the backprop loop
// (client/train/grad_while.cc).
//
// A stack belongs to one executor run: StackV2 makes a new one in the
// device's ResourceMgr (container "_stacks", a name unique to the node,
// step and run) every time it runs, and StackCloseV2 deletes it. The run's
// StepResources delete what is left when the run ends: a step that failed
// or was cancelled before the close, and a backprop loop that was dead (in
// a branch not taken), whose close never runs. Nothing outlives its run.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/core/register.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/blocking_resource_internal.h"

namespace graphrun {
namespace {

using array_util::Annotate;
using array_util::GetInput;

constexpr char kStackContainer[] = "_stacks";

class Stack : public ResourceBase {
 public:
  Stack(std::string name, DataType type, int64_t max_size)
      : name_(std::move(name)), type_(type), max_size_(max_size) {}
  std::string DebugString() const override {
    return absl::StrCat("Stack ", name_, " of ", DataTypeString(type_));
  }
  const std::string& name() const { return name_; }
  DataType type() const { return type_; }

  absl::Status Push(Tensor t) {
    std::lock_guard<std::mutex> l(mu_);
    if (max_size_ >= 0 && static_cast<int64_t>(elems_.size()) >= max_size_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("stack '", name_, "' is full (max_size ", max_size_, ")"));
    }
    elems_.push_back(std::move(t));
    return absl::OkStatus();
  }
  absl::StatusOr<Tensor> Pop() {
    std::lock_guard<std::mutex> l(mu_);
    if (elems_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("stack '", name_, "' is empty"));
    }
    Tensor t = std::move(elems_.back());
    elems_.pop_back();
    return t;
  }

 private:
  const std::string name_;
  const DataType type_;
  const int64_t max_size_;
  std::mutex mu_;
  std::vector<Tensor> elems_;  // guarded by mu_
};

absl::StatusOr<std::shared_ptr<Stack>> LookupStack(const OpKernel& k, OpKernelContext* ctx,
                                                   DataType want) {
  GR_ASSIGN_OR_RETURN(std::shared_ptr<Stack> s, queue_internal::LookupHandle<Stack>(k, ctx));
  if (want != DT_INVALID && s->type() != want) {
    return k.Error(absl::StrCat("stack '", s->name(), "' holds ", DataTypeString(s->type()),
                                " but the op has ", DataTypeString(want)));
  }
  return s;
}

class StackOp : public OpKernel {
 public:
  explicit StackOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("elem_type", &type_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("stack_name", &stack_name_));
    if (stack_name_.empty()) stack_name_ = ctx->def().name();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* max_size, GetInput(*this, ctx, 0));
    if (max_size->dtype() != DT_INT32 || max_size->NumElements() != 1) {
      return Error("max_size must be an int32 scalar");
    }
    static std::atomic<int64_t> next{0};
    queue_internal::ResourceKey key{
        kStackContainer, absl::StrCat(stack_name_, "/", ctx->step_id(), "/", next.fetch_add(1))};
    auto stack = std::make_shared<Stack>(key.name, type_, max_size->scalar<int32_t>());
    ResourceMgr* rm = ctx->resource_manager();
    GR_RETURN_IF_ERROR(Annotate(*this, rm->Create<Stack>(key.container, key.name, stack)));
    if (StepResources* run = ctx->step_resources(); run != nullptr) {
      // Already closed by then, or not: either way gone.
      run->Add([rm, key] { rm->Delete<Stack>(key.container, key.name).IgnoreError(); });
    }
    ctx->set_output(0, queue_internal::MakeHandle(ctx, key, "Stack"));
    return absl::OkStatus();
  }

 private:
  DataType type_ = DT_INVALID;
  std::string stack_name_;
};

class StackPushOp : public OpKernel {
 public:
  explicit StackPushOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("T", &type_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Stack> s, LookupStack(*this, ctx, type_));
    GR_ASSIGN_OR_RETURN(const Tensor* elem, GetInput(*this, ctx, 1));
    GR_RETURN_IF_ERROR(Annotate(*this, s->Push(*elem)));
    ctx->set_output(0, *elem);
    return absl::OkStatus();
  }

 private:
  DataType type_ = DT_INVALID;
};

class StackPopOp : public OpKernel {
 public:
  explicit StackPopOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("elem_type", &type_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Stack> s, LookupStack(*this, ctx, type_));
    auto t = s->Pop();
    if (!t.ok()) return Annotate(*this, t.status());
    ctx->set_output(0, *std::move(t));
    return absl::OkStatus();
  }

 private:
  DataType type_ = DT_INVALID;
};

class StackCloseOp : public OpKernel {
 public:
  explicit StackCloseOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Stack> s, LookupStack(*this, ctx, DT_INVALID));
    const ResourceHandle& h = ctx->input(0).scalar<ResourceHandle>();
    return Annotate(*this, ctx->resource_manager()->Delete<Stack>(h.container, h.name));
  }
};

}  // namespace

void RegisterStackKernels(KernelRegistry& r) {
  r.Add(KernelDef("StackV2").Device(kDeviceCpu), MakeKernel<StackOp>());
  r.Add(KernelDef("StackPushV2").Device(kDeviceCpu), MakeKernel<StackPushOp>());
  r.Add(KernelDef("StackPopV2").Device(kDeviceCpu), MakeKernel<StackPopOp>());
  r.Add(KernelDef("StackCloseV2").Device(kDeviceCpu), MakeKernel<StackCloseOp>());
}

}  // namespace graphrun
