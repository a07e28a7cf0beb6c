// Turns `--feed NAME=VALUE` text into tensors of the type the graph
// expects. JSON values need the dtype of the fed tensor: it comes from the
// node's "dtype" attr for Placeholder/PlaceholderWithDefault/Const, and
// otherwise from importing the graph (GraphFromGraphDef with the default op
// registry) and reading the node's output type.
#ifndef GRAPHRUN_TOOLS_FEEDS_H_
#define GRAPHRUN_TOOLS_FEEDS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "graph/proto/graph.pb.h"
#include "graph/tensor.h"

namespace graphrun {
namespace tools {

// Answers "what dtype is tensor NAME:i of this graph?". Imports the graph
// at most once, on the first question the attrs cannot answer. Holds a
// reference to `def`, which must outlive it. Not thread-safe.
class FeedResolver {
 public:
  explicit FeedResolver(const tensorflow::GraphDef& def) : def_(def) {}

  // InvalidArgument naming the tensor if the node does not exist or has no
  // output `index`, or the graph's import error. Ref types give their base
  // type (a fed value is never a ref).
  absl::StatusOr<DataType> DtypeOf(absl::string_view node, int index);

  // Builds the tensor for one feed. `name` is canonical "node:i"; `value`
  // is JSON text or "@path.npy". A .npy whose dtype differs from the
  // graph's, or a value whose shape does not fit a placeholder's declared
  // shape, is InvalidArgument. Errors start with "feed 'node:i': ".
  absl::StatusOr<Tensor> MakeFeed(absl::string_view name, absl::string_view value);

 private:
  const tensorflow::GraphDef& def_;
  std::unique_ptr<Graph> graph_;
};

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_FEEDS_H_
