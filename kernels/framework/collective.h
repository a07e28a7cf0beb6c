// Collectives as kernels see them: the V2 collective ops (CollectiveReduceV2,
// CollectiveGatherV2, CollectiveBcastSendV2/RecvV2, under TensorFlow's
// names and attrs) describe one member's part of a collective and hand it
// to a CollectiveExecutor, which the runtime provides per step. One
// implementation per transport: in-process devices (shared memory,
// runtime/collective_local.h), tasks over the data channel, and later NCCL;
// the ops never know which.
//
// Group and instance: the members of group `group_key` (group_size
// devices) find each other on their first collective; a member is ranked
// by its device name, sorted. The n-th run of instance `instance_key` on a
// device meets the n-th run on every other member, so the same graph runs
// step after step with the same keys. Every member gets a bit-identical
// result.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_COLLECTIVE_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_COLLECTIVE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "kernels/framework/cancellation.h"

namespace graphrun {

class Accelerator;
class DeviceCollectiveBackend;

enum class CollectiveType { kReduce, kGather, kBroadcastSend, kBroadcastRecv };
enum class CollectiveMerge { kAdd, kMul, kMin, kMax };
enum class CollectiveFinal { kId, kDiv };

// "reduce", "gather", "broadcast send", "broadcast recv".
inline const char* CollectiveTypeName(CollectiveType type) {
  switch (type) {
    case CollectiveType::kReduce:
      return "reduce";
    case CollectiveType::kGather:
      return "gather";
    case CollectiveType::kBroadcastSend:
      return "broadcast send";
    case CollectiveType::kBroadcastRecv:
      return "broadcast recv";
  }
  return "?";
}

// One member's description of one run of a collective.
struct CollectiveArgs {
  CollectiveType type = CollectiveType::kReduce;
  int group_size = 0;
  int32_t group_key = 0;
  int32_t instance_key = 0;
  CollectiveMerge merge_op = CollectiveMerge::kAdd;
  CollectiveFinal final_op = CollectiveFinal::kId;
  // "auto", "ring", "recursive_doubling" (executors may add their own).
  std::string communication_hint = "auto";
  double timeout_seconds = 0;  // 0: no limit
  DataType dtype = DT_INVALID;
  // kBroadcastRecv: the shape the receiver expects.
  TensorShape shape;
  std::string device;   // the member's device, full name
  int64_t step_id = 0;  // the step running it
  std::string node;     // the op's node, for errors
  // Set when the member's input (and result) stay in its accelerator's
  // memory and the round runs through `backend` (NCCL for GPUs); null for
  // members in host memory. Only executors that RunsDeviceBackend(backend)
  // see them.
  Accelerator* accelerator = nullptr;
  DeviceCollectiveBackend* backend = nullptr;
};

// A transport that runs whole rounds in device memory (NCCL between
// GPUs). Within one process, an in-process executor gathers a round's
// members as for host memory, validates them (types, shapes, senders), and
// hands the round to RunRound when every member names the backend. Across
// processes (a backend that SpansProcesses), the members of a group share
// one communicator: rank 0's process makes its id (NewCommunicatorId), the
// group's leader hands it to every member with each run's verdict, and
// each process runs its own members' part of every round through
// RunRanks, in the order the leader gave the group's rounds.
class DeviceCollectiveBackend {
 public:
  struct Member {
    const CollectiveArgs* args;  // args->accelerator holds `input`
    const Tensor* input;         // device memory; empty for kBroadcastRecv
    std::function<void(absl::StatusOr<Tensor>)> done;
  };
  // One process's part of a round of a communicator spanning processes.
  struct Round {
    std::string communicator;   // rank 0's NewCommunicatorId
    int size = 0;               // ranks in all (the group's size)
    std::vector<int> ranks;     // members[i] is rank ranks[i] (ascending)
    std::vector<int64_t> rows;  // gather: every rank's dimension 0, in rank order
    int sender = -1;            // broadcast: the sender's rank
  };
  virtual ~DeviceCollectiveBackend() = default;
  // "nccl"; a communication_hint of this name asks for it.
  virtual const std::string& name() const = 0;
  // Runs one validated round; `members` are in rank order (by device
  // name). Calls each member's `done` exactly once with its result, a new
  // tensor in its device's memory (ordered before the device's later
  // work), or an error naming the round.
  virtual void RunRound(std::vector<Member> members) = 0;

  // Whether a communicator may span processes (RunRanks).
  virtual bool SpansProcesses() const { return false; }
  // A new communicator's id, made by rank 0's process (NCCL: an
  // ncclUniqueId, whose bootstrap listens in this process).
  virtual absl::StatusOr<std::string> NewCommunicatorId() {
    return absl::UnimplementedError(name() + " does not span processes");
  }
  // This process's members of one round, validated by the group's leader
  // (dtype, shape, one sender). The first round of a communicator joins it
  // (every process's ranks join together). Every process calls RunRanks
  // for a communicator's rounds in the same order; calls each member's
  // `done` exactly once, as RunRound does.
  virtual void RunRanks(const Round& round, std::vector<Member> members) {
    for (Member& m : members) m.done(absl::UnimplementedError(name() + " does not span processes"));
  }
};

class CollectiveExecutor {
 public:
  using DoneCallback = std::function<void(absl::StatusOr<Tensor>)>;
  virtual ~CollectiveExecutor() = default;

  // Runs `args.device`'s part with `input` (ignored for kBroadcastRecv).
  // Calls `done` exactly once, possibly on another thread, with the result
  // (a new tensor this member owns) or an error naming the group, the
  // instance and the node: InvalidArgument for members that disagree
  // (group size, dtype, shape, type), DeadlineExceeded when the members do
  // not all arrive within args.timeout_seconds, Cancelled when `cancel`
  // (may be null) cancels first, Unavailable when a member's task is gone.
  virtual void Run(const CollectiveArgs& args, const Tensor& input, CancellationManager* cancel,
                   DoneCallback done) = 0;
  // Whether members with `backend` (args.backend) may come here: an
  // in-process executor runs any backend (every member of its rounds is
  // in this process); a cluster's, backends that span processes.
  virtual bool RunsDeviceBackend(const DeviceCollectiveBackend& backend) const { return false; }
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_COLLECTIVE_H_
