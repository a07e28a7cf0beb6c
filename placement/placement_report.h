// The placement report: who is where and what crosses tasks.
//
// BuildPlacementReport takes a GraphDef whose nodes carry (partial)
// devices — from ApplyPlacementPolicy, a device function, or by hand —
// places it with the Placer over one CPU device per task, partitions it by
// task (Partition with node_to_loc = task) and reports:
//  * per task ("/job:ps/task:0"): the nodes placed there, each variable
//    (PS op) with shape, dtype and bytes, the task's total variable bytes,
//    and the bytes per step it sends and receives;
//  * imbalance: max/mean of bytes over the PS tasks (1 when they hold
//    nothing);
//  * one edge per _Send/_Recv pair between tasks: the original tensor
//    ("w/read:0"), bytes per step (unknown dimensions count as
//    `batch_size`, so with the default 1 the figure is per example; -1
//    when even the rank is unknown), source and destination task.
// Control-only edges carry no data and are not listed; edges only needed
// by nodes outside ReportOptions::fetches are left out.
//
// MeasuredTrafficReport builds the same report from a real step's
// RunMetadata instead (measured = true): tasks are the ones the step ran
// on, variables come from the partition graphs when the metadata has them,
// and each edge is what the step's _Recv (or, without one, _Send) node
// stats say crossed between two tasks, summed per original tensor. With
// partition graphs, each edge is traced to the variable it carries: back
// from its source through reads (Identity, ReadVariableOp, gathers) to a
// variable, or forward from its _Recv through Identity/AddN/Cast/Reshape
// to an op that updates a variable (Apply*, Assign*, Scatter*).
//
// ReportToJson is the documented schema (docs/placement.md):
//   {"strategy": "...", "measured": false, "batch_size": 1,
//    "tasks": [{"task": "/job:ps/task:0", "bytes": N, "num_nodes": k,
//               "send_bytes_per_step": s, "recv_bytes_per_step": r,
//               "variables": [{"name", "shape", "dtype", "bytes"}],
//               "nodes": ["..."]}],
//    "imbalance": x,
//    "edges": [{"src_task", "dst_task", "tensor", "bytes_per_step"}],
//    "pairs": [{"src_task", "dst_task", "bytes_per_step", "edges"}]}
// A measured report adds "read_bytes_per_step" and "update_bytes_per_step"
// to each variable and "variable" to each edge.
#ifndef GRAPHRUN_PLACEMENT_PLACEMENT_REPORT_H_
#define GRAPHRUN_PLACEMENT_PLACEMENT_REPORT_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/op_registry.h"
#include "graph/proto/config.pb.h"
#include "graph/proto/graph.pb.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "placement/ps_strategy.h"

namespace graphrun {
namespace placement {

struct VariableReport {
  std::string name;
  PartialShape shape;
  DataType dtype = DT_INVALID;
  int64_t bytes = -1;  // -1: unknown
  // Measured reports only (-1 otherwise): bytes per step of this
  // variable's value leaving its task (reads, gathers) and of updates to it
  // arriving there (gradients fed to Apply*/Assign*/Scatter* ops on it).
  int64_t read_bytes_per_step = -1, update_bytes_per_step = -1;
};

struct TaskReport {
  std::string task;  // "/job:ps/task:0"
  bool is_ps = false;
  int64_t bytes = 0;  // sum of the known variable bytes
  int64_t send_bytes_per_step = 0, recv_bytes_per_step = 0;
  std::vector<VariableReport> variables;
  std::vector<std::string> nodes;  // in graph order
};

struct EdgeReport {
  std::string src_task, dst_task;
  std::string tensor;  // "name:index" of the original graph
  DataType dtype = DT_INVALID;
  PartialShape shape;           // as inferred, before batch substitution
  int64_t bytes_per_step = -1;  // -1: unknown rank
  // Measured reports only: the variable ("task|name" resolved to its
  // name) whose value or update this edge carries; "" when none.
  std::string variable;
};

// All edges from one task to another, summed.
struct TaskPairReport {
  std::string src_task, dst_task;
  int64_t bytes_per_step = 0;  // -1 when an edge's bytes are unknown
  int num_edges = 0;
};

struct PlacementReport {
  std::string strategy;
  // True when the edges were measured in a step (MeasuredTrafficReport);
  // bytes_per_step are then exact and batch_size is not used.
  bool measured = false;
  // Measured: how many steps the stats held (bytes are per step, averaged).
  int measured_steps = 1;
  int64_t batch_size = 1;
  std::vector<TaskReport> tasks;  // PS tasks, then workers, then others
  double imbalance = 1.0;
  std::vector<EdgeReport> edges;
  std::vector<TaskPairReport> pairs;  // by source, then destination
};

struct ReportOptions {
  std::string strategy;  // only recorded
  std::string ps_job = "ps";
  std::string worker_job = "worker";
  int num_ps_tasks = 0;      // listed even when empty
  int num_worker_tasks = 1;  // listed even when empty
  int64_t batch_size = 1;
  std::set<std::string> ps_ops = DefaultPsOps();
  const OpRegistry* op_registry = nullptr;  // null: the default
  // The nodes one step runs (fetches and targets, "name" or "name:i"):
  // edges count only when their destination is needed for them. Empty:
  // every sink node except pure reads (Identity, ConcatV2, ReadVariableOp,
  // Snapshot) left without consumers — e.g. "w/read" after its gathers
  // were sharded. Initializers are sinks too, so their one-off traffic
  // shows up unless `fetches` names the training step only.
  std::vector<std::string> fetches;
};

// Builds the report. Errors: InvalidArgument for a graph that does not
// import or a device that does not parse (naming the node); the Placer's
// and Partition's errors (e.g. a ref edge forced across tasks).
absl::StatusOr<PlacementReport> BuildPlacementReport(const tensorflow::GraphDef& placed,
                                                     const ReportOptions& options);

// One _Send/_Recv execution as the executor labels it in step stats:
// "NAME = _Recv(TENSOR_NAME from SEND_DEVICE to RECV_DEVICE;
//  src_tensor=NODE:K; bytes=N)".
struct TransferRecord {
  bool is_recv = false;
  std::string tensor_name;  // the rendezvous name ("edge_12_w/read")
  std::string send_device, recv_device;
  std::string src_tensor;  // the original tensor ("w/read:0"); "^n" for control
  int64_t bytes = 0;
};

// Parses a _Send/_Recv timeline label as above. NotFound for any other
// node's label; InvalidArgument for a malformed transfer label. Labels
// without "; src_tensor=" or "; bytes=" (older runs) parse with those
// empty / 0.
absl::StatusOr<TransferRecord> ParseTransferLabel(const std::string& label);

struct MeasuredReportOptions {
  std::string ps_job = "ps";
  std::set<std::string> ps_ops = DefaultPsOps();
  // Group by device instead of task. When false and every device of the
  // step is in one task (a multi-device local run), devices are used
  // anyway: the only traffic there is between devices.
  bool by_device = false;
};

// The measured report of one step (see above), or the per-step average of
// several merged steps (a device listed N times in step_stats: N steps).
// Transfers are counted once per (tensor_name, send_device, recv_device):
// by the _Recv's bytes, or the _Send's when the stats lack the _Recv. Transfers inside one task
// (CPU to GPU) are not edges. Control edges appear with tensor "^node"
// and their 4-byte dummy. InvalidArgument when the metadata has no step
// stats.
absl::StatusOr<PlacementReport> MeasuredTrafficReport(const tensorflow::RunMetadata& metadata,
                                                      const MeasuredReportOptions& options = {});

// The task of a full or partial device name: "/job:ps/task:1"
// ("/job:ps/task:0" when the task is unset, "/job:localhost/task:0" when
// the job is unset).
std::string TaskOfDevice(const std::string& device);

// The JSON form above, on one line per task/edge for readable diffs.
std::string ReportToJson(const PlacementReport& report);

// "[100000,64]", "[?,10]" → as JSON arrays with -1 for unknown dims.
std::string ShapeToJson(const PartialShape& shape);

}  // namespace placement
}  // namespace graphrun

#endif  // GRAPHRUN_PLACEMENT_PLACEMENT_REPORT_H_
