// Per-step rendezvous of one task. A step's RemoteRendezvous is created by
// whichever arrives first — the task's RunGraph or a peer's RecvTensor —
// and dropped by CleanupGraph.
//
//  - Send: into the step's local table.
//  - RecvAsync for a key whose source device is on this task: the local
//    table. Otherwise the source task's RecvTensor is called through the
//    worker cache; the call is cancelled when the step is cancelled or
//    aborted, and its error names the source task.
//  - ServeRecv (the RecvTensor handler): checks the key's incarnation
//    against the local device (a mismatch means the peer planned against a
//    previous incarnation of this task: Aborted naming the task), then waits
//    in the local table.
//
// Thread-safe.
#ifndef GRAPHRUN_DISTRIBUTED_RENDEZVOUS_MGR_H_
#define GRAPHRUN_DISTRIBUTED_RENDEZVOUS_MGR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "distributed/worker_interface.h"
#include "runtime/device.h"
#include "runtime/local_rendezvous.h"

namespace graphrun {
namespace distributed {

class RemoteRendezvous : public Rendezvous, public std::enable_shared_from_this<RemoteRendezvous> {
 public:
  RemoteRendezvous(int64_t step_id, std::string task, const DeviceMgr* device_mgr,
                   WorkerCacheInterface* worker_cache);
  ~RemoteRendezvous() override;

  absl::Status Send(const ParsedKey& key, const Args& args, const Tensor& value,
                    bool is_dead) override;
  void RecvAsync(const ParsedKey& key, const Args& args, DoneCallback done) override;
  void StartAbort(const absl::Status& status) override;

  // Serves a peer's RecvTensor for `key` (source device on this task).
  // `opts` cancels the wait.
  void ServeRecv(const ParsedKey& key, CallOptions* opts, DoneCallback done);

  int64_t step_id() const { return step_id_; }

  // Why the rendezvous was aborted; OK while it is not.
  absl::Status abort_status();

 private:
  void RecvRemote(const ParsedKey& key, const Args& args, DoneCallback done);

  const int64_t step_id_;
  const std::string task_;
  const DeviceMgr* const device_mgr_;
  WorkerCacheInterface* const worker_cache_;
  LocalRendezvous local_;

  std::mutex mu_;
  absl::Status abort_status_;
  int64_t next_call_id_ = 0;
  absl::flat_hash_map<int64_t, std::shared_ptr<CallOptions>> active_calls_;

  // Guarded by the RendezvousMgr's mu_: whether this task's RunGraph took
  // the step, and how many peers' RecvTensor calls are being served.
  friend class RendezvousMgr;
  bool claimed_ = false;
  int serving_ = 0;
};

class RendezvousMgr {
 public:
  RendezvousMgr(std::string task, const DeviceMgr* device_mgr, WorkerCacheInterface* worker_cache);

  // The step's rendezvous for this task's RunGraph, created if needed.
  // Aborted if the step was already cleaned up on this task.
  absl::StatusOr<std::shared_ptr<RemoteRendezvous>> Find(int64_t step_id);
  // The step's rendezvous for serving a peer's RecvTensor, created if
  // needed (the peer may ask before this task's RunGraph comes); Aborted
  // if the step was cleaned up (a late RecvTensor). Pair with EndServe once
  // the call ends: a step that no RunGraph took is dropped when its last
  // served call ends, so calls for steps this task never runs (a stale or
  // bad key, a master that died before the step reached this task) leave
  // nothing behind.
  absl::StatusOr<std::shared_ptr<RemoteRendezvous>> FindForServe(int64_t step_id);
  void EndServe(const std::shared_ptr<RemoteRendezvous>& r);
  // Aborts the step's rendezvous with `status` and forgets it.
  void Cleanup(int64_t step_id, const absl::Status& status);
  void CleanupAll(const absl::Status& status);
  size_t num_steps();

 private:
  static constexpr size_t kRememberCleaned = 4096;
  absl::StatusOr<std::shared_ptr<RemoteRendezvous>> FindLocked(int64_t step_id);
  const std::string task_;
  const DeviceMgr* const device_mgr_;
  WorkerCacheInterface* const worker_cache_;
  std::mutex mu_;
  absl::flat_hash_map<int64_t, std::shared_ptr<RemoteRendezvous>> table_;
  // Recently cleaned steps, oldest first, so a late RecvTensor fails fast
  // instead of re-creating the step.
  std::set<int64_t> cleaned_;
  std::deque<int64_t> cleaned_order_;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RENDEZVOUS_MGR_H_
