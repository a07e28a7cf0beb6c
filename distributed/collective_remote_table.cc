// RemoteCollectives, the task's serving side: its buffer table (pieces
// published for peers, their fetches), and as the leader, groups and
// instances; aborting and draining. The member side is collective_remote.cc.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "distributed/cluster_spec.h"
#include "distributed/collective_remote.h"
#include "distributed/collective_remote_internal.h"
#include "runtime/collective_math.h"

namespace graphrun {
namespace distributed {
using collective_internal::Describe;
using collective_internal::kAbort;
using collective_internal::kBuf;
using collective_internal::kInst;
using collective_internal::kJoin;
using collective_internal::kPrefix;
using collective_internal::kVia;
using collective_internal::Mod;
using collective_internal::Signature;

void RemoteCollectives::Put(const std::string& key, Tensor value) {
  Waiter w{nullptr, nullptr, nullptr};
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = waiters_.find(key);
    if (it == waiters_.end()) {
      buffers_[key] = std::move(value);
      return;
    }
    w = it->second;
    waiters_.erase(it);
  }
  if (w.opts != nullptr) w.opts->ClearCancelCallback();
  w.out->tensor = std::move(value);
  w.out->is_dead = false;
  w.done(absl::OkStatus());
}

uint64_t RemoteCollectives::ArmLeaderCancel(CallOptions* opts) {
  if (opts == nullptr) return 0;
  uint64_t call;
  {
    std::lock_guard<std::mutex> l(mu_);
    call = ++next_call_;
    arming_[call] = false;
  }
  opts->SetCancelCallback([this, call] {
    StatusCallback cb;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = arming_.find(call);
      if (it != arming_.end()) {
        it->second = true;  // EndArming refuses it
        return;
      }
      cb = TakeLeaderWaiter(call);
    }
    if (cb) cb(absl::CancelledError(absl::StrCat("task ", task_, ": collective wait cancelled")));
  });
  return call;
}

bool RemoteCollectives::EndArming(uint64_t call) {
  auto it = arming_.find(call);
  if (it == arming_.end()) return false;
  const bool cancelled = it->second;
  arming_.erase(it);
  return cancelled;
}

StatusCallback RemoteCollectives::TakeLeaderWaiter(uint64_t call) {
  auto take = [call](std::vector<Waiter>* pending) -> StatusCallback {
    for (auto it = pending->begin(); it != pending->end(); ++it) {
      if (it->call != call) continue;
      StatusCallback cb = std::move(it->done);
      pending->erase(it);
      return cb;
    }
    return nullptr;
  };
  for (auto& [group, g] : leader_groups_) {
    // The device stays a member: its next join is answered with the group.
    if (StatusCallback cb = take(&g.pending)) return cb;
  }
  for (auto it = leader_instances_.begin(); it != leader_instances_.end(); ++it) {
    if (StatusCallback cb = take(&it->second.pending)) {
      if (it->second.pending.empty()) leader_instances_.erase(it);
      return cb;
    }
  }
  return nullptr;
}

void RemoteCollectives::ServeInstance(const std::string& key, CallOptions* opts,
                                      RecvTensorResult* out, StatusCallback done) {
  // "collective;inst;G;I;RUN;SIZE;DEVICE;ROLE;ROWS;COMM;SIGNATURE"
  std::vector<std::string> parts =
      absl::StrSplit(key.substr(sizeof(kInst) - 1), absl::MaxSplits(';', 8));
  int32_t group = 0, instance = 0;
  int64_t run = 0;
  int size = 0;
  if (parts.size() != 9 || !absl::SimpleAtoi(parts[0], &group) ||
      !absl::SimpleAtoi(parts[1], &instance) || !absl::SimpleAtoi(parts[2], &run) ||
      !absl::SimpleAtoi(parts[3], &size) || parts[5].size() != 1) {
    done(
        absl::InvalidArgumentError(absl::StrCat("task ", task_, ": bad instance key '", key, "'")));
    return;
  }
  const std::string& device = parts[4];
  std::vector<Waiter> answer;
  absl::Status verdict;
  std::string text;
  absl::Status refused;
  const uint64_t call = ArmLeaderCancel(opts);
  {
    std::lock_guard<std::mutex> l(mu_);
    auto git = leader_groups_.find(group);
    if (EndArming(call)) {
      refused = absl::CancelledError(absl::StrCat("task ", task_, ": collective wait cancelled"));
    } else if (!aborted_.ok()) {
      refused = aborted_;
    } else if (git == leader_groups_.end() ||
               static_cast<int>(git->second.devices.size()) != size) {
      refused = absl::FailedPreconditionError(
          absl::StrCat("instance ", instance, " of group ", group, " before the group formed"));
    } else if (leader_instances_.size() >= kMaxLeaderInstances &&
               leader_instances_.count({group, instance, run}) == 0) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("task ", task_, ": the collective leader holds ", leader_instances_.size(),
                       " instances waiting for members, the most it keeps; instance ", instance,
                       " of group ", group, " (device ", device, ") is refused"));
    }
    if (refused.ok()) {
      LeaderInstance& inst = leader_instances_[{group, instance, run}];
      inst.members[device] = absl::StrCat(parts[5], ";", parts[6], ";", parts[8]);
      if (device == *git->second.devices.begin()) inst.rank0_comm = parts[7];
      inst.pending.push_back({out, std::move(done), opts, call});
      if (static_cast<int>(inst.members.size()) < size) return;
      // Every member spoke: one verdict for all, in rank order.
      const std::set<std::string>& ranked = git->second.devices;
      std::vector<std::string> rows;
      int source = -1, senders = 0, rank = 0;
      std::string signature, first_device;
      // The kind of collective: all-reduce, gather, or broadcast (sender
      // or receiver).
      auto kind = [](char role) { return role == 's' || role == 'r' ? 'b' : role; };
      const char first_kind = kind(inst.members.begin()->second[0]);
      const bool gather = first_kind == 'g';
      for (const std::string& d : ranked) {
        auto it = inst.members.find(d);
        if (it == inst.members.end()) {
          verdict = absl::InvalidArgumentError(
              absl::StrCat("device ", d, " of group ", group, " did not join instance ", instance));
          break;
        }
        std::vector<std::string> f = absl::StrSplit(it->second, absl::MaxSplits(';', 2));
        if (f[0] == "s") {
          source = rank;
          ++senders;
        }
        if (signature.empty()) {
          signature = f[2];
          first_device = d;
        } else if (f[2] != signature) {
          verdict = absl::InvalidArgumentError(
              absl::StrCat("collective instance ", instance, " of group ", group, ": device ", d,
                           " has ", f[2], " but ", first_device, " has ", signature));
        }
        if (kind(f[0][0]) != first_kind) {
          verdict = absl::InvalidArgumentError(
              absl::StrCat("collective instance ", instance, " of group ", group,
                           ": its members run different collectives (device ", d, " runs a ",
                           kind(f[0][0]) == 'a'   ? "reduce"
                           : kind(f[0][0]) == 'g' ? "gather"
                                                  : "broadcast",
                           ")"));
        }
        rows.push_back(f[1]);
        ++rank;
      }
      // Device members (their signature names the backend): the run's
      // number in the group's sequence and rank 0's communicator.
      const bool device_run = absl::StrContains(signature, kVia);
      const std::string& comm = inst.rank0_comm;
      if (verdict.ok() && device_run && !absl::StartsWith(comm, "id:")) {
        verdict = absl::Status(
            comm.empty() ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kInternal,
            absl::StrCat("collective instance ", instance, " of group ", group, ": rank 0 (",
                         *git->second.devices.begin(), ") ",
                         comm.empty()
                             ? "gave no communicator id"
                             : absl::StrCat("could not make a communicator: ", comm.substr(1))));
      }
      if (verdict.ok()) {
        if (first_kind == 'a') {
          text = "ok";
        } else if (gather) {
          text = absl::StrCat("rows;", absl::StrJoin(rows, ","));
        } else if (senders != 1) {
          verdict = absl::InvalidArgumentError(
              absl::StrCat("collective broadcast instance ", instance, " of group ", group,
                           " needs exactly one sender, found ", senders));
        } else {
          text = absl::StrCat("src;", source);
        }
      }
      if (verdict.ok() && device_run) {
        absl::StrAppend(&text, "#", leader_sequence_[group]++, "#", comm.substr(3));
      }
      answer.swap(inst.pending);
      leader_instances_.erase({group, instance, run});
    }
  }
  if (!refused.ok()) {
    if (opts != nullptr) opts->ClearCancelCallback();
    done(refused);
    return;
  }
  for (Waiter& w : answer) {
    if (w.opts != nullptr) w.opts->ClearCancelCallback();
    if (!verdict.ok()) {
      w.done(verdict);
      continue;
    }
    Tensor t(DT_UINT8, TensorShape({static_cast<int64_t>(text.size())}));
    std::memcpy(t.raw_data(), text.data(), text.size());
    w.out->tensor = std::move(t);
    w.out->is_dead = false;
    w.done(absl::OkStatus());
  }
}

void RemoteCollectives::Serve(const std::string& key, CallOptions* opts, RecvTensorResult* out,
                              StatusCallback done) {
  if (absl::StartsWith(key, kInst)) {
    ServeInstance(key, opts, out, std::move(done));
  } else if (absl::StartsWith(key, kJoin)) {
    ServeJoin(key, opts, out, std::move(done));
  } else if (absl::StartsWith(key, kBuf)) {
    Take(key, opts, out, std::move(done));
  } else {
    done(absl::InvalidArgumentError(
        absl::StrCat("task ", task_, ": bad collective key '", key, "'")));
  }
}

void RemoteCollectives::ServeJoin(const std::string& key, CallOptions* opts, RecvTensorResult* out,
                                  StatusCallback done) {
  // "collective;join;G;SIZE;DEVICE"
  std::vector<std::string> parts =
      absl::StrSplit(key.substr(sizeof(kJoin) - 1), absl::MaxSplits(';', 2));
  int32_t group = 0;
  int size = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &group) ||
      !absl::SimpleAtoi(parts[1], &size) || size < 1) {
    done(absl::InvalidArgumentError(absl::StrCat("task ", task_, ": bad join key '", key, "'")));
    return;
  }
  if (size > kMaxGroupSize) {
    done(absl::InvalidArgumentError(absl::StrCat("group ", group, ": group_size ", size,
                                                 " is over the limit of ", kMaxGroupSize,
                                                 " devices (device ", parts[2], ")")));
    return;
  }
  const std::string& device = parts[2];
  std::vector<Waiter> answer;
  std::string members;
  absl::Status refused;
  const uint64_t call = ArmLeaderCancel(opts);
  {
    std::lock_guard<std::mutex> l(mu_);
    const bool full = leader_groups_.size() >= kMaxLeaderGroups && !leader_groups_.count(group);
    LeaderGroup none;  // past the limit: refused below, never made
    LeaderGroup& g = full ? none : leader_groups_[group];
    if (g.size == 0) g.size = size;
    if (EndArming(call)) {
      refused = absl::CancelledError(absl::StrCat("task ", task_, ": collective wait cancelled"));
    } else if (!aborted_.ok()) {
      refused = aborted_;
    } else if (full) {
      refused = absl::ResourceExhaustedError(absl::StrCat(
          "task ", task_, ": the collective leader holds ", leader_groups_.size(),
          " groups, the most it keeps; group ", group, " of device ", device, " is refused"));
    } else if (g.size != size) {
      refused = absl::InvalidArgumentError(absl::StrCat("group ", group, " has group_size ", g.size,
                                                        " (set by its first member) but device ",
                                                        device, " says ", size));
    } else if (g.devices.count(device) == 0 && static_cast<int>(g.devices.size()) == g.size) {
      refused = absl::InvalidArgumentError(absl::StrCat(
          "device ", device, " is not a member of group ", group, ", which is complete with ",
          g.size, " devices (", absl::StrJoin(g.devices, ", "), ")"));
    } else {
      g.devices.insert(device);
      g.pending.push_back({out, std::move(done), opts, call});
      if (static_cast<int>(g.devices.size()) < g.size) return;
      members = absl::StrJoin(g.devices, "\n");
      answer.swap(g.pending);
    }
  }
  if (!refused.ok()) {
    if (opts != nullptr) opts->ClearCancelCallback();
    done(refused);
    return;
  }
  for (Waiter& w : answer) {
    if (w.opts != nullptr) w.opts->ClearCancelCallback();
    Tensor t(DT_UINT8, TensorShape({static_cast<int64_t>(members.size())}));
    if (!members.empty()) std::memcpy(t.raw_data(), members.data(), members.size());
    w.out->tensor = std::move(t);
    w.out->is_dead = false;
    w.done(absl::OkStatus());
  }
}

void RemoteCollectives::Take(const std::string& key, CallOptions* opts, RecvTensorResult* out,
                             StatusCallback done) {
  // Cancellation is armed before the waiter is published: once published,
  // a Put may answer and the caller free `opts` at any time.
  if (opts != nullptr) {
    opts->SetCancelCallback([this, key, opts] {
      StatusCallback cb;
      {
        std::lock_guard<std::mutex> l(mu_);
        auto it = waiters_.find(key);
        if (it == waiters_.end() || it->second.opts != opts) {
          cancelled_keys_.insert(key);  // not published yet (another call's waiter stays)
          return;
        }
        cb = std::move(it->second.done);
        waiters_.erase(it);
      }
      cb(absl::CancelledError(absl::StrCat("task ", task_, ": collective fetch cancelled")));
    });
  }
  absl::Status answer;  // OK with `out` filled, or the refusal
  bool published = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = buffers_.find(key);
    if (it != buffers_.end()) {
      out->tensor = std::move(it->second);
      out->is_dead = false;
      buffers_.erase(it);
      if (buffers_.empty()) drained_cv_.notify_all();
    } else if (cancelled_keys_.erase(key) > 0) {
      answer = absl::CancelledError(absl::StrCat("task ", task_, ": collective fetch cancelled"));
    } else if (waiters_.count(key) > 0) {
      // One fetcher per piece: a second would orphan the first (its call
      // never answered, beyond every cancel).
      answer = absl::AlreadyExistsError(
          absl::StrCat("task ", task_, ": collective piece '", key, "' is already being fetched"));
    } else {
      answer = aborted_;
      if (answer.ok()) {
        waiters_[key] = Waiter{out, std::move(done), opts};
        published = true;
      }
    }
  }
  if (published) return;
  if (opts != nullptr) opts->ClearCancelCallback();
  done(answer);
}

void RemoteCollectives::Drain(int timeout_ms) {
  std::unique_lock<std::mutex> l(mu_);
  drained_cv_.wait_for(l, std::chrono::milliseconds(timeout_ms),
                       [this] { return buffers_.empty(); });
}

void RemoteCollectives::AbortAll(const absl::Status& why) { Abort(why, /*tell_peers=*/false); }

void RemoteCollectives::Abort(const absl::Status& why, bool tell_peers) {
  bool first;
  std::set<std::string> peers;  // every other task of the groups this task is in
  std::vector<Waiter> failed;
  std::vector<std::shared_ptr<RunState>> runs;
  std::map<std::string, std::function<void(absl::StatusOr<Tensor>)>> receivers;
  std::map<std::string, Tensor> inbox;  // freed outside mu_
  {
    std::lock_guard<std::mutex> l(mu_);
    first = aborted_.ok();
    if (first) aborted_ = why;
    if (first && tell_peers && push_) {
      for (const auto& [key, g] : groups_) {
        for (const std::string& d : g->devices) {
          const std::string t = TaskOfDevice(d);
          if (t != task_) peers.insert(t);
        }
      }
    }
    for (auto& [key, w] : waiters_) failed.push_back(std::move(w));
    waiters_.clear();
    buffers_.clear();
    receivers.swap(inbox_waiters_);
    inbox.swap(inbox_);
    inbox_bytes_ = 0;
    drained_cv_.notify_all();
    for (auto& [group, g] : leader_groups_) {
      for (Waiter& w : g.pending) failed.push_back(std::move(w));
      g.pending.clear();
    }
    for (auto& [key, inst] : leader_instances_) {
      for (Waiter& w : inst.pending) failed.push_back(std::move(w));
    }
    leader_instances_.clear();
    device_queues_.clear();  // (their runs are in running_)
    runs.assign(running_.begin(), running_.end());
  }
  // Push mode: peers wait for pieces instead of asking for them, so they
  // would never hear of this; tell them (best effort: a peer that cannot
  // be reached is failing anyway). Told first, so they learn it before
  // this task's own runs return.
  if (!peers.empty()) {
    const std::string message(why.message());
    Tensor notice(DT_UINT8, TensorShape({static_cast<int64_t>(4 + message.size())}));
    const int32_t code = static_cast<int32_t>(why.code());
    std::memcpy(notice.raw_data(), &code, 4);
    std::memcpy(notice.raw_data() + 4, message.data(), message.size());
    for (const std::string& t : peers) {
      auto w = workers_->GetWorker(t);
      if (!w.ok()) continue;
      std::shared_ptr<WorkerInterface> worker = *w;
      worker->PushTensorAsync(absl::StrCat(kAbort, task_), notice,
                              [worker](const absl::Status&) {});
    }
  }
  for (Waiter& w : failed) {
    if (w.opts != nullptr) w.opts->ClearCancelCallback();
    w.done(why);
  }
  for (auto& [key, cb] : receivers) cb(why);
  for (auto& st : runs) Finish(st, why);
}

}  // namespace distributed
}  // namespace graphrun
