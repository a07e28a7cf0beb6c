// The GPU suite (Bazel tag `gpu`: scripts/test_gpu.sh runs it on a GPU
// machine; CI and machines without a GPU skip every test and say why).
// Every GPU kernel is compared with its CPU kernel on random inputs,
// shapes with empty and odd sizes included; errors name the node; the MLP
// and the CNN train on the GPU with the CPU's losses.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_session.h"
#include "client/train/models.h"
#include "client/train/ops_internal.h"
#include "distributed/local_cluster.h"
#include "distributed/rpc/grpc_session.h"
#include "graph/node_def_util.h"
#include "graph/testlib.h"
#include "gtest/gtest.h"
#include "runtime/device_factory.h"
#include "runtime/direct_session.h"
#include "runtime/session.h"

#ifdef GRAPHRUN_CUDA
#include <cuda_runtime_api.h>

#include "kernels/gpu/nccl_backend.h"
#endif

namespace graphrun {
namespace {

std::string GpuMissing() {
  const DeviceFactory* f = DefaultDeviceFactoryRegistry().Find("GPU");
  if (f == nullptr) return "this binary was built without --config=cuda";
  absl::StatusOr<int> n = f->CountAvailable();
  if (!n.ok()) return absl::StrCat("no CUDA device: ", n.status().message());
  if (*n == 0) return "no GPU attached";
  return "";
}

#define REQUIRE_GPU()                                                       \
  do {                                                                      \
    const std::string missing = GpuMissing();                               \
    if (!missing.empty()) GTEST_SKIP() << "GPU suite skipped: " << missing; \
  } while (0)

struct Case {
  std::string op;
  std::vector<Tensor> inputs;
  std::map<std::string, tensorflow::AttrValue> attrs;
  int outputs = 1;
};

absl::StatusOr<std::vector<Tensor>> RunOn(const Case& c, const std::string& device,
                                          std::map<std::string, std::string>* placed = nullptr,
                                          double memory_fraction = 0) {
  tensorflow::GraphDef g;
  NamedTensorList feeds;
  auto* op = g.add_node();
  op->set_name("op");
  op->set_op(c.op);
  op->set_device(device);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    auto* in = g.add_node();
    in->set_name(absl::StrCat("in", i));
    in->set_op("Placeholder");
    (*in->mutable_attr())["dtype"].set_type(c.inputs[i].dtype());
    op->add_input(in->name());
    feeds.push_back({in->name(), c.inputs[i]});
  }
  for (const auto& [k, v] : c.attrs) (*op->mutable_attr())[k] = v;
  SessionOptions so;
  so.config.mutable_gpu_options()->set_per_process_gpu_memory_fraction(memory_fraction);
  GR_ASSIGN_OR_RETURN(auto s, DirectSession::Create(so));
  GR_RETURN_IF_ERROR(s->Create(g));
  std::vector<std::string> fetches;
  for (int k = 0; k < c.outputs; ++k) fetches.push_back(absl::StrCat("op:", k));
  tensorflow::RunOptions ro;
  ro.set_output_partition_graphs(true);
  tensorflow::RunMetadata md;
  GR_ASSIGN_OR_RETURN(auto out, s->Run(ro, feeds, fetches, {}, &md));
  if (placed != nullptr) {
    for (const auto& p : md.partition_graphs()) {
      for (const auto& n : p.node()) (*placed)[n.name()] = n.device();
    }
  }
  return out;
}

Tensor Random(const std::vector<int64_t>& dims, std::mt19937& rng, float lo = -2, float hi = 2) {
  Tensor t(DT_FLOAT, TensorShape(dims));
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& v : t.flat<float>()) v = u(rng);
  return t;
}

tensorflow::AttrValue Type(DataType t) {
  tensorflow::AttrValue v;
  v.set_type(t);
  return v;
}
tensorflow::AttrValue Bool(bool b) {
  tensorflow::AttrValue v;
  v.set_b(b);
  return v;
}

// Runs `c` on GPU:0 and CPU:0 and compares every output.
void Compare(const Case& c, double tolerance = 1e-5) {
  std::map<std::string, std::string> placed;
  auto gpu = RunOn(c, "/device:GPU:0", &placed);
  auto cpu = RunOn(c, "/device:CPU:0");
  std::string what = c.op;
  for (const Tensor& t : c.inputs) absl::StrAppend(&what, " ", t.shape().DebugString());
  ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
  ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
  EXPECT_TRUE(absl::StrContains(placed["op"], "GPU:0")) << what << " ran on " << placed["op"];
  ASSERT_EQ(gpu->size(), cpu->size());
  for (size_t k = 0; k < gpu->size(); ++k) {
    const Tensor& a = (*gpu)[k];
    const Tensor& b = (*cpu)[k];
    ASSERT_EQ(a.shape(), b.shape()) << what;
    ASSERT_EQ(a.dtype(), b.dtype()) << what;
    if (a.dtype() != DT_FLOAT) {
      EXPECT_EQ(a.DebugString(1000), b.DebugString(1000)) << what;
      continue;
    }
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      const float x = a.flat<float>()[i], y = b.flat<float>()[i];
      if (std::isnan(y)) {
        EXPECT_TRUE(std::isnan(x)) << what << " [" << i << "]";
        continue;
      }
      ASSERT_NEAR(x, y, tolerance * std::max(1.0f, std::fabs(y)))
          << what << " output " << k << " [" << i << "]";
    }
  }
}

const std::vector<std::vector<int64_t>> kShapes = {{}, {0}, {7}, {3, 5}, {2, 3, 33}, {1, 1000}};

TEST(GpuTest, UnaryOpsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(1);
  for (const char* op : {"Neg", "Relu", "Square", "Exp", "Tanh", "Sigmoid"}) {
    for (const auto& s : kShapes) Compare({op, {Random(s, rng)}, {{"T", Type(DT_FLOAT)}}});
  }
  for (const char* op : {"Sqrt", "Log"}) {
    for (const auto& s : kShapes) Compare({op, {Random(s, rng, 0.1f, 5)}, {{"T", Type(DT_FLOAT)}}});
  }
}

TEST(GpuTest, BinaryOpsBroadcastAsTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(2);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> pairs = {
      {{3, 5}, {3, 5}}, {{3, 5}, {5}}, {{3, 1}, {1, 5}},    {{}, {4}},
      {{0, 5}, {5}},    {{7}, {}},     {{2, 1, 3}, {4, 1}}, {{2, 3, 1, 5}, {1, 3, 4, 1}}};
  for (const char* op : {"Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"}) {
    for (const auto& [a, b] : pairs) {
      Compare({op, {Random(a, rng), Random(b, rng)}, {{"T", Type(DT_FLOAT)}}});
    }
  }
  for (const auto& [a, b] : pairs) {
    Compare({"RealDiv", {Random(a, rng), Random(b, rng, 0.5f, 3)}, {{"T", Type(DT_FLOAT)}}});
  }
  for (const auto& s : kShapes) {
    Compare({"ReluGrad", {Random(s, rng), Random(s, rng)}, {{"T", Type(DT_FLOAT)}}});
  }
}

// `values` converted to T (static_cast: to bool, v != 0).
template <typename T>
Tensor As(const std::vector<double>& values) {
  std::vector<T> v;
  for (double x : values) v.push_back(static_cast<T>(x));
  return Tensor::FromVector<T>(v);
}

TEST(GpuTest, CastMatchesTheCpu) {
  REQUIRE_GPU();
  using Make = Tensor (*)(const std::vector<double>&);
  const std::vector<std::pair<DataType, Make>> types = {
      {DT_FLOAT, &As<float>},   {DT_DOUBLE, &As<double>}, {DT_INT8, &As<int8_t>},
      {DT_UINT8, &As<uint8_t>}, {DT_INT32, &As<int32_t>}, {DT_INT64, &As<int64_t>},
      {DT_BOOL, &As<bool>}};
  for (const auto& [src, make] : types) {
    std::vector<double> v;
    if (src == DT_FLOAT || src == DT_DOUBLE) {
      // Fractions round toward zero; out-of-range values and NaN saturate
      // and give 0 on both devices.
      v = {-3.7, -0.5, 0, 0.5, 2.9, 127.9, 300, -200, 3e9, -3e9, 1e19, -1e19, std::nan("")};
    } else if (src == DT_UINT8) {
      v = {0, 1, 127, 128, 255};
    } else if (src == DT_INT8) {
      v = {-128, -1, 0, 1, 127};
    } else if (src == DT_BOOL) {
      v = {0, 1, 1, 0};
    } else {
      v = {-70000, -129, -1, 0, 1, 200, 256, 70000};
    }
    for (const auto& [dst, unused] : types) {
      for (const Tensor& x : {make(v), make({}), make({1})}) {
        Compare(
            {"Cast", {x}, {{"SrcT", Type(src)}, {"DstT", Type(dst)}, {"Truncate", Bool(false)}}});
      }
    }
  }
}

TEST(GpuTest, MatMulMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  struct M {
    std::vector<int64_t> a, b;
    bool ta, tb;
  };
  for (const M& m : std::vector<M>{{{3, 5}, {5, 7}, false, false},
                                   {{5, 3}, {5, 7}, true, false},
                                   {{3, 5}, {7, 5}, false, true},
                                   {{5, 3}, {7, 5}, true, true},
                                   {{0, 5}, {5, 7}, false, false},
                                   {{4, 0}, {0, 3}, false, false},
                                   {{129, 257}, {257, 65}, false, false},
                                   {{256, 784}, {784, 256}, false, false}}) {
    Compare({"MatMul",
             {Random(m.a, rng), Random(m.b, rng)},
             {{"T", Type(DT_FLOAT)}, {"transpose_a", Bool(m.ta)}, {"transpose_b", Bool(m.tb)}}},
            1e-4);
  }
}

TEST(GpuTest, NnOpsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(4);
  for (const auto& [x, b] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {{6, 7}, 7}, {{2, 3, 5}, 5}, {{0, 4}, 4}, {{1, 1000}, 1000}}) {
    Compare({"BiasAdd", {Random(x, rng), Random({b}, rng)}, {{"T", Type(DT_FLOAT)}}});
    Compare({"BiasAddGrad", {Random(x, rng)}, {{"T", Type(DT_FLOAT)}}}, 1e-4);
  }
  for (const auto& s : std::vector<std::vector<int64_t>>{{5, 10}, {1, 1000}, {0, 3}, {3, 1}}) {
    Compare({"Softmax", {Random(s, rng)}, {{"T", Type(DT_FLOAT)}}});
    Compare({"LogSoftmax", {Random(s, rng)}, {{"T", Type(DT_FLOAT)}}});
  }
  for (DataType lt : {DT_INT32, DT_INT64}) {
    Tensor labels(lt, TensorShape({9}));
    for (int i = 0; i < 9; ++i) {
      if (lt == DT_INT32) labels.flat<int32_t>()[i] = i % 10;
      if (lt == DT_INT64) labels.flat<int64_t>()[i] = (i * 7) % 10;
    }
    Compare({"SparseSoftmaxCrossEntropyWithLogits",
             {Random({9, 10}, rng), labels},
             {{"T", Type(DT_FLOAT)}, {"Tlabels", Type(lt)}},
             2});
  }
}

TEST(GpuTest, ReductionsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  for (const char* op : {"Sum", "Mean", "Max"}) {
    for (const std::vector<int32_t>& axes :
         std::vector<std::vector<int32_t>>{{0}, {1}, {2}, {1, 2}, {0, 1}, {-1}, {}}) {
      for (bool keep : {false, true}) {
        Compare({op,
                 {Random({4, 5, 6}, rng), Tensor::FromVector<int32_t>(axes)},
                 {{"T", Type(DT_FLOAT)}, {"Tidx", Type(DT_INT32)}, {"keep_dims", Bool(keep)}}},
                1e-4);
      }
    }
  }
  // Non-adjacent axes are not done on the GPU: an error naming the node.
  Case c{"Sum",
         {Random({4, 5, 6}, rng), Tensor::FromVector<int32_t>({0, 2})},
         {{"T", Type(DT_FLOAT)}, {"Tidx", Type(DT_INT32)}, {"keep_dims", Bool(false)}}};
  auto r = RunOn(c, "/device:GPU:0");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "node 'op' (op Sum)")) << r.status();
}

TEST(GpuTest, FillsAndViewsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(6);
  Compare({"Fill",
           {Tensor::FromVector<int32_t>({3, 0, 2}), Tensor::Scalar<float>(2.5f)},
           {{"T", Type(DT_FLOAT)}, {"index_type", Type(DT_INT32)}}});
  Compare({"Fill",
           {Tensor::FromVector<int32_t>({17, 3}), Tensor::Scalar<float>(-1.f)},
           {{"T", Type(DT_FLOAT)}, {"index_type", Type(DT_INT32)}}});
  for (const char* op : {"ZerosLike", "OnesLike", "Identity"}) {
    for (const auto& s : kShapes) Compare({op, {Random(s, rng)}, {{"T", Type(DT_FLOAT)}}});
  }
  Compare({"Reshape",
           {Random({6, 4}, rng), Tensor::FromVector<int32_t>({3, -1})},
           {{"T", Type(DT_FLOAT)}, {"Tshape", Type(DT_INT32)}}});
  Compare(
      {"Shape", {Random({6, 4, 0}, rng)}, {{"T", Type(DT_FLOAT)}, {"out_type", Type(DT_INT32)}}});
}

tensorflow::AttrValue Ints(const std::vector<int64_t>& v) {
  tensorflow::AttrValue a;
  for (int64_t x : v) a.mutable_list()->add_i(x);
  return a;
}
tensorflow::AttrValue Str(const std::string& s) {
  tensorflow::AttrValue a;
  a.set_s(s);
  return a;
}
Tensor Dims(const Tensor& t) {
  std::vector<int32_t> d;
  for (int i = 0; i < t.dims(); ++i) d.push_back(static_cast<int32_t>(t.dim_size(i)));
  return Tensor::FromVector<int32_t>(d);
}
std::vector<int64_t> ShapeOf(const Tensor& t) {
  std::vector<int64_t> d;
  for (int i = 0; i < t.dims(); ++i) d.push_back(t.dim_size(i));
  return d;
}
// Whether SAME padding of a `k` window at stride `s` over `in` is uneven
// (cuDNN pads evenly: the GPU kernels pad such inputs themselves).
bool Uneven(int64_t in, int64_t k, int64_t s) {
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return total % 2 == 1;
}

// cuDNN's Conv2D and its input and filter gradients against the CPU's
// (oneDNN): even and uneven SAME padding, VALID, strides, dilation, a 1x1
// filter and an empty batch.
TEST(GpuTest, ConvolutionsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(8);
  struct C {
    std::vector<int64_t> x, f;
    int64_t stride, dilation;
    const char* padding;
  };
  for (const C& c : std::vector<C>{{{2, 8, 8, 3}, {3, 3, 3, 4}, 1, 1, "SAME"},
                                   {{2, 8, 8, 3}, {3, 3, 3, 5}, 2, 1, "SAME"},
                                   {{1, 6, 7, 2}, {2, 2, 2, 3}, 1, 1, "SAME"},
                                   {{3, 9, 7, 4}, {5, 3, 4, 2}, 1, 1, "VALID"},
                                   {{2, 10, 10, 3}, {3, 3, 3, 4}, 1, 2, "SAME"},
                                   {{1, 5, 5, 1}, {1, 1, 1, 1}, 2, 1, "VALID"},
                                   {{8, 28, 28, 1}, {3, 3, 1, 32}, 1, 1, "SAME"},
                                   {{0, 5, 5, 2}, {3, 3, 2, 2}, 1, 1, "SAME"}}) {
    const std::map<std::string, tensorflow::AttrValue> attrs = {
        {"T", Type(DT_FLOAT)},
        {"strides", Ints({1, c.stride, c.stride, 1})},
        {"dilations", Ints({1, c.dilation, c.dilation, 1})},
        {"padding", Str(c.padding)},
        {"data_format", Str("NHWC")}};
    const Tensor x = Random(c.x, rng), f = Random(c.f, rng);
    Compare({"Conv2D", {x, f}, attrs}, 1e-4);
    auto y = RunOn({"Conv2D", {x, f}, attrs}, "/device:CPU:0");
    ASSERT_TRUE(y.ok()) << y.status();
    const Tensor dy = Random(ShapeOf((*y)[0]), rng);
    Compare({"Conv2DBackpropInput", {Dims(x), f, dy}, attrs}, 1e-4);
    Compare({"Conv2DBackpropFilter", {x, Dims(f), dy}, attrs}, 1e-3);
  }
}

// cuDNN's MaxPool, AvgPool and their gradients against the CPU's. AvgPool
// with uneven SAME padding is Unimplemented on the GPU, naming the node.
TEST(GpuTest, PoolingMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(9);
  struct P {
    std::vector<int64_t> x;
    int64_t k, stride;
    const char* padding;
  };
  for (const P& p : std::vector<P>{{{2, 8, 8, 3}, 2, 2, "VALID"},
                                   {{2, 8, 8, 3}, 3, 2, "SAME"},
                                   {{1, 6, 6, 2}, 3, 1, "SAME"},
                                   {{3, 5, 7, 4}, 2, 1, "VALID"},
                                   {{8, 28, 28, 32}, 2, 2, "VALID"},
                                   {{0, 4, 4, 2}, 2, 2, "VALID"}}) {
    const std::map<std::string, tensorflow::AttrValue> attrs = {
        {"T", Type(DT_FLOAT)},
        {"ksize", Ints({1, p.k, p.k, 1})},
        {"strides", Ints({1, p.stride, p.stride, 1})},
        {"padding", Str(p.padding)},
        {"data_format", Str("NHWC")}};
    const Tensor x = Random(p.x, rng);
    Compare({"MaxPool", {x}, attrs});
    auto y = RunOn({"MaxPool", {x}, attrs}, "/device:CPU:0");
    ASSERT_TRUE(y.ok()) << y.status();
    const Tensor dy = Random(ShapeOf((*y)[0]), rng);
    Compare({"MaxPoolGrad", {x, (*y)[0], dy}, attrs});
    const bool uneven = std::string(p.padding) == "SAME" &&
                        (Uneven(p.x[1], p.k, p.stride) || Uneven(p.x[2], p.k, p.stride));
    if (!uneven) {
      Compare({"AvgPool", {x}, attrs});
      Compare({"AvgPoolGrad", {Dims(x), dy}, attrs});
      continue;
    }
    auto avg = RunOn({"AvgPool", {x}, attrs}, "/device:GPU:0");
    ASSERT_FALSE(avg.ok());
    EXPECT_EQ(avg.status().code(), absl::StatusCode::kUnimplemented) << avg.status();
    EXPECT_TRUE(absl::StrContains(avg.status().message(), "node 'op' (op AvgPool)"))
        << avg.status();
  }
}

tensorflow::AttrValue Float(float f) {
  tensorflow::AttrValue v;
  v.set_f(f);
  return v;
}

// FusedBatchNorm (V1, V3) and its gradient against the CPU's: training with
// the batch's statistics (exponential_avg_factor 1, and 0.9 with running
// statistics) and inference, channels fewer and more than a block's 32,
// one row, and no rows (NaN statistics). The gradient reads the mean and
// variance the CPU's forward pass saved.
TEST(GpuTest, BatchNormMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {2, 4, 4, 3}, {8, 28, 28, 32}, {3, 5, 7, 65}, {1, 1, 1, 4}, {0, 3, 3, 2}}) {
    const int64_t c = dims[3];
    const Tensor x = Random(dims, rng), scale = Random({c}, rng, 0.5f, 2.0f),
                 offset = Random({c}, rng), mean = Random({c}, rng),
                 var = Random({c}, rng, 0.1f, 3.0f), empty(DT_FLOAT, TensorShape({0}));
    for (const char* op : {"FusedBatchNorm", "FusedBatchNormV3"}) {
      const bool v3 = std::string(op) == "FusedBatchNormV3";
      for (int mode = 0; mode < 3; ++mode) {  // training, training 0.9, inference
        const bool training = mode < 2;
        std::map<std::string, tensorflow::AttrValue> attrs = {{"T", Type(DT_FLOAT)},
                                                              {"epsilon", Float(1e-3f)},
                                                              {"is_training", Bool(training)},
                                                              {"data_format", Str("NHWC")}};
        if (v3) {
          attrs["U"] = Type(DT_FLOAT);
          attrs["exponential_avg_factor"] = Float(mode == 1 ? 0.9f : 1.0f);
        }
        if (mode == 1 && !v3) continue;  // V1 has no factor
        const bool stats = mode != 0;
        const Case fwd{
            op, {x, scale, offset, stats ? mean : empty, stats ? var : empty}, attrs, v3 ? 6 : 5};
        SCOPED_TRACE(absl::StrCat(op, " mode ", mode, " ", TensorShape(dims).DebugString()));
        Compare(fwd, dims[0] * dims[1] * dims[2] > 10000 ? 1e-3 : 1e-4);
        auto cpu = RunOn(fwd, "/device:CPU:0");
        ASSERT_TRUE(cpu.ok()) << cpu.status();
        const Tensor dy = Random(dims, rng);
        std::map<std::string, tensorflow::AttrValue> gattrs = attrs;
        gattrs.erase("exponential_avg_factor");
        std::vector<Tensor> in = {dy, x, scale, (*cpu)[3], (*cpu)[4]};
        if (v3) in.push_back((*cpu)[5]);
        Compare({v3 ? "FusedBatchNormGradV3" : "FusedBatchNormGrad", in, gattrs, 5},
                dims[0] * dims[1] * dims[2] > 10000 ? 1e-3 : 1e-4);
      }
    }
  }
}

// Variables on the GPU and their updates against the CPU:
// ResourceApplyGradientDescent, Momentum (plain and Nesterov) and Adam,
// three steps each from the same values; every variable and slot is read
// back after each step, and the updates ran on the GPU.
TEST(GpuTest, VariableUpdatesMatchTheCpu) {
  REQUIRE_GPU();
  auto graph = [](const std::string& device) {
    std::string g;
    auto node = [&](const std::string& text) {
      g += "node { " + text + " device: '" + device + "' }\n";
    };
    auto scalar = [&](const std::string& name, float v) {
      node("name: '" + name +
           "' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: 'value' "
           "value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: " +
           std::to_string(v) + " } } }");
    };
    node("name: 'grad' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } }");
    node("name: 'init' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } }");
    for (const char* v : {"gd", "mo", "mo_acc", "nm", "nm_acc", "ad", "ad_m", "ad_v"}) {
      const std::string n(v);
      node("name: '" + n +
           "' op: 'VarHandleOp' attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: "
           "'shape' value { shape { dim { size: 1000 } } } } attr { key: 'shared_name' value { "
           "s: '" +
           n + "' } }");
      node("name: 'init_" + n + "' op: 'AssignVariableOp' input: '" + n +
           "' input: 'init' attr { key: 'dtype' value { type: DT_FLOAT } }");
      node("name: 'read_" + n + "' op: 'ReadVariableOp' input: '" + n +
           "' attr { key: 'dtype' value { type: DT_FLOAT } }");
    }
    scalar("lr", 0.1f);
    scalar("momentum", 0.9f);
    scalar("b1p", 0.81f);
    scalar("b2p", 0.998f);
    scalar("b1", 0.9f);
    scalar("b2", 0.999f);
    scalar("eps", 1e-7f);
    const std::string t = " attr { key: 'T' value { type: DT_FLOAT } }";
    node(
        "name: 'apply_gd' op: 'ResourceApplyGradientDescent' input: 'gd' input: 'lr' input: "
        "'grad'" +
        t);
    node(
        "name: 'apply_mo' op: 'ResourceApplyMomentum' input: 'mo' input: 'mo_acc' input: 'lr' "
        "input: 'grad' input: 'momentum'" +
        t);
    node(
        "name: 'apply_nm' op: 'ResourceApplyMomentum' input: 'nm' input: 'nm_acc' input: 'lr' "
        "input: 'grad' input: 'momentum' attr { key: 'use_nesterov' value { b: true } }" +
        t);
    node(
        "name: 'apply_ad' op: 'ResourceApplyAdam' input: 'ad' input: 'ad_m' input: 'ad_v' "
        "input: 'b1p' input: 'b2p' input: 'lr' input: 'b1' input: 'b2' input: 'eps' input: "
        "'grad'" +
        t);
    return g;
  };
  const std::vector<std::string> reads = {"read_gd",     "read_mo", "read_mo_acc", "read_nm",
                                          "read_nm_acc", "read_ad", "read_ad_m",   "read_ad_v"};
  const std::vector<std::string> inits = {"init_gd",     "init_mo", "init_mo_acc", "init_nm",
                                          "init_nm_acc", "init_ad", "init_ad_m",   "init_ad_v"};
  const std::vector<std::string> applies = {"apply_gd", "apply_mo", "apply_nm", "apply_ad"};
  std::mt19937 rng(5);
  const Tensor init = Random({1000}, rng, 0, 1);
  std::vector<Tensor> grads;
  for (int i = 0; i < 3; ++i) grads.push_back(Random({1000}, rng));
  std::map<std::string, std::vector<std::vector<Tensor>>> results;
  for (const std::string device : {"/device:GPU:0", "/device:CPU:0"}) {
    auto s = DirectSession::Create(SessionOptions());
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Create(test::ParseGraph(graph(device))).ok());
    ASSERT_TRUE((*s)->Run({{"init", init}}, {}, inits).ok());
    for (int step = 0; step < 3; ++step) {
      tensorflow::RunOptions ro;
      ro.set_output_partition_graphs(true);
      tensorflow::RunMetadata md;
      auto r = (*s)->Run(ro, {{"grad", grads[step]}}, {}, applies, &md);
      ASSERT_TRUE(r.ok()) << device << ": " << r.status();
      for (const auto& p : md.partition_graphs()) {
        for (const auto& n : p.node()) {
          if (absl::StartsWith(n.name(), "apply_")) {
            EXPECT_TRUE(absl::StrContains(n.device(), device.substr(8))) << n.name();
          }
        }
      }
      auto values = (*s)->Run({}, reads);
      ASSERT_TRUE(values.ok()) << values.status();
      results[device].push_back(*values);
    }
  }
  for (int step = 0; step < 3; ++step) {
    for (size_t k = 0; k < reads.size(); ++k) {
      const Tensor& g = results["/device:GPU:0"][step][k];
      const Tensor& c = results["/device:CPU:0"][step][k];
      ASSERT_EQ(g.NumElements(), c.NumElements());
      for (int64_t i = 0; i < g.NumElements(); ++i) {
        ASSERT_NEAR(g.flat<float>()[i], c.flat<float>()[i],
                    1e-5 * std::max(1.0f, std::fabs(c.flat<float>()[i])))
            << reads[k] << " step " << step << " [" << i << "]";
      }
    }
  }
}

TEST(GpuTest, OutOfGpuMemoryNamesTheNodeAndDevice) {
  REQUIRE_GPU();
  std::mt19937 rng(7);
  // 1e-6 of the GPU's memory (a few kB) cannot hold 4 MB.
  Case c{"Relu", {Random({1000, 1000}, rng)}, {{"T", Type(DT_FLOAT)}}};
  auto r = RunOn(c, "/device:GPU:0", nullptr, 1e-6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "out of memory on "
                                "/job:localhost/replica:0/task:0/device:GPU:0"))
      << r.status();
}

// A model of the zoo through the client API, on the CPU and with a GPU:
// the passes, the variables and their updates run on the GPU, the losses
// agree. `ops` counts the first step's ops by type on the GPU (with one),
// else on the CPU.
struct TrainRun {
  std::vector<float> losses;
  std::map<std::string, int> ops;
};

TrainRun TrainModel(const std::string& model, bool gpu) {
  using namespace client;         // NOLINT
  using namespace client::train;  // NOLINT
  const bool cnn = model == "cnn";
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
  // The CNN as `graphrun train --model=cnn` builds it: 4 Conv-BN-ReLU
  // blocks (32, 32, 64, 64 filters), 2 max pools, dropout 0.5 (its random
  // mask has no GPU kernel: it runs on the CPU, with the same seed in both
  // runs), dense 512.
  Model m = cnn ? Cnn(layers, x, labels) : Mlp(layers, x, labels);
  GradientDescentOptimizer sgd(cnn ? 0.05f : 0.1f);
  auto train = TrainOp(s, layers, m.loss, sgd);
  EXPECT_TRUE(train.ok()) << train.status();
  SessionOptions so;
  (*so.config.mutable_device_count())["GPU"] = gpu ? 1 : 0;
  ClientSession session(s, so);
  EXPECT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(s)}).ok());
  std::mt19937 rng(11);
  const int64_t batch = cnn ? 64 : 256;
  const int steps = cnn ? 10 : 20;
  Tensor xs = Random(
      cnn ? std::vector<int64_t>{batch, 28, 28, 1} : std::vector<int64_t>{batch, 784}, rng, 0, 1);
  Tensor ys(DT_INT32, TensorShape({batch}));
  for (int i = 0; i < batch; ++i) ys.flat<int32_t>()[i] = i % 10;
  TrainRun run;
  tensorflow::RunOptions ro;
  ro.set_output_partition_graphs(true);
  for (int i = 0; i < steps; ++i) {
    tensorflow::RunMetadata md;
    auto r = session.Run({{x, xs}, {labels, ys}}, {m.loss}, {*train}, ro, &md);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    run.losses.push_back((*r)[0].scalar<float>());
    if (i > 0) continue;
    for (const auto& p : md.partition_graphs()) {
      for (const auto& n : p.node()) {
        if (absl::StrContains(n.device(), gpu ? "GPU" : "CPU")) run.ops[n.op()]++;
      }
    }
  }
  return run;
}

TEST(GpuTest, MlpTrainsOnTheGpuAsOnTheCpu) {
  REQUIRE_GPU();
  TrainRun g = TrainModel("mlp", true);
  TrainRun c = TrainModel("mlp", false);
  ASSERT_EQ(g.losses.size(), 20u);
  ASSERT_EQ(c.losses.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_NEAR(g.losses[i], c.losses[i], 1e-3 * std::max(1.0f, c.losses[i])) << i;
  }
  EXPECT_LT(g.losses.back(), g.losses.front());
  EXPECT_EQ(g.ops["MatMul"], 8);
  EXPECT_EQ(g.ops["SparseSoftmaxCrossEntropyWithLogits"], 1);
  // The variables live on the GPU: their reads and updates run there.
  EXPECT_EQ(g.ops["ResourceApplyGradientDescent"], 6);
  EXPECT_GE(g.ops["ReadVariableOp"], 6);
}

// The kernels the CNN's step runs, counted on the device that runs them:
// checked here on the CPU (runs without a GPU), and on the GPU below.
void ExpectCnnKernels(std::map<std::string, int>& ops) {
  EXPECT_EQ(ops["Conv2D"], 4);
  EXPECT_EQ(ops["Conv2DBackpropFilter"], 4);
  EXPECT_EQ(ops["Conv2DBackpropInput"], 3);  // none into the images
  EXPECT_EQ(ops["FusedBatchNormV3"], 4);
  EXPECT_EQ(ops["FusedBatchNormGradV3"], 4);
  EXPECT_EQ(ops["MaxPool"], 2);
  EXPECT_EQ(ops["MaxPoolGrad"], 2);
  EXPECT_EQ(ops["MatMul"], 6);
  EXPECT_EQ(ops["SparseSoftmaxCrossEntropyWithLogits"], 1);
  // 4 kernels, 4 gammas, 4 betas, 2 dense kernels and 2 biases.
  EXPECT_EQ(ops["ResourceApplyGradientDescent"], 16);
}

TEST(GpuTest, CnnKernelsOfTheStepOnTheCpu) {
  TrainRun c = TrainModel("cnn", false);
  ASSERT_EQ(c.losses.size(), 10u);
  EXPECT_LT(c.losses.back(), c.losses.front());
  ExpectCnnKernels(c.ops);
}

TEST(GpuTest, CnnTrainsOnTheGpuAsOnTheCpu) {
  REQUIRE_GPU();
  TrainRun g = TrainModel("cnn", true);
  TrainRun c = TrainModel("cnn", false);
  ASSERT_EQ(g.losses.size(), 10u);
  ASSERT_EQ(c.losses.size(), 10u);
  // cuDNN's convolution algorithms sum in other orders than the CPU's
  // (float32 throughout: no TF32), and batch norm over 64 examples
  // carries the differences on: a looser bound than the MLP's.
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(g.losses[i], c.losses[i], 1e-2 * std::max(1.0f, c.losses[i])) << i;
  }
  EXPECT_LT(g.losses.back(), g.losses.front());
  ExpectCnnKernels(g.ops);
  // The dropout mask comes from the CPU (no GPU kernel for RandomUniform).
  EXPECT_EQ(g.ops["RandomUniform"], 0);
}

#ifdef GRAPHRUN_CUDA
// A GPU result fetched by the client came through a device-to-host copy
// into page-locked memory (the GPU device's pinned allocator); a CPU
// result lies in ordinary memory.
TEST(GpuTest, DeviceToHostCopiesLandInPinnedMemory) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  Case c{"Relu", {Random({64, 64}, rng)}, {{"T", Type(DT_FLOAT)}}};
  auto gpu = RunOn(c, "/device:GPU:0");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  cudaPointerAttributes attr;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, (*gpu)[0].raw_data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  auto cpu = RunOn(c, "/device:CPU:0");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(cudaPointerGetAttributes(&attr, (*cpu)[0].raw_data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered);
}
#endif

// NCCL (kernels/gpu/nccl_backend.h): collectives of GPU members of one
// session. GPU count of this machine, 0 without one.
int GpuCount() {
  const DeviceFactory* f = DefaultDeviceFactoryRegistry().Find("GPU");
  absl::StatusOr<int> n = f == nullptr ? absl::StatusOr<int>(0) : f->CountAvailable();
  return n.ok() ? *n : 0;
}

// Members on GPU:0..n-1, member k with [2, 3] values k*10 + i: a mean
// all-reduce (of their Relu, the same values), a gather and a broadcast
// from GPU:0, over group 1 of n. Devices of `task` ("" in a local
// session).
std::string CollectiveGraph(int n, const std::string& task = "") {
  auto scalar = [&task](const std::string& name, int v) {
    return absl::StrCat("node { name: '", name, "' op: 'Const' device: '", task,
                        "/device:CPU:0' attr { key: 'dtype' value { type: "
                        "DT_INT32 } } attr { key: 'value' value { tensor { dtype: DT_INT32 "
                        "tensor_shape {} int_val: ",
                        v, " } } } }\n");
  };
  std::string g = absl::StrCat(scalar("size", n), scalar("key", 1), scalar("i_reduce", 1),
                               scalar("i_gather", 2), scalar("i_bcast", 3));
  g += absl::StrCat("node { name: 'shape' op: 'Const' device: '", task,
                    "/device:CPU:0' attr { key: 'dtype' value { type: "
                    "DT_INT32 } } attr { key: 'value' value { tensor { dtype: DT_INT32 "
                    "tensor_shape { dim { size: 2 } } int_val: 2 int_val: 3 } } } }\n");
  const std::string common =
      "attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'timeout_seconds' value { f: 60 } }";
  for (int k = 0; k < n; ++k) {
    const std::string dev = absl::StrCat(task, "/device:GPU:", k);
    std::string values;
    for (int i = 0; i < 6; ++i) absl::StrAppend(&values, " float_val: ", k * 10 + i);
    absl::StrAppend(&g, "node { name: 'x", k, "' op: 'Const' device: '", dev,
                    "' attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: 'value' value { "
                    "tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 3 } } ",
                    values, " } } } }\n");
    // A kernel on each GPU first (launched with that GPU current).
    absl::StrAppend(&g, "node { name: 'relu", k, "' op: 'Relu' device: '", dev, "' input: 'x", k,
                    "' attr { key: 'T' value { type: DT_FLOAT } } }\n");
    absl::StrAppend(&g, "node { name: 'r", k, "' op: 'CollectiveReduceV2' device: '", dev,
                    "' input: 'relu", k,
                    "' input: 'size' input: 'key' input: 'i_reduce' attr { key: 'merge_op' value "
                    "{ s: 'Add' } } attr { key: 'final_op' value { s: 'Div' } } ",
                    common, " }\n");
    absl::StrAppend(&g, "node { name: 'g", k, "' op: 'CollectiveGatherV2' device: '", dev,
                    "' input: 'x", k, "' input: 'size' input: 'key' input: 'i_gather' ", common,
                    " }\n");
    if (k == 0) {
      absl::StrAppend(&g, "node { name: 'b0' op: 'CollectiveBcastSendV2' device: '", dev,
                      "' input: 'x0' input: 'size' input: 'key' input: 'i_bcast' ", common, " }\n");
    } else {
      absl::StrAppend(&g, "node { name: 'b", k, "' op: 'CollectiveBcastRecvV2' device: '", dev,
                      "' input: 'size' input: 'key' input: 'i_bcast' input: 'shape' ", common,
                      " }\n");
    }
  }
  return g;
}

// Runs CollectiveGraph(n) in session `s`, 3 steps, and checks every
// member's results and that NCCL ran each round.
void CheckCollectives(Session* s, int n) {
#ifdef GRAPHRUN_CUDA
  const int64_t rounds_before = NcclRoundsRun();
#endif
  std::vector<std::string> fetches;
  for (int k = 0; k < n; ++k) {
    for (const char* p : {"r", "g", "b"}) fetches.push_back(absl::StrCat(p, k));
  }
  for (int step = 0; step < 3; ++step) {
    auto out = s->Run({}, fetches, {});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int k = 0; k < n; ++k) {
      const Tensor& r = (*out)[3 * k];
      const Tensor& g = (*out)[3 * k + 1];
      const Tensor& b = (*out)[3 * k + 2];
      ASSERT_EQ(r.shape().DebugString(), "[2,3]");
      ASSERT_EQ(g.shape().DebugString(), absl::StrCat("[", 2 * n, ",3]"));
      ASSERT_EQ(b.shape().DebugString(), "[2,3]");
      for (int i = 0; i < 6; ++i) {
        // The mean of k*10 + i over k.
        EXPECT_FLOAT_EQ(r.flat<float>()[i], 5.0f * (n - 1) + i) << k << " " << i;
        EXPECT_EQ(b.flat<float>()[i], static_cast<float>(i)) << k << " " << i;
        for (int m = 0; m < n; ++m) {
          EXPECT_EQ(g.flat<float>()[m * 6 + i], static_cast<float>(m * 10 + i)) << k;
        }
      }
    }
  }
#ifdef GRAPHRUN_CUDA
  // Three rounds a step, all through NCCL.
  EXPECT_EQ(NcclRoundsRun() - rounds_before, 9);
#endif
}

// Runs CollectiveGraph(n) on n GPUs of a local session.
void RunCollectivesOnGpus(int n) {
  SessionOptions so;
  (*so.config.mutable_device_count())["GPU"] = n;
  auto s = DirectSession::Create(so);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Create(test::ParseGraph(CollectiveGraph(n))).ok());
  CheckCollectives(s->get(), n);
}

TEST(GpuTest, NcclCollectivesOnOneGpu) {
  REQUIRE_GPU();
  RunCollectivesOnGpus(1);
}

// NCCL as multi_worker_mirrored's GPU workers use it, across processes:
// a one-task cluster (in process, over gRPC) runs the collectives on its
// GPU:0 through the task's RemoteCollectives, which agrees on each round
// at the leader and hands it to NCCL with the communicator id rank 0 made
// (ncclGetUniqueId, ncclCommInitRank). One rank: NCCL needs a GPU per
// rank, and the ranks of several tasks in one process would share the
// process's NCCL backend.
TEST(GpuTest, NcclThroughAClustersCollectives) {
  REQUIRE_GPU();
  distributed::RegisterGrpcSession();
  distributed::LocalClusterOptions o;
  o.jobs = {{"worker", 1}};
  auto cluster = distributed::LocalCluster::Start(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  SessionOptions so;
  so.target = (*cluster)->target("worker", 0);
  auto s = NewSession(so);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::Status created =
      (*s)->Create(test::ParseGraph(CollectiveGraph(1, "/job:worker/replica:0/task:0")));
  ASSERT_TRUE(created.ok()) << created;
  CheckCollectives(s->get(), 1);
  s->reset();
  (*cluster)->StopAll();
}

TEST(GpuTest, NcclCollectivesAcrossGpus) {
  REQUIRE_GPU();
  const int n = GpuCount();
  if (n < 2) GTEST_SKIP() << "NCCL between GPUs needs two; this machine has " << n;
  RunCollectivesOnGpus(std::min(n, 4));
}

}  // namespace
}  // namespace graphrun
