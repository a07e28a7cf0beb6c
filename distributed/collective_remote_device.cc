// RemoteCollectives, members in device memory: a DeviceCollectiveBackend
// whose communicators span processes (NCCL between the GPUs of several
// workers). The member of rank 0 makes its process's communicator id for
// the group once and sends it with every device run's instance key; the
// leader's verdict carries the id and the run's place in the group's
// sequence; each process launches the group's rounds in that sequence,
// its own members of a round together (see collective_remote.h).
#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "distributed/cluster_spec.h"
#include "distributed/collective_remote.h"
#include "distributed/collective_remote_internal.h"

namespace graphrun {
namespace distributed {
using collective_internal::Describe;
using collective_internal::TakeVerdict;

std::string RemoteCollectives::CommField(const std::shared_ptr<RunState>& st) {
  if (st->args.backend == nullptr || st->rank != 0) return "";
  std::lock_guard<std::mutex> l(comm_mu_);
  auto it = comm_ids_.find(st->args.group_key);
  if (it == comm_ids_.end()) {
    absl::StatusOr<std::string> id = st->args.backend->NewCommunicatorId();
    if (!id.ok()) {
      // The leader fails the run for every member with this.
      return absl::StrCat("!", id.status().ToString());
    }
    it = comm_ids_.emplace(st->args.group_key, absl::BytesToHexString(*id)).first;
  }
  return absl::StrCat("id:", it->second);
}

void RemoteCollectives::StartDevice(std::shared_ptr<RunState> st, const std::string& answer) {
  // "TEXT#SEQ#HEX", TEXT as for host members ("ok", "rows;...", "src;S").
  std::vector<std::string> parts = absl::StrSplit(answer, '#');
  int64_t sequence = -1;
  const bool hex = parts.size() == 3 && !parts[2].empty() && parts[2].size() % 2 == 0 &&
                   std::all_of(parts[2].begin(), parts[2].end(), absl::ascii_isxdigit);
  if (!hex || !absl::SimpleAtoi(parts[1], &sequence) || sequence < 0 ||
      !TakeVerdict(parts[0], st.get())) {
    Finish(st, absl::InternalError(absl::StrCat(Describe(st->args), ": the leader answered '",
                                                answer.substr(0, 200), "'")));
    return;
  }
  st->communicator = absl::HexStringToBytes(parts[2]);
  absl::Status aborted;
  {
    std::lock_guard<std::mutex> l(mu_);
    aborted = aborted_;
    if (aborted.ok()) device_queues_[st->args.group_key].ready[sequence].push_back(st);
  }
  if (!aborted.ok()) {
    Finish(st, aborted);
    return;
  }
  LaunchDevice(st->args.group_key);
}

void RemoteCollectives::LaunchDevice(int32_t group) {
  {
    std::lock_guard<std::mutex> l(mu_);
    DeviceQueue& q = device_queues_[group];
    if (q.launching) return;  // that thread launches what is ready
    q.launching = true;
  }
  for (;;) {
    // The next rounds whose every local member is here, in sequence.
    std::vector<std::vector<std::shared_ptr<RunState>>> rounds;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto qit = device_queues_.find(group);
      if (qit == device_queues_.end()) return;  // aborted meanwhile
      DeviceQueue& q = qit->second;
      for (auto it = q.ready.find(q.next); it != q.ready.end(); it = q.ready.find(q.next)) {
        const std::vector<std::string>& devices = it->second[0]->group->devices;
        const size_t local = static_cast<size_t>(
            std::count_if(devices.begin(), devices.end(),
                          [this](const std::string& d) { return TaskOfDevice(d) == task_; }));
        if (it->second.size() < local) break;
        rounds.push_back(std::move(it->second));
        q.ready.erase(it);
        ++q.next;
      }
      if (rounds.empty()) {
        q.launching = false;
        return;
      }
    }
    for (std::vector<std::shared_ptr<RunState>>& members : rounds) {
      std::sort(members.begin(), members.end(),
                [](const auto& a, const auto& b) { return a->rank < b->rank; });
      const RunState& first = *members[0];
      DeviceCollectiveBackend::Round round;
      round.communicator = first.communicator;
      round.size = first.n;
      round.rows = first.rows;
      round.sender = first.sender;
      std::vector<DeviceCollectiveBackend::Member> parts;
      for (const std::shared_ptr<RunState>& st : members) {
        round.ranks.push_back(st->rank);
        parts.push_back({&st->args, &st->input, [this, st](absl::StatusOr<Tensor> r) {
                           if (!r.ok()) {
                             Finish(st, r.status());
                             return;
                           }
                           st->output = *std::move(r);
                           Finish(st, absl::OkStatus());
                         }});
      }
      first.args.backend->RunRanks(round, std::move(parts));
    }
  }
}

}  // namespace distributed
}  // namespace graphrun
