#include "placement/placement_report.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "graph/graph.h"
#include "graph/ops/all_ops.h"
#include "graph/status.h"
#include "placement/device_spec.h"
#include "placement/partition.h"
#include "placement/placer.h"

namespace graphrun {
namespace placement {
namespace {

// Byte counts from a graph or a RunMetadata file may be absurd: sums stop
// at INT64_MAX instead of wrapping to negative numbers.
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The output shape of `n:k`, looking through Identity and resource reads
// when inference left it unknown.
PartialShape OutputShape(const Node& n, int k, int depth = 0) {
  PartialShape s = n.output_shape(k);
  if (s.known_rank() || depth > 8) return s;
  const Edge* in = n.num_inputs() > 0 ? n.input_edge(0) : nullptr;
  if (in == nullptr) return s;
  if (n.op() == "ReadVariableOp" && in->src->op() == "VarHandleOp") {
    return GetVariableInfo(in->src->def()).shape;
  }
  if (n.op() == "Identity" || n.op() == "Snapshot" || n.op() == "StopGradient") {
    return OutputShape(*in->src, in->src_output, depth + 1);
  }
  return s;
}

int64_t Bytes(const PartialShape& s, DataType dtype, int64_t batch_size) {
  if (!s.known_rank()) return -1;
  int64_t n = DataTypeSize(BaseType(dtype));
  for (int64_t d : s.dims()) {
    if (__builtin_mul_overflow(n, d < 0 ? batch_size : d, &n)) return -1;  // no such tensor
  }
  return n;
}

// Ids of the nodes a step over `fetches` (or, when empty, over every sink
// but dangling pure reads) runs.
absl::StatusOr<std::vector<bool>> NeededNodes(const Graph& graph,
                                              const std::vector<std::string>& fetches) {
  std::vector<bool> needed(graph.num_node_ids(), false);
  std::vector<const Node*> stack;
  if (!fetches.empty()) {
    for (const std::string& f : fetches) {
      GR_ASSIGN_OR_RETURN(TensorId id, ParseTensorName(f));
      const Node* n = graph.FindNode(id.node);
      if (n == nullptr) {
        return absl::NotFoundError(absl::StrCat("fetch '", f, "': no such node"));
      }
      // A bare name of a node without outputs is a target (a train op).
      const bool target = n->num_outputs() == 0 && f.find(':') == std::string::npos;
      if (!id.IsControl() && !target && id.index >= n->num_outputs()) {
        return absl::InvalidArgumentError(absl::StrCat("fetch '", f, "': node '", n->name(),
                                                       "' has ", n->num_outputs(), " output",
                                                       n->num_outputs() == 1 ? "" : "s"));
      }
      stack.push_back(n);
    }
  } else {
    for (const Node* n : graph.nodes()) {
      const std::string& op = n->op();
      const bool pure_read =
          op == "Identity" || op == "ConcatV2" || op == "ReadVariableOp" || op == "Snapshot";
      if (n->out_edges().empty() && !pure_read) stack.push_back(n);
    }
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (needed[n->id()]) continue;
    needed[n->id()] = true;
    for (const Edge* e : n->in_edges()) stack.push_back(e->src);
  }
  return needed;
}

// The name part of an input string ("a:1", "^a" -> "a").
absl::string_view InputNode(absl::string_view input) {
  if (absl::StartsWith(input, "^")) input.remove_prefix(1);
  return input.substr(0, input.rfind(':'));
}

bool UpdatesInputZero(const std::string& op) {
  // Scatters into a new tensor, not into input 0.
  if (op == "ScatterNd" || op == "ScatterNdNonAliasingAdd") return false;
  static const char* const kPrefixes[] = {
      "Apply",  "ResourceApply", "SparseApply",    "ResourceSparseApply",
      "Assign", "Scatter",       "ResourceScatter"};
  for (const char* p : kPrefixes) {
    if (absl::StartsWith(op, p)) return true;
  }
  return false;
}

// Traces measured transfers to the variables they carry, over the step's
// partition graphs: nodes are keyed by location (task or device, as the
// report groups them) and name, so that the same names in the graphs of
// several workers (between-graph replication) stay apart.
class VariableTracer {
 public:
  VariableTracer(const tensorflow::RunMetadata& metadata, const std::set<std::string>& ps_ops,
                 const std::function<std::string(const std::string&)>& loc_of)
      : ps_ops_(ps_ops) {
    for (const tensorflow::GraphDef& g : metadata.partition_graphs()) {
      for (const tensorflow::NodeDef& n : g.node()) {
        const std::string loc = loc_of(n.device());
        if (!nodes_.try_emplace({loc, n.name()}, &n).second) continue;
        for (int i = 0; i < n.input_size(); ++i) {
          if (absl::StartsWith(n.input(i), "^")) continue;
          consumers_[{loc, std::string(InputNode(n.input(i)))}].push_back({&n, i});
        }
        if (n.op() == "_Recv") {
          auto it = n.attr().find("tensor_name");
          if (it != n.attr().end()) recvs_[{loc, it->second.s()}] = &n;
        }
      }
    }
  }

  // The variable (its node name) whose value `node` in `loc` reads, "" when
  // none: `node` itself, or the source of a chain of reads.
  std::string ReadOf(const std::string& loc, absl::string_view node) const {
    static const std::set<std::string>* const kReads =
        new std::set<std::string>{"Identity", "Snapshot",       "ReadVariableOp", "Gather",
                                  "GatherV2", "ResourceGather", "Enter",          "RefIdentity"};
    for (int hops = 0; hops < 32; ++hops) {
      auto it = nodes_.find({loc, std::string(node)});
      if (it == nodes_.end()) return "";
      const tensorflow::NodeDef& n = *it->second;
      if (ps_ops_.count(n.op())) return n.name();
      if (!kReads->count(n.op()) || n.input_size() == 0) return "";
      node = InputNode(n.input(0));
    }
    return "";
  }

  // The variable that the value received by the _Recv of `tensor_name` in
  // `loc` updates, "" when none.
  std::string UpdateOf(const std::string& loc, const std::string& tensor_name) const {
    static const std::set<std::string>* const kThrough =
        new std::set<std::string>{"Identity", "Snapshot", "IdentityN", "AddN", "Cast", "Reshape"};
    auto recv = recvs_.find({loc, tensor_name});
    if (recv == recvs_.end()) return "";
    std::vector<std::string> stack = {recv->second->name()};
    std::set<std::string> visited;
    while (!stack.empty() && visited.size() < 256) {
      const std::string name = std::move(stack.back());
      stack.pop_back();
      if (!visited.insert(name).second) continue;
      auto cs = consumers_.find({loc, name});
      if (cs == consumers_.end()) continue;
      for (const auto& [c, index] : cs->second) {
        if (index >= 1 && UpdatesInputZero(c->op())) {
          std::string var = ReadOf(loc, InputNode(c->input(0)));
          if (!var.empty()) return var;
        } else if (kThrough->count(c->op())) {
          stack.push_back(c->name());
        }
      }
    }
    return "";
  }

 private:
  const std::set<std::string>& ps_ops_;
  std::map<std::pair<std::string, std::string>, const tensorflow::NodeDef*> nodes_;
  std::map<std::pair<std::string, std::string>,
           std::vector<std::pair<const tensorflow::NodeDef*, int>>>
      consumers_;
  std::map<std::pair<std::string, std::string>, const tensorflow::NodeDef*> recvs_;
};

// report.pairs from report.edges.
void SumTaskPairs(PlacementReport* report) {
  std::map<std::pair<std::string, std::string>, TaskPairReport> pairs;
  for (const EdgeReport& e : report->edges) {
    TaskPairReport& p = pairs[{e.src_task, e.dst_task}];
    p.src_task = e.src_task;
    p.dst_task = e.dst_task;
    ++p.num_edges;
    if (p.bytes_per_step >= 0) {
      p.bytes_per_step = e.bytes_per_step < 0 ? -1 : SatAdd(p.bytes_per_step, e.bytes_per_step);
    }
  }
  report->pairs.clear();
  for (auto& [key, p] : pairs) report->pairs.push_back(std::move(p));
}

}  // namespace

std::string TaskOfDevice(const std::string& device) {
  auto spec = DeviceSpec::Parse(device);
  if (!spec.ok()) return device;
  return absl::StrCat("/job:", spec->job.value_or("localhost"), "/task:", spec->task.value_or(0));
}

absl::StatusOr<PlacementReport> BuildPlacementReport(const tensorflow::GraphDef& placed,
                                                     const ReportOptions& options) {
  const OpRegistry& registry = options.op_registry ? *options.op_registry : DefaultOpRegistry();
  auto imported = GraphFromGraphDef(placed, registry);
  if (!imported.ok()) {
    ImportOptions no_shapes;
    no_shapes.infer_shapes = false;
    imported = GraphFromGraphDef(placed, registry, no_shapes);
  }
  if (!imported.ok()) return imported.status();
  Graph& graph = **imported;

  // One CPU device per task: the listed PS and worker tasks, then any other
  // job/task a node asks for.
  std::vector<std::pair<std::string, int>> tasks;
  for (int i = 0; i < options.num_ps_tasks; ++i) tasks.push_back({options.ps_job, i});
  for (int i = 0; i < std::max(options.num_worker_tasks, 1); ++i) {
    tasks.push_back({options.worker_job, i});
  }
  for (const Node* n : graph.nodes()) {
    auto spec = DeviceSpec::Parse(n->requested_device());
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", n->name(), "': ", spec.status().message()));
    }
    if (!spec->job) continue;
    std::pair<std::string, int> t{*spec->job, spec->task.value_or(0)};
    if (std::find(tasks.begin(), tasks.end(), t) == tasks.end()) tasks.push_back(t);
  }
  std::vector<DeviceInfo> devices;
  for (const auto& [job, task] : tasks) {
    devices.push_back({FullDeviceName(job, 0, task, "CPU", 0), "CPU"});
  }
  PlacerOptions placer;
  placer.allow_soft_placement = true;
  // Nodes without a device go to the first worker, as a session would.
  placer.default_device = absl::StrCat("/job:", options.worker_job, "/task:0");
  GR_RETURN_IF_ERROR(Place(&graph, devices, placer));
  PartitionOptions popts;
  popts.node_to_loc = [](const Node& n) { return TaskOfDevice(n.assigned_device()); };
  GR_ASSIGN_OR_RETURN(auto partitions, Partition(graph, popts));

  GR_ASSIGN_OR_RETURN(std::vector<bool> needed, NeededNodes(graph, options.fetches));
  PlacementReport report;
  report.strategy = options.strategy;
  report.batch_size = options.batch_size;
  std::map<std::string, int> task_index;
  for (const auto& [job, task] : tasks) {
    TaskReport t;
    t.task = absl::StrCat("/job:", job, "/task:", task);
    t.is_ps = job == options.ps_job;
    task_index[t.task] = static_cast<int>(report.tasks.size());
    report.tasks.push_back(std::move(t));
  }
  for (const Node* n : graph.nodes()) {
    auto it = task_index.find(TaskOfDevice(n->assigned_device()));
    if (it == task_index.end()) continue;  // cannot happen: devices are the tasks
    TaskReport& t = report.tasks[it->second];
    t.nodes.push_back(n->name());
    if (options.ps_ops.count(n->op())) {
      const VariableInfo info = GetVariableInfo(n->def());
      t.variables.push_back({n->name(), info.shape, info.dtype, info.bytes});
      if (info.bytes > 0) t.bytes = SatAdd(t.bytes, info.bytes);
    }
  }
  // The consumers of each (tensor, destination task) pair, to skip edges
  // no needed node reads.
  std::set<std::pair<std::string, std::string>> used;
  for (const Node* n : graph.nodes()) {
    if (!needed[n->id()]) continue;
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) continue;
      used.insert(
          {absl::StrCat(e->src->name(), ":", e->src_output), TaskOfDevice(n->assigned_device())});
    }
  }
  for (const auto& [loc, def] : partitions) {
    for (const tensorflow::NodeDef& send : def.node()) {
      if (send.op() != "_Send" || send.input_size() == 0) continue;
      auto id = ParseTensorName(send.input(0));
      if (!id.ok()) continue;
      const Node* src = graph.FindNode(id->node);
      if (src == nullptr) continue;  // a control edge's dummy Const
      std::string recv_device;
      (void)GetAttr(send, "recv_device", &recv_device);
      EdgeReport e;
      e.src_task = loc;
      e.dst_task = TaskOfDevice(recv_device);
      e.tensor = absl::StrCat(id->node, ":", id->index);
      if (!used.count({e.tensor, e.dst_task})) continue;
      e.dtype = BaseType(src->output_type(id->index));
      e.shape = OutputShape(*src, id->index);
      e.bytes_per_step = Bytes(e.shape, e.dtype, options.batch_size);
      if (e.bytes_per_step > 0) {
        auto s = task_index.find(e.src_task), d = task_index.find(e.dst_task);
        if (s != task_index.end()) {
          auto& sent = report.tasks[s->second].send_bytes_per_step;
          sent = SatAdd(sent, e.bytes_per_step);
        }
        if (d != task_index.end()) {
          auto& received = report.tasks[d->second].recv_bytes_per_step;
          received = SatAdd(received, e.bytes_per_step);
        }
      }
      report.edges.push_back(std::move(e));
    }
  }
  std::sort(report.edges.begin(), report.edges.end(), [](const EdgeReport& a, const EdgeReport& b) {
    return std::tie(a.src_task, a.dst_task, a.tensor) < std::tie(b.src_task, b.dst_task, b.tensor);
  });
  SumTaskPairs(&report);
  double total = 0, max_bytes = 0;
  int num_ps = 0;
  for (const TaskReport& t : report.tasks) {
    if (!t.is_ps) continue;
    ++num_ps;
    total += t.bytes;
    max_bytes = std::max<double>(max_bytes, t.bytes);
  }
  report.imbalance = num_ps > 0 && total > 0 ? max_bytes / (total / num_ps) : 1.0;
  return report;
}

absl::StatusOr<TransferRecord> ParseTransferLabel(const std::string& label) {
  const size_t eq = label.find(" = ");
  if (eq == std::string::npos) return absl::NotFoundError("not a node label");
  const size_t open = label.find('(', eq);
  if (open == std::string::npos) return absl::NotFoundError("not a node label");
  const std::string op = label.substr(eq + 3, open - eq - 3);
  TransferRecord r;
  if (op == "_Recv" || op == "_HostRecv") {
    r.is_recv = true;
  } else if (op != "_Send" && op != "_HostSend") {
    return absl::NotFoundError(absl::StrCat("not a transfer: ", op));
  }
  const size_t close = label.rfind(')');
  if (close == std::string::npos || close < open) {
    return absl::InvalidArgumentError(absl::StrCat("transfer label '", label, "': no ')'"));
  }
  std::vector<std::string> parts = absl::StrSplit(label.substr(open + 1, close - open - 1), "; ");
  const std::string& route = parts[0];
  const size_t to = route.rfind(" to ");
  const size_t from = to == std::string::npos ? to : route.rfind(" from ", to);
  if (from == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("transfer label '", label, "': expected 'TENSOR from DEVICE to DEVICE'"));
  }
  r.tensor_name = route.substr(0, from);
  r.send_device = route.substr(from + 6, to - from - 6);
  r.recv_device = route.substr(to + 4);
  for (size_t i = 1; i < parts.size(); ++i) {
    if (absl::StartsWith(parts[i], "src_tensor=")) {
      r.src_tensor = parts[i].substr(11);
    } else if (absl::StartsWith(parts[i], "bytes=")) {
      if (!absl::SimpleAtoi(parts[i].substr(6), &r.bytes) || r.bytes < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("transfer label '", label, "': bad byte count"));
      }
    }
  }
  return r;
}

absl::StatusOr<PlacementReport> MeasuredTrafficReport(const tensorflow::RunMetadata& metadata,
                                                      const MeasuredReportOptions& options) {
  const tensorflow::StepStats& stats = metadata.step_stats();
  if (stats.dev_stats_size() == 0) {
    return absl::InvalidArgumentError(
        "RunMetadata has no step stats; run the step with trace_level FULL_TRACE "
        "(graphrun run --run_metadata=FILE does)");
  }
  // Transfers by rendezvous identity; recv and send records apart.
  struct Seen {
    TransferRecord record;
    DataType dtype = DT_INVALID;
    PartialShape shape;
    int64_t recv_bytes = 0, send_bytes = 0;
    bool has_recv = false;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Seen> transfers;
  std::set<std::string> devices;
  // Stats of several steps merged (`graphrun train --trace_dir`) list a
  // device once per step: the report is per step, averaged over them.
  std::map<std::string, int> lists_of_device;
  int steps = 1;
  for (const auto& dev : stats.dev_stats()) {
    steps = std::max(steps, ++lists_of_device[dev.device()]);
  }
  for (const auto& dev : stats.dev_stats()) {
    devices.insert(dev.device());
    for (const auto& ns : dev.node_stats()) {
      auto rec = ParseTransferLabel(ns.timeline_label());
      if (absl::IsNotFound(rec.status())) continue;
      if (!rec.ok()) return rec.status();
      devices.insert(rec->send_device);
      devices.insert(rec->recv_device);
      Seen& seen = transfers[{rec->tensor_name, rec->send_device, rec->recv_device}];
      if (rec->is_recv) {
        seen.has_recv = true;
        seen.recv_bytes = SatAdd(seen.recv_bytes, rec->bytes);
        for (const auto& out : ns.output()) {
          if (out.slot() != 0) continue;
          const auto& desc = out.tensor_description();
          seen.dtype = desc.dtype();
          if (desc.has_shape()) seen.shape = PartialShape::FromProto(desc.shape());
          if (rec->bytes == 0) {
            seen.recv_bytes =
                SatAdd(seen.recv_bytes, desc.allocation_description().requested_bytes());
          }
        }
      } else {
        seen.send_bytes = SatAdd(seen.send_bytes, rec->bytes);
      }
      if (seen.record.tensor_name.empty() || rec->is_recv) seen.record = *std::move(rec);
    }
  }
  std::set<std::string> task_set;
  for (const std::string& d : devices) task_set.insert(TaskOfDevice(d));
  const bool by_device = options.by_device || task_set.size() == 1;
  auto loc_of = [&](const std::string& device) {
    return by_device ? device : TaskOfDevice(device);
  };

  PlacementReport report;
  report.strategy = "measured";
  report.measured = true;
  report.measured_steps = steps;
  report.batch_size = 0;
  // Locations: PS job first, then the others, each by job name and task
  // number ("task:10" after "task:9").
  struct LocKey {
    bool not_ps;
    std::string job;
    int task;
    std::string name;
    bool operator<(const LocKey& o) const {
      return std::tie(not_ps, job, task, name) < std::tie(o.not_ps, o.job, o.task, o.name);
    }
  };
  std::set<LocKey> locs;
  for (const std::string& d : devices) {
    auto spec = DeviceSpec::Parse(d);
    const std::string job = spec.ok() ? spec->job.value_or("localhost") : d;
    locs.insert({job != options.ps_job, job, spec.ok() ? spec->task.value_or(0) : 0, loc_of(d)});
  }
  std::map<std::string, int> index;
  for (const LocKey& k : locs) {
    if (index.count(k.name)) continue;
    index[k.name] = static_cast<int>(report.tasks.size());
    TaskReport t;
    t.task = k.name;
    t.is_ps = !k.not_ps;
    report.tasks.push_back(std::move(t));
  }
  // Nodes and variables from the partition graphs (per task or device;
  // a node listed by several partition graphs is counted once).
  std::set<std::pair<int, std::string>> seen_nodes;
  for (const tensorflow::GraphDef& g : metadata.partition_graphs()) {
    for (const tensorflow::NodeDef& n : g.node()) {
      auto it = index.find(loc_of(n.device()));
      if (it == index.end()) continue;
      if (!seen_nodes.insert({it->second, n.name()}).second) continue;
      TaskReport& t = report.tasks[it->second];
      t.nodes.push_back(n.name());
      if (options.ps_ops.count(n.op())) {
        const VariableInfo info = GetVariableInfo(n);
        t.variables.push_back({n.name(), info.shape, info.dtype, info.bytes});
        if (info.bytes > 0) t.bytes = SatAdd(t.bytes, info.bytes);
      }
    }
  }
  // Edges: one per (source, destination, original tensor), bytes summed,
  // each traced to the variable it reads or updates.
  const VariableTracer tracer(metadata, options.ps_ops, loc_of);
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> var_traffic;
  std::map<std::tuple<std::string, std::string, std::string>, EdgeReport> edges;
  for (auto& [key, seen] : transfers) {
    const std::string src = loc_of(seen.record.send_device);
    const std::string dst = loc_of(seen.record.recv_device);
    if (src == dst) continue;
    const std::string tensor =
        seen.record.src_tensor.empty() ? seen.record.tensor_name : seen.record.src_tensor;
    const int64_t bytes = ((seen.has_recv ? seen.recv_bytes : seen.send_bytes) + steps / 2) / steps;
    auto [it, inserted] = edges.try_emplace({src, dst, tensor});
    EdgeReport& e = it->second;
    if (inserted) {
      e.src_task = src;
      e.dst_task = dst;
      e.tensor = tensor;
      e.dtype = seen.dtype;
      e.shape = seen.shape;
      e.bytes_per_step = 0;
    }
    e.bytes_per_step = SatAdd(e.bytes_per_step, bytes);
    auto& sent = report.tasks[index[src]].send_bytes_per_step;
    sent = SatAdd(sent, bytes);
    auto& received = report.tasks[index[dst]].recv_bytes_per_step;
    received = SatAdd(received, bytes);
    if (absl::StartsWith(tensor, "^")) continue;
    if (std::string var = tracer.ReadOf(src, InputNode(tensor)); !var.empty()) {
      var_traffic[{src, var}].first += bytes;
      e.variable = var;
    } else if (var = tracer.UpdateOf(dst, seen.record.tensor_name); !var.empty()) {
      var_traffic[{dst, var}].second += bytes;
      e.variable = var;
    }
  }
  for (auto& [key, e] : edges) report.edges.push_back(std::move(e));
  for (TaskReport& t : report.tasks) {
    for (VariableReport& v : t.variables) {
      auto it = var_traffic.find({t.task, v.name});
      v.read_bytes_per_step = it == var_traffic.end() ? 0 : it->second.first;
      v.update_bytes_per_step = it == var_traffic.end() ? 0 : it->second.second;
    }
  }
  SumTaskPairs(&report);
  double total = 0, max_bytes = 0;
  int num_ps = 0;
  for (const TaskReport& t : report.tasks) {
    if (!t.is_ps) continue;
    ++num_ps;
    total += t.bytes;
    max_bytes = std::max<double>(max_bytes, t.bytes);
  }
  report.imbalance = num_ps > 0 && total > 0 ? max_bytes / (total / num_ps) : 1.0;
  return report;
}

std::string ShapeToJson(const PartialShape& shape) {
  if (!shape.known_rank()) return "null";
  return absl::StrCat("[", absl::StrJoin(shape.dims(), ", "), "]");
}

std::string ReportToJson(const PlacementReport& report) {
  std::string out = absl::StrCat("{\"strategy\": ", Quote(report.strategy),
                                 ", \"measured\": ", report.measured ? "true" : "false",
                                 ", \"batch_size\": ", report.batch_size, ",\n\"tasks\": [");
  for (size_t i = 0; i < report.tasks.size(); ++i) {
    const TaskReport& t = report.tasks[i];
    absl::StrAppend(&out, i ? ",\n" : "\n", "{\"task\": ", Quote(t.task), ", \"bytes\": ", t.bytes,
                    ", \"num_nodes\": ", t.nodes.size(),
                    ", \"send_bytes_per_step\": ", t.send_bytes_per_step,
                    ", \"recv_bytes_per_step\": ", t.recv_bytes_per_step, ", \"variables\": [");
    for (size_t j = 0; j < t.variables.size(); ++j) {
      const VariableReport& v = t.variables[j];
      absl::StrAppend(&out, j ? ", " : "", "{\"name\": ", Quote(v.name),
                      ", \"shape\": ", ShapeToJson(v.shape),
                      ", \"dtype\": ", Quote(DataTypeEnumName(v.dtype)), ", \"bytes\": ", v.bytes);
      if (report.measured) {
        absl::StrAppend(&out, ", \"read_bytes_per_step\": ", v.read_bytes_per_step,
                        ", \"update_bytes_per_step\": ", v.update_bytes_per_step);
      }
      out += "}";
    }
    absl::StrAppend(&out, "], \"nodes\": [");
    for (size_t j = 0; j < t.nodes.size(); ++j) {
      absl::StrAppend(&out, j ? ", " : "", Quote(t.nodes[j]));
    }
    out += "]}";
  }
  absl::StrAppend(&out, "],\n\"imbalance\": ", absl::StrFormat("%.6g", report.imbalance),
                  ",\n\"edges\": [");
  for (size_t i = 0; i < report.edges.size(); ++i) {
    const EdgeReport& e = report.edges[i];
    absl::StrAppend(&out, i ? ",\n" : "\n", "{\"src_task\": ", Quote(e.src_task),
                    ", \"dst_task\": ", Quote(e.dst_task), ", \"tensor\": ", Quote(e.tensor),
                    ", \"bytes_per_step\": ", e.bytes_per_step);
    if (report.measured) absl::StrAppend(&out, ", \"variable\": ", Quote(e.variable));
    out += "}";
  }
  out += "],\n\"pairs\": [";
  for (size_t i = 0; i < report.pairs.size(); ++i) {
    const TaskPairReport& p = report.pairs[i];
    absl::StrAppend(&out, i ? ",\n" : "\n", "{\"src_task\": ", Quote(p.src_task),
                    ", \"dst_task\": ", Quote(p.dst_task),
                    ", \"bytes_per_step\": ", p.bytes_per_step, ", \"edges\": ", p.num_edges, "}");
  }
  out += "]}\n";
  return out;
}

}  // namespace placement
}  // namespace graphrun
