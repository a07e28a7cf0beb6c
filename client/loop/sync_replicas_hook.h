// SyncReplicasHook: runs a SyncReplicasOptimizer inside a TrainingLoop
// (TensorFlow's SyncReplicasOptimizer.make_session_run_hook).
//
//   AfterInit  chief: chief_init_op, then the chief queue runner — a thread
//              running chief_sync_op in a loop on a second session of its
//              own (so its blocking take never holds up the loop's
//              session); every other worker first waits (up to
//              wait_timeout) until the chief's chief_init_op ran, and with
//              set_recovery, until it ran again after the last generation
//              this process saw; then every worker: local_step_init_op.
//   AfterLoop  chief: stops the queue runner (closing its session cancels
//              the take it is blocked in) before the final checkpoint.
//   OnError    closes the token queue, so workers blocked on a token fail
//              at once instead of waiting for an update that never comes;
//              stops the queue runner.
// A failing queue runner also closes the token queue; its error is kept
// (status()) and returned by the chief's next AfterLoop. A replica whose
// AfterInit did not complete closes nothing. With set_recovery (a task
// that recovers in place from a lost task), an Unavailable, Aborted or
// DeadlineExceeded error — the step's or the queue runner's — closes
// nothing: the recovering chief drops the whole synchronization state
// (kSyncReplicasContainer) before it makes it again, where a late close
// would shut the new queue; a queue runner failing so ends the chief's own
// step instead (closing the loop's session), and the steps of workers
// that needed the lost task fail on their own, or with Aborted when the
// chief drops the queue they wait on. A worker that recovered from a loss
// the chief never saw finds no new generation within wait_timeout and
// joins the one it ran with again.
//
// Thread-safe: the loop's thread and the queue runner's.
#ifndef GRAPHRUN_CLIENT_LOOP_SYNC_REPLICAS_HOOK_H_
#define GRAPHRUN_CLIENT_LOOP_SYNC_REPLICAS_HOOK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/client_session.h"
#include "client/loop/training_loop.h"
#include "client/scope.h"
#include "client/train/sync_replicas_optimizer.h"

namespace graphrun {
namespace client {

class SyncReplicasHook : public TrainingHook {
 public:
  // `scope`: the graph holding the optimizer's ops; `queue_runner_options`:
  // how the chief opens the queue runner's session (the loop's target).
  // The optimizer must outlive the hook.
  SyncReplicasHook(const train::SyncReplicasOptimizer* optimizer, const Scope& scope,
                   SessionOptions queue_runner_options);
  ~SyncReplicasHook() override;

  // Recovery in place: `last_generation` (0: none yet) holds the
  // generation of the synchronization state this process last ran with,
  // across the hooks of its successive replicas; it must outlive the hook.
  void set_recovery(std::atomic<int64_t>* last_generation) { last_generation_ = last_generation; }
  // How long a worker waits for the chief's chief_init_op (default 120 s;
  // DeadlineExceeded after it).
  void set_wait_timeout(absl::Duration d) { wait_timeout_ = d; }
  // Ends a worker's wait early (Cancelled) once set; may be null.
  void set_stop(const std::atomic<bool>* stop) { stop_ = stop; }

  absl::Status AfterInit(const ClientSession& session, bool is_chief) override;
  void AfterStep(const StepInfo&, const std::vector<std::string>&) override {}
  absl::Status AfterLoop(const ClientSession& session) override;
  void OnError(const ClientSession& session, const absl::Status& status) override;

  // The queue runner's error (OK while it runs or after a clean stop).
  absl::Status status() const;
  // Updates the queue runner applied.
  int64_t updates() const;

 private:
  void QueueRunner();
  void StopQueueRunner();
  // Whether an error of `s` closes the token queue. REQUIRES: mu_ held.
  bool ClosesOnLocked(const absl::Status& s) const;
  // A worker's wait for the chief's chief_init_op; its generation.
  absl::StatusOr<int64_t> WaitForGeneration(const ClientSession& session) const;

  const train::SyncReplicasOptimizer* optimizer_;
  Scope scope_;
  SessionOptions options_;
  std::atomic<int64_t>* last_generation_ = nullptr;
  absl::Duration wait_timeout_ = absl::Seconds(120);
  const std::atomic<bool>* stop_ = nullptr;
  mutable std::mutex mu_;
  std::unique_ptr<ClientSession> qr_session_;
  const ClientSession* loop_session_ = nullptr;  // the chief's, from AfterInit
  bool joined_ = false;                          // AfterInit completed
  std::thread qr_thread_;
  bool stopping_ = false;
  absl::Status qr_status_;
  int64_t updates_ = 0;
};

}  // namespace client
}  // namespace graphrun

#endif  // GRAPHRUN_CLIENT_LOOP_SYNC_REPLICAS_HOOK_H_
