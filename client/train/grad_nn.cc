// Gradients of the neural-network ops: activations, softmax and the
// cross-entropy losses, BiasAdd, Conv2D, MaxPool, AvgPool and
// FusedBatchNorm{,V2,V3}.
#include "client/train/grad_internal.h"
#include "client/train/gradients.h"

namespace graphrun {
namespace client {
namespace train {
namespace {

using namespace internal;  // NOLINT: the op helpers

using Outs = absl::StatusOr<std::vector<Output>>;

Outs ReluGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return std::vector<Output>{Binary(s, "ReluGrad", dy[0], InputOf(op, 0))};
}
Outs Relu6Grad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return std::vector<Output>{Binary(s, "Relu6Grad", dy[0], InputOf(op, 0))};
}

// y = softmax(x): dx = (g - sum(g * y, -1)) * y.
Outs SoftmaxGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  Output y = OutputOf(op, 0);
  Output dot = Sum(s, Mul(s, dy[0], y), -1, /*keep_dims=*/true);
  return std::vector<Output>{Mul(s, Sub(s, dy[0], dot), y)};
}
// y = log_softmax(x): dx = g - exp(y) * sum(g, -1).
Outs LogSoftmaxGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  Output y = OutputOf(op, 0);
  return std::vector<Output>{Sub(s, dy[0], Mul(s, Exp(s, y), Sum(s, dy[0], -1, true)))};
}

Outs BiasAddGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  Op b(s, "BiasAddGrad");
  b.In(dy[0]);
  CopyAttrs(op, {"data_format"}, &b);
  return std::vector<Output>{dy[0], b.Out()};
}

// The gradient of the loss output times the op's own backprop output. The
// gradient of the backprop output (second order) is not propagated.
Outs SoftmaxXentGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  if (dy[0].node() == nullptr) return std::vector<Output>{Output(), Output()};
  Output g = ExpandDims(s, dy[0], -1);
  Output dx = Mul(s, g, OutputOf(op, 1));
  Output dlabels = Mul(s, g, Neg(s, Unary(s, "LogSoftmax", InputOf(op, 0))));
  return std::vector<Output>{dx, dlabels};
}
Outs SparseSoftmaxXentGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  if (dy[0].node() == nullptr) return std::vector<Output>{Output(), Output()};
  return std::vector<Output>{Mul(s, ExpandDims(s, dy[0], -1), OutputOf(op, 1)), Output()};
}

const std::vector<const char*> kConvAttrs = {"strides",     "padding",   "explicit_paddings",
                                             "data_format", "dilations", "use_cudnn_on_gpu"};

Outs Conv2DGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  Output x = InputOf(op, 0), f = InputOf(op, 1);
  Op bi(s, "Conv2DBackpropInput");
  bi.In(Shape(s, x)).In(f).In(dy[0]);
  CopyAttrs(op, kConvAttrs, &bi);
  Op bf(s, "Conv2DBackpropFilter");
  bf.In(x).In(Shape(s, f)).In(dy[0]);
  CopyAttrs(op, kConvAttrs, &bf);
  return std::vector<Output>{bi.Out(), bf.Out()};
}

const std::vector<const char*> kPoolAttrs = {"ksize", "strides", "padding", "explicit_paddings",
                                             "data_format"};

Outs MaxPoolGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  Op b(s, "MaxPoolGrad");
  b.In(InputOf(op, 0)).In(OutputOf(op, 0)).In(dy[0]);
  CopyAttrs(op, kPoolAttrs, &b);
  return std::vector<Output>{b.Out()};
}

// AvgPoolGrad takes the input's shape (int32) rather than the input.
Outs AvgPoolGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  Op b(s, "AvgPoolGrad");
  b.In(Shape(s, InputOf(op, 0))).In(dy[0]);
  CopyAttrs(op, kPoolAttrs, &b);
  return std::vector<Output>{b.Out()};
}

// Inputs x, scale, offset, mean, variance; outputs y, batch_mean,
// batch_variance, reserve_space_1, reserve_space_2 and (V3 only)
// reserve_space_3, which FusedBatchNormGradV3 takes as its sixth input. In
// training the saved batch statistics (reserve spaces) are used; in
// inference the population ones. `grad_op` is the version's gradient op.
Outs BatchNormGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy,
                   const char* grad_op, bool v3) {
  bool is_training = true;
  GR_RETURN_IF_ERROR(NodeAttr(op, "is_training", &is_training));
  Output g = dy[0];
  if (g.node() == nullptr) g = ZerosLike(s, OutputOf(op, 0));
  Op b(s, grad_op);
  b.In(g).In(InputOf(op, 0)).In(InputOf(op, 1));
  if (is_training) {
    b.In(OutputOf(op, 3)).In(OutputOf(op, 4));
  } else {
    b.In(InputOf(op, 3)).In(InputOf(op, 4));
  }
  if (v3) b.In(OutputOf(op, 5));
  CopyAttrs(op, {"epsilon", "data_format", "is_training"}, &b);
  std::vector<Output> outs = b.Outs();
  if (outs.size() < 3) return std::vector<Output>(5);
  return std::vector<Output>{outs[0], outs[1], outs[2], Output(), Output()};
}
Outs FusedBatchNormGrad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return BatchNormGrad(s, op, dy, "FusedBatchNormGrad", /*v3=*/false);
}
Outs FusedBatchNormV2Grad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return BatchNormGrad(s, op, dy, "FusedBatchNormGradV2", /*v3=*/false);
}
Outs FusedBatchNormV3Grad(const Scope& s, const Operation& op, const std::vector<Output>& dy) {
  return BatchNormGrad(s, op, dy, "FusedBatchNormGradV3", /*v3=*/true);
}

}  // namespace

void RegisterNnGradients(GradientRegistry& r) {
  r.AddDense("Relu", ReluGrad);
  r.AddDense("Relu6", Relu6Grad);
  r.AddDense("Softmax", SoftmaxGrad);
  r.AddDense("LogSoftmax", LogSoftmaxGrad);
  r.AddDense("BiasAdd", BiasAddGrad);
  r.AddDense("BiasAddV1", BiasAddGrad);
  r.AddDense("SoftmaxCrossEntropyWithLogits", SoftmaxXentGrad);
  r.AddDense("SparseSoftmaxCrossEntropyWithLogits", SparseSoftmaxXentGrad);
  r.AddDense("Conv2D", Conv2DGrad);
  r.AddDense("MaxPool", MaxPoolGrad);
  r.AddDense("AvgPool", AvgPoolGrad);
  r.AddDense("FusedBatchNorm", FusedBatchNormGrad);
  r.AddDense("FusedBatchNormV2", FusedBatchNormV2Grad);
  r.AddDense("FusedBatchNormV3", FusedBatchNormV3Grad);
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
