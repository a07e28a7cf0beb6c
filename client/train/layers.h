// Layers: the Keras / tf.layers building blocks over the C++ API. A Layers
// object builds layers into a Scope and owns the variables they create:
//
//   Layers layers(scope);
//   Output h = layers.Dense(x, 256, Activation::kRelu);   // dense/kernel, dense/bias
//   Output logits = layers.Dense(h, 10);                   // dense_1/kernel, …
//
// Each layer call takes the next name of its kind ("dense", "dense_1", …),
// builds its ops in that name scope, and creates its variables there
// ("dense/kernel"): Glorot-uniform kernels, zero biases, BatchNormalization's
// gamma/beta/moving_mean/moving_variance, Embedding's uniform table.
//
// `training` is decided when the graph is built (Dropout's mask,
// BatchNormalization's batch vs moving statistics). To evaluate the same
// weights, build a second tower with Layers(other_scope, reuse_from): it
// names its layers in the same sequence and reuses the first tower's
// variables instead of creating new ones.
//
// Partitioning: with LayersOptions::partitioner, Dense kernels and
// Embedding tables (the big variables; biases and batch-norm vectors stay
// whole) may be created as PartitionedVariables
// (client/partitioned_variable.h): "dense/kernel/part_0" ..
// "dense/kernel/part_{K-1}", split on axis 0 with TensorFlow's sizes, each
// its own variable for the device functions (ReplicaDeviceSetter puts them
// on different PS tasks), each with save-slice info for the Saver. Dense
// reads the ConcatV2 of the parts, Embedding gathers per part. The
// initializer builds the full tensor once and splits it, so a partitioned
// model starts (and, step for step, trains) bit-identical to the
// unpartitioned one. variables() and trainable_variables() list the parts
// in place of the full variable, so optimizers make slots per part.
//
// BatchNormalization in training adds the updates of its moving averages
// to update_ops(); run them with the train op (see models.h's TrainOp).
//
// Errors (an input whose needed dimensions are unknown, a failing op) are
// recorded on the scope; the layer then returns a null Output. Same
// thread-safety as Scope.
#ifndef GRAPHRUN_CLIENT_TRAIN_LAYERS_H_
#define GRAPHRUN_CLIENT_TRAIN_LAYERS_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/operation.h"
#include "client/partitioned_variable.h"
#include "client/scope.h"
#include "client/variables.h"

namespace graphrun {
namespace client {
namespace train {

enum class Activation { kNone, kRelu, kTanh, kSigmoid, kSoftmax };

// The number of axis-0 parts for the variable `var_name` (its full name,
// e.g. "dense/kernel" or "tower/embedding/embeddings") of `shape` (fully
// defined). 1 or less keeps it whole; more than shape.dim(0) is cut to
// shape.dim(0) (TensorFlow's fixed_size_partitioner).
using VariablePartitioner =
    std::function<int(const std::string& var_name, const PartialShape& shape)>;

// Partitions the variables named in `parts` (full names -> number of parts);
// every other variable stays whole.
VariablePartitioner PartitionsByName(std::map<std::string, int> parts);

// Explicit row counts of the parts of a variable (as a placement plan's
// shards); empty or one entry keeps it whole.
using VariablePartSizes =
    std::function<std::vector<int64_t>(const std::string& var_name, const PartialShape& shape)>;
VariablePartSizes PartSizesByName(std::map<std::string, std::vector<int64_t>> sizes);

struct LayersOptions {
  // Makes initializers and dropout deterministic (each op gets the graph
  // seed and its own op seed).
  std::optional<int64_t> seed;
  // Asked for Dense kernels and Embedding tables only. Null: nothing is
  // partitioned.
  VariablePartitioner partitioner;
  // Like `partitioner` with the parts' row counts; takes precedence.
  VariablePartSizes part_sizes;
};

class Layers {
 public:
  // Layers creating their variables; `seed` makes initializers and dropout
  // deterministic (each op gets the graph seed and its own op seed).
  explicit Layers(const Scope& scope, std::optional<int64_t> seed = std::nullopt);
  Layers(const Scope& scope, LayersOptions options);
  // A tower reusing `reuse_from`'s variables, partitioned or not (same
  // layer sequence). REQUIRES: `reuse_from` outlives this object's layer
  // calls.
  Layers(const Scope& scope, const Layers& reuse_from);

  // x [N, in] -> [N, units]: x · kernel + bias, then the activation.
  Output Dense(const Output& x, int64_t units, Activation activation = Activation::kNone,
               bool use_bias = true);
  // NHWC x -> Conv2D with a [k, k, in, filters] kernel, bias, activation.
  Output Conv2D(const Output& x, int64_t filters, int kernel_size, int stride = 1,
                const std::string& padding = "SAME", Activation activation = Activation::kNone,
                bool use_bias = true);
  Output MaxPool2D(const Output& x, int pool_size = 2, int stride = 2,
                   const std::string& padding = "VALID");
  // Over the last axis of an NHWC or [N, C] input (FusedBatchNormV3).
  // Training normalises with the batch statistics and updates the moving
  // ones: moving -= (moving - batch) * (1 - momentum).
  Output BatchNormalization(const Output& x, bool training, float momentum = 0.99f,
                            float epsilon = 1e-3f);
  // Training: zeroes each element with probability `rate` and scales the
  // rest by 1 / (1 - rate). Inference: x unchanged.
  Output Dropout(const Output& x, float rate, bool training);
  // [N, d1, d2, …] -> [N, d1 * d2 * …].
  Output Flatten(const Output& x);
  // Integer ids of any shape -> [..., dim] rows of a [vocab, dim] table
  // (ResourceGather, so its gradient is sparse).
  Output Embedding(const Output& ids, int64_t vocab_size, int64_t dim);

  // Variables in creation order, a partitioned one as its parts (a reusing
  // tower lists the shared ones it used).
  const std::vector<Variable>& trainable_variables() const { return trainable_; }
  const std::vector<Variable>& variables() const { return all_; }
  // The partitioned variables among them, in creation order.
  const std::vector<PartitionedVariable>& partitioned_variables() const { return partitioned_; }
  // Moving-average updates built by training-mode BatchNormalization.
  const std::vector<Operation>& update_ops() const { return update_ops_; }
  const Scope& scope() const { return scope_; }

 private:
  // The next layer name of `kind` and the name scope for its ops.
  std::string NextName(const std::string& kind);
  // Variable `name` of layer `layer` (created, or looked up when reusing).
  const Variable* GetVariable(const Scope& layer_scope, const std::string& layer,
                              const std::string& name, const PartialShape& shape,
                              const Initializer& init, bool trainable);
  // A trainable kernel or table: partitioned when options_.partitioner asks
  // for more than one part, else whole. Both null on error.
  struct Weights {
    const Variable* whole = nullptr;
    const PartitionedVariable* partitioned = nullptr;
    bool ok() const { return whole != nullptr || partitioned != nullptr; }
    Output Read(const Scope& s) const { return whole ? whole->Read(s) : partitioned->Read(s); }
  };
  Weights GetWeights(const Scope& layer_scope, const std::string& layer, const std::string& name,
                     const PartialShape& shape, const Initializer& init);
  Output ApplyActivation(const Scope& s, const Output& x, Activation a);
  std::optional<int64_t> NextSeed();

  // "<layer>/<name>" -> variable; shared with reusing towers.
  struct Store {
    std::map<std::string, Variable> whole;
    std::map<std::string, PartitionedVariable> partitioned;
  };

  Scope scope_;
  LayersOptions options_;
  int64_t seed_counter_ = 0;
  std::map<std::string, int> counters_;
  std::shared_ptr<Store> store_;
  bool reuse_ = false;
  std::vector<Variable> trainable_, all_;
  std::vector<PartitionedVariable> partitioned_;
  std::vector<Operation> update_ops_;
};

}  // namespace train
}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_TRAIN_LAYERS_H_
