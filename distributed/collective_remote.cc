#include "distributed/collective_remote.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "distributed/cluster_spec.h"
#include "distributed/collective_remote_internal.h"
#include "runtime/collective_math.h"

namespace graphrun {
namespace distributed {
namespace collective_internal {

// The dtype and shape members of an instance must agree on: for a gather
// all but dimension 0, for a broadcast the whole shape.
std::string Signature(const CollectiveArgs& a, const Tensor& input, bool push) {
  // Members in device memory name their transport: a device member and a
  // host member never meet.
  const std::string via = a.backend != nullptr ? absl::StrCat(kVia, a.backend->name()) : "";
  if (a.type == CollectiveType::kReduce) {
    // What every member must agree on, algorithm and transport included.
    return absl::StrCat(DataTypeString(a.dtype), "[", input.NumElements(), "] merge ",
                        static_cast<int>(a.merge_op), " final ", static_cast<int>(a.final_op),
                        " hint ", a.communication_hint, push ? " push" : " pull", via);
  }
  TensorShape shape = a.type == CollectiveType::kBroadcastRecv ? a.shape : input.shape();
  std::vector<int64_t> dims(shape.dim_sizes().begin(), shape.dim_sizes().end());
  if (a.type == CollectiveType::kGather && !dims.empty()) dims.erase(dims.begin());
  return absl::StrCat(DataTypeString(a.dtype), "[", absl::StrJoin(dims, ","), "]", via);
}

// "collective reduce of group 1 instance 7 (node 'r' on DEVICE)".
std::string Describe(const CollectiveArgs& a) {
  return absl::StrCat("collective ", CollectiveTypeName(a.type), " of group ", a.group_key,
                      " instance ", a.instance_key, " (node '", a.node, "' on ", a.device, ")");
}

absl::Status PeerError(const CollectiveArgs& a, const std::string& task, absl::StatusCode code,
                       const absl::Status& why) {
  const std::string msg(why.message());
  return absl::Status(
      code, absl::StrCat(Describe(a), ": peer ", task,
                         msg.find(task) == std::string::npos ? absl::StrCat(" (", msg, ")")
                                                             : absl::StrCat(": ", msg)));
}

absl::Status StoppedAfter(const std::string& task, const absl::Status& why) {
  return absl::Status(
      why.code(),
      absl::StrCat("task ", task, ": collectives stopped after a failure: ", why.message()));
}

bool TakeVerdict(const std::string& text, RemoteCollectives::RunState* st) {
  if (st->args.type == CollectiveType::kReduce) return true;
  if (st->args.type == CollectiveType::kGather) {
    if (!absl::StartsWith(text, "rows;")) return false;
    st->rows.clear();
    for (absl::string_view p : absl::StrSplit(text.substr(5), ',')) {
      int64_t r = -1;
      if (!absl::SimpleAtoi(p, &r) || r < 0) return false;
      st->rows.push_back(r);
    }
    return static_cast<int>(st->rows.size()) == st->n;
  }
  return absl::StartsWith(text, "src;") && absl::SimpleAtoi(text.substr(4), &st->sender) &&
         st->sender >= 0 && st->sender < st->n;
}

}  // namespace collective_internal

using collective_internal::Describe;
using collective_internal::kAbort;
using collective_internal::kBuf;
using collective_internal::kInst;
using collective_internal::kJoin;
using collective_internal::kPrefix;
using collective_internal::Mod;
using collective_internal::PeerError;
using collective_internal::Signature;
using collective_internal::StoppedAfter;
using collective_internal::TakeVerdict;

RemoteCollectives::RemoteCollectives(std::string task, WorkerCacheInterface* workers,
                                     std::string leader)
    : task_(std::move(task)),
      workers_(workers),
      leader_(std::move(leader)),
      timer_([this] { TimerLoop(); }) {}

RemoteCollectives::~RemoteCollectives() {
  AbortAll(absl::CancelledError(absl::StrCat("task ", task_, ": collectives shut down")));
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  timer_cv_.notify_all();
  timer_.join();
}

std::string RemoteCollectives::LeaderOf(const std::vector<std::string>& tasks) {
  for (const char* job : {"/job:chief/", "/job:worker/"}) {
    for (const std::string& t : tasks) {
      auto id = ParseTaskName(t);
      if (absl::StartsWith(t, job) && id.ok() && id->task == 0) return t;
    }
  }
  return tasks.empty() ? std::string() : tasks[0];
}

bool RemoteCollectives::IsCollectiveKey(const std::string& key) {
  return absl::StartsWith(key, kPrefix);
}

void RemoteCollectives::Run(const CollectiveArgs& args, const Tensor& input,
                            CancellationManager* cancel, DoneCallback done) {
  auto st = std::make_shared<RunState>();
  st->args = args;
  st->input = input;
  st->done = std::move(done);
  st->cancel = cancel;
  if (args.backend != nullptr && !args.backend->SpansProcesses()) {
    st->done(absl::InternalError(absl::StrCat(Describe(args), ": ", args.backend->name(),
                                              " does not span processes, yet came to a cluster's "
                                              "collectives")));
    return;
  }
  if (args.type == CollectiveType::kReduce && args.backend == nullptr &&
      (!collective_math::Reducible(args.dtype) || input.dtype() != args.dtype)) {
    st->done(absl::InvalidArgumentError(
        absl::StrCat(Describe(args), ": cannot reduce ", DataTypeString(input.dtype()))));
    return;
  }
  if (cancel != nullptr) {
    st->token = cancel->NewToken();
    std::weak_ptr<RunState> weak = st;
    if (!cancel->RegisterCallback(st->token, [this, weak] {
          if (auto s = weak.lock()) {
            Finish(s, absl::CancelledError(absl::StrCat(Describe(s->args), ": cancelled")));
          }
        })) {
      st->token = -1;
      st->done(absl::CancelledError(absl::StrCat(Describe(args), ": cancelled")));
      return;
    }
  }
  absl::Status aborted;
  int64_t became_busy = 0;  // a generation: the first run in flight
  {
    std::lock_guard<std::mutex> l(mu_);
    aborted = aborted_;
    if (aborted.ok()) {
      st->run = next_run_[{args.group_key, args.instance_key, args.device}]++;
      st->prefix = absl::StrCat(kBuf, args.group_key, ";", args.instance_key, ";", st->run, ";");
      running_.insert(st);
      if (running_.size() == 1 && health_ != nullptr) became_busy = ++watch_generation_;
      if (args.timeout_seconds > 0) {
        deadlines_.emplace(Clock::now() + std::chrono::microseconds(
                                              static_cast<int64_t>(args.timeout_seconds * 1e6)),
                           st);
        timer_cv_.notify_all();
      }
    }
  }
  if (became_busy > 0) WatchPeers(became_busy);
  if (!aborted.ok()) {
    Finish(st, aborted);
    return;
  }
  ResolveGroup(st);
}

void RemoteCollectives::ResolveGroup(std::shared_ptr<RunState> st) {
  std::shared_ptr<const Group> known;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = groups_.find(st->args.group_key);
    if (it != groups_.end()) known = it->second;
  }
  if (known != nullptr) {
    {
      std::lock_guard<std::mutex> l(st->mu);
      st->group = known;
    }
    Start(st);
    return;
  }
  auto worker = workers_->GetWorker(leader_);
  if (!worker.ok()) {
    Finish(st, absl::UnavailableError(absl::StrCat(Describe(st->args), ": leader ", leader_, ": ",
                                                   worker.status().message())));
    return;
  }
  auto opts = std::make_shared<CallOptions>();
  auto req = std::make_shared<RecvTensorRequest>();
  auto res = std::make_shared<RecvTensorResult>();
  req->set_rendezvous_key(
      absl::StrCat(kJoin, st->args.group_key, ";", st->args.group_size, ";", st->args.device));
  {
    std::lock_guard<std::mutex> l(st->mu);
    st->fetches.push_back(opts);
  }
  std::shared_ptr<WorkerInterface> w = *worker;
  w->RecvTensorAsync(
      opts.get(), *req, res.get(), [this, st, opts, req, res, w](const absl::Status& s) {
        if (!s.ok()) {
          Finish(st,
                 absl::Status(s.code(), absl::StrCat(Describe(st->args), ": joining the group at ",
                                                     leader_, ": ", s.message())));
          return;
        }
        const Tensor& t = res->tensor;
        std::string text(t.raw_data(), static_cast<size_t>(t.TotalBytes()));
        auto group = std::make_shared<Group>();
        group->size = st->args.group_size;
        group->devices = absl::StrSplit(text, '\n', absl::SkipEmpty());
        if (static_cast<int>(group->devices.size()) != group->size) {
          Finish(st, absl::InternalError(
                         absl::StrCat(Describe(st->args), ": the leader answered ", text)));
          return;
        }
        {
          std::lock_guard<std::mutex> l(mu_);
          groups_.emplace(st->args.group_key, group);
        }
        st->group = group;
        Start(st);
      });
}

void RemoteCollectives::Receive(std::shared_ptr<RunState> st, int rank, const std::string& key,
                                std::function<void(absl::StatusOr<Tensor>)> cb) {
  Tensor got;
  absl::Status aborted;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = inbox_.find(key);
    if (!aborted_.ok()) {
      aborted = aborted_;
    } else if (it != inbox_.end()) {
      got = std::move(it->second);
      inbox_bytes_ -= got.TotalBytes();
      inbox_.erase(it);
    } else {
      inbox_waiters_[key] = std::move(cb);
    }
  }
  if (!aborted.ok()) {
    Finish(st, aborted);
    return;
  }
  if (got.IsInitialized()) {
    cb(std::move(got));
    return;
  }
  // Waiting: the connection to the sender closing (it died, or stopped)
  // fails the run at once, as a pull from it would; heartbeats cover the
  // rest.
  const std::string task = TaskOfDevice(st->group->devices[rank]);
  auto worker = workers_->GetWorker(task);
  if (!worker.ok()) return;
  // Weak: a cancelled watch stays with the connection until its next
  // watch, and must not keep the run's tensors alive.
  std::function<void()> unwatch = (*worker)->WatchLoss(
      [this, weak = std::weak_ptr<RunState>(st), key, task](const absl::Status& why) {
        std::shared_ptr<RunState> st = weak.lock();
        if (st == nullptr) return;
        bool waiting;
        {
          std::lock_guard<std::mutex> l(mu_);
          waiting = inbox_waiters_.erase(key) > 0;
        }
        if (!waiting) return;
        Finish(st, PeerError(st->args, task, absl::StatusCode::kUnavailable, why));
      });
  bool finished;
  {
    std::lock_guard<std::mutex> l(st->mu);
    finished = st->finished;
    if (!finished) st->unwatch.push_back(unwatch);
  }
  if (finished) unwatch();
}

absl::Status RemoteCollectives::Deliver(const std::string& key, const Tensor& value) {
  if (key.rfind(kAbort, 0) == 0) {
    // A peer's collectives stopped: so do this task's (its runs would wait
    // for pieces that never come). The notice: int32 code, then message.
    if (value.dtype() != DT_UINT8 || value.TotalBytes() < 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("task ", task_, ": a malformed abort notice '", key.substr(0, 200), "'"));
    }
    int32_t code;
    std::memcpy(&code, value.raw_data(), 4);
    std::string message(value.raw_data() + 4, static_cast<size_t>(value.TotalBytes() - 4));
    if (code <= 0 || code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
      code = static_cast<int32_t>(absl::StatusCode::kUnknown);
    }
    Abort(absl::Status(static_cast<absl::StatusCode>(code), message), /*tell_peers=*/false);
    return absl::OkStatus();
  }
  std::function<void(absl::StatusOr<Tensor>)> waiter;
  absl::Status refused;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!aborted_.ok()) return aborted_;
    auto it = inbox_waiters_.find(key);
    if (key.rfind(kBuf, 0) != 0) {
      refused = absl::InvalidArgumentError(absl::StrCat(
          "task ", task_, ": pushed '", key.substr(0, 200), "' is no collective piece"));
    } else if (!value.IsInitialized()) {
      refused = absl::ResourceExhaustedError(absl::StrCat(
          "task ", task_, ": collective piece '", key, "' arrived but could not be allocated"));
    } else if (it != inbox_waiters_.end()) {
      waiter = std::move(it->second);
      inbox_waiters_.erase(it);
    } else if (inbox_.count(key) > 0) {
      refused = absl::AlreadyExistsError(
          absl::StrCat("task ", task_, ": collective piece '", key, "' was pushed twice"));
    } else if (inbox_bytes_ + value.TotalBytes() > kMaxInboxBytes) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("task ", task_, ": collective pieces pushed ahead of their runs exceed ",
                       kMaxInboxBytes, " bytes"));
    } else if (inbox_.size() >= kMaxInboxPieces) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("task ", task_, ": ", inbox_.size(),
                       " collective pieces pushed ahead of their runs, the most it keeps"));
    } else {
      inbox_bytes_ += value.TotalBytes();
      inbox_.emplace(key, value);
      return absl::OkStatus();
    }
  }
  if (!refused.ok()) {
    // The pusher was told OK (pushes are one-way): a refused piece stops
    // this task's collectives and tells every peer, so nobody waits on it.
    Abort(refused, /*tell_peers=*/true);
    return refused;
  }
  waiter(value);
  return absl::OkStatus();
}

void RemoteCollectives::Start(std::shared_ptr<RunState> st) {
  const Group& g = *st->group;
  if (g.size != st->args.group_size) {
    Finish(st, absl::InvalidArgumentError(absl::StrCat(
                   Describe(st->args), ": group ", st->args.group_key, " has group_size ", g.size,
                   " but this member says ", st->args.group_size)));
    return;
  }
  auto pos = std::find(g.devices.begin(), g.devices.end(), st->args.device);
  if (pos == g.devices.end()) {
    Finish(st, absl::InvalidArgumentError(
                   absl::StrCat(Describe(st->args), ": device ", st->args.device,
                                " is not a member of group ", st->args.group_key)));
    return;
  }
  st->rank = static_cast<int>(pos - g.devices.begin());
  st->n = g.size;
  if (st->args.type == CollectiveType::kReduce && st->args.backend == nullptr) {
    // The members agree on dtype, size and algorithm the first time an
    // instance runs (at the leader); later runs of it skip the round trip
    // (device runs agree every time: the verdict orders them).
    const std::string signature = Signature(st->args, st->input, push_);
    bool checked;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = checked_.find({st->args.group_key, st->args.instance_key});
      checked = it != checked_.end() && it->second == signature;
    }
    if (checked) {
      StartReduce(st);
      return;
    }
  }
  ResolveInstance(st);
}

void RemoteCollectives::StartReduce(std::shared_ptr<RunState> st) {
  st->elem = DataTypeSize(st->args.dtype);
  const int64_t count = st->input.NumElements();
  const int64_t bytes = count * st->elem;
  const bool pow2 = (st->n & (st->n - 1)) == 0;
  const std::string& hint = st->args.communication_hint;
  const bool doubling =
      pow2 && (hint == "recursive_doubling" || (hint != "ring" && bytes <= kSmallBytes));
  if (st->n == 1 || doubling) {
    st->buffer = st->input.DeepCopy();
    if (st->n == 1) {
      collective_math::Finish(st->args.dtype, st->args.final_op, st->buffer.raw_data(), count, 1);
      Finish(st, absl::OkStatus());
    } else {
      DoublingStep(st, 0);
    }
    return;
  }
  // The ring builds the result in `output`, never copying the input: the
  // reduce-scatter writes output = input (op) received, chunk by chunk,
  // and the all-gather fills in the other members' final chunks.
  st->output = Tensor(st->args.dtype, st->input.shape());
  st->flat_buffer = *st->input.Reshaped(TensorShape({count}));
  st->flat_output = *st->output.Reshaped(TensorShape({count}));
  // Segments: up to 4 independent rings of >= 1 MiB each.
  const int64_t segs = std::clamp<int64_t>(bytes >> 20, 1, 4);
  for (int64_t s = 0; s < segs; ++s) {
    st->segments.push_back({count * s / segs, count * (s + 1) / segs});
  }
  st->segments_left = static_cast<int>(segs);
  for (int s = 0; s < static_cast<int>(segs); ++s) RingStep(st, s, 0, 0);
}

bool RemoteCollectives::Finished(const std::shared_ptr<RunState>& st) {
  std::lock_guard<std::mutex> l(st->mu);
  return st->finished;
}

void RemoteCollectives::RingStep(std::shared_ptr<RunState> st, int segment, int phase, int t) {
  if (Finished(st)) return;
  const int n = st->n, r = st->rank;
  if (t == n - 1) {
    if (phase == 0) {
      // This member's chunk is complete: finish it, then all-gather.
      auto [b, e] = st->Chunk(segment, Mod(r + 1, n));
      collective_math::Finish(st->args.dtype, st->args.final_op,
                              st->output.raw_data() + b * st->elem, e - b, n);
      RingStep(st, segment, 1, 0);
    } else {
      SegmentDone(st);
    }
    return;
  }
  const int send = phase == 0 ? Mod(r - t, n) : Mod(r + 1 - t, n);
  const int recv = phase == 0 ? Mod(r - t - 1, n) : Mod(r - t, n);
  auto key = [&](int from) {
    return absl::StrCat(st->prefix, "s", segment, phase == 0 ? "rs" : "ag", t, ";", from);
  };
  // No copy. The reduce-scatter sends the input's own chunk first, then
  // the partial sums it wrote into the output; the all-gather sends final
  // chunks. A partial sum of chunk c is overwritten only when the final
  // chunk c arrives in the all-gather, and chunk c can be final only
  // after the next member merged that partial sum (it is on c's chain):
  // so no piece changes while a peer may still read it. The input's
  // chunk likewise is read before this member's run can end.
  auto [sb, se] = st->Chunk(segment, send);
  Put(key(r), (phase == 0 && t == 0 ? st->flat_buffer : st->flat_output).Slice(sb, se));
  const int prev = Mod(r - 1, n);
  // The all-gather's chunks may arrive straight in the output (a failed
  // run's output is dropped, so a late write there is harmless).
  Tensor into;
  if (phase == 1) {
    auto [rb, re] = st->Chunk(segment, recv);
    into = st->flat_output.Slice(rb, re);
  }
  Fetch(
      st, prev, key(prev),
      [this, st, segment, phase, t, recv](absl::StatusOr<Tensor> v) {
        if (!v.ok()) {
          Finish(st, v.status());
          return;
        }
        auto [b, e] = st->Chunk(segment, recv);
        if (v->dtype() != st->args.dtype || v->NumElements() != e - b) {
          Finish(st, absl::InvalidArgumentError(absl::StrCat(
                         Describe(st->args), ": ", st->group->devices[Mod(st->rank - 1, st->n)],
                         " sent ", v->DebugString(0), " where ", e - b, " ",
                         DataTypeString(st->args.dtype),
                         " were expected (members disagree on "
                         "the dtype or shape)")));
          return;
        }
        char* dst = st->output.raw_data() + b * st->elem;
        if (phase == 0) {
          // Each chunk is merged once per member: output = input (op) received.
          collective_math::MergeInto(st->args.dtype, st->args.merge_op, dst,
                                     st->input.raw_data() + b * st->elem, v->raw_data(), e - b);
        } else if (v->raw_data() != dst) {
          std::memcpy(dst, v->raw_data(), static_cast<size_t>((e - b) * st->elem));
        }
        RingStep(st, segment, phase, t + 1);
      },
      std::move(into));
}

void RemoteCollectives::DoublingStep(std::shared_ptr<RunState> st, int k) {
  if (Finished(st)) return;
  const int n = st->n, r = st->rank;
  if ((1 << k) >= n) {
    collective_math::Finish(st->args.dtype, st->args.final_op, st->buffer.raw_data(),
                            st->buffer.NumElements(), n);
    Finish(st, absl::OkStatus());
    return;
  }
  const int partner = r ^ (1 << k);
  auto key = [&](int from) { return absl::StrCat(st->prefix, "rd", k, ";", from); };
  auto merge = [this, st, k, partner](absl::StatusOr<Tensor> v) {
    if (!v.ok()) {
      Finish(st, v.status());
      return;
    }
    if (v->dtype() != st->args.dtype || v->shape() != st->buffer.shape()) {
      Finish(st, absl::InvalidArgumentError(
                     absl::StrCat(Describe(st->args), ": ", st->group->devices[partner], " sent ",
                                  v->DebugString(0), " where ", DataTypeString(st->args.dtype), " ",
                                  st->buffer.shape().DebugString(), " was expected")));
      return;
    }
    // Merges are commutative, so both partners get the same bytes.
    collective_math::Merge(st->args.dtype, st->args.merge_op, st->buffer.raw_data(), v->raw_data(),
                           st->buffer.NumElements());
    DoublingStep(st, k + 1);
  };
  // The piece goes out (a copy: the merge below changes the buffer) before
  // the partner's is merged.
  if (push_) {
    Push(st, partner, key(r), st->buffer.DeepCopy());
    Receive(st, partner, key(partner), std::move(merge));
  } else {
    Put(key(r), st->buffer.DeepCopy());
    Fetch(st, partner, key(partner), std::move(merge));
  }
}

void RemoteCollectives::Push(std::shared_ptr<RunState> st, int rank, const std::string& key,
                             Tensor value) {
  const std::string task = TaskOfDevice(st->group->devices[rank]);
  auto worker = workers_->GetWorker(task);
  if (!worker.ok()) {
    Finish(st, absl::UnavailableError(absl::StrCat(Describe(st->args), ": peer ", task, ": ",
                                                   worker.status().message())));
    return;
  }
  std::shared_ptr<WorkerInterface> w = *worker;
  num_pushed_.fetch_add(1);
  w->PushTensorAsync(key, value, [this, st, w, task](const absl::Status& s) {
    if (s.ok()) return;
    absl::Status failed = PeerError(st->args, task, s.code(), s);
    // A push that fails after this member's run ended (an RPC's late
    // answer) still leaves the partner without its piece: abort, and tell.
    if (Finished(st)) {
      Abort(StoppedAfter(task_, failed), /*tell_peers=*/true);
      return;
    }
    Finish(st, failed);
  });
}

void RemoteCollectives::SegmentDone(std::shared_ptr<RunState> st) {
  if (st->segments_left.fetch_sub(1) == 1) Finish(st, absl::OkStatus());
}

void RemoteCollectives::WatchPeers(int64_t generation) {
  std::vector<std::string> peers;
  for (const std::string& t : workers_->ListTasks()) {
    if (t != task_) peers.push_back(t);
  }
  HealthMonitor::Watch w = health_->WatchTasks(peers, [this](const absl::Status& why) {
    bool busy;
    {
      std::lock_guard<std::mutex> l(mu_);
      busy = !running_.empty();
    }
    if (busy) AbortAll(why);
  });
  {
    std::lock_guard<std::mutex> l(mu_);
    if (generation == watch_generation_) {
      std::swap(watch_, w);  // still busy since: keep it
    }
  }
  w.Cancel();  // (a stale one, outside mu_)
}

void RemoteCollectives::Finish(std::shared_ptr<RunState> st, absl::Status status) {
  std::vector<std::shared_ptr<CallOptions>> fetches;
  std::vector<std::function<void()>> unwatch;
  {
    std::lock_guard<std::mutex> l(st->mu);
    if (st->finished) return;
    st->finished = true;
    fetches.swap(st->fetches);
    unwatch.swap(st->unwatch);
  }
  for (auto& u : unwatch) u();
  HealthMonitor::Watch idle;  // cancelled after mu_ is released
  {
    std::lock_guard<std::mutex> l(mu_);
    running_.erase(st);
    if (running_.empty()) {
      ++watch_generation_;
      idle = std::move(watch_);
    }
  }
  idle.Cancel();
  if (st->cancel != nullptr && st->token >= 0) st->cancel->DeregisterCallback(st->token);
  if (!status.ok()) {
    // As TensorFlow's collective executor: one failure aborts every
    // collective of this task (a group whose members skipped a run never
    // lines up again); peers waiting on this member's pieces learn why.
    for (auto& f : fetches) f->StartCancel();
    bool first;
    {
      std::lock_guard<std::mutex> l(mu_);
      first = aborted_.ok();
    }
    if (first) Abort(StoppedAfter(task_, status), /*tell_peers=*/true);
    st->done(status);
    return;
  }
  st->done(st->output.IsInitialized() ? std::move(st->output) : std::move(st->buffer));
}

void RemoteCollectives::Fetch(std::shared_ptr<RunState> st, int rank, const std::string& key,
                              std::function<void(absl::StatusOr<Tensor>)> cb, Tensor into) {
  const std::string device = st->group->devices[rank];
  const std::string task = TaskOfDevice(device);
  auto worker = workers_->GetWorker(task);
  if (!worker.ok()) {
    cb(absl::UnavailableError(
        absl::StrCat(Describe(st->args), ": peer ", task, ": ", worker.status().message())));
    return;
  }
  auto opts = std::make_shared<CallOptions>();
  auto req = std::make_shared<RecvTensorRequest>();
  auto res = std::make_shared<RecvTensorResult>();
  req->set_rendezvous_key(key);
  res->destination = std::move(into);
  {
    std::lock_guard<std::mutex> l(st->mu);
    if (st->finished) return;
    st->fetches.push_back(opts);
  }
  std::shared_ptr<WorkerInterface> w = *worker;
  w->RecvTensorAsync(opts.get(), *req, res.get(),
                     [st, opts, req, res, w, task, cb = std::move(cb)](const absl::Status& s) {
                       {
                         std::lock_guard<std::mutex> l(st->mu);
                         auto& f = st->fetches;
                         f.erase(std::remove(f.begin(), f.end(), opts), f.end());
                       }
                       if (!s.ok()) {
                         cb(PeerError(st->args, task, s.code(), s));
                         return;
                       }
                       cb(std::move(res->tensor));
                     });
}

void RemoteCollectives::ResolveInstance(std::shared_ptr<RunState> st) {
  const CollectiveArgs& a = st->args;
  const char role = a.type == CollectiveType::kReduce          ? 'a'
                    : a.type == CollectiveType::kGather        ? 'g'
                    : a.type == CollectiveType::kBroadcastSend ? 's'
                                                               : 'r';
  const int64_t rows = a.type == CollectiveType::kGather ? st->input.dim_size(0) : 0;
  auto worker = workers_->GetWorker(leader_);
  if (!worker.ok()) {
    Finish(st, absl::UnavailableError(absl::StrCat(Describe(a), ": leader ", leader_, ": ",
                                                   worker.status().message())));
    return;
  }
  auto opts = std::make_shared<CallOptions>();
  auto req = std::make_shared<RecvTensorRequest>();
  auto res = std::make_shared<RecvTensorResult>();
  req->set_rendezvous_key(absl::StrCat(
      kInst, a.group_key, ";", a.instance_key, ";", st->run, ";", a.group_size, ";", a.device, ";",
      std::string(1, role), ";", rows, ";", CommField(st), ";", Signature(a, st->input, push_)));
  {
    std::lock_guard<std::mutex> l(st->mu);
    if (st->finished) return;
    st->fetches.push_back(opts);
  }
  std::shared_ptr<WorkerInterface> w = *worker;
  w->RecvTensorAsync(
      opts.get(), *req, res.get(), [this, st, opts, req, res, w](const absl::Status& s) {
        if (!s.ok()) {
          Finish(st, absl::Status(s.code(), absl::StrCat(Describe(st->args), ": ", s.message())));
          return;
        }
        const std::string answer(res->tensor.raw_data(),
                                 static_cast<size_t>(res->tensor.TotalBytes()));
        if (st->args.backend != nullptr) {
          StartDevice(st, answer);
        } else if (st->args.type == CollectiveType::kReduce) {
          {
            std::lock_guard<std::mutex> l(mu_);
            checked_[{st->args.group_key, st->args.instance_key}] =
                Signature(st->args, st->input, push_);
          }
          StartReduce(st);
        } else if (!TakeVerdict(answer, st.get())) {
          Finish(st, absl::InternalError(absl::StrCat(Describe(st->args), ": the leader answered '",
                                                      answer.substr(0, 200), "'")));
        } else if (st->args.type == CollectiveType::kGather) {
          st->pieces.assign(st->n, Tensor());
          st->pieces[st->rank] = st->input;
          GatherStep(st, 0);
        } else {
          Broadcast(st, st->sender);
        }
      });
}

void RemoteCollectives::Broadcast(std::shared_ptr<RunState> st, int source) {
  auto key = [&](int receiver) { return absl::StrCat(st->prefix, "bc;", receiver); };
  if (st->rank == source) {
    // One entry per receiver, each taken once; they share the buffer.
    for (int k = 0; k < st->n; ++k) {
      if (k != source) Put(key(k), st->input);
    }
    st->output = st->input;
    Finish(st, absl::OkStatus());
    return;
  }
  Fetch(st, source, key(st->rank), [this, st](absl::StatusOr<Tensor> v) {
    if (!v.ok()) {
      Finish(st, v.status());
      return;
    }
    if (v->dtype() != st->args.dtype || v->shape() != st->args.shape) {
      Finish(st, absl::InvalidArgumentError(absl::StrCat(Describe(st->args), ": received ",
                                                         v->DebugString(0), ", expected ",
                                                         st->args.shape.DebugString())));
      return;
    }
    st->output = std::move(*v);
    Finish(st, absl::OkStatus());
  });
}

void RemoteCollectives::GatherStep(std::shared_ptr<RunState> st, int t) {
  if (Finished(st)) return;
  const int n = st->n, r = st->rank;
  if (t == n - 1) {
    int64_t rows = 0;
    for (int64_t x : st->rows) rows += x;
    TensorShape shape = st->input.shape();
    shape.set_dim(0, rows);
    Tensor out(st->args.dtype, shape);
    char* p = out.raw_data();
    for (const Tensor& piece : st->pieces) {
      const size_t bytes = static_cast<size_t>(piece.TotalBytes());
      if (bytes > 0) std::memcpy(p, piece.raw_data(), bytes);
      p += bytes;
    }
    st->output = std::move(out);
    Finish(st, absl::OkStatus());
    return;
  }
  auto key = [&](int from) { return absl::StrCat(st->prefix, "ga", t, ";", from); };
  Put(key(r), st->pieces[Mod(r - t, n)]);
  const int prev = Mod(r - 1, n);
  const int piece = Mod(r - t - 1, n);
  Fetch(st, prev, key(prev), [this, st, t, piece](absl::StatusOr<Tensor> v) {
    if (!v.ok()) {
      Finish(st, v.status());
      return;
    }
    const int64_t row = st->input.dims() > 0 && st->input.dim_size(0) > 0
                            ? st->input.NumElements() / st->input.dim_size(0)
                            : -1;
    if (v->dtype() != st->args.dtype || v->dims() != st->input.dims() ||
        v->dim_size(0) != st->rows[piece] ||
        (row >= 0 && v->NumElements() != row * v->dim_size(0))) {
      Finish(st, absl::InvalidArgumentError(absl::StrCat(Describe(st->args), ": rank ", piece,
                                                         "'s piece is ", v->DebugString(0))));
      return;
    }
    st->pieces[piece] = std::move(*v);
    GatherStep(st, t + 1);
  });
}

void RemoteCollectives::TimerLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    if (deadlines_.empty()) {
      timer_cv_.wait(l);
      continue;
    }
    auto first = deadlines_.begin();
    if (Clock::now() < first->first) {
      timer_cv_.wait_until(l, first->first);
      continue;
    }
    std::shared_ptr<RunState> st = first->second.lock();
    deadlines_.erase(first);
    if (st == nullptr) continue;
    l.unlock();
    bool done;
    std::shared_ptr<const Group> group;
    {
      std::lock_guard<std::mutex> sl(st->mu);
      done = st->finished;
      group = st->group;
    }
    if (!done) {
      Finish(st, absl::DeadlineExceededError(
                     absl::StrCat(Describe(st->args), ": timed out after ",
                                  st->args.timeout_seconds, " s (members: ",
                                  group != nullptr ? absl::StrJoin(group->devices, ", ")
                                                   : std::string("group not yet complete"),
                                  ")")));
    }
    l.lock();
  }
}

}  // namespace distributed
}  // namespace graphrun
