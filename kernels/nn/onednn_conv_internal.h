// oneDNN plumbing and window geometry shared by the CPU kernels of
// graph/ops/conv_ops.cc: conv_kernels.cc (Conv2D and its gradients),
// pool_kernels.cc (MaxPool/AvgPool and their gradients) and
// batch_norm_kernels.cc (FusedBatchNorm, L2Loss). Private to kernels/.
//
// oneDNN's C++ API reports errors by throwing dnnl::error; every call into it
// goes through DnnlCall, which turns that into an Internal status naming the
// node, so no exception crosses a kernel boundary.
//
// Primitives are built once per input geometry and cached in the kernel
// (PrimitiveCache, mutex-guarded); a oneDNN primitive may execute
// concurrently from several threads, so kernels running at once for
// different steps share them. oneDNN runs its own (OpenMP) threads.
#ifndef GRAPHRUN_KERNELS_NN_ONEDNN_CONV_INTERNAL_H_
#define GRAPHRUN_KERNELS_NN_ONEDNN_CONV_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/window_util.h"
#include "graph/status.h"
#include "kernels/framework/conv_window.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/op_kernel.h"
#include "kernels/math/onednn_util.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace graphrun {
namespace onednn_conv {

// ---------------------------------------------------------------------------
// Registration: RegisterConvKernels (all_kernels.h) calls these.

void RegisterPoolKernels(KernelRegistry& r);       // pool_kernels.cc
void RegisterBatchNormKernels(KernelRegistry& r);  // batch_norm_kernels.cc

// ---------------------------------------------------------------------------
// oneDNN plumbing.

// The process-wide CPU engine. Thread-safe.
dnnl::engine& CpuEngine();

// Runs `fn`, converting a dnnl::error into Internal naming the node.
template <typename F>
absl::Status DnnlCall(const OpKernel& k, const char* what, const F& fn) {
  try {
    fn();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("node '", k.name(), "' (op ", k.type_string(),
                                            "): oneDNN ", what, " failed: ", e.what()));
  }
  return absl::OkStatus();
}

// One kernel's oneDNN primitives by geometry key. Entries are immutable once
// built and shared with running computations. Thread-safe; building happens
// under the lock, so concurrent first uses of a shape build once.
template <typename Entry>
class PrimitiveCache {
 public:
  using Maker = std::function<absl::StatusOr<std::shared_ptr<const Entry>>()>;

  absl::StatusOr<std::shared_ptr<const Entry>> Get(const std::vector<int64_t>& key,
                                                   const Maker& make) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
    // Bounded: a graph fed many shapes rebuilds rather than grows.
    if (entries_.size() >= kMaxEntries) entries_.clear();
    GR_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e, make());
    entries_.emplace(key, e);
    return e;
  }

 private:
  static constexpr size_t kMaxEntries = 16;
  std::mutex mu_;
  std::map<std::vector<int64_t>, std::shared_ptr<const Entry>> entries_;
};

// Runs `run(stream)` on a fresh stream of CpuEngine() and waits for it, with
// oneDNN's threads held to ctx's intra-op parallelism. A dnnl::error becomes
// Internal naming the node and `what`, as in DnnlCall.
template <typename F>
absl::Status RunOnStream(const OpKernel& k, OpKernelContext* ctx, const char* what, const F& run) {
  return DnnlCall(k, what, [&] {
    LimitOneDnnThreads(ctx->intra_op_parallelism());
    dnnl::stream s(CpuEngine());
    run(s);
    s.wait();
  });
}

// A oneDNN memory over `t`'s buffer, described by `md`.
inline dnnl::memory Mem(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, CpuEngine(), t.raw_data());
}

// Window attributes and geometry (kernels/framework/conv_window.h).
using conv_window::Geometry;
using conv_window::MakeGeometry;
using conv_window::ReadWindowParams;
using conv_window::ShapeInput;
using conv_window::WindowParams;

}  // namespace onednn_conv
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_NN_ONEDNN_CONV_INTERNAL_H_
