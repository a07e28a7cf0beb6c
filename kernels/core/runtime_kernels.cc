// _Send/_Recv (cross-device edges, through the step's Rendezvous) and
// _Arg/_Retval (feeds and fetches, through the call frame).
//
// Rendezvous hold host tensors only. On an accelerator, _Send copies a
// tensor in the device's memory to the host (device-to-host stream) before
// it sends, and _Recv copies what it receives into the device's memory
// (host-to-device stream) when the device can hold its type, so a
// transfer between two accelerators, or to another task, goes through the
// host.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/core/register.h"
#include "kernels/framework/variable.h"

namespace graphrun {
namespace {

struct TransferAttrs {
  std::string tensor_name, send_device, recv_device;
  int64_t send_device_incarnation = 0;
};

void ReadTransferAttrs(OpKernelConstruction* ctx, TransferAttrs* a) {
  GR_CTX_CHECK_OK(ctx, ctx->GetAttr("tensor_name", &a->tensor_name));
  GR_CTX_CHECK_OK(ctx, ctx->GetAttr("send_device", &a->send_device));
  GR_CTX_CHECK_OK(ctx, ctx->GetAttr("recv_device", &a->recv_device));
  GR_CTX_CHECK_OK(ctx, ctx->GetAttr("send_device_incarnation", &a->send_device_incarnation));
}

// This step's key for the transfer; an error naming `k` without a
// rendezvous.
absl::StatusOr<Rendezvous::ParsedKey> KeyFor(const OpKernel& k, const TransferAttrs& a,
                                             const OpKernelContext* ctx) {
  if (ctx->rendezvous() == nullptr) return k.Error("no rendezvous for this step");
  return Rendezvous::ParseKey(
      Rendezvous::CreateKey(a.send_device, static_cast<uint64_t>(a.send_device_incarnation),
                            a.recv_device, a.tensor_name, ctx->frame_iter()));
}

// A transfer's failure names the transfer node, unless it already names a
// node: then it is another node's error that the step's abort carried to
// this rendezvous, and that node is the one to name (not '.../_recv').
absl::Status NameTransfer(const absl::Status& s, const std::string& node) {
  if (absl::StartsWith(s.message(), "node '")) return s;
  return AnnotateStatus(s, absl::StrCat("node '", node, "': "));
}

// The accelerator's transfer kernels run only on an accelerator.
void RequireAccelerator(const OpKernel& k, OpKernelConstruction* ctx) {
  if (ctx->device()->accelerator() == nullptr) {
    ctx->SetStatus(k.Error(absl::StrCat("device ", ctx->device()->name(), " (",
                                        ctx->device()->device_type(), ") is no accelerator")));
  }
}

class SendOp : public OpKernel {
 public:
  explicit SendOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    ReadTransferAttrs(ctx, &attrs_);
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(Rendezvous::ParsedKey key, KeyFor(*this, attrs_, ctx));
    Rendezvous::Args args;
    args.cancellation_manager = ctx->cancellation_manager();
    const bool dead = !ctx->has_input(0);
    Tensor value = dead ? Tensor() : ctx->input(0);
    if (!dead && !value.IsInitialized()) {
      // A ref input from a variable nobody assigned yet.
      const auto& var = ctx->input_ref(0);
      absl::Status s =
          var ? var->UninitializedError() : absl::FailedPreconditionError("input has no value");
      return AnnotateStatus(s, absl::StrCat("node '", name(), "': "));
    }
    absl::Status s = ctx->rendezvous()->Send(key, args, value, dead);
    if (!s.ok()) return NameTransfer(s, name());
    return absl::OkStatus();
  }

 private:
  TransferAttrs attrs_;
};

class RecvOp : public AsyncOpKernel {
 public:
  explicit RecvOp(OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    ReadTransferAttrs(ctx, &attrs_);
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto key = KeyFor(*this, attrs_, ctx);
    if (!key.ok()) {
      done(key.status());
      return;
    }
    Rendezvous::Args args;
    args.cancellation_manager = ctx->cancellation_manager();
    std::string node = name();
    ctx->rendezvous()->RecvAsync(
        *key, args,
        [ctx, done = std::move(done), node](const absl::Status& s, const Tensor& v, bool is_dead) {
          if (!s.ok()) {
            done(NameTransfer(s, node));
            return;
          }
          if (!is_dead) ctx->set_output(0, v);
          done(absl::OkStatus());
        });
  }

 private:
  TransferAttrs attrs_;
};

// _Send on an accelerator: asynchronous, as its copy is.
class AcceleratorSendOp : public AsyncOpKernel {
 public:
  explicit AcceleratorSendOp(OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    ReadTransferAttrs(ctx, &attrs_);
    RequireAccelerator(*this, ctx);
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto key = KeyFor(*this, attrs_, ctx);
    if (!key.ok()) {
      done(key.status());
      return;
    }
    const bool dead = !ctx->has_input(0);
    Tensor value = dead ? Tensor() : ctx->input(0);
    Accelerator* acc = ctx->device()->accelerator();
    std::string node = name();
    auto send = [ctx, node, key = *key](const Tensor& v, bool is_dead) {
      Rendezvous::Args args;
      args.cancellation_manager = ctx->cancellation_manager();
      absl::Status s = ctx->rendezvous()->Send(key, args, v, is_dead);
      return s.ok() ? s : NameTransfer(s, node);
    };
    if (dead || value.memory_space() != acc->memory_space()) {
      done(send(value, dead));
      return;
    }
    absl::StatusOr<Tensor> host =
        acc->AllocateHostForCopy(value.dtype(), value.shape(), absl::StrCat("node '", node, "': "));
    if (!host.ok()) {
      done(host.status());
      return;
    }
    Tensor h = *host;
    acc->CopyDeviceToHost(value, h, [send, h, node, done = std::move(done)](const absl::Status& s) {
      if (!s.ok()) {
        done(NameTransfer(s, node));
        return;
      }
      done(send(h, false));
    });
  }

 private:
  TransferAttrs attrs_;
};

class AcceleratorRecvOp : public AsyncOpKernel {
 public:
  explicit AcceleratorRecvOp(OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    ReadTransferAttrs(ctx, &attrs_);
    // Set by the runtime when every consumer reads this value on the host.
    if (ctx->HasAttr("_host_memory")) {
      GR_CTX_CHECK_OK(ctx, ctx->GetAttr("_host_memory", &host_));
    }
    RequireAccelerator(*this, ctx);
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto key = KeyFor(*this, attrs_, ctx);
    if (!key.ok()) {
      done(key.status());
      return;
    }
    Rendezvous::Args args;
    args.cancellation_manager = ctx->cancellation_manager();
    std::string node = name();
    Accelerator* acc = ctx->device()->accelerator();
    const bool host = host_;
    ctx->rendezvous()->RecvAsync(
        *key, args,
        [ctx, acc, host, done = std::move(done), node](const absl::Status& s, const Tensor& v,
                                                       bool is_dead) {
          if (!s.ok()) {
            done(NameTransfer(s, node));
            return;
          }
          if (is_dead) {
            done(absl::OkStatus());
            return;
          }
          if (host || !v.IsInitialized() || !acc->CanHold(v.dtype()) ||
              v.memory_space() == acc->memory_space()) {
            ctx->set_output(0, v);
            done(absl::OkStatus());
            return;
          }
          const std::string context = absl::StrCat("node '", node, "': ");
          absl::StatusOr<Tensor> dev = acc->AllocateDevice(v.dtype(), v.shape(), context);
          if (!dev.ok()) {
            done(dev.status());
            return;
          }
          Tensor d = *dev;
          acc->CopyHostToDevice(v, d, [ctx, d, context, done](const absl::Status& s) {
            if (!s.ok()) {
              done(AnnotateStatus(s, context));
              return;
            }
            ctx->set_output(0, d);
            done(absl::OkStatus());
          });
        });
  }

 private:
  TransferAttrs attrs_;
  bool host_ = false;
};

class ArgOp : public OpKernel {
 public:
  explicit ArgOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("index", &index_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("T", &dtype_));
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    if (ctx->call_frame() == nullptr) return Error("no call frame for this run");
    GR_ASSIGN_OR_RETURN(Tensor t, ctx->call_frame()->GetArg(index_));
    if (t.dtype() != dtype_) {
      return Error(absl::StrCat("fed value has type ", DataTypeString(t.dtype()),
                                " but the graph expects ", DataTypeString(dtype_)));
    }
    ctx->set_output(0, std::move(t));
    return absl::OkStatus();
  }

 private:
  int index_ = 0;
  DataType dtype_ = DT_INVALID;
};

class RetvalOp : public OpKernel {
 public:
  explicit RetvalOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("index", &index_));
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    if (ctx->call_frame() == nullptr) return Error("no call frame for this run");
    // A fetched variable that holds no value yet: the variable named, as
    // its reads say it (this node is the session's own).
    if (!ctx->input(0).IsInitialized() && ctx->input_is_ref(0)) {
      return ctx->input_ref(0)->UninitializedError();
    }
    return ctx->call_frame()->SetRetval(index_, ctx->input(0));
  }

 private:
  int index_ = 0;
};

}  // namespace

void RegisterRuntimeKernels(KernelRegistry& r) {
  r.Add(KernelDef("_Send"), MakeKernel<SendOp>());
  r.Add(KernelDef("_Recv"), MakeKernel<RecvOp>());
  r.Add(KernelDef("_Arg"), MakeKernel<ArgOp>());
  r.Add(KernelDef("_Retval"), MakeKernel<RetvalOp>());
}

void RegisterAcceleratorTransferKernels(KernelRegistry& r, const std::string& device_type) {
  r.Add(KernelDef("_Send").Device(device_type), MakeKernel<AcceleratorSendOp>());
  r.Add(KernelDef("_Recv").Device(device_type), MakeKernel<AcceleratorRecvOp>());
}

}  // namespace graphrun
