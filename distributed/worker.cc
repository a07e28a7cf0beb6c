#include "distributed/worker.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/collective_remote.h"
#include "distributed/health.h"
#include "graph/status.h"

namespace graphrun {
namespace distributed {
namespace {

// Call frame of one RunGraph: sparse args/retvals by _Arg/_Retval index.
class IndexedCallFrame : public CallFrameInterface {
 public:
  absl::StatusOr<Tensor> GetArg(int index) const override {
    auto it = args_.find(index);
    if (it == args_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no argument ", index, " was sent"));
    }
    return it->second;
  }
  absl::Status SetRetval(int index, const Tensor& value) override {
    std::lock_guard<std::mutex> l(mu_);
    retvals_[index] = value;
    return absl::OkStatus();
  }
  std::map<int, Tensor>& args() { return args_; }
  std::map<int, Tensor> TakeRetvals() {
    std::lock_guard<std::mutex> l(mu_);
    return std::move(retvals_);
  }

 private:
  std::map<int, Tensor> args_;
  std::mutex mu_;
  std::map<int, Tensor> retvals_;
};

}  // namespace

struct Worker::Step {
  int64_t step_id = 0;
  CancellationManager cm;
  std::shared_ptr<RemoteRendezvous> rendezvous;
  IndexedCallFrame frame;
  // The master's liveness while the step runs (env health, another task).
  HealthMonitor::Watch master_watch;
};

Worker::Worker(const WorkerEnv* env)
    : env_(env), rendezvous_mgr_(env->task, env->device_mgr, env->worker_cache) {}

Worker::~Worker() {
  AbortAll(absl::CancelledError(absl::StrCat("task ", env_->task, " is shutting down")));
}

void Worker::AbortAll(const absl::Status& status) {
  std::vector<std::shared_ptr<Step>> steps;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [id, s] : steps_) steps.push_back(s);
  }
  for (auto& s : steps) {
    s->rendezvous->StartAbort(status);
    s->cm.StartCancel();
  }
  rendezvous_mgr_.CleanupAll(status);
}

void Worker::GetStatusAsync(const GetStatusRequest&, GetStatusResponse* response,
                            StatusCallback done) {
  response->set_task(env_->task);
  for (const auto& a : env_->device_mgr->ListDeviceAttributes()) {
    auto* d = response->add_device();
    d->set_name(a.name);
    d->set_device_type(a.device_type);
    d->set_memory_limit(a.memory_limit);
    d->set_incarnation(a.incarnation);
  }
  done(absl::OkStatus());
}

int64_t Worker::num_sessions() {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int64_t>(sessions_.size());
}

void Worker::CreateWorkerSessionAsync(const CreateWorkerSessionRequest& request,
                                      CreateWorkerSessionResponse*, StatusCallback done) {
  if (request.session_handle().empty()) {
    done(absl::InvalidArgumentError("CreateWorkerSession: empty session_handle"));
    return;
  }
  if (env_->worker_cache != nullptr && !request.task_addresses().empty()) {
    // The master's tasks this task's cluster may not name (a sparse one):
    // graphs of this session pull tensors from them.
    absl::Status learned = env_->worker_cache->LearnAddresses(
        {request.task_addresses().begin(), request.task_addresses().end()});
    if (!learned.ok()) {
      done(absl::Status(learned.code(), absl::StrCat("task ", env_->task, ": CreateWorkerSession: ",
                                                     learned.message())));
      return;
    }
  }
  // Only a master this task can reach is watched (a name no cluster
  // knows would only cost heartbeats that cannot be sent).
  const bool watch_master = !request.master_task().empty() && request.master_task() != env_->task &&
                            env_->worker_cache != nullptr &&
                            env_->worker_cache->GetWorker(request.master_task()).ok();
  std::lock_guard<std::mutex> l(mu_);
  if (static_cast<int64_t>(sessions_.size()) >= env_->limits.max_sessions) {
    done(absl::ResourceExhaustedError(
        absl::StrCat("task ", env_->task, ": ", sessions_.size(),
                     " worker sessions are open, the most it allows (--max_sessions)")));
    return;
  }
  auto [it, inserted] = sessions_.emplace(request.session_handle(), nullptr);
  if (!inserted) {
    done(absl::AlreadyExistsError(absl::StrCat("task ", env_->task, ": worker session '",
                                               request.session_handle(), "' exists")));
    return;
  }
  it->second = std::make_shared<GraphMgr>(env_);
  if (watch_master) session_masters_[request.session_handle()] = request.master_task();
  done(absl::OkStatus());
}

void Worker::DeleteWorkerSessionAsync(const DeleteWorkerSessionRequest& request,
                                      DeleteWorkerSessionResponse*, StatusCallback done) {
  std::shared_ptr<GraphMgr> mgr;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = sessions_.find(request.session_handle());
    if (it != sessions_.end()) {
      mgr = std::move(it->second);
      sessions_.erase(it);
    }
    session_masters_.erase(request.session_handle());
  }
  if (mgr) mgr->DeregisterAll();
  done(absl::OkStatus());
}

absl::StatusOr<std::shared_ptr<GraphMgr>> Worker::FindSession(const std::string& handle,
                                                              std::string* master_task) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end()) {
    return absl::AbortedError(absl::StrCat("task ", env_->task, " has no worker session '", handle,
                                           "' (the task may have restarted)"));
  }
  if (master_task != nullptr) {
    auto m = session_masters_.find(handle);
    *master_task = m == session_masters_.end() ? "" : m->second;
  }
  return it->second;
}

void Worker::RegisterGraphAsync(const RegisterGraphRequest& request,
                                RegisterGraphResponse* response, StatusCallback done) {
  auto mgr = FindSession(request.session_handle());
  if (!mgr.ok()) {
    done(mgr.status());
    return;
  }
  if (absl::Status g =
          CheckGraphSize(env_->task, request.graph_def(), env_->limits.max_graph_nodes);
      !g.ok()) {
    done(g);
    return;
  }
  auto handle = (*mgr)->Register(request.graph_def());
  if (!handle.ok()) {
    done(AnnotateStatus(handle.status(), absl::StrCat("task ", env_->task, ": ")));
    return;
  }
  response->set_graph_handle(*handle);
  done(absl::OkStatus());
}

void Worker::DeregisterGraphAsync(const DeregisterGraphRequest& request, DeregisterGraphResponse*,
                                  StatusCallback done) {
  auto mgr = FindSession(request.session_handle());
  if (!mgr.ok()) {
    done(mgr.status());
    return;
  }
  done((*mgr)->Deregister(request.graph_handle()));
}

void Worker::RunGraphAsync(CallOptions* opts, const RunGraphRequest& request,
                           RunGraphResponse* response, StatusCallback done) {
  std::string master_task;
  auto mgr = FindSession(request.session_handle(), &master_task);
  if (!mgr.ok()) {
    done(mgr.status());
    return;
  }
  auto rendezvous = rendezvous_mgr_.Find(request.step_id());
  if (!rendezvous.ok()) {
    done(rendezvous.status());
    return;
  }
  auto step = std::make_shared<Step>();
  step->step_id = request.step_id();
  step->rendezvous = *rendezvous;
  for (const auto& a : request.arg()) {
    auto t = Tensor::FromProto(a.tensor());
    if (!t.ok()) {
      done(AnnotateStatus(t.status(), absl::StrCat("RunGraph argument ", a.index(), ": ")));
      return;
    }
    step->frame.args()[a.index()] = std::move(*t);
  }
  std::multimap<int64_t, std::shared_ptr<Step>>::iterator pos;
  size_t running = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    running = steps_.size();
    if (static_cast<int64_t>(running) < env_->limits.max_concurrent_steps) {
      pos = steps_.emplace(step->step_id, step);
    }
  }
  if (static_cast<int64_t>(running) >= env_->limits.max_concurrent_steps) {
    done(absl::ResourceExhaustedError(
        absl::StrCat("task ", env_->task, ": ", running,
                     " graphs are running, the most it allows at once (--max_concurrent_steps)")));
    return;
  }
  if (opts != nullptr) {
    opts->SetCancelCallback([step] {
      step->rendezvous->StartAbort(absl::CancelledError("step cancelled by the caller"));
      step->cm.StartCancel();
    });
  }
  if (env_->health != nullptr && !master_task.empty()) {
    // A master that dies or is cut off mid-step cannot end its partitions
    // here: they would wait for it (a _Recv of its gradients) for good.
    // The callback holds the step only while it runs (a weak pointer: the
    // step holds the watch). Aborting may end the step on this very thread,
    // completion dropping its last other reference. The master just
    // called (heard_from): whatever heartbeats said before, it is back.
    step->master_watch = env_->health->WatchTasks(
        {master_task},
        [weak = std::weak_ptr<Step>(step), task = env_->task,
         master_task](const absl::Status& why) {
          std::shared_ptr<Step> st = weak.lock();
          if (st == nullptr) return;
          const absl::Status ended = absl::UnavailableError(
              absl::StrCat("task ", task, " ended step ", st->step_id, ": its master, task ",
                           master_task, ", is gone (", why.message(), ")"));
          st->rendezvous->StartAbort(ended);
          st->cm.StartCancel();
        },
        /*heard_from=*/true);
  }
  GraphMgr::StepParams params;
  params.step_id = step->step_id;
  params.rendezvous = step->rendezvous.get();
  params.call_frame = &step->frame;
  params.cancellation = &step->cm;
  params.stats = request.collect_stats() ? response->mutable_step_stats() : nullptr;
  (*mgr)->ExecuteAsync(
      request.graph_handle(), params,
      [this, step, pos, opts, response, done = std::move(done)](const absl::Status& s) {
        if (opts != nullptr) opts->ClearCancelCallback();
        step->master_watch.Cancel();
        {
          std::lock_guard<std::mutex> l(mu_);
          steps_.erase(pos);
        }
        if (!s.ok()) {
          // A cancelled executor reports only that it was cancelled; the
          // reason the step was aborted (the task stopping, a peer's
          // failure) is what the master should see.
          absl::Status why = step->rendezvous->abort_status();
          absl::Status st = s.code() == absl::StatusCode::kCancelled && !why.ok() ? why : s;
          step->rendezvous->StartAbort(st);
          done(st);
          return;
        }
        for (auto& [index, t] : step->frame.TakeRetvals()) {
          auto* r = response->add_retval();
          r->set_index(index);
          t.AsProtoTensorContent(r->mutable_tensor());
        }
        done(absl::OkStatus());
      });
}

void Worker::CleanupGraphAsync(const CleanupGraphRequest& request, CleanupGraphResponse*,
                               StatusCallback done) {
  absl::Status ended =
      absl::CancelledError(absl::StrCat("step ", request.step_id(), " was ended by the master"));
  std::vector<std::shared_ptr<Step>> running;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto range = steps_.equal_range(request.step_id());
    for (auto it = range.first; it != range.second; ++it) running.push_back(it->second);
  }
  rendezvous_mgr_.Cleanup(request.step_id(), ended);
  for (auto& s : running) s->cm.StartCancel();
  done(absl::OkStatus());
}

void Worker::CleanupAllAsync(const CleanupAllRequest& request, CleanupAllResponse*,
                             StatusCallback done) {
  for (const auto& d : env_->device_mgr->devices()) {
    if (request.container().empty()) {
      d->resource_manager()->Clear();
    } else {
      for (const auto& c : request.container()) d->resource_manager()->Cleanup(c);
    }
  }
  done(absl::OkStatus());
}

void Worker::PushTensorAsync(const std::string& key, const Tensor& tensor, StatusCallback done) {
  if (!RemoteCollectives::IsCollectiveKey(key)) {
    done(absl::InvalidArgumentError(absl::StrCat("task ", env_->task, ": a pushed tensor under '",
                                                 key.substr(0, 200),
                                                 "', which is not a collective's key")));
    return;
  }
  if (env_->collectives == nullptr) {
    done(absl::FailedPreconditionError(absl::StrCat("task ", env_->task, " runs no collectives")));
    return;
  }
  done(env_->collectives->Deliver(key, tensor));
}

void Worker::RecvTensorAsync(CallOptions* opts, const RecvTensorRequest& request,
                             RecvTensorResult* response, StatusCallback done) {
  if (RemoteCollectives::IsCollectiveKey(request.rendezvous_key())) {
    if (env_->collectives == nullptr) {
      done(
          absl::FailedPreconditionError(absl::StrCat("task ", env_->task, " runs no collectives")));
      return;
    }
    env_->collectives->Serve(request.rendezvous_key(), opts, response, std::move(done));
    return;
  }
  auto key = Rendezvous::ParseKey(request.rendezvous_key());
  if (!key.ok()) {
    done(key.status());
    return;
  }
  auto rendezvous = rendezvous_mgr_.FindForServe(request.step_id());
  if (!rendezvous.ok()) {
    done(rendezvous.status());
    return;
  }
  std::shared_ptr<RemoteRendezvous> r = *rendezvous;
  r->ServeRecv(*key, opts,
               [this, r, response, done = std::move(done)](const absl::Status& s, const Tensor& v,
                                                           bool dead) {
                 if (s.ok()) {
                   response->tensor = v;
                   response->is_dead = dead;
                 }
                 rendezvous_mgr_.EndServe(r);
                 done(s);
               });
}

}  // namespace distributed
}  // namespace graphrun
