// CPU kernels for the gradient helper ops of graph/ops/grad_ops.cc.
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "kernels/framework/array_util.h"
#include "kernels/nn/register.h"

namespace graphrun {
namespace {

using array_util::GetInput;
using array_util::IntValues;

// Writes `values` into a new vector output `i` of the output's int type.
absl::Status PutVector(OpKernelContext* ctx, int i, const std::vector<int64_t>& values) {
  GR_ASSIGN_OR_RETURN(Tensor * out,
                      ctx->allocate_output(i, TensorShape({static_cast<int64_t>(values.size())})));
  for (size_t k = 0; k < values.size(); ++k) {
    if (out->dtype() == DT_INT32) {
      out->base<int32_t>()[k] = static_cast<int32_t>(values[k]);
    } else {
      out->base<int64_t>()[k] = values[k];
    }
  }
  return absl::OkStatus();
}

// r0/r1: every axis of the broadcast shape along which s0/s1 (left-padded
// with 1s) has size 1. Summing a gradient over them and reshaping gives the
// input's shape (summing size-1 axes is harmless, as in TensorFlow's BCast).
class BroadcastGradientArgsOp : public OpKernel {
 public:
  explicit BroadcastGradientArgsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* t0, GetInput(*this, ctx, 0));
    GR_ASSIGN_OR_RETURN(const Tensor* t1, GetInput(*this, ctx, 1));
    if (t0->dims() != 1 || t1->dims() != 1) return Error("shapes must be vectors");
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> s0, IntValues(*this, *t0, "s0"));
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> s1, IntValues(*this, *t1, "s1"));
    const size_t rank = std::max(s0.size(), s1.size());
    s0.insert(s0.begin(), rank - s0.size(), 1);
    s1.insert(s1.begin(), rank - s1.size(), 1);
    std::vector<int64_t> r0, r1;
    for (size_t i = 0; i < rank; ++i) {
      if (s0[i] != s1[i] && s0[i] != 1 && s1[i] != 1) {
        return Error(absl::StrCat("incompatible shapes [", absl::StrJoin(s0, ","), "] and [",
                                  absl::StrJoin(s1, ","), "]"));
      }
      if (s0[i] == 1) r0.push_back(static_cast<int64_t>(i));
      if (s1[i] == 1) r1.push_back(static_cast<int64_t>(i));
    }
    GR_RETURN_IF_ERROR(PutVector(ctx, 0, r0));
    return PutVector(ctx, 1, r1);
  }
};

class InvertPermutationOp : public OpKernel {
 public:
  explicit InvertPermutationOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(*this, ctx, 0));
    if (t->dims() != 1) return Error("x must be a vector");
    GR_ASSIGN_OR_RETURN(std::vector<int64_t> perm, IntValues(*this, *t, "x"));
    const int64_t n = static_cast<int64_t>(perm.size());
    std::vector<int64_t> inv(perm.size(), -1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = perm[i];
      if (p < 0 || p >= n || inv[p] != -1) {
        return Error(absl::StrCat("x is not a permutation: [", absl::StrJoin(perm, ","), "]"));
      }
      inv[p] = i;
    }
    return PutVector(ctx, 0, inv);
  }
};

}  // namespace

void RegisterGradKernels(KernelRegistry& r) {
  for (DataType t : {DT_INT32, DT_INT64}) {
    r.Add(KernelDef("BroadcastGradientArgs").Device(kDeviceCpu).TypeConstraint("T", t),
          MakeKernel<BroadcastGradientArgsOp>());
    r.Add(KernelDef("InvertPermutation").Device(kDeviceCpu).TypeConstraint("T", t),
          MakeKernel<InvertPermutationOp>());
  }
}

}  // namespace graphrun
