// Chrome trace (chrome://tracing, Perfetto) from a step's StepStats — of
// one device, several, or every task of a distributed step (the master
// merges all tasks' DeviceStepStats into one RunMetadata).
//
// One process row per task (pid in order of the task's first
// DeviceStepStats; "process_name" is the task, "/job:worker/task:1"; a
// device name that does not parse is its own task), one thread row per
// (device, executor thread) of that task (tid numbered from 0 within the
// process; "thread_name" is "CPU:0 inter_op_1", or "CPU:0 thread 7"
// without DeviceStepStats.thread_names), and one complete event ("ph": "X")
// per node execution:
//   {"name": "MatMul", "cat": "Op", "ph": "X", "pid": 0, "tid": 3,
//    "ts": 1700000000123, "dur": 42,
//    "args": {"op": "MatMul", "device": "/job:worker/replica:0/task:0/device:CPU:0",
//             "outputs": ["float[2,2]"]}}
// _Send/_Recv events also carry "label": their timeline label (tensor,
// devices, original tensor, bytes), and each transfer gets a flow arrow
// from its _Send to its _Recv ("ph": "s" at the send's start and "ph": "f",
// "bp": "e" at the receive's end, one "id" each, "cat": "transfer"; the
// sends and receives of one tensor pair up in time order, so merged steps
// get one arrow each). ts/dur are microseconds (fractional
// when the stats carry nanoseconds); tasks in other processes are on the
// same clock only as far as the hosts' clocks agree. Output is
// deterministic: devices and nodes in StepStats order, threads by id.
#ifndef GRAPHRUN_TOOLS_TRACE_H_
#define GRAPHRUN_TOOLS_TRACE_H_

#include <string>

#include "graph/proto/graph.pb.h"
#include "graph/proto/step_stats.pb.h"

namespace graphrun {
namespace tools {

// The trace as JSON text, one event per line. The op of each node comes from
// its timeline_label ("name = Op(...)") or else from `graph` (optional; may
// be null); unknown ops are "".
std::string StepStatsToChromeTrace(const tensorflow::StepStats& stats,
                                   const tensorflow::GraphDef* graph = nullptr);

}  // namespace tools
}  // namespace graphrun

#endif  // GRAPHRUN_TOOLS_TRACE_H_
