#include "distributed/graph_mgr.h"

#include "absl/strings/str_cat.h"
#include "distributed/collective_remote.h"
#include "graph/graph.h"
#include "graph/node_def_util.h"
#include "graph/status.h"
#include "placement/partition.h"

namespace graphrun {
namespace distributed {

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
  placement::PartitionOptions popts;
  popts.get_incarnation = [dm](const std::string& name) -> uint64_t {
    auto d = dm->Lookup(name);
    return d.ok() ? (*d)->incarnation() : placement::kDefaultIncarnation;
  };
  GR_ASSIGN_OR_RETURN(auto partitions, placement::Partition(*graph, popts));
  auto item = std::make_shared<Item>();
  for (auto& [device_name, pdef] : partitions) {
    GR_ASSIGN_OR_RETURN(Device * device, dm->Lookup(device_name));
    GR_ASSIGN_OR_RETURN(std::unique_ptr<Graph> pg, GraphFromGraphDef(pdef, *env_->op_registry, io));
    ExecutorParams ep{device, env_->kernel_registry};
    GR_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::Create(ep, std::move(pg)));
    item->units.push_back({device, std::move(ex)});
  }
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
  std::shared_ptr<Item> item;
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
  struct Barrier {
    std::mutex mu;
    int pending;
    absl::Status status;
    std::vector<std::unique_ptr<StepStatsCollector>> collectors;
    StatusCallback done;
    std::shared_ptr<Item> item;  // keeps the executors alive
  };
  auto barrier = std::make_shared<Barrier>();
  barrier->pending = static_cast<int>(item->units.size());
  barrier->done = std::move(done);
  barrier->item = item;
  if (barrier->pending == 0) {
    barrier->done(absl::OkStatus());
    return;
  }
  ThreadPool* pool = env_->inter_op_pool;
  Executor::Args args;
  args.step_id = p.step_id;
  args.rendezvous = p.rendezvous;
  args.call_frame = p.call_frame;
  args.cancellation_manager = p.cancellation;
  args.runner = [pool](std::function<void()> fn) { pool->Schedule(std::move(fn)); };
  args.collective_executor = env_->collectives;
  if (p.stats != nullptr) {
    for (const Unit& u : item->units) {
      auto* ds = p.stats->add_dev_stats();
      ds->set_device(u.device->name());
      barrier->collectors.push_back(std::make_unique<StepStatsCollector>(ds));
    }
  }
  Rendezvous* rendezvous = p.rendezvous;
  CancellationManager* cm = p.cancellation;
  const size_t n = item->units.size();
  for (size_t k = 0; k < n; ++k) {
    Executor::Args a = args;
    if (p.stats != nullptr) a.stats_collector = barrier->collectors[k].get();
    Executor* ex = item->units[k].executor.get();
    auto start = [barrier, rendezvous, cm, a, ex] {
      ex->RunAsync(a, [barrier, rendezvous, cm](const absl::Status& s) {
        if (!s.ok()) {
          rendezvous->StartAbort(s);
          cm->StartCancel();
        }
        StatusCallback fire;
        absl::Status result;
        {
          std::lock_guard<std::mutex> l(barrier->mu);
          if (!s.ok() && barrier->status.ok()) barrier->status = s;
          if (--barrier->pending == 0) {
            fire = std::move(barrier->done);
            result = barrier->status;
          }
        }
        if (fire) fire(result);
      });
    };
    if (k + 1 < n) {
      pool->Schedule(start);
    } else {
      start();
    }
  }
}

}  // namespace distributed
}  // namespace graphrun
