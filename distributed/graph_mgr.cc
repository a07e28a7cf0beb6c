#include "distributed/graph_mgr.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "distributed/collective_remote.h"
#include "graph/graph.h"
#include "graph/node_def_util.h"
#include "graph/status.h"

namespace graphrun {
namespace distributed {

namespace {

// Call frames within the task's limits (--max_function_depth,
// --max_graph_nodes).
FunctionRuntimeOptions CallFrameOptions(const ServingLimits& limits) {
  FunctionRuntimeOptions o;
  o.max_depth = static_cast<int>(std::min<int64_t>(limits.max_function_depth, 1 << 20));
  o.max_nodes = limits.max_graph_nodes;
  return o;
}

}  // namespace

absl::StatusOr<std::string> GraphMgr::Register(const tensorflow::GraphDef& def) {
  ImportOptions io;
  io.infer_shapes = false;
  GR_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, GraphFromGraphDef(def, *env_->op_registry, io));
  DeviceMgr* dm = env_->device_mgr;
  for (Node* n : graph->nodes()) {
    const std::string& d = n->requested_device();
    auto device = dm->Lookup(d);
    if (!device.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("node '", n->name(), "' is placed on '", d,
                                                     "', which is not a device of task ",
                                                     env_->task));
    }
    if (n->op() == "_Send") {
      int64_t inc = 0;
      GR_RETURN_IF_ERROR(GetAttr(NodeAttrs(n->def()), "send_device_incarnation", &inc));
      if (static_cast<uint64_t>(inc) != (*device)->incarnation()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "node '", n->name(), "': the graph was planned for incarnation ",
            absl::Hex(static_cast<uint64_t>(inc)), " of ", d, " but task ", env_->task, " is at ",
            absl::Hex((*device)->incarnation()), " (the task restarted); re-create the session"));
      }
    }
    n->set_assigned_device(d);
  }
  GR_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceExecutors> item,
                      DeviceExecutors::Build(*graph, dm, *env_->op_registry, *env_->kernel_registry,
                                             CallFrameOptions(env_->limits)));
  std::string handle = absl::StrCat("g", next_id_.fetch_add(1));
  std::lock_guard<std::mutex> l(mu_);
  items_[handle] = std::move(item);
  return handle;
}

absl::Status GraphMgr::Deregister(const std::string& handle) {
  std::lock_guard<std::mutex> l(mu_);
  if (items_.erase(handle) == 0) {
    return absl::NotFoundError(
        absl::StrCat("task ", env_->task, ": no registered graph '", handle, "'"));
  }
  return absl::OkStatus();
}

void GraphMgr::DeregisterAll() {
  std::lock_guard<std::mutex> l(mu_);
  items_.clear();
}

void GraphMgr::ExecuteAsync(const std::string& handle, const StepParams& p, StatusCallback done) {
  std::shared_ptr<const DeviceExecutors> item;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = items_.find(handle);
    if (it != items_.end()) item = it->second;
  }
  if (item == nullptr) {
    done(absl::NotFoundError(absl::StrCat("task ", env_->task, ": no registered graph '", handle,
                                          "' (the task may have restarted)")));
    return;
  }
  DeviceExecutors::StepArgs args;
  args.step_id = p.step_id;
  args.rendezvous = p.rendezvous;
  args.call_frame = p.call_frame;
  args.cancellation = p.cancellation;
  args.inter_op_pool = env_->inter_op_pool;
  args.collectives = env_->collectives;
  args.stats = p.stats;
  DeviceExecutors::RunAsync(std::move(item), args, std::move(done));
}

}  // namespace distributed
}  // namespace graphrun
