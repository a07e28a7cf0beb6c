#include "tools/trace.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "placement/device_spec.h"
#include "placement/placement_report.h"
#include "util/json.h"

namespace graphrun {
namespace tools {
namespace {

// Microseconds from nanoseconds: "12" or "12.345" (trailing zeros dropped).
std::string MicrosText(int64_t nanos) {
  std::string sign = nanos < 0 ? "-" : "";
  uint64_t n = nanos < 0 ? -static_cast<uint64_t>(nanos) : nanos;
  std::string out = absl::StrCat(sign, n / 1000);
  uint64_t frac = n % 1000;
  if (frac == 0) return out;
  std::string digits = absl::StrCat(1000 + frac).substr(1);
  while (digits.back() == '0') digits.pop_back();
  return absl::StrCat(out, ".", digits);
}

// "Op" from TensorFlow's timeline label "name = Op(in1, in2)".
std::string OpFromLabel(const std::string& label) {
  size_t eq = label.find(" = ");
  if (eq == std::string::npos) return "";
  size_t start = eq + 3;
  size_t paren = label.find('(', start);
  return label.substr(start, paren == std::string::npos ? std::string::npos : paren - start);
}

std::string OutputText(const tensorflow::NodeOutput& out) {
  const auto& desc = out.tensor_description();
  std::string shape =
      desc.has_shape() ? PartialShape::FromProto(desc.shape()).DebugString() : "<unknown>";
  return absl::StrCat(DataTypeString(desc.dtype()), shape);
}

// "CPU:0" from a full device name; the name itself when it does not parse.
std::string ShortDevice(const std::string& device) {
  auto spec = placement::DeviceSpec::Parse(device);
  if (!spec.ok() || !spec->type) return device;
  return spec->id ? absl::StrCat(*spec->type, ":", *spec->id) : *spec->type;
}

}  // namespace

std::string StepStatsToChromeTrace(const tensorflow::StepStats& stats,
                                   const tensorflow::GraphDef* graph) {
  absl::flat_hash_map<std::string, std::string> op_of;
  if (graph != nullptr) {
    for (const auto& n : graph->node()) op_of.emplace(n.name(), n.op());
  }
  std::vector<std::string> events;
  // Transfers, for the flow arrows from each _Send to its _Recv.
  struct Transfer {
    int pid, tid;
    int64_t start, dur;
  };
  std::map<std::string, std::vector<Transfer>> sends, recvs;  // key -> in StepStats order
  std::map<std::string, int> pid_of;                          // task -> pid
  std::vector<int> next_tid;                                  // per pid
  std::map<std::pair<std::string, uint32_t>, int> tid_of;     // (device, thread) -> tid
  for (const auto& dev : stats.dev_stats()) {
    const std::string task = placement::TaskOfDevice(dev.device());
    auto [it, inserted] = pid_of.emplace(task, static_cast<int>(pid_of.size()));
    const int pid = it->second;
    if (inserted) {
      next_tid.push_back(0);
      events.push_back(absl::StrCat("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": ", pid,
                                    ", \"args\": {\"name\": ", JsonQuote(task), "}}"));
    }
    // This device's threads, by id: a tid each, named "CPU:0 inter_op_1"
    // (or "CPU:0 thread 7" without a thread name).
    std::set<uint32_t> threads;
    for (const auto& [id, name] : dev.thread_names()) threads.insert(id);
    for (const auto& ns : dev.node_stats()) threads.insert(ns.thread_id());
    const std::string short_device = ShortDevice(dev.device());
    for (uint32_t id : threads) {
      auto [t, new_thread] = tid_of.emplace(std::make_pair(dev.device(), id), next_tid[pid]);
      if (!new_thread) continue;
      ++next_tid[pid];
      auto named = dev.thread_names().find(id);
      const std::string name =
          named != dev.thread_names().end() ? named->second : absl::StrCat("thread ", id);
      events.push_back(absl::StrCat(
          "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": ", pid, ", \"tid\": ", t->second,
          ", \"args\": {\"name\": ", JsonQuote(absl::StrCat(short_device, " ", name)), "}}"));
    }
    for (const auto& ns : dev.node_stats()) {
      const bool nanos = ns.all_start_nanos() != 0 || ns.all_end_rel_nanos() != 0;
      const int64_t start = nanos ? ns.all_start_nanos() : ns.all_start_micros() * 1000;
      const int64_t dur = nanos ? ns.all_end_rel_nanos() : ns.all_end_rel_micros() * 1000;
      std::string op = OpFromLabel(ns.timeline_label());
      if (op.empty()) {
        auto found = op_of.find(ns.node_name());
        if (found != op_of.end()) op = found->second;
      }
      std::vector<std::string> outputs;
      for (const auto& out : ns.output()) outputs.push_back(JsonQuote(OutputText(out)));
      const int tid = tid_of.at({dev.device(), ns.thread_id()});
      std::string transfer;
      if (op == "_Send" || op == "_Recv" || op == "_HostSend" || op == "_HostRecv") {
        transfer = absl::StrCat(", \"label\": ", JsonQuote(ns.timeline_label()));
        // "NAME = _Send(TENSOR from SEND_DEVICE to RECV_DEVICE; ...)": the
        // part in parentheses up to ';' names the transfer on both ends.
        const std::string& label = ns.timeline_label();
        const size_t open = label.find('(');
        const size_t semi = label.find(';', open);
        if (open != std::string::npos && semi != std::string::npos) {
          const std::string key = label.substr(open + 1, semi - open - 1);
          const bool send = op == "_Send" || op == "_HostSend";
          (send ? sends : recvs)[key].push_back({pid, tid, start, dur});
        }
      }
      events.push_back(absl::StrCat(
          "{\"name\": ", JsonQuote(ns.node_name()), ", \"cat\": \"Op\", \"ph\": \"X\", \"pid\": ",
          pid, ", \"tid\": ", tid, ", \"ts\": ", MicrosText(start), ", \"dur\": ", MicrosText(dur),
          ", \"args\": {\"op\": ", JsonQuote(op), ", \"device\": ", JsonQuote(dev.device()),
          transfer, ", \"outputs\": [", absl::StrJoin(outputs, ", "), "]}}"));
    }
  }
  // Flow arrows ("ph": "s" at the send, "f" binding to the receive),
  // pairing each transfer's sends and receives in time order (one per step
  // when several steps are merged).
  int flow_id = 0;
  for (auto& [key, out] : sends) {
    auto in = recvs.find(key);
    if (in == recvs.end()) continue;
    auto by_start = [](const Transfer& a, const Transfer& b) { return a.start < b.start; };
    std::stable_sort(out.begin(), out.end(), by_start);
    std::stable_sort(in->second.begin(), in->second.end(), by_start);
    for (size_t i = 0; i < out.size() && i < in->second.size(); ++i) {
      const Transfer& a = out[i];
      const Transfer& b = in->second[i];
      const std::string name = JsonQuote(key.substr(0, key.find(" from ")));
      events.push_back(absl::StrCat(
          "{\"name\": ", name, ", \"cat\": \"transfer\", \"ph\": \"s\", \"id\": ", flow_id,
          ", \"pid\": ", a.pid, ", \"tid\": ", a.tid, ", \"ts\": ", MicrosText(a.start), "}"));
      events.push_back(absl::StrCat(
          "{\"name\": ", name, ", \"cat\": \"transfer\", \"ph\": \"f\", \"bp\": \"e\", \"id\": ",
          flow_id, ", \"pid\": ", b.pid, ", \"tid\": ", b.tid,
          ", \"ts\": ", MicrosText(b.start + b.dur), "}"));
      ++flow_id;
    }
  }
  return absl::StrCat("{\"traceEvents\": [\n", absl::StrJoin(events, ",\n"), "\n]}\n");
}

}  // namespace tools
}  // namespace graphrun
