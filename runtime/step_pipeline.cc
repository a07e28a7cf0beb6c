#include "runtime/step_pipeline.h"

#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/framework/thread_pool.h"
#include "placement/device_spec.h"
#include "placement/partition.h"

namespace graphrun {

namespace {

placement::PlacerOptions PlacerOptionsFor(const std::string& client_device,
                                          const KernelRegistry& kernel_registry,
                                          const tensorflow::ConfigProto& config,
                                          const DeviceFactoryRegistry* device_factories,
                                          absl::Status* status) {
  placement::PlacerOptions popts;
  // The client's task; the device type comes from the priorities.
  absl::StatusOr<placement::DeviceSpec> client = placement::DeviceSpec::Parse(client_device);
  if (!client.ok()) {
    *status = client.status();
    return popts;
  }
  popts.default_device = client->TaskPart().ToString();
  const DeviceFactoryRegistry* factories =
      device_factories != nullptr ? device_factories : &DefaultDeviceFactoryRegistry();
  popts.device_type_priority = [factories](const std::string& type) {
    return factories->Priority(type);
  };
  popts.allow_soft_placement = config.allow_soft_placement();
  popts.log_device_placement = config.log_device_placement();
  const KernelRegistry* kr = &kernel_registry;
  popts.supports_device = [kr](const Node& n, const std::string& type) {
    return kr->HasKernel(n.def(), type);
  };
  return popts;
}

// Stateful, or takes a resource or a reference.
bool HoldsState(const Node& n) {
  if (n.IsStateful()) return true;
  for (DataType t : n.input_types()) {
    if (IsRefType(t) || BaseType(t) == DT_RESOURCE) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ClientGraph> PlaceClientGraph(
    const tensorflow::GraphDef& def, const OpRegistry& op_registry,
    const KernelRegistry& kernel_registry, const ClientGraphSpec& spec,
    const std::vector<placement::DeviceInfo>& devices, const tensorflow::ConfigProto& config,
    const DeviceFactoryRegistry* device_factories, const NodeDevices* pinned) {
  GR_ASSIGN_OR_RETURN(ClientGraph cg, BuildClientGraph(def, op_registry, spec));
  absl::Status status;
  placement::PlacerOptions popts =
      PlacerOptionsFor(spec.client_device, kernel_registry, config, device_factories, &status);
  GR_RETURN_IF_ERROR(status);
  if (pinned != nullptr && !pinned->empty()) {
    for (Node* n : cg.graph->nodes()) {
      auto it = pinned->find(n->name());
      if (it != pinned->end()) n->mutable_def()->set_device(it->second);
    }
  }
  GR_RETURN_IF_ERROR(placement::Place(cg.graph.get(), devices, popts));
  return cg;
}

NodeDevices PlaceStatefulNodes(const tensorflow::GraphDef& def, const OpRegistry& op_registry,
                               const KernelRegistry& kernel_registry,
                               const std::string& client_device,
                               const std::vector<placement::DeviceInfo>& devices,
                               const tensorflow::ConfigProto& config,
                               const DeviceFactoryRegistry* device_factories,
                               const NodeDevices* previous) {
  NodeDevices out;
  absl::Status status;
  placement::PlacerOptions popts =
      PlacerOptionsFor(client_device, kernel_registry, config, device_factories, &status);
  if (!status.ok()) return out;
  popts.log_device_placement = false;  // each run logs its own placement
  ImportOptions opts;
  opts.infer_shapes = false;
  absl::StatusOr<std::unique_ptr<Graph>> g = GraphFromGraphDef(def, op_registry, opts);
  if (!g.ok()) return out;
  bool placed = false;
  if (previous != nullptr && !previous->empty()) {
    absl::StatusOr<std::unique_ptr<Graph>> kept = GraphFromGraphDef(def, op_registry, opts);
    if (kept.ok()) {
      for (Node* n : (*kept)->nodes()) {
        auto it = previous->find(n->name());
        if (it != previous->end()) n->mutable_def()->set_device(it->second);
      }
      if (placement::Place(kept->get(), devices, popts).ok()) {
        g = std::move(kept);
        placed = true;
      }
    }
  }
  if (!placed && !placement::Place(g->get(), devices, popts).ok()) return out;
  for (Node* n : (*g)->nodes()) {
    if (HoldsState(*n)) out[n->name()] = n->assigned_device();
  }
  return out;
}

namespace {

// On an accelerator, a _Recv whose consumers all read that input in host
// memory (HostMemory args: shapes, axes) keeps what it receives on the
// host (attr _host_memory) instead of copying it into device memory.
void MarkHostMemoryRecvs(Device* device, const OpRegistry& op_registry,
                         const KernelRegistry& kernels, tensorflow::GraphDef* pdef) {
  Accelerator* acc = device->accelerator();
  auto can_hold = [acc](DataType t) { return acc->CanHold(t); };
  absl::flat_hash_set<std::string> recvs;
  for (const auto& n : pdef->node()) {
    if (n.op() == "_Recv") recvs.insert(n.name());
  }
  // Per _Recv with consumers: whether every one reads it on the host.
  absl::flat_hash_map<std::string, bool> all_host;
  for (const auto& n : pdef->node()) {
    for (int i = 0; i < n.input_size(); ++i) {
      absl::string_view in = n.input(i);
      if (absl::StartsWith(in, "^")) continue;
      in = in.substr(0, in.find(':'));
      if (!recvs.contains(in)) continue;
      const OpRegistrationData* reg = op_registry.LookUp(n.op());
      absl::StatusOr<MemoryTypes> mt =
          reg == nullptr ? absl::NotFoundError("")
                         : kernels.GetMemoryTypes(n, reg->op_def, device->device_type(), can_hold);
      const bool on_host =
          mt.ok() && i < static_cast<int>(mt->input_on_host.size()) && mt->input_on_host[i];
      auto [it, first] = all_host.try_emplace(std::string(in), on_host);
      if (!first && !on_host) it->second = false;
    }
  }
  for (auto& n : *pdef->mutable_node()) {
    auto it = all_host.find(n.name());
    if (n.op() == "_Recv" && it != all_host.end() && it->second) {
      (*n.mutable_attr())["_host_memory"].set_b(true);
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceExecutors>> DeviceExecutors::Build(
    const Graph& graph, DeviceMgr* device_mgr, const OpRegistry& op_registry,
    const KernelRegistry& kernels, const FunctionRuntimeOptions& functions) {
  placement::PartitionOptions popts;
  popts.get_incarnation = [device_mgr](const std::string& name) -> uint64_t {
    auto d = device_mgr->Lookup(name);
    return d.ok() ? (*d)->incarnation() : placement::kDefaultIncarnation;
  };
  GR_ASSIGN_OR_RETURN(auto partitions, placement::Partition(graph, popts));
  auto out = std::unique_ptr<DeviceExecutors>(new DeviceExecutors());
  ImportOptions io;
  io.infer_shapes = false;  // the whole graph's shapes were checked already
  for (auto& [device_name, pdef] : partitions) {
    GR_ASSIGN_OR_RETURN(Device * device, device_mgr->Lookup(device_name));
    if (device->accelerator() != nullptr) {
      MarkHostMemoryRecvs(device, op_registry, kernels, &pdef);
    }
    GR_ASSIGN_OR_RETURN(std::unique_ptr<Graph> pg, GraphFromGraphDef(pdef, op_registry, io));
    ExecutorParams ep{device, &kernels, functions};
    ep.functions.device_mgr = device_mgr;
    GR_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::Create(ep, std::move(pg)));
    out->units_.push_back({device, std::move(ex), std::move(pdef)});
  }
  return out;
}

std::vector<tensorflow::GraphDef> DeviceExecutors::partition_graphs() const {
  std::vector<tensorflow::GraphDef> out;
  out.reserve(units_.size());
  for (const Unit& u : units_) out.push_back(u.graph_def);
  return out;
}

void DeviceExecutors::RunAsync(std::shared_ptr<const DeviceExecutors> self, const StepArgs& p,
                               std::function<void(const absl::Status&)> done) {
  struct Barrier {
    std::mutex mu;
    int pending;
    absl::Status status;
    std::vector<std::unique_ptr<StepStatsCollector>> collectors;
    std::function<void(const absl::Status&)> done;
    std::shared_ptr<const DeviceExecutors> executors;  // alive until `done`
  };
  const size_t n = self->units_.size();
  if (n == 0) {
    done(absl::OkStatus());
    return;
  }
  auto barrier = std::make_shared<Barrier>();
  barrier->pending = static_cast<int>(n);
  barrier->done = std::move(done);
  barrier->executors = self;
  std::function<void(std::function<void()>)> runner = p.runner;
  if (!runner) {
    ThreadPool* pool = p.inter_op_pool;
    runner = [pool](std::function<void()> fn) { pool->Schedule(std::move(fn)); };
  }
  Executor::Args args;
  args.step_id = p.step_id;
  args.rendezvous = p.rendezvous;
  args.call_frame = p.call_frame;
  args.cancellation_manager = p.cancellation;
  args.runner = runner;
  args.collective_executor = p.collectives;
  if (p.stats_parent != nullptr) {
    for (size_t k = 0; k < n; ++k) {
      barrier->collectors.push_back(
          std::make_unique<StepStatsCollector>(p.stats_parent, p.stats_prefix));
    }
  } else if (p.stats != nullptr) {
    for (const Unit& u : self->units_) {
      auto* ds = p.stats->add_dev_stats();
      ds->set_device(u.device->name());
      barrier->collectors.push_back(std::make_unique<StepStatsCollector>(ds));
    }
  }
  Rendezvous* rendezvous = p.rendezvous;
  CancellationManager* cm = p.cancellation;
  for (size_t k = 0; k < n; ++k) {
    Executor::Args a = args;
    if (!barrier->collectors.empty()) a.stats_collector = barrier->collectors[k].get();
    Executor* ex = self->units_[k].executor.get();
    auto start = [barrier, rendezvous, cm, a, ex] {
      ex->RunAsync(a, [barrier, rendezvous, cm](const absl::Status& s) {
        if (!s.ok()) {
          // The cause wins over the cancellations it causes in the other
          // devices' executors (a failing executor cancels the step), even
          // when one of them finishes first.
          {
            std::lock_guard<std::mutex> l(barrier->mu);
            if (barrier->status.ok() ||
                (absl::IsCancelled(barrier->status) && !absl::IsCancelled(s))) {
              barrier->status = s;
            }
          }
          rendezvous->StartAbort(s);
          cm->StartCancel();
        }
        std::function<void(const absl::Status&)> fire;
        absl::Status result;
        {
          std::lock_guard<std::mutex> l(barrier->mu);
          if (--barrier->pending == 0) {
            fire = std::move(barrier->done);
            result = barrier->status;
          }
        }
        if (fire) fire(result);
      });
    };
    if (k + 1 < n || !p.run_last_inline) {
      runner(start);
    } else {
      start();
    }
  }
}

}  // namespace graphrun
