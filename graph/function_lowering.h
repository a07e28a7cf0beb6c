// Function libraries and functional control flow, lowered away at import.
//
// A TensorFlow 2 GraphDef carries a FunctionDefLibrary, and its nodes call
// into it three ways: a node whose op is a library function's name;
// PartitionedCall / StatefulPartitionedCall with the function in attr `f`;
// and the functional control-flow ops If / StatelessIf (then_branch,
// else_branch) and While / StatelessWhile (cond, body). graphrun's executor
// runs dataflow graphs with v1 control flow (Switch/Merge, and loop frames
// of Enter/Exit/NextIteration), so every call is inlined before the graph is
// built, as TensorFlow's own function-inlining and control-flow-lowering
// passes do:
//
// - A call node `c` becomes the function body's nodes, named `c/<node>`,
//   with the function's arguments wired to the call's inputs, and an
//   IdentityN named `c` over the function's return values (a NoOp when it
//   returns nothing), so `c:1` and `^c` still mean what they meant. `^c`
//   also waits for the function's control returns. Nodes of the body with
//   no inputs wait for the call's control inputs.
// - `If` becomes a Switch per input, both branches inlined (`c/then/...`,
//   `c/else/...`) with nodes that have no inputs anchored to a pivot of the
//   predicate, so the branch not taken is dead, and a Merge per output.
// - `While` becomes a loop frame named after the node: Enter, Merge,
//   the inlined cond, LoopCond, Switch, the inlined body, NextIteration and
//   Exit per loop variable.
// - Attrs a function leaves as placeholders take the caller's values.
//   Body nodes keep their own device and colocation (`loc:@` names are
//   renamed with the body); a body node with no device takes the call's.
//
// A call of a function marked `_noinline` (kNoInlineAttr) is not inlined,
// unless a node of its body (or of a function it calls) asks for a device
// of a named job, replica or task: a call frame runs on its caller's task,
// so such a body is inlined like any other and its nodes are placed and
// partitioned where they ask. Otherwise the call
// stays one StatefulPartitionedCall (PartitionedCall when it was one)
// named as the call, with `f`, `Tin` and `Tout` set, and the graph keeps
// its library; the call runs as a call frame, its body in an executor of
// its own (runtime/function_call.h).
//
// Errors are InvalidArgument naming the function and the node: a call to
// a function that is not in the library, a function that calls itself
// (recursion is not supported, inlined or in call frames), a wrong
// number of inputs, an input naming no argument or node of the body, a
// placeholder attr the call does not set. ResourceExhausted when inlining
// would make more than `max_nodes` nodes.
#ifndef GRAPHRUN_GRAPH_FUNCTION_LOWERING_H_
#define GRAPHRUN_GRAPH_FUNCTION_LOWERING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/op_registry.h"
#include "graph/proto/graph.pb.h"

namespace graphrun {

// A FunctionDef attr: calls of the function are not inlined but run as
// call frames (kernels/core/function_call_kernels.cc), as TensorFlow's
// `_noinline`.
constexpr char kNoInlineAttr[] = "_noinline";
// A call node attr: inline this call even of a `_noinline` function (how a
// call frame instantiates its own body).
constexpr char kInlineAttr[] = "_graphrun_inline";

struct LoweringOptions {
  // Calls nested deeper than this are an error.
  int max_depth = 64;
  // The lowered graph may have at most this many nodes.
  int64_t max_nodes = int64_t{1} << 20;
};

struct LoweredGraph {
  // The graph with no function library and no call or functional ops.
  tensorflow::GraphDef graph_def;
  // For each node that came from a function body, where it came from:
  // "node 'add' of function 'f' (called by 'c')". Used to name the
  // function in errors found later, when the lowered graph is validated.
  absl::flat_hash_map<std::string, std::string> origin;
};

// True when `def` has a function library or uses a functional op, so that
// LowerFunctionCalls would change it.
bool NeedsLowering(const tensorflow::GraphDef& def);

// Inlines every call of `def` into its function library and lowers If and
// While to v1 control flow (see the top of this file).
absl::StatusOr<LoweredGraph> LowerFunctionCalls(const tensorflow::GraphDef& def,
                                                const OpRegistry& registry,
                                                const LoweringOptions& options = {});

// Rewrites an error about a lowered graph so that a node that came from a
// function body is named by its function: the first "node 'X'" whose X is
// in `origin` becomes origin[X]. Other errors come back unchanged.
absl::Status AnnotateLoweringError(const absl::Status& status,
                                   const absl::flat_hash_map<std::string, std::string>& origin);

// The GraphDef version graphrun reads graphs as (TensorFlow's
// TF_GRAPH_DEF_VERSION of the 2.x releases whose graphs it is tested on).
constexpr int kGraphDefConsumerVersion = 1766;

// TensorFlow wrote `shape {}` (a scalar) for a Placeholder of unknown shape
// until GraphDef version 22, and still reads it so in graphs of earlier
// versions. True for such a Placeholder of a graph whose versions say
// 1..21; a graph without versions (producer 0, written by hand) keeps a
// scalar a scalar.
bool HasLegacyUnknownPlaceholderShape(const tensorflow::NodeDef& node,
                                      const tensorflow::VersionDef& versions);

// What every entry point (sessions, `graphrun run`, placeviz) does to a
// GraphDef a user hands in, before anything else reads it:
// - checks TensorFlow's versioning rule: a graph whose
//   versions.min_consumer is above kGraphDefConsumerVersion, or whose
//   versions.bad_consumers lists it, is InvalidArgument;
// - lowers function calls (above);
// - applies TensorFlow 2's rule for attrs an op does not declare: one whose
//   name starts with '_' is kept, any other is dropped, with one warning per
//   node and attr appended to `warnings` (may be null);
// - gives a legacy scalar Placeholder shape (above) unknown rank.
// When it lowered calls, it also validates the result (GraphFromGraphDef),
// so that an error inside a function body names the function.
// Nodes of ops the registry does not know are left for validation to name.
// `lowering` bounds the inlining (servers pass their --max_graph_nodes and
// --max_function_depth).
// `origin`, when given, gains LoweredGraph::origin's entries (the nodes
// inlined here); entries already there stay, so a session that extends its
// lowered graph keeps them.
absl::StatusOr<tensorflow::GraphDef> CanonicalizeGraphDef(
    const tensorflow::GraphDef& def, const OpRegistry& registry, std::vector<std::string>* warnings,
    const LoweringOptions& lowering = {},
    absl::flat_hash_map<std::string, std::string>* origin = nullptr);

// Adds `add`'s functions and gradients to `into`, as a session's Extend
// adds a graph's library to the session's: a function (or gradient) already
// in `into` under the same name must be defined the same way, otherwise
// InvalidArgument naming it.
absl::Status MergeFunctionLibrary(const tensorflow::FunctionDefLibrary& add,
                                  tensorflow::FunctionDefLibrary* into);

// True when a node of `nodes` calls a function of `library`: as its op, or
// through a function attr (PartitionedCall's `f`, If's branches, ...).
// Sessions attach their kept library to an extended graph only then, so
// an Extend without calls is not lowered again.
bool CallsLibrary(const tensorflow::GraphDef& nodes, const tensorflow::FunctionDefLibrary& library);

// CanonicalizeGraphDef for sessions: each warning goes to stderr as one
// line "graphrun: warning: ...".
absl::StatusOr<tensorflow::GraphDef> CanonicalizeGraphDefForSession(
    const tensorflow::GraphDef& def, const OpRegistry& registry,
    const LoweringOptions& lowering = {},
    absl::flat_hash_map<std::string, std::string>* origin = nullptr);

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_FUNCTION_LOWERING_H_
