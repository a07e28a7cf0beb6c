#include "distributed/master_session.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/call_group_internal.h"
#include "distributed/cluster_spec.h"
#include "distributed/health.h"
#include "graph/function_lowering.h"
#include "graph/graph.h"
#include "graph/node_def_util.h"
#include "graph/status.h"
#include "placement/device_spec.h"
#include "placement/partition.h"
#include "placement/placer.h"
#include "runtime/client_graph.h"
#include "runtime/step_pipeline.h"

namespace graphrun {
namespace distributed {
namespace {

// Inlining within the task's limits (--max_graph_nodes, --max_function_depth).
LoweringOptions Lowering(const MasterEnv& env) {
  LoweringOptions o;
  o.max_nodes = env.limits.max_graph_nodes;
  o.max_depth = static_cast<int>(std::min<int64_t>(env.limits.max_function_depth, 1 << 20));
  return o;
}

using internal::CallGroup;

// Grace period for cancelled calls to report back before a step returns.
constexpr int64_t kCancelGraceMs = 5000;

int64_t NewStepId() {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> l(mu);
  return static_cast<int64_t>(rng() >> 1) | 1;
}

bool DevicePassesFilters(const std::string& device,
                         const google::protobuf::RepeatedPtrField<std::string>& filters) {
  if (filters.empty()) return true;
  for (const std::string& f : filters) {
    auto m = placement::Matches(f, device);
    if (m.ok() && *m) return true;
  }
  return false;
}

// The task's error, naming the task unless the message already does.
absl::Status NameTask(const absl::Status& s, const std::string& task) {
  if (s.ok() || absl::StrContains(s.message(), task)) return s;
  return AnnotateStatus(s, absl::StrCat("task ", task, ": "));
}

// Picks the most telling error: the first that is not a consequence of
// another task's failure. Cancelled (the step was cancelled) and Aborted
// (the step had already ended on that task) are what the other tasks see
// after the first failure, so they are chosen only when nothing else failed.
absl::Status PickError(const std::vector<absl::Status>& statuses,
                       const std::vector<std::string>& tasks) {
  absl::Status aborted, cancelled;
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].ok()) continue;
    absl::Status s = NameTask(statuses[i], tasks[i]);
    if (s.code() == absl::StatusCode::kCancelled) {
      if (cancelled.ok()) cancelled = s;
    } else if (s.code() == absl::StatusCode::kAborted) {
      if (aborted.ok()) aborted = s;
    } else {
      return s;
    }
  }
  return aborted.ok() ? cancelled : aborted;
}

}  // namespace

absl::StatusOr<bool> TaskPassesFilters(
    const std::string& task, const google::protobuf::RepeatedPtrField<std::string>& filters) {
  if (filters.empty()) return true;
  GR_ASSIGN_OR_RETURN(TaskId id, ParseTaskName(task));
  for (const std::string& f : filters) {
    auto spec = placement::DeviceSpec::Parse(f);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_filters: '", f, "': ", spec.status().message()));
    }
    if ((!spec->job || *spec->job == id.job) && (!spec->replica || *spec->replica == id.replica) &&
        (!spec->task || *spec->task == id.task)) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<std::unique_ptr<MasterSession>> MasterSession::Create(
    const MasterEnv* env, std::string handle, const tensorflow::GraphDef& graph,
    const tensorflow::ConfigProto& config) {
  std::unique_ptr<MasterSession> s(new MasterSession(env, std::move(handle)));
  s->config_ = config;
  GR_RETURN_IF_ERROR(ValidateNodeNames(graph));
  tensorflow::FunctionDefLibrary library;
  GR_RETURN_IF_ERROR(MergeFunctionLibrary(graph.library(), &library));
  auto origin = std::make_shared<absl::flat_hash_map<std::string, std::string>>();
  GR_ASSIGN_OR_RETURN(
      tensorflow::GraphDef def,
      CanonicalizeGraphDefForSession(graph, *env->op_registry, Lowering(*env), origin.get()));
  // Inlined functions count: a small graph may call big ones.
  GR_RETURN_IF_ERROR(CheckGraphSize(env->task, def, env->limits.max_graph_nodes));
  GR_RETURN_IF_ERROR(
      AnnotateLoweringError(GraphFromGraphDef(def, *env->op_registry).status(), *origin));
  s->graph_def_ = std::move(def);
  s->library_ = std::move(library);
  s->origin_ = std::move(origin);
  s->graph_version_ = 1;

  std::vector<std::string> tasks;
  for (const std::string& t : env->worker_cache->ListTasks()) {
    GR_ASSIGN_OR_RETURN(bool pass, TaskPassesFilters(t, config.device_filters()));
    if (pass) tasks.push_back(t);
  }
  if (tasks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("device_filters [",
                                                   absl::StrJoin(config.device_filters(), ", "),
                                                   "] match no task of the cluster"));
  }
  const int n = static_cast<int>(tasks.size());
  auto group = std::make_shared<CallGroup>(n);
  std::vector<std::shared_ptr<WorkerInterface>> workers(n);
  auto responses = std::make_shared<std::vector<GetStatusResponse>>(n);
  auto opts = std::make_shared<std::vector<CallOptions>>(n);
  GetStatusRequest req;
  for (int i = 0; i < n; ++i) {
    GR_ASSIGN_OR_RETURN(workers[i], env->worker_cache->GetWorker(tasks[i]));
    (*opts)[i].set_timeout_ms(env->control_timeout_ms);
  }
  for (int i = 0; i < n; ++i) {
    workers[i]->GetStatusAsync(
        req, &(*responses)[i],
        [group, responses, opts, cb = group->Callback(i)](const absl::Status& st) { cb(st); });
  }
  if (!group->WaitFor(env->control_timeout_ms + kCancelGraceMs)) {
    auto done = group->done();
    for (int i = 0; i < n; ++i) {
      if (!done[i]) {
        return absl::UnavailableError(absl::StrCat("task ", tasks[i], " did not answer GetStatus"));
      }
    }
  }
  auto statuses = group->statuses();
  for (int i = 0; i < n; ++i) {
    if (!statuses[i].ok()) return NameTask(statuses[i], tasks[i]);
    for (const auto& d : (*responses)[i].device()) {
      if (DevicePassesFilters(d.name(), config.device_filters())) s->devices_.push_back(d);
    }
  }
  if (s->devices_.empty()) {
    return absl::InvalidArgumentError("device_filters match no device of the cluster");
  }
  s->tasks_ = tasks;
  return s;
}

MasterSession::~MasterSession() { Close().IgnoreError(); }

int64_t MasterSession::graph_version() const {
  std::lock_guard<std::mutex> l(mu_);
  return graph_version_;
}

absl::StatusOr<int64_t> MasterSession::Extend(const tensorflow::GraphDef& graph) {
  std::lock_guard<std::mutex> pl(plan_mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Plan>> old;
  int64_t version;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return absl::FailedPreconditionError("session is closed");
    GR_RETURN_IF_ERROR(ValidateNodeNames(graph));
    tensorflow::GraphDef merged = graph_def_;
    for (const auto& node : graph.node()) *merged.add_node() = node;
    // The functions of earlier graphs stay callable, as in TensorFlow.
    tensorflow::FunctionDefLibrary library = library_;
    GR_RETURN_IF_ERROR(MergeFunctionLibrary(graph.library(), &library));
    // Attached when the extension brings functions (lowering checks them)
    // or its nodes call into the library; an extension of plain nodes is
    // not lowered again (a kept call frame's functions are in `merged`).
    if (graph.library().function_size() > 0 || CallsLibrary(graph, library)) {
      *merged.mutable_library() = library;
    }
    auto origin = std::make_shared<absl::flat_hash_map<std::string, std::string>>();
    if (origin_ != nullptr) *origin = *origin_;
    GR_ASSIGN_OR_RETURN(merged, CanonicalizeGraphDefForSession(merged, *env_->op_registry,
                                                               Lowering(*env_), origin.get()));
    // The session's whole graph, not each extension, is one graph.
    GR_RETURN_IF_ERROR(CheckGraphSize(env_->task, merged, env_->limits.max_graph_nodes));
    GR_RETURN_IF_ERROR(
        AnnotateLoweringError(GraphFromGraphDef(merged, *env_->op_registry).status(), *origin));
    graph_def_ = std::move(merged);
    library_ = std::move(library);
    origin_ = std::move(origin);
    version = ++graph_version_;
    old.swap(plans_);
  }
  DeregisterPlans(std::move(old));
  return version;
}

void MasterSession::ListDevices(ListDevicesResponse* response) const {
  for (const auto& d : devices_) {
    if (TaskOfDevice(d.name()) == env_->task) {
      *response->add_local_device() = d;
    } else {
      *response->add_remote_device() = d;
    }
  }
}

absl::Status MasterSession::EnsureWorkerSession(const std::string& task, WorkerInterface* worker) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (worker_sessions_.count(task)) return absl::OkStatus();
  }
  CreateWorkerSessionRequest req;
  req.set_session_handle(handle_);
  req.set_master_task(env_->task);
  // Where this master's tasks are, for a task whose cluster does not say
  // (a sparseCluster PS knows only itself, yet pulls from this task).
  for (const auto& [t, address] : env_->worker_cache->Addresses()) {
    (*req.mutable_task_addresses())[t] = address;
  }
  CreateWorkerSessionResponse resp;
  GR_RETURN_IF_ERROR(NameTask(CallAndWait([&](StatusCallback done) {
                                worker->CreateWorkerSessionAsync(req, &resp, std::move(done));
                              }),
                              task));
  GR_ASSIGN_OR_RETURN(auto w, env_->worker_cache->GetWorker(task));
  std::lock_guard<std::mutex> l(mu_);
  worker_sessions_[task] = w;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<MasterSession::Plan>> MasterSession::GetOrCreatePlan(
    const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
    const std::vector<std::string>& targets) {
  std::string key = ClientGraphKey(feeds, fetches, targets);
  std::lock_guard<std::mutex> pl(plan_mu_);
  tensorflow::GraphDef def;
  int64_t version = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return absl::CancelledError("session is closed");
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      it->second->last_used.store(plan_clock_.fetch_add(1) + 1);
      return it->second;
    }
    def = graph_def_;
    version = graph_version_;
  }
  // The master task's first device hosts feeds, fetches and unplaced nodes.
  std::string client_device = devices_[0].name();
  for (const auto& d : devices_) {
    if (TaskOfDevice(d.name()) == env_->task) {
      client_device = d.name();
      break;
    }
  }
  std::vector<placement::DeviceInfo> infos;
  absl::flat_hash_map<std::string, uint64_t> incarnations;
  for (const auto& d : devices_) {
    infos.push_back({d.name(), d.device_type()});
    incarnations[d.name()] = d.incarnation();
  }
  // Stateful nodes go where a placement of the whole graph puts them, the
  // same in every plan (PlaceStatefulNodes).
  if (pinned_version_ != version) {
    pinned_ = PlaceStatefulNodes(def, *env_->op_registry, *env_->kernel_registry, client_device,
                                 infos, config_, nullptr, &pinned_);
    pinned_version_ = version;
  }
  ClientGraphSpec spec{feeds, fetches, targets, client_device};
  GR_ASSIGN_OR_RETURN(ClientGraph cg,
                      PlaceClientGraph(def, *env_->op_registry, *env_->kernel_registry, spec, infos,
                                       config_, nullptr, &pinned_));
  // The pipeline's task stage: one piece per task, each task's GraphMgr
  // then runs the device stages.
  placement::PartitionOptions part;
  part.node_to_loc = [](const Node& n) { return TaskOfDevice(n.assigned_device()); };
  part.get_incarnation = [&incarnations](const std::string& name) -> uint64_t {
    auto it = incarnations.find(name);
    return it == incarnations.end() ? placement::kDefaultIncarnation : it->second;
  };
  GR_ASSIGN_OR_RETURN(auto partitions, placement::Partition(*cg.graph, part));

  auto plan = std::make_shared<Plan>();
  plan->feed_types = cg.feed_types;
  plan->fetch_types = cg.fetch_types;
  for (auto& [task, pdef] : partitions) {
    TaskGraph tg;
    tg.task = task;
    GR_ASSIGN_OR_RETURN(tg.worker, env_->worker_cache->GetWorker(task));
    for (const auto& node : pdef.node()) {
      if (node.op() != "_Arg" && node.op() != "_Retval") continue;
      int64_t index = 0;
      GR_RETURN_IF_ERROR(GetAttr(NodeAttrs(node), "index", &index));
      (node.op() == "_Arg" ? tg.arg_indices : tg.retval_indices).push_back(static_cast<int>(index));
    }
    tg.graph_def = std::move(pdef);
    plan->tasks.push_back(std::move(tg));
  }
  // Register every piece (concurrently).
  const int n = static_cast<int>(plan->tasks.size());
  for (auto& tg : plan->tasks) GR_RETURN_IF_ERROR(EnsureWorkerSession(tg.task, tg.worker.get()));
  auto group = std::make_shared<CallGroup>(n);
  auto reqs = std::make_shared<std::vector<RegisterGraphRequest>>(n);
  auto resps = std::make_shared<std::vector<RegisterGraphResponse>>(n);
  for (int i = 0; i < n; ++i) {
    (*reqs)[i].set_session_handle(handle_);
    *(*reqs)[i].mutable_graph_def() = plan->tasks[i].graph_def;
  }
  for (int i = 0; i < n; ++i) {
    plan->tasks[i].worker->RegisterGraphAsync(
        (*reqs)[i], &(*resps)[i],
        [reqs, resps, cb = group->Callback(i)](const absl::Status& s) { cb(s); });
  }
  std::vector<std::string> task_names;
  for (auto& tg : plan->tasks) task_names.push_back(tg.task);
  if (!group->WaitFor(env_->control_timeout_ms + kCancelGraceMs)) {
    return absl::UnavailableError("a task did not answer RegisterGraph in time");
  }
  auto statuses = group->statuses();
  absl::Status err = PickError(statuses, task_names);
  for (int i = 0; i < n; ++i) plan->tasks[i].graph_handle = (*resps)[i].graph_handle();
  if (!err.ok()) {
    absl::flat_hash_map<std::string, std::shared_ptr<Plan>> partial;
    partial["partial"] = plan;
    DeregisterPlans(std::move(partial));
    return err;
  }
  plan->last_used.store(plan_clock_.fetch_add(1) + 1);
  absl::flat_hash_map<std::string, std::shared_ptr<Plan>> evicted;
  {
    std::lock_guard<std::mutex> l(mu_);
    plans_[key] = plan;
    while (static_cast<int64_t>(plans_.size()) >
           std::max<int64_t>(1, env_->limits.max_plans_per_session)) {
      auto oldest = plans_.end();
      for (auto it = plans_.begin(); it != plans_.end(); ++it) {
        if (it->second != plan &&
            (oldest == plans_.end() || it->second->last_used < oldest->second->last_used)) {
          oldest = it;
        }
      }
      if (oldest == plans_.end()) break;
      evicted.insert(*oldest);
      plans_.erase(oldest);
    }
  }
  // A step still running on an evicted plan keeps its executors until it
  // ends (GraphMgr).
  if (!evicted.empty()) DeregisterPlans(std::move(evicted));
  return plan;
}

void MasterSession::DeregisterPlans(absl::flat_hash_map<std::string, std::shared_ptr<Plan>> plans) {
  for (auto& [key, plan] : plans) {
    for (auto& tg : plan->tasks) {
      if (tg.graph_handle.empty()) continue;
      auto req = std::make_shared<DeregisterGraphRequest>();
      req->set_session_handle(handle_);
      req->set_graph_handle(tg.graph_handle);
      auto resp = std::make_shared<DeregisterGraphResponse>();
      tg.worker->DeregisterGraphAsync(*req, resp.get(), [req, resp](const absl::Status&) {});
    }
  }
}

absl::Status MasterSession::Annotated(absl::Status s) const {
  if (s.ok()) return s;
  std::shared_ptr<const absl::flat_hash_map<std::string, std::string>> origin;
  {
    std::lock_guard<std::mutex> l(mu_);
    origin = origin_;
  }
  return origin == nullptr ? s : AnnotateLoweringError(s, *origin);
}

absl::Status MasterSession::Run(CallOptions* opts, const RunStepRequest& request,
                                RunStepResponse* response) {
  std::vector<std::string> feed_names, fetches(request.fetch().begin(), request.fetch().end()),
      targets(request.target().begin(), request.target().end());
  for (const auto& f : request.feed()) feed_names.push_back(f.name());
  auto planned = GetOrCreatePlan(feed_names, fetches, targets);
  if (!planned.ok()) return Annotated(planned.status());
  std::shared_ptr<Plan> plan = *std::move(planned);
  for (int i = 0; i < request.feed_size(); ++i) {
    DataType t = static_cast<DataType>(request.feed(i).tensor().dtype());
    if (t != plan->feed_types[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feed '", feed_names[i], "': the graph expects ", DataTypeString(plan->feed_types[i]),
          " but the fed value is ", DataTypeString(t)));
    }
  }
  const tensorflow::RunOptions& ro = request.options();
  const bool trace = ro.trace_level() != tensorflow::RunOptions::NO_TRACE;
  int64_t timeout_ms =
      ro.timeout_in_ms() > 0 ? ro.timeout_in_ms() : config_.operation_timeout_in_ms();
  const int64_t step_id = NewStepId();
  const int n = static_cast<int>(plan->tasks.size());

  struct StepCalls {
    std::vector<RunGraphRequest> reqs;
    std::vector<RunGraphResponse> resps;
    std::vector<CallOptions> opts;
    std::shared_ptr<Plan> plan;
  };
  auto calls = std::make_shared<StepCalls>();
  calls->reqs.resize(n);
  calls->resps.resize(n);
  calls->opts = std::vector<CallOptions>(n);
  calls->plan = plan;
  std::vector<std::string> task_names;
  for (int i = 0; i < n; ++i) {
    const TaskGraph& tg = plan->tasks[i];
    task_names.push_back(tg.task);
    RunGraphRequest& r = calls->reqs[i];
    r.set_session_handle(handle_);
    r.set_graph_handle(tg.graph_handle);
    r.set_step_id(step_id);
    r.set_collect_stats(trace);
    for (int index : tg.arg_indices) {
      auto* a = r.add_arg();
      a->set_index(index);
      *a->mutable_tensor() = request.feed(index).tensor();
    }
    if (timeout_ms > 0) calls->opts[i].set_timeout_ms(timeout_ms + kCancelGraceMs);
  }
  // Ends the step on every task: pending Recvs and RecvTensor calls fail.
  auto cleanup = [plan, step_id] {
    for (const auto& tg : plan->tasks) {
      auto req = std::make_shared<CleanupGraphRequest>();
      req->set_step_id(step_id);
      auto resp = std::make_shared<CleanupGraphResponse>();
      tg.worker->CleanupGraphAsync(*req, resp.get(), [req, resp](const absl::Status&) {});
    }
  };
  auto cancel_all = [calls] {
    for (auto& o : calls->opts) o.StartCancel();
  };
  auto group = std::make_shared<CallGroup>(n);
  group->set_on_error([cleanup, cancel_all](int, const absl::Status&) {
    cleanup();
    cancel_all();
  });
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto cancel_step = [cleanup, cancel_all, cancelled] {
    cancelled->store(true);
    cleanup();
    cancel_all();
  };
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return absl::CancelledError("session is closed");
    running_[step_id] = cancel_step;
  }
  if (opts != nullptr) opts->SetCancelCallback(cancel_step);
  // A task of the step found dead (heartbeats) fails the step at once,
  // naming it: the other tasks' partitions are cancelled and cleaned up.
  auto death = std::make_shared<std::pair<std::mutex, absl::Status>>();
  HealthMonitor::Watch watch;
  if (env_->health != nullptr) {
    watch =
        env_->health->WatchTasks(task_names, [death, cleanup, cancel_all](const absl::Status& s) {
          {
            std::lock_guard<std::mutex> l(death->first);
            death->second = s;
          }
          cleanup();
          cancel_all();
        });
  }
  for (int i = 0; i < n; ++i) {
    plan->tasks[i].worker->RunGraphAsync(
        &calls->opts[i], calls->reqs[i], &calls->resps[i],
        [calls, cb = group->Callback(i)](const absl::Status& s) { cb(s); });
  }
  absl::Status status;
  if (!group->WaitFor(timeout_ms)) {
    std::vector<std::string> late;
    auto done = group->done();
    for (int i = 0; i < n; ++i) {
      if (!done[i]) late.push_back(task_names[i]);
    }
    status = absl::DeadlineExceededError(absl::StrCat(
        "step timed out after ", timeout_ms, " ms; still running on ", absl::StrJoin(late, ", ")));
    cleanup();
    cancel_all();
    group->WaitFor(kCancelGraceMs);
  } else {
    status = PickError(group->statuses(), task_names);
    cleanup();
  }
  if (opts != nullptr) opts->ClearCancelCallback();
  watch.Cancel();
  {
    std::lock_guard<std::mutex> l(mu_);
    running_.erase(step_id);
  }
  {
    std::lock_guard<std::mutex> l(death->first);
    if (!death->second.ok() && !status.ok()) status = death->second;
  }
  if (!status.ok()) {
    if (cancelled->load()) {
      return absl::CancelledError(absl::StrCat("step cancelled (", status.message(), ")"));
    }
    return Annotated(status);
  }

  // Fetches in order.
  std::vector<const tensorflow::TensorProto*> fetched(fetches.size(), nullptr);
  for (int i = 0; i < n; ++i) {
    for (const auto& r : calls->resps[i].retval()) {
      if (r.index() >= 0 && r.index() < static_cast<int>(fetched.size())) {
        fetched[r.index()] = &r.tensor();
      }
    }
  }
  for (size_t i = 0; i < fetched.size(); ++i) {
    if (fetched[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("fetch '", fetches[i],
                       "' produced no value (it is on an untaken branch of a "
                       "conditional, or the step stopped early)"));
    }
    auto* t = response->add_tensor();
    t->set_name(fetches[i]);
    t->mutable_tensor()->Swap(const_cast<tensorflow::TensorProto*>(fetched[i]));
  }
  if (trace) {
    auto* ss = response->mutable_metadata()->mutable_step_stats();
    for (int i = 0; i < n; ++i) {
      for (auto& ds : *calls->resps[i].mutable_step_stats()->mutable_dev_stats()) {
        ss->add_dev_stats()->Swap(&ds);
      }
    }
  }
  if (ro.output_partition_graphs()) {
    for (const auto& tg : plan->tasks) {
      *response->mutable_metadata()->add_partition_graphs() = tg.graph_def;
    }
  }
  return absl::OkStatus();
}

absl::Status MasterSession::Close() {
  std::lock_guard<std::mutex> pl(plan_mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Plan>> plans;
  std::map<std::string, std::shared_ptr<WorkerInterface>> sessions;
  std::map<int64_t, std::function<void()>> running;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    plans.swap(plans_);
    sessions.swap(worker_sessions_);
    running.swap(running_);
  }
  for (auto& [id, cancel] : running) cancel();
  plans.clear();  // DeleteWorkerSession deregisters the graphs.
  for (auto& [task, worker] : sessions) {
    auto req = std::make_shared<DeleteWorkerSessionRequest>();
    req->set_session_handle(handle_);
    auto resp = std::make_shared<DeleteWorkerSessionResponse>();
    worker->DeleteWorkerSessionAsync(*req, resp.get(), [req, resp](const absl::Status&) {});
  }
  return absl::OkStatus();
}

}  // namespace distributed
}  // namespace graphrun
