#include "client/loop/sync_replicas_hook.h"

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
  }
  GR_RETURN_IF_ERROR(session.Run({}, {}, {optimizer_->local_step_init_op()}).status());
  if (is_chief) {
    std::lock_guard<std::mutex> l(mu_);
    qr_session_ = std::make_unique<ClientSession>(scope_, options_);
    stopping_ = false;
    qr_thread_ = std::thread([this] { QueueRunner(); });
  }
  return absl::OkStatus();
}

void SyncReplicasHook::QueueRunner() {
  while (true) {
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
    }
    // Release the workers waiting for a token.
    qr_session_->Run({}, {}, {optimizer_->close_token_queue()}).status().IgnoreError();
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

void SyncReplicasHook::OnError(const ClientSession& session, const absl::Status&) {
  session.Run({}, {}, {optimizer_->close_token_queue()}).status().IgnoreError();
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
