// RemoteCollectives: the CollectiveExecutor of a task of a cluster, for
// groups whose members are devices of several tasks (multi-worker
// all-reduce). One per task (its Worker's environment).
//
// Group resolution, as TensorFlow's distributed param resolver: a member
// joins its group at the leader task (the chief, else worker 0) with a
// RecvTensor of the key "collective;join;G;SIZE;DEVICE"; the leader answers
// every member once group_size devices joined, with the members sorted
// (their ranks). A member that says another group size, or a device beyond
// a complete group, gets InvalidArgument naming it.
//
// Data moves with the task's RecvTensor transport (the data channel, or
// gRPC), by pull: a member publishes each piece it sends under a key in its
// own buffer table, and the peer that needs it fetches it. Recursive
// doubling pushes instead when the task watches its peers' health
// (set_push): each piece goes to the partner unasked
// (WorkerInterface::PushTensorAsync, one message instead of a request and
// its answer) and waits in the partner's inbox until its run takes it. A
// partner that dies shows as the connection to it closing (the one this
// member pushed on), as a push that fails, or else as the heartbeats'
// Unavailable naming it (within interval x misses). A member whose
// collectives stop after a failure while it lives pushes an abort notice
// to its peers, which then fail with its status instead of waiting for
// pieces that never come. Members agree on the transport with the rest of
// an instance's signature, so a member that pulls while another pushes is
// an InvalidArgument naming it, never a hang. Algorithms:
//   * ring (reduce-scatter then all-gather, the tensor split into
//     segments that run as independent rings, so transfers and merges of
//     different segments overlap);
//   * recursive doubling for small tensors on a power-of-two group.
// "auto" picks recursive doubling up to kSmallBytes, else the ring;
// communication_hint "ring" / "recursive_doubling" overrides. Each chunk's
// final value is computed by one member and copied to the others (ring),
// or by the same commutative merges on every member (doubling), so every
// member gets bit-identical bytes.
//
// Members in device memory (args.backend, a DeviceCollectiveBackend that
// spans processes: NCCL between the GPUs of several workers) take another
// path: every run agrees at the leader, the member of rank 0 adding its
// process's communicator id for the group (made once, by the backend), and
// the leader's verdict gives the run a sequence number within the group
// and the id. Each process hands the group's rounds to the backend
// (RunRanks, its members of a round together) strictly in that sequence,
// so every rank of a communicator enqueues the same collectives in the
// same order, whatever order its kernels arrived in. Device and host
// members of one instance disagree on the signature (InvalidArgument).
//
// Gather and broadcast first agree at the leader (as TensorFlow's instance
// resolution), and so does an all-reduce instance on its first run (dtype,
// size, ops, hint: what picks the algorithm, so members never wait on each
// other's different keys): every member reports its role, its rows and
// its dtype/shape; the leader answers with the sender's rank
// or every member's rows, or with InvalidArgument naming the member that
// disagrees. Broadcast: receivers fetch from the sender. Gather: a ring
// passes every member's piece around; the result is the pieces in rank
// order.
//
// A peer that fails (its connection closes: the task died) fails the run
// with Unavailable naming that task; the run's pending buffers then fail
// their takers with the same error, so the whole group learns it.
//
// Thread-safe.
#ifndef GRAPHRUN_DISTRIBUTED_COLLECTIVE_REMOTE_H_
#define GRAPHRUN_DISTRIBUTED_COLLECTIVE_REMOTE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "distributed/health.h"
#include "distributed/worker_interface.h"
#include "kernels/framework/collective.h"

namespace graphrun {
namespace distributed {

class RemoteCollectives final : public CollectiveExecutor {
 public:
  // Up to this many bytes "auto" uses recursive doubling (power-of-two
  // groups).
  static constexpr int64_t kSmallBytes = 64 << 10;

  // `task` is this task; `workers` reaches every task (this one included);
  // `leader` is the task that resolves groups.
  RemoteCollectives(std::string task, WorkerCacheInterface* workers, std::string leader);
  ~RemoteCollectives() override;

  // The leader of a cluster: its chief, else worker 0, else its first task.
  static std::string LeaderOf(const std::vector<std::string>& tasks);
  // True for the RecvTensor keys Serve handles.
  static bool IsCollectiveKey(const std::string& key);

  void Run(const CollectiveArgs& args, const Tensor& input, CancellationManager* cancel,
           DoneCallback done) override;
  // Backends whose communicators span processes (see the top).
  bool RunsDeviceBackend(const DeviceCollectiveBackend& backend) const override {
    return backend.SpansProcesses();
  }

  // A peer's RecvTensor of a collective key: a group join (on the leader)
  // or a published buffer. `opts` (may be null) cancels the wait.
  void Serve(const std::string& key, CallOptions* opts, RecvTensorResult* out, StatusCallback done);

  // A piece a peer pushed (WorkerInterface::PushTensorAsync): handed to
  // the run waiting for it, or kept until that run starts. Refused (and
  // this task's collectives aborted, its peers told, as the pusher was
  // told OK): a key that is no piece (InvalidArgument), a piece that could
  // not be allocated (an uninitialized `value`) or held ahead of its run
  // over kMaxInboxBytes or kMaxInboxPieces (ResourceExhausted: empty
  // pieces count too), a piece pushed twice (AlreadyExists). After an
  // abort: the abort status. A peer's abort notice (a key under
  // "collective;abort;") aborts this task with the peer's status.
  absl::Status Deliver(const std::string& key, const Tensor& value);
  static constexpr int64_t kMaxInboxBytes = int64_t{1} << 30;
  static constexpr size_t kMaxInboxPieces = size_t{1} << 16;
  // Recursive doubling pushes its pieces (above). Set before the first
  // Run, the same on every member (it is part of the signature).
  void set_push(bool push) { push_ = push; }
  // Pieces this task pushed so far.
  int64_t num_pushed() const { return num_pushed_.load(); }

  // Fails every pending run, join and buffer wait with `why` (the task is
  // stopping, or a run failed: one failure aborts every collective of the
  // task, as TensorFlow's); later calls fail at once.
  void AbortAll(const absl::Status& why);
  // While collectives run, the other tasks are watched with `health`'s
  // heartbeats: one found dead aborts them all (AbortAll naming it).
  // Set before the first Run; may be null.
  void set_health(HealthMonitor* health) { health_ = health; }
  // Waits (up to `timeout_ms`) until peers took every piece this task
  // published: a task that finished its last collective stays to serve
  // them before it stops.
  void Drain(int timeout_ms);

  // What the leader keeps for its members, at most: groups (each up to
  // kMaxGroupSize devices) and instances waiting for their members. A
  // join or instance past them is refused (InvalidArgument for the group
  // size, ResourceExhausted for the tables), so a member that names new
  // groups or instances without end cannot exhaust the leader's memory.
  static constexpr int kMaxGroupSize = 1 << 16;
  static constexpr size_t kMaxLeaderGroups = size_t{1} << 16;
  static constexpr size_t kMaxLeaderInstances = size_t{1} << 16;

  struct RunState;

 private:
  using Clock = std::chrono::steady_clock;
  struct Group {
    int size = 0;
    std::vector<std::string> devices;  // sorted: the ranks
  };
  struct Waiter {
    RecvTensorResult* out;
    StatusCallback done;
    CallOptions* opts;
    uint64_t call = 0;  // a join or instance wait's ArmLeaderCancel id
  };
  struct LeaderGroup {
    int size = 0;
    std::set<std::string> devices;
    std::vector<Waiter> pending;
  };
  // One run of a gather or broadcast instance, as the leader sees it: what
  // each member said (role, rows, signature), until all have.
  struct LeaderInstance {
    std::map<std::string, std::string> members;  // device -> "ROLE;ROWS;SIGNATURE"
    std::string rank0_comm;                      // device runs: rank 0's COMM field
    std::vector<Waiter> pending;
  };

  // Resolves args' group through the leader (cached once known).
  void ResolveGroup(std::shared_ptr<RunState> st);
  void Start(std::shared_ptr<RunState> st);
  void StartReduce(std::shared_ptr<RunState> st);
  void RingStep(std::shared_ptr<RunState> st, int segment, int phase, int t);
  void DoublingStep(std::shared_ptr<RunState> st, int k);
  void SegmentDone(std::shared_ptr<RunState> st);
  static bool Finished(const std::shared_ptr<RunState>& st);
  void Finish(std::shared_ptr<RunState> st, absl::Status status);
  // Heartbeats to every other task while runs are in flight (from the
  // run that made this generation busy).
  void WatchPeers(int64_t generation);
  // AbortAll; with `tell_peers` (a failure here, in push mode) the first
  // abort also pushes a notice to every other task of this task's groups,
  // whose Deliver aborts them with the same status.
  void Abort(const absl::Status& why, bool tell_peers);
  // Publishes `value` under `key` in this task's table.
  void Put(const std::string& key, Tensor value);
  // Pushes `value` to the task of `rank`'s device under `key`; a failed
  // push fails the run naming the peer.
  void Push(std::shared_ptr<RunState> st, int rank, const std::string& key, Tensor value);
  // Calls `cb` with the piece that `rank`'s task pushed under `key` once it
  // is here; the connection to that task closing meanwhile fails the run.
  void Receive(std::shared_ptr<RunState> st, int rank, const std::string& key,
               std::function<void(absl::StatusOr<Tensor>)> cb);
  // Fetches `key` from the task of `rank`'s device; the transport may
  // receive it straight into `into` (RecvTensorResult::destination).
  void Fetch(std::shared_ptr<RunState> st, int rank, const std::string& key,
             std::function<void(absl::StatusOr<Tensor>)> cb, Tensor into = Tensor());
  void ServeJoin(const std::string& key, CallOptions* opts, RecvTensorResult* out,
                 StatusCallback done);
  // A join or instance wait's cancellation, armed (on `opts`, if any)
  // before its waiter is published: a cancel before that refuses it
  // (EndArming), one while it waits answers it Cancelled, one after its
  // answer does nothing. Returns the call's id (0 without `opts`).
  uint64_t ArmLeaderCancel(CallOptions* opts);
  // REQUIRES: mu_. True if the call was cancelled while arming.
  bool EndArming(uint64_t call);
  // REQUIRES: mu_. Removes call's waiter from the leader's groups and
  // instances; its callback, or null if it was answered.
  StatusCallback TakeLeaderWaiter(uint64_t call);
  // Gather and broadcast: agree at the leader on the sender / the rows of
  // each member, then exchange.
  void ResolveInstance(std::shared_ptr<RunState> st);
  void ServeInstance(const std::string& key, CallOptions* opts, RecvTensorResult* out,
                     StatusCallback done);
  void Broadcast(std::shared_ptr<RunState> st, int source);
  void GatherStep(std::shared_ptr<RunState> st, int t);
  void Take(const std::string& key, CallOptions* opts, RecvTensorResult* out, StatusCallback done);
  void TimerLoop();
  // Device members (collective_remote_device.cc). The COMM field of a
  // device run's instance key: "id:HEX" (rank 0's communicator id),
  // "!why" (rank 0 could not make one), or "" (other ranks).
  std::string CommField(const std::shared_ptr<RunState>& st);
  // Takes the leader's verdict for a device run ("TEXT#SEQ#HEX"): the
  // run's sequence number and communicator, then queues it for launch.
  void StartDevice(std::shared_ptr<RunState> st, const std::string& answer);
  // Launches the group's rounds whose local members are all queued, in
  // sequence order (one thread at a time per group).
  void LaunchDevice(int32_t group);

  const std::string task_;
  WorkerCacheInterface* const workers_;
  const std::string leader_;

  std::mutex mu_;
  absl::Status aborted_;                                    // AbortAll's reason
  std::map<int32_t, std::shared_ptr<const Group>> groups_;  // resolved (member side)
  std::map<int32_t, LeaderGroup> leader_groups_;            // leader side
  std::map<std::tuple<int32_t, int32_t, int64_t>, LeaderInstance> leader_instances_;
  std::map<std::tuple<int32_t, int32_t, std::string>, int64_t> next_run_;
  // All-reduce instances whose members agreed (at the leader), with the
  // signature they agreed on.
  std::map<std::pair<int32_t, int32_t>, std::string> checked_;
  std::map<std::string, Tensor> buffers_;
  bool push_ = false;
  std::atomic<int64_t> num_pushed_{0};
  std::map<std::string, Tensor> inbox_;  // pushed pieces not taken yet
  int64_t inbox_bytes_ = 0;
  std::map<std::string, std::function<void(absl::StatusOr<Tensor>)>> inbox_waiters_;
  std::map<std::string, Waiter> waiters_;
  std::set<std::string> cancelled_keys_;  // fetches cancelled before they waited
  uint64_t next_call_ = 0;
  std::map<uint64_t, bool> arming_;  // join/instance calls arming -> cancelled
  std::set<std::shared_ptr<RunState>> running_;
  HealthMonitor* health_ = nullptr;
  HealthMonitor::Watch watch_;  // while running_ is not empty
  int64_t watch_generation_ = 0;
  std::multimap<Clock::time_point, std::weak_ptr<RunState>> deadlines_;
  std::condition_variable timer_cv_;
  std::condition_variable drained_cv_;  // buffers_ became empty
  bool stopping_ = false;
  std::thread timer_;
  // Device members: per group, the next sequence number to launch, the
  // runs queued by sequence number, and whether a thread is launching.
  struct DeviceQueue {
    int64_t next = 0;
    std::map<int64_t, std::vector<std::shared_ptr<RunState>>> ready;
    bool launching = false;
  };
  std::map<int32_t, DeviceQueue> device_queues_;
  std::map<int32_t, int64_t> leader_sequence_;  // leader: the next device run's number
  std::mutex comm_mu_;                          // making communicator ids (outside mu_)
  std::map<int32_t, std::string> comm_ids_;     // rank 0's communicator per group
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_COLLECTIVE_REMOTE_H_
