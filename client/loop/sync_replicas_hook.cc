#include "client/loop/sync_replicas_hook.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/status.h"

namespace graphrun {
namespace client {

SyncReplicasHook::SyncReplicasHook(const train::SyncReplicasOptimizer* optimizer,
                                   const Scope& scope, SessionOptions queue_runner_options)
    : optimizer_(optimizer), scope_(scope), options_(std::move(queue_runner_options)) {}

SyncReplicasHook::~SyncReplicasHook() { StopQueueRunner(); }

absl::Status SyncReplicasHook::AfterInit(const ClientSession& session, bool is_chief) {
  if (optimizer_->chief_sync_op().node() == nullptr) {
    return absl::FailedPreconditionError(
        "SyncReplicasHook: the optimizer's ApplyGradients has not been built");
  }
  if (is_chief) {
    if (options_.target.empty()) {
      return absl::FailedPreconditionError(
          "SyncReplicasHook: synchronous replicas need a cluster target (grpc://...): the "
          "chief queue runner's second session must share the PS state");
    }
    GR_RETURN_IF_ERROR(session.Run({}, {}, {optimizer_->chief_init_op()}).status());
    if (last_generation_ != nullptr) {
      GR_ASSIGN_OR_RETURN(std::vector<Tensor> g, session.Run({optimizer_->generation()}));
      last_generation_->store(g[0].scalar<int64_t>());
    }
  } else {
    GR_ASSIGN_OR_RETURN(int64_t generation, WaitForGeneration(session));
    if (last_generation_ != nullptr) last_generation_->store(generation);
  }
  GR_RETURN_IF_ERROR(session.Run({}, {}, {optimizer_->local_step_init_op()}).status());
  std::lock_guard<std::mutex> l(mu_);
  joined_ = true;
  if (is_chief) {
    loop_session_ = &session;
    qr_session_ = std::make_unique<ClientSession>(scope_, options_);
    stopping_ = false;
    qr_thread_ = std::thread([this] { QueueRunner(); });
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SyncReplicasHook::WaitForGeneration(const ClientSession& session) const {
  const int64_t last = last_generation_ != nullptr ? last_generation_->load() : 0;
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(wait_timeout_);
  absl::Status seen = absl::OkStatus();
  bool same_as_last = false;
  while (true) {
    if (stop_ != nullptr && stop_->load()) {
      return absl::CancelledError("SyncReplicasHook: stopped while waiting for the chief");
    }
    absl::StatusOr<std::vector<Tensor>> ready = session.Run({optimizer_->generation_ready()});
    if (ready.ok() && (*ready)[0].scalar<bool>()) {
      absl::StatusOr<std::vector<Tensor>> g = session.Run({optimizer_->generation()});
      if (g.ok() && (*g)[0].scalar<int64_t>() != last) return (*g)[0].scalar<int64_t>();
      same_as_last = g.ok();
      if (!g.ok()) seen = g.status();
    } else {
      same_as_last = false;
      if (!ready.ok()) seen = ready.status();
    }
    if (std::chrono::steady_clock::now() > deadline) {
      if (same_as_last) {
        // The chief did not remake the state (it never lost a task: this
        // worker's loss was its own, a heartbeat that missed): the state
        // it ran with is still there, so it joins it again.
        return last;
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "SyncReplicasHook: the chief did not make the synchronization state",
          last != 0 ? " again" : "", " within ", absl::FormatDuration(wait_timeout_),
          seen.ok() ? std::string() : absl::StrCat(" (last check: ", seen.message(), ")")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool SyncReplicasHook::ClosesOnLocked(const absl::Status& s) const {
  // A replica that never joined has nobody waiting on it.
  if (!joined_) return false;
  if (last_generation_ == nullptr) return true;
  // Errors the in-place recovery recovers from, its own or the queue
  // runner's: the chief drops and remakes the state instead.
  auto recoverable = [](const absl::Status& x) {
    return absl::IsUnavailable(x) || absl::IsAborted(x) || absl::IsDeadlineExceeded(x);
  };
  return !recoverable(s) && !recoverable(qr_status_);
}

void SyncReplicasHook::QueueRunner() {
  while (true) {
    bool closes = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return;
    }
    absl::Status s = qr_session_->Run({}, {}, {optimizer_->chief_sync_op()}).status();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return;  // cancelled by StopQueueRunner
      if (s.ok()) {
        ++updates_;
        continue;
      }
      qr_status_ =
          absl::Status(s.code(), absl::StrCat("sync replicas queue runner: ", s.message()));
      closes = ClosesOnLocked(s);
    }
    if (closes) {
      // Release the workers waiting for a token.
      qr_session_->Run({}, {}, {optimizer_->close_token_queue()}).status().IgnoreError();
    } else if (loop_session_->session() != nullptr) {
      // Recovering: the loop's own step waits for a token that will not
      // come (and would wait for a heartbeat, or forever if the lost task
      // answered again first); end it, so the loop fails with this error.
      loop_session_->session()->Close().IgnoreError();
    }
    return;
  }
}

void SyncReplicasHook::StopQueueRunner() {
  std::thread t;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!qr_thread_.joinable()) return;
    stopping_ = true;
    t = std::move(qr_thread_);
  }
  // Cancels the step the queue runner is blocked in.
  if (qr_session_->session() != nullptr) qr_session_->session()->Close().IgnoreError();
  t.join();
}

absl::Status SyncReplicasHook::AfterLoop(const ClientSession&) {
  StopQueueRunner();
  return status();
}

void SyncReplicasHook::OnError(const ClientSession& session, const absl::Status& status) {
  bool closes = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    closes = ClosesOnLocked(status);
  }
  if (closes) {
    session.Run({}, {}, {optimizer_->close_token_queue()}).status().IgnoreError();
  }
  StopQueueRunner();
}

absl::Status SyncReplicasHook::status() const {
  std::lock_guard<std::mutex> l(mu_);
  return qr_status_;
}

int64_t SyncReplicasHook::updates() const {
  std::lock_guard<std::mutex> l(mu_);
  return updates_;
}

}  // namespace client
}  // namespace graphrun
