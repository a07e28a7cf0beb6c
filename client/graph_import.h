// ImportGraphDef: adds a serialized graph (a TensorFlow GraphDef, with or
// without a function library) to a Scope's graph, as tf.import_graph_def
// does, so a C++ client can extend it: fetch its tensors, feed its
// placeholders, take gradients through it (functional If and While
// included: they are lowered on import, graph/function_lowering.h) and
// train its variables.
//
//   auto g = ImportGraphDef(scope, def);              // nodes "import/..."
//   Output y = *g->Tensor("result:0");
//   auto dy = AddSymbolicGradients(scope, {y}, {*g->Tensor("x")}, {});
//
// The graph is canonicalised as every entry point does (versions, lowering,
// undeclared attrs) and validated before anything is added: on any error
// the scope's graph is unchanged. Names are prefixed with `prefix` under
// the scope's name scope (no prefix when empty); a clash with an existing
// node is InvalidArgument naming it. Colocation attrs (`_class`
// "loc:@name") follow the renaming.
#ifndef GRAPHRUN_CLIENT_GRAPH_IMPORT_H_
#define GRAPHRUN_CLIENT_GRAPH_IMPORT_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/operation.h"
#include "client/scope.h"
#include "graph/proto/graph.pb.h"

namespace graphrun {
namespace client {

class ImportedGraph {
 public:
  // The operation imported for the GraphDef's node `name`; NotFound
  // naming it.
  absl::StatusOr<Operation> Op(absl::string_view name) const;
  // A tensor by the GraphDef's name, "node" or "node:i"; NotFound or
  // InvalidArgument naming it.
  absl::StatusOr<Output> Tensor(absl::string_view name) const;
  size_t size() const { return ops_.size(); }

 private:
  friend absl::StatusOr<ImportedGraph> ImportGraphDef(
      const Scope&, const tensorflow::GraphDef&, absl::string_view,
      const absl::flat_hash_map<std::string, Output>&);
  absl::flat_hash_map<std::string, Operation> ops_;
};

absl::StatusOr<ImportedGraph> ImportGraphDef(const Scope& scope, const tensorflow::GraphDef& def,
                                             absl::string_view prefix = "import");

// As above, with `input_map` (tf.import_graph_def's): a tensor of `def`
// ("node:i", or "node" for output 0) -> a tensor of the scope's graph that
// the imported consumers read instead. The mapped nodes are imported all
// the same. InvalidArgument naming the key: a key naming no tensor of
// `def` (after lowering: a node of a function body is not there), two keys
// for one tensor ("p" and "p:0"), a value of another dtype, a null value
// or one from another graph.
absl::StatusOr<ImportedGraph> ImportGraphDef(
    const Scope& scope, const tensorflow::GraphDef& def, absl::string_view prefix,
    const absl::flat_hash_map<std::string, Output>& input_map);

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_GRAPH_IMPORT_H_
