// MatMul on CPU: float through oneDNN's row-major dnnl_sgemm (which runs
// its own threads), other types through a plain row-parallel loop.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/math/cwise_util.h"
#include "kernels/math/onednn_util.h"
#include "kernels/math/register.h"
#include "oneapi/dnnl/dnnl.h"

namespace graphrun {
namespace {

// Dimensions of one product C[m,n] = op(A)[m,k] * op(B)[k,n].
struct GemmDims {
  int64_t m = 0, n = 0, k = 0;
};

template <typename T>
class MatMulOp : public OpKernel {
 public:
  explicit MatMulOp(OpKernelConstruction* c) : OpKernel(c) {
    GR_CTX_CHECK_OK(c, c->GetAttr("transpose_a", &ta_));
    GR_CTX_CHECK_OK(c, c->GetAttr("transpose_b", &tb_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    if (!a.IsInitialized() || !b.IsInitialized()) {
      return Error("input is not initialized");
    }
    if (a.dims() != 2 || b.dims() != 2) {
      return Error(absl::StrCat("inputs must be matrices, got shapes ", a.shape().DebugString(),
                                " and ", b.shape().DebugString()));
    }
    GemmDims d;
    d.m = a.dim_size(ta_ ? 1 : 0);
    d.k = a.dim_size(ta_ ? 0 : 1);
    d.n = b.dim_size(tb_ ? 0 : 1);
    const int64_t kb = b.dim_size(tb_ ? 1 : 0);
    if (d.k != kb) {
      return Error(absl::StrCat("matrix size-incompatible: a ", a.shape().DebugString(), ", b ",
                                b.shape().DebugString(), " (transpose_a=", ta_,
                                ", transpose_b=", tb_, ")"));
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({d.m, d.n})));
    if (d.m == 0 || d.n == 0) return absl::OkStatus();
    T* c = out->base<T>();
    if (d.k == 0) {
      std::fill(c, c + d.m * d.n, T{0});
      return absl::OkStatus();
    }
    return Gemm(ctx, d, a.base<T>(), b.base<T>(), c);
  }

 private:
  absl::Status Gemm(OpKernelContext* ctx, const GemmDims& d, const T* a, const T* b, T* c);

  bool ta_ = false, tb_ = false;
};

template <>
absl::Status MatMulOp<float>::Gemm(OpKernelContext* ctx, const GemmDims& d, const float* a,
                                   const float* b, float* c) {
  // Row-major: the leading dimension is the stored row length.
  const dnnl_dim_t lda = ta_ ? d.m : d.k;
  const dnnl_dim_t ldb = tb_ ? d.k : d.n;
  LimitOneDnnThreads(ctx->intra_op_parallelism());
  dnnl_status_t s = dnnl_sgemm(ta_ ? 'T' : 'N', tb_ ? 'T' : 'N', d.m, d.n, d.k, 1.0f, a, lda, b,
                               ldb, 0.0f, c, d.n);
  if (s != dnnl_success) {
    return absl::InternalError(absl::StrCat("node '", name(), "' (op ", type_string(),
                                            "): dnnl_sgemm failed, status ", static_cast<int>(s)));
  }
  return absl::OkStatus();
}

// y[j] += a * x[j], vectorisable (see cwise_util.h).
template <typename T>
inline void Axpy(T a, const T* __restrict x, T* __restrict y, int64_t n) {
  int64_t j = 0;
  for (; j + cwise::kBlock <= n; j += cwise::kBlock) {
    for (int l = 0; l < cwise::kBlock; ++l) y[j + l] += a * x[j + l];
  }
  for (; j < n; ++j) y[j] += a * x[j];
}

// i-p-j order: the innermost loop streams a row of B and of C, which gcc
// vectorises; with transpose_b it is a dot product per output.
template <typename T>
absl::Status MatMulOp<T>::Gemm(OpKernelContext* ctx, const GemmDims& d, const T* a, const T* b,
                               T* c) {
  const bool ta = ta_, tb = tb_;
  cwise::ParallelFor(ctx, d.m, d.n * d.k, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T* crow = c + i * d.n;
      if (!tb) {
        std::fill(crow, crow + d.n, T{0});
        for (int64_t p = 0; p < d.k; ++p) {
          const T av = ta ? a[p * d.m + i] : a[i * d.k + p];
          Axpy(av, b + p * d.n, crow, d.n);
        }
      } else {
        for (int64_t j = 0; j < d.n; ++j) {
          const T* brow = b + j * d.k;
          T sum{0};
          for (int64_t p = 0; p < d.k; ++p) {
            sum += (ta ? a[p * d.m + i] : a[i * d.k + p]) * brow[p];
          }
          crow[j] = sum;
        }
      }
    }
  });
  return absl::OkStatus();
}

template <typename T>
void AddMatMul(KernelRegistry& r) {
  r.Add(KernelDef("MatMul").Device(kDeviceCpu).TypeConstraint<T>("T"), MakeKernel<MatMulOp<T>>());
}

}  // namespace

void RegisterMatMulKernels(KernelRegistry& r) {
  AddMatMul<float>(r);
  AddMatMul<double>(r);
  AddMatMul<int32_t>(r);
  AddMatMul<int64_t>(r);
}

}  // namespace graphrun
