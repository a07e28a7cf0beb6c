#include "client/train/layers.h"

#include "absl/strings/str_cat.h"
#include "client/train/ops_internal.h"

namespace graphrun {
namespace client {
namespace train {

using namespace internal;  // NOLINT: the op helpers

namespace {

absl::Status LayerError(const std::string& layer, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat("layer '", layer, "': ", msg));
}

// The static size of the last dimension of `x`, or -1.
int64_t LastDim(const Output& x) {
  PartialShape s = x.shape();
  if (!s.known_rank() || s.rank() == 0) return -1;
  return s.dim(s.rank() - 1);
}

tensorflow::AttrValue Ints(std::vector<int64_t> v) { return client::internal::AttrIntList(v); }

}  // namespace

VariablePartitioner PartitionsByName(std::map<std::string, int> parts) {
  return [parts = std::move(parts)](const std::string& name, const PartialShape&) {
    auto it = parts.find(name);
    return it == parts.end() ? 1 : it->second;
  };
}

VariablePartSizes PartSizesByName(std::map<std::string, std::vector<int64_t>> sizes) {
  return [sizes = std::move(sizes)](const std::string& name, const PartialShape&) {
    auto it = sizes.find(name);
    return it == sizes.end() ? std::vector<int64_t>() : it->second;
  };
}

Layers::Layers(const Scope& scope, std::optional<int64_t> seed)
    : Layers(scope, LayersOptions{seed, nullptr, nullptr}) {}

Layers::Layers(const Scope& scope, LayersOptions options)
    : scope_(scope), options_(std::move(options)), store_(std::make_shared<Store>()) {}

Layers::Layers(const Scope& scope, const Layers& reuse_from)
    : scope_(scope), options_(reuse_from.options_), store_(reuse_from.store_), reuse_(true) {}

std::string Layers::NextName(const std::string& kind) {
  int n = counters_[kind]++;
  return n == 0 ? kind : absl::StrCat(kind, "_", n);
}

std::optional<int64_t> Layers::NextSeed() {
  if (!options_.seed) return std::nullopt;
  return *options_.seed + seed_counter_++;
}

const Variable* Layers::GetVariable(const Scope& layer_scope, const std::string& layer,
                                    const std::string& name, const PartialShape& shape,
                                    const Initializer& init, bool trainable) {
  const std::string key = absl::StrCat(layer, "/", name);
  auto it = store_->whole.find(key);
  if (it == store_->whole.end()) {
    if (reuse_) {
      scope_.UpdateStatus(LayerError(layer, absl::StrCat("no variable '", key, "' to reuse")));
      return nullptr;
    }
    it = store_->whole.emplace(key, Variable(layer_scope.WithOpName(name), shape, DT_FLOAT, init))
             .first;
  }
  if (it->second.handle().node() == nullptr) return nullptr;
  all_.push_back(it->second);
  if (trainable) trainable_.push_back(it->second);
  return &it->second;
}

Layers::Weights Layers::GetWeights(const Scope& layer_scope, const std::string& layer,
                                   const std::string& name, const PartialShape& shape,
                                   const Initializer& init) {
  Weights w;
  const std::string key = absl::StrCat(layer, "/", name);
  auto it = store_->partitioned.find(key);
  if (it == store_->partitioned.end()) {
    const bool may_split = !store_->whole.count(key) && !reuse_;
    const std::string full_name = absl::StrCat(layer_scope.name_prefix(), "/", name);
    std::vector<int64_t> sizes;
    if (may_split && options_.part_sizes) sizes = options_.part_sizes(full_name, shape);
    const int parts = !sizes.empty()                      ? static_cast<int>(sizes.size())
                      : may_split && options_.partitioner ? options_.partitioner(full_name, shape)
                                                          : 1;
    if (parts <= 1) {
      w.whole = GetVariable(layer_scope, layer, name, shape, init, true);
      return w;
    }
    it = store_->partitioned
             .emplace(key, sizes.empty() ? PartitionedVariable(layer_scope.WithOpName(name), shape,
                                                               DT_FLOAT, parts, init)
                                         : PartitionedVariable(layer_scope.WithOpName(name), shape,
                                                               DT_FLOAT, sizes, init))
             .first;
  }
  if (it->second.parts().empty()) return w;
  for (const Variable& part : it->second.parts()) {
    all_.push_back(part);
    trainable_.push_back(part);
  }
  partitioned_.push_back(it->second);
  w.partitioned = &it->second;
  return w;
}

Output Layers::ApplyActivation(const Scope& s, const Output& x, Activation a) {
  switch (a) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return Relu(s, x);
    case Activation::kTanh:
      return Tanh(s, x);
    case Activation::kSigmoid:
      return Unary(s, "Sigmoid", x);
    case Activation::kSoftmax:
      return Unary(s, "Softmax", x);
  }
  return x;
}

Output Layers::Dense(const Output& x, int64_t units, Activation activation, bool use_bias) {
  const std::string name = NextName("dense");
  Scope s = scope_.NewSubScope(name);
  const int64_t in = LastDim(x);
  if (in < 0) {
    scope_.UpdateStatus(LayerError(name, "the input's last dimension must be known"));
    return Output();
  }
  Weights kernel =
      GetWeights(s, name, "kernel", PartialShape({in, units}), init::GlorotUniform(NextSeed()));
  if (!kernel.ok()) return Output();
  Output y = MatMul(s, x, kernel.Read(s), false, false);
  if (use_bias) {
    const Variable* bias = GetVariable(s, name, "bias", PartialShape({units}), init::Zeros(), true);
    if (bias == nullptr) return Output();
    y = Binary(s, "BiasAdd", y, bias->Read(s));
  }
  return ApplyActivation(s, y, activation);
}

Output Layers::Conv2D(const Output& x, int64_t filters, int kernel_size, int stride,
                      const std::string& padding, Activation activation, bool use_bias) {
  const std::string name = NextName("conv2d");
  Scope s = scope_.NewSubScope(name);
  const int64_t in = LastDim(x);
  if (in < 0 || x.shape().rank() != 4) {
    scope_.UpdateStatus(LayerError(name, "needs an NHWC input with known channels"));
    return Output();
  }
  const Variable* kernel =
      GetVariable(s, name, "kernel", PartialShape({kernel_size, kernel_size, in, filters}),
                  init::GlorotUniform(NextSeed()), true);
  if (kernel == nullptr) return Output();
  Output y = Op(s, "Conv2D")
                 .In(x)
                 .In(kernel->Read(s))
                 .Attr("strides", Ints({1, stride, stride, 1}))
                 .Attr("padding", client::internal::AttrString(padding))
                 .Out();
  if (use_bias) {
    const Variable* bias =
        GetVariable(s, name, "bias", PartialShape({filters}), init::Zeros(), true);
    if (bias == nullptr) return Output();
    y = Binary(s, "BiasAdd", y, bias->Read(s));
  }
  return ApplyActivation(s, y, activation);
}

Output Layers::MaxPool2D(const Output& x, int pool_size, int stride, const std::string& padding) {
  Scope s = scope_.NewSubScope(NextName("max_pooling2d"));
  return Op(s, "MaxPool")
      .In(x)
      .Attr("ksize", Ints({1, pool_size, pool_size, 1}))
      .Attr("strides", Ints({1, stride, stride, 1}))
      .Attr("padding", client::internal::AttrString(padding))
      .Out();
}

Output Layers::BatchNormalization(const Output& x, bool training, float momentum, float epsilon) {
  const std::string name = NextName("batch_normalization");
  Scope s = scope_.NewSubScope(name);
  const int64_t c = LastDim(x);
  const int rank = x.shape().known_rank() ? x.shape().rank() : -1;
  if (c < 0 || (rank != 2 && rank != 4)) {
    scope_.UpdateStatus(LayerError(name, "needs an NHWC or [N, C] input with known channels"));
    return Output();
  }
  PartialShape shape({c});
  const Variable* gamma = GetVariable(s, name, "gamma", shape, init::Ones(), true);
  const Variable* beta = GetVariable(s, name, "beta", shape, init::Zeros(), true);
  const Variable* mean = GetVariable(s, name, "moving_mean", shape, init::Zeros(), false);
  const Variable* var = GetVariable(s, name, "moving_variance", shape, init::Ones(), false);
  if (!gamma || !beta || !mean || !var) return Output();

  Output in = rank == 2 ? Reshape(s, x, IntVec(s, {-1, 1, 1, c})) : x;
  Output empty = Const(s, Tensor::FromVector<float>({}));
  std::vector<Output> bn = Op(s, "FusedBatchNormV3")
                               .In(in)
                               .In(gamma->Read(s))
                               .In(beta->Read(s))
                               .In(training ? empty : mean->Read(s))
                               .In(training ? empty : var->Read(s))
                               .Attr("epsilon", client::internal::AttrFloat(epsilon))
                               .Attr("is_training", ABool(training))
                               .Outs();
  if (bn.size() < 3) return Output();
  if (training) {
    const float decay = 1.0f - momentum;
    for (auto [moving, batch] : {std::make_pair(mean, bn[1]), std::make_pair(var, bn[2])}) {
      Scope us = s.NewSubScope("AssignMovingAvg").ColocateWith(moving->op());
      Output delta = Mul(us, Sub(us, moving->Read(us), batch), decay);
      update_ops_.push_back(moving->AssignSub(us, delta));
    }
  }
  return rank == 2 ? Reshape(s, bn[0], IntVec(s, {-1, c})) : bn[0];
}

Output Layers::Dropout(const Output& x, float rate, bool training) {
  const std::string name = NextName("dropout");
  if (!training || rate == 0.0f) return x;
  Scope s = scope_.NewSubScope(name);
  auto [seed, seed2] = s.GetSeeds(NextSeed());
  Output u = Op(s, "RandomUniform")
                 .In(Shape(s, x))
                 .Attr("dtype", AType(x.type()))
                 .Attr("seed", AInt(seed))
                 .Attr("seed2", AInt(seed2))
                 .Out();
  Output keep = Cast(s, Binary(s, "GreaterEqual", u, ScalarOf(s, rate, x.type())), x.type());
  return Mul(s, x, Mul(s, keep, ScalarOf(s, 1.0 / (1.0 - rate), x.type())));
}

Output Layers::Flatten(const Output& x) {
  Scope s = scope_.NewSubScope(NextName("flatten"));
  PartialShape ps = x.shape();
  int64_t n = 1;
  bool known = ps.known_rank() && ps.rank() >= 1;
  for (int d = 1; known && d < ps.rank(); ++d) {
    if (ps.dim(d) < 0) known = false;
    n *= ps.dim(d);
  }
  if (known) return Reshape(s, x, IntVec(s, {-1, n}));
  Output batch = GatherV2(s, Shape(s, x), 0, 0);
  return Reshape(s, x, Op(s, "Pack").InList(std::vector<Input>{batch, -1}).Out());
}

Output Layers::Embedding(const Output& ids, int64_t vocab_size, int64_t dim) {
  const std::string name = NextName("embedding");
  Scope s = scope_.NewSubScope(name);
  Weights table = GetWeights(s, name, "embeddings", PartialShape({vocab_size, dim}),
                             init::RandomUniform(-0.05, 0.05, NextSeed()));
  if (!table.ok()) return Output();
  Output rows = table.partitioned != nullptr
                    ? table.partitioned->Gather(s, ids)
                    : Op(s.ColocateWith(table.whole->op()), "ResourceGather")
                          .In(table.whole->handle())
                          .In(ids)
                          .Attr("dtype", AType(DT_FLOAT))
                          .Out();
  // ResourceGather cannot see the table's shape; restore the static shape
  // [?, ids dims..., dim] for the layers that follow.
  PartialShape is = ids.shape();
  if (rows.node() == nullptr || !is.known_rank() || is.rank() < 1) return rows;
  std::vector<int64_t> dims = {-1};
  for (int d = 1; d < is.rank(); ++d) {
    if (is.dim(d) < 0) return rows;
    dims.push_back(is.dim(d));
  }
  dims.push_back(dim);
  return Reshape(s, rows, IntVec(s, dims));
}

}  // namespace train
}  // namespace client
}  // namespace graphrun
