// InProcessCollectives: the CollectiveExecutor for devices of one process
// (MirroredStrategy's replicas). Members meet in shared memory: when the
// last member of a run arrives, the result is computed once, in rank order
// (members ranked by device name), chunk by chunk on the runner for large
// tensors, and copied to each member's own output. So every member gets
// bit-identical bytes, and no bytes go through a socket. Members whose
// tensors stay in accelerator memory (CollectiveArgs::backend, NCCL for
// GPUs) meet here the same way, and their validated round runs through
// that backend; a round mixing them with host members is InvalidArgument.
//
// Runs: the n-th run of an instance on a device in a step meets the n-th
// run on the other members in the same step (members of one process run in
// one step).
//
// Groups: the first member of group_key sets its size; the group is
// complete when group_size distinct devices have joined. A member with
// another group size, or a device beyond a complete group, is
// InvalidArgument naming the node and device. Members of one run that
// disagree (collective type, dtype, shape, merge/final op, broadcast
// senders) all get InvalidArgument naming both sides.
//
// Thread-safe. Callbacks run on the thread of the last arriving member, on
// the runner, or on the timer thread (timeouts); never under a lock.
#ifndef GRAPHRUN_RUNTIME_COLLECTIVE_LOCAL_H_
#define GRAPHRUN_RUNTIME_COLLECTIVE_LOCAL_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/framework/collective.h"

namespace graphrun {

class InProcessCollectives final : public CollectiveExecutor {
 public:
  using Runner = std::function<void(std::function<void()>)>;
  // `runner` runs the chunks of large reductions in parallel (null: all
  // work on the last arriving member's thread).
  explicit InProcessCollectives(Runner runner);
  // Fails every pending member with Cancelled.
  ~InProcessCollectives() override;

  void Run(const CollectiveArgs& args, const Tensor& input, CancellationManager* cancel,
           DoneCallback done) override;
  // Every member is in this process: a round whose members all name one
  // DeviceCollectiveBackend (NCCL) runs there, in device memory.
  bool RunsDeviceBackend(const DeviceCollectiveBackend&) const override { return true; }

  // Elements per parallel chunk of a reduction (tests lower it).
  void set_chunk_elements(int64_t n) { chunk_elements_ = n; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Member {
    CollectiveArgs args;
    Tensor input;
    DoneCallback done;
    CancellationManager* cancel = nullptr;
    int64_t token = -1;
  };
  struct Round {
    int group_size = 0;
    std::vector<Member> members;  // arrival order
    int arrived = 0;              // including arrivals after a failure
    absl::Status failed;          // later arrivals get it too
    Clock::time_point deadline = Clock::time_point::max();
  };
  struct Group {
    int size = 0;
    std::set<std::string> devices;
  };
  // group, instance, step, run within the step
  using RoundKey = std::tuple<int32_t, int32_t, int64_t, int64_t>;
  using Callbacks = std::vector<std::pair<DoneCallback, absl::Status>>;

  // Marks `round` failed with `why` and takes its members' callbacks.
  // REQUIRES: mu_ held.
  Callbacks FailLocked(const RoundKey& key, Round& round, const absl::Status& why);
  void OnCancel(const RoundKey& key);
  // Validates the complete round and computes every member's result.
  void Execute(std::shared_ptr<Round> round);
  void Reduce(std::shared_ptr<Round> round);
  void TimerLoop();
  static void Deregister(std::vector<Member>& members);

  const Runner runner_;
  int64_t chunk_elements_ = int64_t{1} << 18;

  std::mutex mu_;
  std::condition_variable timer_cv_;
  bool stopping_ = false;
  std::map<int32_t, Group> groups_;
  // Per (group, instance, device): the step it last ran in and its runs
  // there. In-graph members share their step, so a step that failed
  // half-way never shifts the next step's pairing.
  std::map<std::tuple<int32_t, int32_t, std::string>, std::pair<int64_t, int64_t>> next_run_;
  std::map<RoundKey, std::shared_ptr<Round>> rounds_;
  std::thread timer_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_COLLECTIVE_LOCAL_H_
