// Kernels of the V2 collective ops (graph/ops/collective_ops.cc): each
// reads its group and instance, describes its member's part and hands it
// to the step's CollectiveExecutor (kernels/framework/collective.h), completing
// asynchronously, without holding a thread, when every member has arrived.
#include "absl/strings/str_cat.h"
#include "kernels/core/register.h"

namespace graphrun {
namespace {

// A scalar int32 input (group_size, group_key, instance_key).
absl::StatusOr<int32_t> ScalarInt32(OpKernelContext* ctx, int i, const char* what,
                                    const OpKernel& k) {
  const Tensor& t = ctx->input(i);
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
      GR_ASSIGN_OR_RETURN(args.group_size, ScalarInt32(ctx, first, "group_size", *this));
      GR_ASSIGN_OR_RETURN(args.group_key, ScalarInt32(ctx, first + 1, "group_key", *this));
      GR_ASSIGN_OR_RETURN(args.instance_key, ScalarInt32(ctx, first + 2, "instance_key", *this));
      if (args.group_size < 1) {
        return Error(absl::StrCat("group_size must be >= 1, got ", args.group_size));
      }
      if (recv) {
        const Tensor& shape = ctx->input(3);
        if (shape.dims() != 1) return Error("shape must be a vector");
        std::vector<int64_t> dims;
        for (int64_t i = 0; i < shape.NumElements(); ++i) {
          dims.push_back(shape.dtype() == DT_INT32 ? shape.flat<int32_t>()[i]
                                                   : shape.flat<int64_t>()[i]);
        }
        absl::StatusOr<TensorShape> made = TensorShape::Make(dims);
        if (!made.ok()) return Error(absl::StrCat("shape: ", made.status().message()));
        args.shape = *made;
      } else if (args.type == CollectiveType::kGather && ctx->input(0).dims() == 0) {
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
    Tensor input = recv ? Tensor() : ctx->input(0);
    executor->Run(args, input, ctx->cancellation_manager(),
                  [ctx, done = std::move(done)](absl::StatusOr<Tensor> r) {
                    if (!r.ok()) {
                      done(r.status());
                      return;
                    }
                    ctx->set_output(0, std::move(*r));
                    done(absl::OkStatus());
                  });
  }

 private:
  CollectiveArgs args_;
};

template <CollectiveType kType>
class TypedCollectiveOp : public CollectiveOp {
 public:
  explicit TypedCollectiveOp(OpKernelConstruction* ctx) : CollectiveOp(ctx, kType) {}
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

}  // namespace graphrun
