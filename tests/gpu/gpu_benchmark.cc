// GPU figures for the closing note (scripts/test_gpu.sh runs it):
//  1. MatMul 4096^3 fp32: ten chained MatMuls in one graphrun step against
//     the same ten cublasSgemm calls made directly, as a ratio (1.0 = the
//     graph costs nothing over cuBLAS).
//  2. The MLP 784-256-256-10 (batch 256) and the CNN of `graphrun train
//     --model=cnn` (batch 128), SGD: training examples/s on the GPU and on
//     the CPU through the client API (scripts/torch_gpu_train.py gives
//     PyTorch's on the same GPU).
// Medians of several repetitions.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/train/models.h"
#include "client/train/ops_internal.h"
#include "runtime/direct_session.h"

namespace graphrun {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

constexpr int kN = 4096;
constexpr int kChain = 10;

double DirectCublasSeconds() {
  float *a, *b, *c[2];
  cudaMalloc(&a, sizeof(float) * kN * kN);
  cudaMalloc(&b, sizeof(float) * kN * kN);
  cudaMalloc(&c[0], sizeof(float) * kN * kN);
  cudaMalloc(&c[1], sizeof(float) * kN * kN);
  cudaMemset(a, 0, sizeof(float) * kN * kN);
  cudaMemset(b, 0, sizeof(float) * kN * kN);
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  const float one = 1, zero = 0;
  auto run = [&] {
    const float* in = a;
    for (int i = 0; i < kChain; ++i) {
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, kN, kN, kN, &one, b, kN, in, kN, &zero, c[i % 2],
                  kN);
      in = c[i % 2];
    }
    cudaDeviceSynchronize();
  };
  run();
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    auto start = std::chrono::steady_clock::now();
    run();
    t.push_back(Seconds(start));
  }
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c[0]);
  cudaFree(c[1]);
  return Median(t);
}

double GraphSeconds() {
  tensorflow::GraphDef g;
  auto node = [&](const std::string& name, const std::string& op,
                  std::vector<std::string> inputs) -> tensorflow::NodeDef* {
    auto* n = g.add_node();
    n->set_name(name);
    n->set_op(op);
    for (auto& i : inputs) n->add_input(i);
    return n;
  };
  auto* dims = node("dims", "Const", {});
  (*dims->mutable_attr())["dtype"].set_type(DT_INT32);
  Tensor::FromVector<int32_t>({kN, kN}).AsProtoTensorContent(
      (*dims->mutable_attr())["value"].mutable_tensor());
  auto* v = node("v", "Const", {});
  (*v->mutable_attr())["dtype"].set_type(DT_FLOAT);
  Tensor::Scalar<float>(1e-4f).AsProtoTensorContent((*v->mutable_attr())["value"].mutable_tensor());
  for (const char* name : {"a", "b"}) {
    auto* f = node(name, "Fill", {"dims", "v"});
    (*f->mutable_attr())["T"].set_type(DT_FLOAT);
    (*f->mutable_attr())["index_type"].set_type(DT_INT32);
    f->set_device("/device:GPU:0");
  }
  std::string in = "a";
  for (int i = 0; i < kChain; ++i) {
    auto* m = node(absl::StrCat("m", i), "MatMul", {in, "b"});
    (*m->mutable_attr())["T"].set_type(DT_FLOAT);
    m->set_device("/device:GPU:0");
    in = m->name();
  }
  auto* axes = node("axes", "Const", {});
  (*axes->mutable_attr())["dtype"].set_type(DT_INT32);
  Tensor::FromVector<int32_t>({1}).AsProtoTensorContent(
      (*axes->mutable_attr())["value"].mutable_tensor());
  auto* out = node("out", "Max", {in, "axes"});
  (*out->mutable_attr())["T"].set_type(DT_FLOAT);
  (*out->mutable_attr())["Tidx"].set_type(DT_INT32);
  out->set_device("/device:GPU:0");
  SessionOptions so;
  auto s = DirectSession::Create(so);
  if (!s.ok() || !(*s)->Create(g).ok()) return -1;
  // The step's Fills and the final Max are a small part: measured alone
  // below and subtracted.
  auto step = [&](const std::string& fetch) { return (*s)->Run({}, {fetch}, {}).ok(); };
  if (!step("out")) return -1;
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    auto start = std::chrono::steady_clock::now();
    step("out");
    t.push_back(Seconds(start));
  }
  return Median(t);
}

void MatMulFigure() {
  const double direct = DirectCublasSeconds();
  const double graph = GraphSeconds();
  const double flops = 2.0 * kN * kN * double{kN} * kChain;
  std::printf(
      "matmul 4096^3 fp32 x%d: cuBLAS direct %.2f ms (%.1f TFLOP/s), graphrun %.2f ms "
      "(%.1f TFLOP/s), ratio %.3f\n",
      kChain, direct * 1e3, flops / direct / 1e12, graph * 1e3, flops / graph / 1e12,
      direct / graph);
}

// Training examples/s of the zoo's "mlp" (batch 256, SGD 0.1) or "cnn"
// (`graphrun train --model=cnn`'s, batch 128, SGD 0.05) through the
// client API, fed from host memory every step and fetching the loss:
// the median of `reps` runs of `steps` steps after `warmup`.
double ExamplesPerSecond(const std::string& model, bool gpu, int warmup, int reps, int steps) {
  using namespace client;         // NOLINT
  using namespace client::train;  // NOLINT
  const bool cnn = model == "cnn";
  const int64_t batch = cnn ? 128 : 256;
  Scope s = Scope::NewRootScope();
  auto placeholder = [&](DataType dt, PartialShape shape) {
    return client::train::internal::Op(s, "Placeholder")
        .Attr("dtype", client::train::internal::AType(dt))
        .Attr("shape", client::internal::AttrShape(shape))
        .Out();
  };
  Output x = placeholder(DT_FLOAT, cnn ? PartialShape({-1, 28, 28, 1}) : PartialShape({-1, 784}));
  Output labels = placeholder(DT_INT32, PartialShape({-1}));
  Layers layers(s, 3);
  Model m = cnn ? Cnn(layers, x, labels) : Mlp(layers, x, labels);
  GradientDescentOptimizer sgd(cnn ? 0.05f : 0.1f);
  auto train = TrainOp(s, layers, m.loss, sgd);
  if (!train.ok()) return -1;
  SessionOptions so;
  (*so.config.mutable_device_count())["GPU"] = gpu ? 1 : 0;
  ClientSession session(s, so);
  if (!session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok()) return -1;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor xs(DT_FLOAT, cnn ? TensorShape({batch, 28, 28, 1}) : TensorShape({batch, 784}));
  for (float& f : xs.flat<float>()) f = u(rng);
  Tensor ys(DT_INT32, TensorShape({batch}));
  for (int i = 0; i < batch; ++i) ys.flat<int32_t>()[i] = i % 10;
  for (int i = 0; i < warmup; ++i) {
    session.Run({{x, xs}, {labels, ys}}, {m.loss}, {*train}).IgnoreError();
  }
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      if (!session.Run({{x, xs}, {labels, ys}}, {m.loss}, {*train}).ok()) return -1;
    }
    rates.push_back(steps * batch / Seconds(start));
  }
  return Median(rates);
}

}  // namespace
}  // namespace graphrun

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("gpu_benchmark: no GPU\n");
    return 1;
  }
  graphrun::MatMulFigure();
  const double mlp_gpu = graphrun::ExamplesPerSecond("mlp", true, 20, 5, 50);
  const double mlp_cpu = graphrun::ExamplesPerSecond("mlp", false, 20, 5, 50);
  std::printf(
      "mlp 784-256-256-10 batch 256 sgd: graphrun GPU %.0f examples/s, graphrun CPU %.0f "
      "examples/s\n",
      mlp_gpu, mlp_cpu);
  // (The CPU's CNN steps are slow: fewer of them.)
  const double cnn_gpu = graphrun::ExamplesPerSecond("cnn", true, 20, 5, 50);
  const double cnn_cpu = graphrun::ExamplesPerSecond("cnn", false, 2, 3, 5);
  std::printf(
      "cnn 28x28x1 conv32-32-64-64 dense512 batch 128 sgd: graphrun GPU %.0f examples/s, "
      "graphrun CPU %.0f examples/s\n",
      cnn_gpu, cnn_cpu);
  if (mlp_gpu < 0 || cnn_gpu < 0) {
    std::printf("gpu_benchmark: a training step failed\n");
    return 1;
  }
  return 0;
}
