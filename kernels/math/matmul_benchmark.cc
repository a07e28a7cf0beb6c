// MatMul float32 1024x1024x1024: the graphrun kernel (created from the
// default registry, inputs reused, output allocated per call as in a real
// step) against dnnl_sgemm called directly on preallocated buffers.
//
//   bazel run -c opt //kernels/math:matmul_benchmark
//
// BM_MatMulRatio interleaves the two and reports kernel/direct GFLOP/s as
// the counter "ratio" (goal: >= 0.9).
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "graph/ops/all_ops.h"
#include "kernels/all_kernels.h"
#include "kernels/kernel_test_util.h"
#include "oneapi/dnnl/dnnl.h"

namespace graphrun {
namespace {

constexpr int64_t kDim = 1024;
constexpr double kFlops = 2.0 * kDim * kDim * kDim;

Tensor Filled(float v) {
  Tensor t(DT_FLOAT, TensorShape({kDim, kDim}));
  for (int64_t i = 0; i < kDim * kDim; ++i) {
    t.base<float>()[i] = v * static_cast<float>(i % 17);
  }
  return t;
}

// One MatMul kernel with its inputs, ready to Compute() repeatedly.
class KernelRunner {
 public:
  KernelRunner() : device_(std::make_shared<TestCpuDevice>()) {
    def_.set_name("bench_matmul");
    def_.set_op("MatMul");
    (*def_.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
    const OpRegistrationData* reg = DefaultOpRegistry().LookUp("MatMul");
    AddDefaultsToNodeDef(reg->op_def, &def_);
    auto k = DefaultKernelRegistry().CreateKernel(def_, reg->op_def, {DT_FLOAT, DT_FLOAT},
                                                  {DT_FLOAT}, device_.get());
    if (!k.ok()) {
      std::fprintf(stderr, "%s\n", std::string(k.status().message()).c_str());
      std::abort();
    }
    kernel_ = *std::move(k);
    inputs_[0].tensor = Filled(0.5f);
    inputs_[1].tensor = Filled(0.25f);
  }

  // Returns false on a kernel error.
  bool Run() {
    OpKernelContext::Params p;
    p.device = device_.get();
    p.op_kernel = kernel_.get();
    p.inputs = inputs_;
    p.num_inputs = 2;
    OpKernelContext ctx(&p);
    absl::Status s = kernel_->Compute(&ctx);
    benchmark::DoNotOptimize((*ctx.mutable_outputs())[0].tensor.raw_data());
    return s.ok();
  }

 private:
  std::shared_ptr<TestCpuDevice> device_;
  tensorflow::NodeDef def_;
  std::unique_ptr<OpKernel> kernel_;
  TensorValue inputs_[2];
};

class DirectRunner {
 public:
  DirectRunner() : a_(Filled(0.5f)), b_(Filled(0.25f)), c_(DT_FLOAT, TensorShape({kDim, kDim})) {}
  bool Run() {
    dnnl_status_t s = dnnl_sgemm('N', 'N', kDim, kDim, kDim, 1.0f, a_.base<float>(), kDim,
                                 b_.base<float>(), kDim, 0.0f, c_.base<float>(), kDim);
    benchmark::DoNotOptimize(c_.raw_data());
    return s == dnnl_success;
  }

 private:
  Tensor a_, b_, c_;
};

void SetFlops(benchmark::State& state) {
  state.counters["FLOPS"] =
      benchmark::Counter(kFlops, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MatMulKernel(benchmark::State& state) {
  KernelRunner runner;
  runner.Run();  // warm-up
  for (auto _ : state) {
    if (!runner.Run()) state.SkipWithError("MatMul kernel failed");
  }
  SetFlops(state);
}
BENCHMARK(BM_MatMulKernel)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DnnlSgemmDirect(benchmark::State& state) {
  DirectRunner runner;
  runner.Run();
  for (auto _ : state) {
    if (!runner.Run()) state.SkipWithError("dnnl_sgemm failed");
  }
  SetFlops(state);
}
BENCHMARK(BM_DnnlSgemmDirect)->Unit(benchmark::kMillisecond)->UseRealTime();

// Alternates kernel and direct calls so both see the same machine state.
void BM_MatMulRatio(benchmark::State& state) {
  KernelRunner kernel;
  DirectRunner direct;
  kernel.Run();
  direct.Run();
  using Clock = std::chrono::steady_clock;
  double kernel_s = 0, direct_s = 0;
  int64_t n = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    bool ok = kernel.Run();
    auto t1 = Clock::now();
    ok &= direct.Run();
    auto t2 = Clock::now();
    if (!ok) state.SkipWithError("MatMul failed");
    kernel_s += std::chrono::duration<double>(t1 - t0).count();
    direct_s += std::chrono::duration<double>(t2 - t1).count();
    ++n;
  }
  if (n == 0) return;
  const double kernel_gflops = kFlops * n / kernel_s / 1e9;
  const double direct_gflops = kFlops * n / direct_s / 1e9;
  state.counters["kernel_GFLOPs"] = kernel_gflops;
  state.counters["direct_GFLOPs"] = direct_gflops;
  state.counters["ratio"] = kernel_gflops / direct_gflops;
}
BENCHMARK(BM_MatMulRatio)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

}  // namespace
}  // namespace graphrun
