#include "distributed/master.h"

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/call_group_internal.h"
#include "graph/status.h"
#include "util/metrics.h"

namespace graphrun {
namespace distributed {
namespace {

std::string NewSessionHandle() {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> l(mu);
  return absl::StrCat("s", absl::Hex(rng(), absl::kZeroPad16));
}

}  // namespace

Master::~Master() {
  absl::flat_hash_map<std::string, std::shared_ptr<MasterSession>> sessions;
  {
    std::lock_guard<std::mutex> l(mu_);
    sessions.swap(sessions_);
  }
  for (auto& [h, s] : sessions) s->Close().IgnoreError();
}

absl::StatusOr<std::shared_ptr<MasterSession>> Master::Find(const std::string& handle) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end()) {
    return absl::AbortedError(absl::StrCat("master of task ", env_->task, " has no session '",
                                           handle, "' (closed, or the task restarted)"));
  }
  return it->second;
}

size_t Master::num_sessions() {
  std::lock_guard<std::mutex> l(mu_);
  return sessions_.size();
}

size_t Master::num_plans() {
  std::vector<std::shared_ptr<MasterSession>> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [h, s] : sessions_) all.push_back(s);
  }
  size_t n = 0;
  for (auto& s : all) n += s->num_plans();
  return n;
}

void Master::CreateSessionAsync(const CreateSessionRequest& request,
                                CreateSessionResponse* response, StatusCallback done) {
  if (absl::Status g =
          CheckGraphSize(env_->task, request.graph_def(), env_->limits.max_graph_nodes);
      !g.ok()) {
    done(g);
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (static_cast<int64_t>(sessions_.size()) >= env_->limits.max_sessions) {
      done(absl::ResourceExhaustedError(absl::StrCat(
          "task ", env_->task, ": ", sessions_.size(),
          " sessions are open, the most it allows (--max_sessions); close one first")));
      return;
    }
  }
  std::string handle = NewSessionHandle();
  auto s = MasterSession::Create(env_, handle, request.graph_def(), request.config());
  if (!s.ok()) {
    done(s.status());
    return;
  }
  response->set_session_handle(handle);
  response->set_graph_version((*s)->graph_version());
  {
    std::lock_guard<std::mutex> l(mu_);
    sessions_[handle] = std::move(*s);
  }
  done(absl::OkStatus());
}

void Master::ExtendSessionAsync(const ExtendSessionRequest& request,
                                ExtendSessionResponse* response, StatusCallback done) {
  auto s = Find(request.session_handle());
  if (!s.ok()) {
    done(s.status());
    return;
  }
  if (absl::Status g =
          CheckGraphSize(env_->task, request.graph_def(), env_->limits.max_graph_nodes);
      !g.ok()) {
    done(g);
    return;
  }
  auto v = (*s)->Extend(request.graph_def());
  if (!v.ok()) {
    done(v.status());
    return;
  }
  response->set_new_graph_version(*v);
  done(absl::OkStatus());
}

void Master::RunStepAsync(CallOptions* opts, const RunStepRequest& request,
                          RunStepResponse* response, StatusCallback done) {
  auto s = Find(request.session_handle());
  if (!s.ok()) {
    done(s.status());
    return;
  }
  if (running_steps_.fetch_add(1) >= env_->limits.max_concurrent_steps) {
    const int64_t n = running_steps_.fetch_sub(1) - 1;
    done(absl::ResourceExhaustedError(
        absl::StrCat("task ", env_->task, ": ", n,
                     " steps are running, the most it allows at once (--max_concurrent_steps)")));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::Status ran = (*s)->Run(opts, request, response);
  running_steps_.fetch_sub(1);
  const MetricLabels code = {{"code", absl::StatusCodeToString(ran.code())}};
  Metrics::Get().Increment("graphrun_steps_total", code);
  Metrics::Get().Observe(
      "graphrun_step_seconds", {},
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  done(ran);
}

void Master::CloseSessionAsync(const CloseSessionRequest& request, CloseSessionResponse*,
                               StatusCallback done) {
  std::shared_ptr<MasterSession> s;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = sessions_.find(request.session_handle());
    if (it != sessions_.end()) {
      s = std::move(it->second);
      sessions_.erase(it);
    }
  }
  done(s ? s->Close() : absl::OkStatus());
}

void Master::ListDevicesAsync(const ListDevicesRequest& request, ListDevicesResponse* response,
                              StatusCallback done) {
  if (!request.session_handle().empty()) {
    auto s = Find(request.session_handle());
    if (!s.ok()) {
      done(s.status());
      return;
    }
    (*s)->ListDevices(response);
    done(absl::OkStatus());
    return;
  }
  // No session: a temporary one over the whole cluster lists everything.
  auto tmp = MasterSession::Create(env_, NewSessionHandle(), tensorflow::GraphDef(),
                                   tensorflow::ConfigProto());
  if (!tmp.ok()) {
    done(tmp.status());
    return;
  }
  (*tmp)->ListDevices(response);
  done(absl::OkStatus());
}

namespace {

// Calls `call`(worker, done) on every task of `tasks` at once and waits up
// to `timeout_ms`: the first failure, annotated with its task (Unavailable
// for a task that did not answer in time).
absl::Status CallEveryTask(WorkerCacheInterface* cache, const std::vector<std::string>& tasks,
                           int64_t timeout_ms, const char* what,
                           const std::function<void(WorkerInterface*, StatusCallback)>& call) {
  const int n = static_cast<int>(tasks.size());
  auto group = std::make_shared<internal::CallGroup>(n);
  for (int i = 0; i < n; ++i) {
    auto w = cache->GetWorker(tasks[i]);
    if (!w.ok()) {
      group->Callback(i)(w.status());
      continue;
    }
    call(w->get(), group->Callback(i));
  }
  if (!group->WaitFor(timeout_ms)) {
    return absl::UnavailableError(absl::StrCat("Reset: a task did not answer ", what));
  }
  const std::vector<absl::Status> statuses = group->statuses();
  for (int i = 0; i < n; ++i) {
    if (!statuses[i].ok())
      return AnnotateStatus(statuses[i], absl::StrCat("task ", tasks[i], ": "));
  }
  return absl::OkStatus();
}

}  // namespace

void Master::ResetAsync(const ResetRequest& request, ResetResponse*, StatusCallback done) {
  // Only the tasks the filters name (all without filters), as TensorFlow's
  // ResetRequest.device_filters.
  std::vector<std::string> tasks;
  for (const auto& t : env_->worker_cache->ListTasks()) {
    absl::StatusOr<bool> pass = TaskPassesFilters(t, request.device_filters());
    if (!pass.ok()) {
      done(pass.status());
      return;
    }
    if (*pass) tasks.push_back(t);
  }
  // Every task must answer before any drops anything: a reset that reached
  // some tasks only would leave the others' resources behind (a caller
  // retrying while a task restarts resets them all at once).
  absl::Status s = CallEveryTask(
      env_->worker_cache, tasks, env_->control_timeout_ms, "GetStatus",
      [](WorkerInterface* w, StatusCallback cb) {
        auto req = std::make_shared<GetStatusRequest>();
        auto resp = std::make_shared<GetStatusResponse>();
        w->GetStatusAsync(*req, resp.get(),
                          [req, resp, cb = std::move(cb)](const absl::Status& s) { cb(s); });
      });
  if (!s.ok()) {
    done(absl::Status(s.code(), absl::StrCat(s.message(), " (nothing was reset)")));
    return;
  }
  absl::flat_hash_map<std::string, std::shared_ptr<MasterSession>> sessions;
  {
    std::lock_guard<std::mutex> l(mu_);
    sessions.swap(sessions_);
  }
  for (auto& [h, session] : sessions) session->Close().IgnoreError();
  auto req = std::make_shared<CleanupAllRequest>();
  for (const auto& c : request.container()) req->add_container(c);
  done(CallEveryTask(env_->worker_cache, tasks, env_->control_timeout_ms, "CleanupAll",
                     [req](WorkerInterface* w, StatusCallback cb) {
                       auto resp = std::make_shared<CleanupAllResponse>();
                       w->CleanupAllAsync(
                           *req, resp.get(),
                           [req, resp, cb = std::move(cb)](const absl::Status& s) { cb(s); });
                     }));
}

}  // namespace distributed
}  // namespace graphrun
