// Internal to distributed/collective_remote*.cc: the keys, the helpers and
// one member's run state.
#ifndef GRAPHRUN_DISTRIBUTED_COLLECTIVE_REMOTE_INTERNAL_H_
#define GRAPHRUN_DISTRIBUTED_COLLECTIVE_REMOTE_INTERNAL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "distributed/collective_remote.h"

namespace graphrun {
namespace distributed {
namespace collective_internal {

inline constexpr char kPrefix[] = "collective;";
inline constexpr char kJoin[] = "collective;join;";
inline constexpr char kBuf[] = "collective;buf;";
inline constexpr char kInst[] = "collective;inst;";
// Pushed to every peer when a task's collectives stop after a failure
// (push mode): "collective;abort;TASK", a uint8 tensor of the int32
// status code and the message.
inline constexpr char kAbort[] = "collective;abort;";
// Ends the signature of a member in device memory: " via BACKEND".
inline constexpr char kVia[] = " via ";

// What the members of an instance must agree on (dtype and shape; for an
// all-reduce also the ops, hint and transport, which pick the algorithm).
std::string Signature(const CollectiveArgs& a, const Tensor& input, bool push);
// "collective reduce of group 1 instance 7 (node 'r' on DEVICE)".
std::string Describe(const CollectiveArgs& a);
// `why` (a failure reaching peer `task`) as "DESCRIBE: peer TASK (why)", or
// "...: why" when it names the task already; with `code`.
absl::Status PeerError(const CollectiveArgs& a, const std::string& task, absl::StatusCode code,
                       const absl::Status& why);
// "task TASK: collectives stopped after a failure: why", with why's code.
absl::Status StoppedAfter(const std::string& task, const absl::Status& why);
inline int Mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace collective_internal

// One member's run of one collective.
struct RemoteCollectives::RunState {
  CollectiveArgs args;
  Tensor input;
  DoneCallback done;
  CancellationManager* cancel = nullptr;
  CancellationToken token = -1;
  std::shared_ptr<const Group> group;
  int rank = 0, n = 0;
  int64_t run = 0;
  std::string prefix;               // "collective;buf;G;I;RUN;"
  Tensor buffer;                    // doubling: the result being built
  Tensor output;                    // ring: the result being built
  Tensor flat_buffer, flat_output;  // ring: 1-D views of the input and the output
  // Gather: every member's rows (rank order) and the pieces received.
  std::vector<int64_t> rows;
  // The broadcast's sender (the leader's verdict) and, for device
  // members, the group's communicator.
  int sender = -1;
  std::string communicator;
  std::vector<Tensor> pieces;
  int64_t elem = 0;  // bytes per element
  // Ring: segments of the tensor, each N chunks.
  std::vector<std::pair<int64_t, int64_t>> segments;  // [begin, end) elements
  std::atomic<int> segments_left{0};
  std::mutex mu;
  bool finished = false;
  std::vector<std::shared_ptr<CallOptions>> fetches;  // in flight
  std::vector<std::function<void()>> unwatch;         // push receives' WatchLoss

  // Chunk `c` of segment `s`: [begin, end) elements.
  std::pair<int64_t, int64_t> Chunk(int s, int c) const {
    const auto [b, e] = segments[s];
    return {b + (e - b) * c / n, b + (e - b) * (c + 1) / n};
  }
};

namespace collective_internal {
// The leader's verdict on an instance's run, host and device members
// alike: a gather's "rows;r0,r1,..." (every member's rows, in rank order)
// into st->rows, a broadcast's "src;S" (the sender's rank) into
// st->sender. False when `text` is not that (a reduce's "ok" always is).
bool TakeVerdict(const std::string& text, RemoteCollectives::RunState* st);
}  // namespace collective_internal

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_COLLECTIVE_REMOTE_INTERNAL_H_
