// Builds the graph one Run() executes: feeds become _Arg nodes (every
// consumer of a fed tensor reads the _Arg instead), fetches become _Retval
// nodes, and everything not needed by a fetch or target is pruned — so an
// unfed placeholder that nothing needs is never demanded.
#ifndef GRAPHRUN_RUNTIME_CLIENT_GRAPH_H_
#define GRAPHRUN_RUNTIME_CLIENT_GRAPH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace graphrun {

struct ClientGraphSpec {
  std::vector<std::string> feeds;    // "name" or "name:i"; arg index = position
  std::vector<std::string> fetches;  // "name" or "name:i"; retval index = position
  std::vector<std::string> targets;  // node names
  std::string client_device;         // requested device of _Arg/_Retval
};

struct ClientGraph {
  std::unique_ptr<Graph> graph;
  DataTypeVector feed_types;   // expected dtype of each feed
  DataTypeVector fetch_types;  // dtype of each fetch
};

// The key a session caches one signature's graph under: each name
// length-prefixed, so no two distinct (feeds, fetches, targets) share a key
// whatever their names hold (a feed named "a,b" is not the feeds "a", "b").
std::string ClientGraphKey(const std::vector<std::string>& feeds,
                           const std::vector<std::string>& fetches,
                           const std::vector<std::string>& targets);

// InvalidArgument naming the feed/fetch/target that names no node or an
// output index the node does not have, or a tensor fed twice.
absl::StatusOr<ClientGraph> BuildClientGraph(const tensorflow::GraphDef& def,
                                             const OpRegistry& registry,
                                             const ClientGraphSpec& spec);

// Removes every node from which no node of `keep` is reachable (following
// data and control edges backwards).
void PruneGraph(Graph* graph, const std::vector<Node*>& keep);

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_CLIENT_GRAPH_H_
