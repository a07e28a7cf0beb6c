// What graph/function_lowering.cc asks of a function library: which
// functions a body calls, and which calls stay call frames. Internal to
// the lowering (and its tests).
#ifndef GRAPHRUN_GRAPH_FUNCTION_CALLS_H_
#define GRAPHRUN_GRAPH_FUNCTION_CALLS_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "graph/proto/function.pb.h"
#include "graph/proto/node_def.pb.h"

namespace graphrun {
namespace function_calls {

using FunctionMap = absl::flat_hash_map<std::string, const tensorflow::FunctionDef*>;

// The functions a FunctionDef's nodes name: as their op, or in a func
// attr (also in lists).
std::vector<std::string> Callees(const tensorflow::FunctionDef& fn);

// True when a device string names a job, replica or task.
bool NamesATask(const std::string& device);

// True when a node of `fn`'s body, or of a function it calls (in `fns`),
// asks for a device of a named task.
bool BodyNamesATask(const tensorflow::FunctionDef& fn, const FunctionMap& fns,
                    absl::flat_hash_set<const tensorflow::FunctionDef*>* seen);

// A call of `fn` that stays a call frame: the function is marked
// `_noinline`, the call does not force inlining, and no node of its body
// (or of the functions it calls) asks for a device of a named task: a
// call frame runs on its caller's task, so such a body is inlined, placed
// and partitioned as the rest of the graph is (inlining keeps what the
// call computes; `_noinline` only asks that it run as a unit).
// `names_task` (optional) caches BodyNamesATask per function.
bool StaysCallFrame(
    const tensorflow::FunctionDef& fn, const tensorflow::NodeDef& call, const FunctionMap& fns,
    absl::flat_hash_map<const tensorflow::FunctionDef*, bool>* names_task = nullptr);

}  // namespace function_calls
}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_FUNCTION_CALLS_H_
