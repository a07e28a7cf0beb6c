#include "distributed/rendezvous_mgr.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/cluster_spec.h"

namespace graphrun {
namespace distributed {

RemoteRendezvous::RemoteRendezvous(int64_t step_id, std::string task, const DeviceMgr* device_mgr,
                                   WorkerCacheInterface* worker_cache)
    : step_id_(step_id),
      task_(std::move(task)),
      device_mgr_(device_mgr),
      worker_cache_(worker_cache) {}

RemoteRendezvous::~RemoteRendezvous() = default;

absl::Status RemoteRendezvous::Send(const ParsedKey& key, const Args& args, const Tensor& value,
                                    bool is_dead) {
  if (!is_dead && !value.IsInitialized()) {
    // A ref input whose variable holds no value yet: fail here, naming the
    // edge, rather than deliver "nothing" to the receiving task.
    return absl::FailedPreconditionError(
        absl::StrCat("tensor '", key.edge_name, "' sent from ", key.src_device,
                     " has no value: is a variable uninitialized?"));
  }
  return local_.Send(key, args, value, is_dead);
}

void RemoteRendezvous::RecvAsync(const ParsedKey& key, const Args& args, DoneCallback done) {
  if (TaskOfDevice(key.src_device) == task_) {
    local_.RecvAsync(key, args, std::move(done));
    return;
  }
  RecvRemote(key, args, std::move(done));
}

void RemoteRendezvous::RecvRemote(const ParsedKey& key, const Args& args, DoneCallback done) {
  const std::string src_task = TaskOfDevice(key.src_device);
  auto worker = worker_cache_->GetWorker(src_task);
  if (!worker.ok()) {
    done(worker.status(), Tensor(), false);
    return;
  }
  auto opts = std::make_shared<CallOptions>();
  int64_t call_id;
  absl::Status aborted;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (abort_status_.ok()) {
      call_id = next_call_id_++;
      active_calls_[call_id] = opts;
    } else {
      aborted = abort_status_;
    }
  }
  if (!aborted.ok()) {
    // Outside mu_: `done` may abort this rendezvous (StartAbort takes mu_).
    done(aborted, Tensor(), false);
    return;
  }
  CancellationManager* cm = args.cancellation_manager;
  CancellationToken token = 0;
  bool registered = false;
  if (cm != nullptr) {
    token = cm->NewToken();
    registered = cm->RegisterCallback(token, [opts] { opts->StartCancel(); });
    if (!registered) opts->StartCancel();
  }
  auto request = std::make_shared<RecvTensorRequest>();
  request->set_step_id(step_id_);
  request->set_rendezvous_key(key.full_key);
  auto result = std::make_shared<RecvTensorResult>();
  auto self = shared_from_this();
  (*worker)->RecvTensorAsync(opts.get(), *request, result.get(),
                             [self, opts, request, result, call_id, cm, token, registered, src_task,
                              done = std::move(done)](const absl::Status& s) {
                               if (registered) cm->DeregisterCallback(token);
                               {
                                 std::lock_guard<std::mutex> l(self->mu_);
                                 self->active_calls_.erase(call_id);
                               }
                               if (!s.ok()) {
                                 done(s, Tensor(), false);
                                 return;
                               }
                               done(absl::OkStatus(), result->tensor, result->is_dead);
                             });
}

void RemoteRendezvous::ServeRecv(const ParsedKey& key, CallOptions* opts, DoneCallback done) {
  if (TaskOfDevice(key.src_device) != task_) {
    done(absl::InvalidArgumentError(absl::StrCat(
             "task ", task_, " cannot serve RecvTensor for a tensor sent from ", key.src_device)),
         Tensor(), false);
    return;
  }
  auto device = device_mgr_->Lookup(key.src_device);
  if (!device.ok()) {
    done(absl::InvalidArgumentError(absl::StrCat("task ", task_, ": ", device.status().message())),
         Tensor(), false);
    return;
  }
  if ((*device)->incarnation() != key.src_incarnation) {
    done(absl::AbortedError(
             absl::StrCat("task ", task_, " was restarted: the tensor was planned for incarnation ",
                          absl::Hex(key.src_incarnation), " of ", key.src_device, ", which is now ",
                          absl::Hex((*device)->incarnation()), "; re-create the session")),
         Tensor(), false);
    return;
  }
  // A cancelled wait (the caller gave up) resolves through a private
  // cancellation manager wired to `opts`.
  auto cm = std::make_shared<CancellationManager>();
  if (opts != nullptr) opts->SetCancelCallback([cm] { cm->StartCancel(); });
  Args args;
  args.cancellation_manager = cm.get();
  local_.RecvAsync(
      key, args,
      [cm, opts, done = std::move(done)](const absl::Status& s, const Tensor& v, bool dead) {
        if (opts != nullptr) opts->ClearCancelCallback();
        done(s, v, dead);
      });
}

absl::Status RemoteRendezvous::abort_status() {
  std::lock_guard<std::mutex> l(mu_);
  return abort_status_;
}

void RemoteRendezvous::StartAbort(const absl::Status& status) {
  std::vector<std::shared_ptr<CallOptions>> calls;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (abort_status_.ok()) {
      abort_status_ = status.ok() ? absl::CancelledError("aborted") : status;
    }
    for (auto& [id, c] : active_calls_) calls.push_back(c);
  }
  local_.StartAbort(status);
  for (auto& c : calls) c->StartCancel();
}

RendezvousMgr::RendezvousMgr(std::string task, const DeviceMgr* device_mgr,
                             WorkerCacheInterface* worker_cache)
    : task_(std::move(task)), device_mgr_(device_mgr), worker_cache_(worker_cache) {}

absl::StatusOr<std::shared_ptr<RemoteRendezvous>> RendezvousMgr::FindLocked(int64_t step_id) {
  auto it = table_.find(step_id);
  if (it != table_.end()) return it->second;
  if (cleaned_.count(step_id)) {
    return absl::AbortedError(absl::StrCat("step ", step_id, " already ended on task ", task_));
  }
  auto r = std::make_shared<RemoteRendezvous>(step_id, task_, device_mgr_, worker_cache_);
  table_[step_id] = r;
  return r;
}

absl::StatusOr<std::shared_ptr<RemoteRendezvous>> RendezvousMgr::Find(int64_t step_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto r = FindLocked(step_id);
  if (r.ok()) (*r)->claimed_ = true;
  return r;
}

absl::StatusOr<std::shared_ptr<RemoteRendezvous>> RendezvousMgr::FindForServe(int64_t step_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto r = FindLocked(step_id);
  if (r.ok()) ++(*r)->serving_;
  return r;
}

void RendezvousMgr::EndServe(const std::shared_ptr<RemoteRendezvous>& r) {
  std::lock_guard<std::mutex> l(mu_);
  if (--r->serving_ > 0 || r->claimed_) return;
  auto it = table_.find(r->step_id());
  if (it != table_.end() && it->second == r) table_.erase(it);
}

void RendezvousMgr::Cleanup(int64_t step_id, const absl::Status& status) {
  std::shared_ptr<RemoteRendezvous> r;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = table_.find(step_id);
    if (it != table_.end()) {
      r = std::move(it->second);
      table_.erase(it);
    }
    if (cleaned_.insert(step_id).second) {
      cleaned_order_.push_back(step_id);
      if (cleaned_order_.size() > kRememberCleaned) {
        cleaned_.erase(cleaned_order_.front());
        cleaned_order_.pop_front();
      }
    }
  }
  if (r) r->StartAbort(status);
}

void RendezvousMgr::CleanupAll(const absl::Status& status) {
  absl::flat_hash_map<int64_t, std::shared_ptr<RemoteRendezvous>> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    all.swap(table_);
  }
  for (auto& [id, r] : all) r->StartAbort(status);
}

size_t RendezvousMgr::num_steps() {
  std::lock_guard<std::mutex> l(mu_);
  return table_.size();
}

}  // namespace distributed
}  // namespace graphrun
