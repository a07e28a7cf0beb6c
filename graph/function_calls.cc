#include "graph/function_calls.h"

#include "absl/strings/match.h"
#include "graph/function_lowering.h"

namespace graphrun {
namespace function_calls {

using tensorflow::FunctionDef;
using tensorflow::NodeDef;

std::vector<std::string> Callees(const FunctionDef& fn) {
  std::vector<std::string> out;
  for (const NodeDef& n : fn.node_def()) {
    out.push_back(n.op());
    for (const auto& [k, v] : n.attr()) {
      if (v.has_func()) out.push_back(v.func().name());
      for (const auto& f : v.list().func()) out.push_back(f.name());
    }
  }
  return out;
}

bool NamesATask(const std::string& device) {
  for (const char* part : {"/job:", "/replica:", "/task:"}) {
    if (device.find(part) != std::string::npos) return true;
  }
  return absl::StartsWith(device, "job:");
}

bool BodyNamesATask(const FunctionDef& fn, const FunctionMap& fns,
                    absl::flat_hash_set<const FunctionDef*>* seen) {
  if (!seen->insert(&fn).second) return false;
  for (const NodeDef& n : fn.node_def()) {
    if (NamesATask(n.device())) return true;
  }
  for (const std::string& callee : Callees(fn)) {
    auto it = fns.find(callee);
    if (it != fns.end() && BodyNamesATask(*it->second, fns, seen)) return true;
  }
  return false;
}

bool StaysCallFrame(const FunctionDef& fn, const NodeDef& call, const FunctionMap& fns,
                    absl::flat_hash_map<const FunctionDef*, bool>* names_task) {
  auto no = fn.attr().find(kNoInlineAttr);
  if (no == fn.attr().end() || !no->second.b()) return false;
  auto force = call.attr().find(kInlineAttr);
  if (force != call.attr().end() && force->second.b()) return false;
  if (names_task != nullptr) {
    auto it = names_task->find(&fn);
    if (it != names_task->end()) return !it->second;
  }
  absl::flat_hash_set<const FunctionDef*> seen;
  const bool names = BodyNamesATask(fn, fns, &seen);
  if (names_task != nullptr) (*names_task)[&fn] = names;
  return !names;
}

}  // namespace function_calls
}  // namespace graphrun
