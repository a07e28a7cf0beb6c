// Kernels of the V2 collective ops (graph/ops/collective_ops.cc): each
// reads its group and instance, describes its member's part and hands it
// to the step's CollectiveExecutor (kernels/framework/collective.h), completing
// asynchronously, without holding a thread, when every member has arrived.
//
// On an accelerator (RegisterAcceleratorCollectiveKernels) the member's data
// goes through the host: its input is copied to host memory on the
// device-to-host stream, the collective runs there as a CPU member's would
// (the member is the accelerator device), and the result is copied back on
// the host-to-device stream. So MirroredStrategy replicates over the
// accelerators of a host without a device-to-device transport. Where the
// device has one (Accelerator::collective_backend: NCCL for GPUs), the
// step's executor runs it (in-process, every member here; a cluster's,
// when the backend's communicators span processes) and the
// communication_hint is "auto" or the backend's name, the member's tensors
// stay in device memory and the round runs through it.
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/core/register.h"

namespace graphrun {
namespace {

// A scalar int32 input (group_size, group_key, instance_key).
absl::StatusOr<int32_t> ScalarInt32(const Tensor& t, const char* what, const OpKernel& k) {
  if (t.dtype() != DT_INT32 || t.NumElements() != 1 || t.dims() != 0) {
    return k.Error(absl::StrCat(what, " must be an int32 scalar, got ", t.DebugString()));
  }
  return t.scalar<int32_t>();
}

class CollectiveOp : public AsyncOpKernel {
 public:
  CollectiveOp(OpKernelConstruction* ctx, CollectiveType type) : AsyncOpKernel(ctx) {
    args_.type = type;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("T", &args_.dtype));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("communication_hint", &args_.communication_hint));
    float timeout = 0;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("timeout_seconds", &timeout));
    if (!(timeout >= 0)) {
      ctx->SetStatus(ctx->Error(absl::StrCat("timeout_seconds must be >= 0, got ", timeout)));
      return;
    }
    args_.timeout_seconds = timeout;
    if (type == CollectiveType::kReduce) {
      std::string merge, final_op;
      GR_CTX_CHECK_OK(ctx, ctx->GetAttr("merge_op", &merge));
      GR_CTX_CHECK_OK(ctx, ctx->GetAttr("final_op", &final_op));
      if (merge == "Add") {
        args_.merge_op = CollectiveMerge::kAdd;
      } else if (merge == "Mul") {
        args_.merge_op = CollectiveMerge::kMul;
      } else if (merge == "Min") {
        args_.merge_op = CollectiveMerge::kMin;
      } else if (merge == "Max") {
        args_.merge_op = CollectiveMerge::kMax;
      } else {
        ctx->SetStatus(ctx->Error(absl::StrCat("unknown merge_op '", merge, "'")));
        return;
      }
      if (final_op == "Id") {
        args_.final_op = CollectiveFinal::kId;
      } else if (final_op == "Div") {
        args_.final_op = CollectiveFinal::kDiv;
      } else {
        ctx->SetStatus(ctx->Error(absl::StrCat("unknown final_op '", final_op, "'")));
        return;
      }
    }
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    RunOnInputs(ctx, std::move(done));
  }

 protected:
  // Runs this member's part on the op's inputs as they are, and sets the
  // result as output 0. With a `backend`, the data input and the result
  // are in `acc`'s memory (see RunMember).
  void RunOnInputs(OpKernelContext* ctx, DoneCallback done, Accelerator* acc = nullptr,
                   DeviceCollectiveBackend* backend = nullptr) {
    std::vector<Tensor> in;
    for (int i = 0; i < kUsedInputs; ++i) in.push_back(ctx->input(i));
    RunMember(
        ctx, std::move(in),
        [ctx, done = std::move(done)](absl::StatusOr<Tensor> r) {
          if (r.ok()) ctx->set_output(0, std::move(*r));
          done(r.status());
        },
        acc, backend);
  }

  // Inputs read: the data (none for a broadcast receiver), group_size,
  // group_key, instance_key (and the receiver's shape).
  static constexpr int kUsedInputs = 4;

  // Runs this member's part with the op's first kUsedInputs inputs `in`,
  // in host memory; `done` gets the result, in host memory. With a
  // `backend`, the data input and the result are in `acc`'s memory instead
  // (the scalars and the shape are host memory either way).
  void RunMember(OpKernelContext* ctx, std::vector<Tensor> in,
                 std::function<void(absl::StatusOr<Tensor>)> done, Accelerator* acc = nullptr,
                 DeviceCollectiveBackend* backend = nullptr) {
    CollectiveExecutor* executor = ctx->collective_executor();
    if (executor == nullptr) {
      done(absl::FailedPreconditionError(
          absl::StrCat("node '", name(), "' (op ", type_string(),
                       "): this session has no collective executor")));
      return;
    }
    const bool recv = args_.type == CollectiveType::kBroadcastRecv;
    const int first = recv ? 0 : 1;  // group_size's input
    CollectiveArgs args = args_;
    absl::Status s = [&]() -> absl::Status {
      GR_ASSIGN_OR_RETURN(args.group_size, ScalarInt32(in[first], "group_size", *this));
      GR_ASSIGN_OR_RETURN(args.group_key, ScalarInt32(in[first + 1], "group_key", *this));
      GR_ASSIGN_OR_RETURN(args.instance_key, ScalarInt32(in[first + 2], "instance_key", *this));
      if (args.group_size < 1) {
        return Error(absl::StrCat("group_size must be >= 1, got ", args.group_size));
      }
      if (recv) {
        const Tensor& shape = in[3];
        if (shape.dims() != 1) return Error("shape must be a vector");
        std::vector<int64_t> dims;
        for (int64_t i = 0; i < shape.NumElements(); ++i) {
          dims.push_back(shape.dtype() == DT_INT32 ? shape.flat<int32_t>()[i]
                                                   : shape.flat<int64_t>()[i]);
        }
        absl::StatusOr<TensorShape> made = TensorShape::Make(dims);
        if (!made.ok()) return Error(absl::StrCat("shape: ", made.status().message()));
        args.shape = *made;
      } else if (args.type == CollectiveType::kGather && in[0].dims() == 0) {
        return Error("input must have rank >= 1 to be gathered");
      }
      return absl::OkStatus();
    }();
    if (!s.ok()) {
      done(s);
      return;
    }
    args.device = ctx->device()->name();
    args.step_id = ctx->step_id();
    args.node = name();
    args.accelerator = backend != nullptr ? acc : nullptr;
    args.backend = backend;
    Tensor input = recv ? Tensor() : std::move(in[0]);
    executor->Run(args, std::move(input), ctx->cancellation_manager(), std::move(done));
  }

  const CollectiveArgs& args() const { return args_; }

 private:
  CollectiveArgs args_;
};

template <CollectiveType kType>
class TypedCollectiveOp : public CollectiveOp {
 public:
  explicit TypedCollectiveOp(OpKernelConstruction* ctx) : CollectiveOp(ctx, kType) {}
};

// The member on an accelerator: through the host (see the top).
template <CollectiveType kType>
class AcceleratorCollectiveOp : public CollectiveOp {
 public:
  explicit AcceleratorCollectiveOp(OpKernelConstruction* ctx) : CollectiveOp(ctx, kType) {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Accelerator* acc = ctx->device()->accelerator();
    if (acc == nullptr) {
      done(Error("an accelerator collective kernel on a device without an accelerator"));
      return;
    }
    // In device memory when the device has a transport of its own (NCCL),
    // the step's executor runs it (every member in this process, or a
    // cluster's executor and a backend that spans processes), and the hint
    // allows it.
    DeviceCollectiveBackend* backend = acc->collective_backend();
    CollectiveExecutor* executor = ctx->collective_executor();
    const std::string& hint = args().communication_hint;
    // The data (none for a broadcast receiver) must be in device memory.
    const bool data_on_device = kType == CollectiveType::kBroadcastRecv ||
                                ctx->input(0).memory_space() == acc->memory_space();
    if (backend != nullptr && executor != nullptr && executor->RunsDeviceBackend(*backend) &&
        data_on_device && (hint == "auto" || hint.empty() || hint == backend->name())) {
      RunOnInputs(ctx, std::move(done), acc, backend);
      return;
    }
    // The result, back into device memory.
    auto to_device = [this, ctx, acc, done](absl::StatusOr<Tensor> r) {
      if (!r.ok()) {
        done(r.status());
        return;
      }
      absl::StatusOr<Tensor> out = acc->AllocateDevice(r->dtype(), r->shape(), name());
      if (!out.ok()) {
        done(out.status());
        return;
      }
      Tensor result = *out;
      acc->CopyHostToDevice(*r, result, [ctx, done, result, host = *r](const absl::Status& s) {
        if (s.ok()) ctx->set_output(0, result);
        done(s);
      });
    };
    // Every input read, in host memory: the data, and the scalars (and
    // shape) where a kernel on this device produced them in its memory.
    struct Staged {
      std::mutex mu;
      std::vector<Tensor> in;
      int pending = 1;
      absl::Status status;
    };
    auto staged = std::make_shared<Staged>();
    staged->in.resize(kUsedInputs);
    auto one_done = [this, ctx, staged, to_device](const absl::Status& s) {
      {
        std::lock_guard<std::mutex> l(staged->mu);
        if (!s.ok() && staged->status.ok()) staged->status = s;
        if (--staged->pending > 0) return;
      }
      if (!staged->status.ok()) {
        to_device(staged->status);
        return;
      }
      RunMember(ctx, std::move(staged->in), to_device);
    };
    for (int i = 0; i < kUsedInputs; ++i) {
      const Tensor& t = ctx->input(i);
      if (t.memory_space() == nullptr) {
        staged->in[i] = t;
        continue;
      }
      {
        std::lock_guard<std::mutex> l(staged->mu);
        ++staged->pending;
      }
      absl::StatusOr<Tensor> host =
          acc->AllocateHostForCopy(t.dtype(), t.shape(), absl::StrCat("node '", name(), "': "));
      if (!host.ok()) {
        one_done(host.status());
        continue;
      }
      staged->in[i] = *std::move(host);
      acc->CopyDeviceToHost(t, staged->in[i], one_done);
    }
    one_done(absl::OkStatus());
  }
};

}  // namespace

void RegisterCollectiveKernels(KernelRegistry& r) {
  const std::vector<DataType> numeric = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
  std::vector<DataType> bcast = numeric;
  bcast.push_back(DT_BOOL);
  r.Add(KernelDef("CollectiveReduceV2").Device(kDeviceCpu).TypeConstraint("T", numeric),
        MakeKernel<TypedCollectiveOp<CollectiveType::kReduce>>());
  r.Add(KernelDef("CollectiveGatherV2").Device(kDeviceCpu).TypeConstraint("T", numeric),
        MakeKernel<TypedCollectiveOp<CollectiveType::kGather>>());
  r.Add(KernelDef("CollectiveBcastSendV2").Device(kDeviceCpu).TypeConstraint("T", bcast),
        MakeKernel<TypedCollectiveOp<CollectiveType::kBroadcastSend>>());
  r.Add(KernelDef("CollectiveBcastRecvV2").Device(kDeviceCpu).TypeConstraint("T", bcast),
        MakeKernel<TypedCollectiveOp<CollectiveType::kBroadcastRecv>>());
}

void RegisterAcceleratorCollectiveKernels(KernelRegistry& r, const std::string& device_type,
                                          const std::vector<DataType>& types) {
  auto def = [&](const char* op) {
    KernelDef d(op);
    d.Device(device_type).TypeConstraint("T", types);
    for (const char* arg : {"group_size", "group_key", "instance_key"}) d.HostMemory(arg);
    return d;
  };
  r.Add(def("CollectiveReduceV2").HostMemory("ordering_token"),
        MakeKernel<AcceleratorCollectiveOp<CollectiveType::kReduce>>());
  r.Add(def("CollectiveGatherV2").HostMemory("ordering_token"),
        MakeKernel<AcceleratorCollectiveOp<CollectiveType::kGather>>());
  r.Add(def("CollectiveBcastSendV2"),
        MakeKernel<AcceleratorCollectiveOp<CollectiveType::kBroadcastSend>>());
  r.Add(def("CollectiveBcastRecvV2").HostMemory("shape"),
        MakeKernel<AcceleratorCollectiveOp<CollectiveType::kBroadcastRecv>>());
}

}  // namespace graphrun
