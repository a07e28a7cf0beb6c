#include "runtime/collective_local.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/collective_math.h"

namespace graphrun {
namespace {

// "collective reduce of group 1 instance 7 (node 'r' on DEVICE)".
std::string Describe(const CollectiveArgs& a) {
  return absl::StrCat("collective ", CollectiveTypeName(a.type), " of group ", a.group_key,
                      " instance ", a.instance_key, " (node '", a.node, "' on ", a.device, ")");
}

std::string Who(const CollectiveArgs& a) {
  return absl::StrCat("node '", a.node, "' on ", a.device);
}

// InvalidArgument unless every member of the (rank-ordered) run agrees.
absl::Status Validate(const std::vector<const CollectiveArgs*>& m,
                      const std::vector<const Tensor*>& inputs) {
  const CollectiveArgs& a = *m[0];
  auto disagree = [&](size_t i, const std::string& what, const std::string& mine,
                      const std::string& theirs) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(*m[i]), ": its ", what, " ", theirs,
                                                   " differs from ", Who(a), "'s ", mine));
  };
  const bool bcast =
      a.type == CollectiveType::kBroadcastSend || a.type == CollectiveType::kBroadcastRecv;
  int senders = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    const CollectiveArgs& b = *m[i];
    const bool b_bcast =
        b.type == CollectiveType::kBroadcastSend || b.type == CollectiveType::kBroadcastRecv;
    if (bcast != b_bcast || (!bcast && a.type != b.type)) {
      return disagree(i, "collective", CollectiveTypeName(a.type), CollectiveTypeName(b.type));
    }
    if (b.dtype != a.dtype) {
      return disagree(i, "dtype", DataTypeString(a.dtype), DataTypeString(b.dtype));
    }
    if (b.type == CollectiveType::kBroadcastSend) ++senders;
    if (a.type == CollectiveType::kReduce) {
      if (inputs[i]->shape() != inputs[0]->shape()) {
        return disagree(i, "shape", inputs[0]->shape().DebugString(),
                        inputs[i]->shape().DebugString());
      }
      if (b.merge_op != a.merge_op || b.final_op != a.final_op) {
        return absl::InvalidArgumentError(
            absl::StrCat(Describe(b), ": its merge_op/final_op differ from ", Who(a), "'s"));
      }
    } else if (a.type == CollectiveType::kGather) {
      const TensorShape& s0 = inputs[0]->shape();
      const TensorShape& si = inputs[i]->shape();
      bool same = si.dims() == s0.dims();
      for (int d = 1; same && d < si.dims(); ++d) same = si.dim_size(d) == s0.dim_size(d);
      if (!same) {
        return disagree(i, "shape", s0.DebugString(),
                        absl::StrCat(si.DebugString(), " (all but dimension 0 must match)"));
      }
    }
  }
  if (bcast && senders != 1) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(a),
                                                   ": a broadcast needs exactly one sender, found ",
                                                   senders, " among ", m.size(), " members"));
  }
  if (bcast) {
    size_t s = 0;
    while (m[s]->type != CollectiveType::kBroadcastSend) ++s;
    for (size_t i = 0; i < m.size(); ++i) {
      if (i != s && m[i]->shape != inputs[s]->shape()) {
        return disagree(i, "expected shape", inputs[s]->shape().DebugString(),
                        m[i]->shape.DebugString());
      }
    }
  }
  if (a.type == CollectiveType::kReduce && !collective_math::Reducible(a.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(a), ": cannot reduce ", DataTypeString(a.dtype)));
  }
  return absl::OkStatus();
}

// InvalidArgument unless the members all run through one device backend
// (NCCL) or all through host memory: a round cannot be split between the
// two.
absl::Status CheckBackends(const std::vector<const CollectiveArgs*>& m) {
  for (size_t i = 1; i < m.size(); ++i) {
    if (m[i]->backend == m[0]->backend) continue;
    auto how = [](const CollectiveArgs& a) {
      return a.backend != nullptr ? absl::StrCat("through ", a.backend->name(), " in device memory")
                                  : std::string("through host memory");
    };
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(*m[i]), ": it runs ", how(*m[i]), " but ", Who(*m[0]), " runs ", how(*m[0]),
        "; put every member on one kind of device, or give every member "
        "communication_hint='ring' to meet in host memory"));
  }
  return absl::OkStatus();
}

}  // namespace

InProcessCollectives::InProcessCollectives(Runner runner)
    : runner_(std::move(runner)), timer_([this] { TimerLoop(); }) {}

InProcessCollectives::~InProcessCollectives() {
  Callbacks callbacks;
  std::vector<Member> members;
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    for (auto& [key, round] : rounds_) {
      if (!round->failed.ok()) continue;
      for (Member& m : round->members) members.push_back(m);
      Callbacks c =
          FailLocked(key, *round, absl::CancelledError("the session's collectives were shut down"));
      callbacks.insert(callbacks.end(), c.begin(), c.end());
    }
    rounds_.clear();
  }
  timer_cv_.notify_all();
  timer_.join();
  Deregister(members);
  for (auto& [done, status] : callbacks) done(status);
}

void InProcessCollectives::Deregister(std::vector<Member>& members) {
  for (Member& m : members) {
    if (m.cancel != nullptr && m.token >= 0) m.cancel->DeregisterCallback(m.token);
    m.token = -1;
  }
}

InProcessCollectives::Callbacks InProcessCollectives::FailLocked(const RoundKey& key, Round& round,
                                                                 const absl::Status& why) {
  Callbacks callbacks;
  round.failed = why;
  for (Member& m : round.members) callbacks.emplace_back(std::move(m.done), why);
  round.members.clear();
  if (round.arrived >= round.group_size) rounds_.erase(key);
  return callbacks;
}

void InProcessCollectives::Run(const CollectiveArgs& args, const Tensor& input,
                               CancellationManager* cancel, DoneCallback done) {
  std::unique_lock<std::mutex> l(mu_);
  if (stopping_) {
    l.unlock();
    done(absl::CancelledError(absl::StrCat(Describe(args), ": the session is closing")));
    return;
  }
  auto [git, inserted] = groups_.try_emplace(args.group_key);
  Group& group = git->second;
  if (inserted) group.size = args.group_size;
  absl::Status bad;
  if (group.size != args.group_size) {
    bad = absl::InvalidArgumentError(
        absl::StrCat(Describe(args), ": group ", args.group_key, " has group_size ", group.size,
                     " (set by its first member) but this member says ", args.group_size));
  } else if (group.devices.count(args.device) == 0) {
    if (static_cast<int>(group.devices.size()) == group.size) {
      bad = absl::InvalidArgumentError(
          absl::StrCat(Describe(args), ": device ", args.device, " is not a member of group ",
                       args.group_key, ", which is complete with ", group.size, " devices (",
                       absl::StrJoin(group.devices, ", "), ")"));
    } else {
      group.devices.insert(args.device);
    }
  }
  if (!bad.ok()) {
    l.unlock();
    done(bad);
    return;
  }
  std::pair<int64_t, int64_t>& counter =
      next_run_[{args.group_key, args.instance_key, args.device}];
  if (counter.first != args.step_id) counter = {args.step_id, 0};
  const RoundKey key{args.group_key, args.instance_key, args.step_id, counter.second++};
  std::shared_ptr<Round>& slot = rounds_[key];
  if (slot == nullptr) {
    slot = std::make_shared<Round>();
    slot->group_size = group.size;
  }
  std::shared_ptr<Round> round = slot;
  ++round->arrived;
  if (!round->failed.ok()) {
    absl::Status why = round->failed;
    if (round->arrived >= round->group_size) rounds_.erase(key);
    l.unlock();
    done(why);
    return;
  }
  Member m;
  m.args = args;
  m.input = input;
  m.done = std::move(done);
  m.cancel = cancel;
  if (cancel != nullptr) {
    m.token = cancel->NewToken();
    if (!cancel->RegisterCallback(m.token, [this, key] { OnCancel(key); })) {
      m.token = -1;
      round->members.push_back(std::move(m));
      Callbacks c = FailLocked(key, *round,
                               absl::CancelledError(absl::StrCat(Describe(args), ": cancelled")));
      l.unlock();
      for (auto& [cb, status] : c) cb(status);
      return;
    }
  }
  if (args.timeout_seconds > 0) {
    auto deadline =
        Clock::now() + std::chrono::microseconds(static_cast<int64_t>(args.timeout_seconds * 1e6));
    if (deadline < round->deadline) {
      round->deadline = deadline;
      timer_cv_.notify_all();
    }
  }
  round->members.push_back(std::move(m));
  if (static_cast<int>(round->members.size()) < round->group_size) return;
  rounds_.erase(key);
  l.unlock();
  Deregister(round->members);
  Execute(std::move(round));
}

void InProcessCollectives::OnCancel(const RoundKey& key) {
  Callbacks callbacks;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = rounds_.find(key);
    if (it == rounds_.end() || !it->second->failed.ok() || it->second->members.empty()) return;
    Round& round = *it->second;
    callbacks =
        FailLocked(key, round,
                   absl::CancelledError(absl::StrCat(
                       Describe(round.members[0].args), ": cancelled with ", round.members.size(),
                       " of ", round.group_size, " members arrived")));
  }
  for (auto& [cb, status] : callbacks) cb(status);
}

void InProcessCollectives::TimerLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    Clock::time_point next = Clock::time_point::max();
    for (auto& [key, round] : rounds_) {
      if (round->failed.ok()) next = std::min(next, round->deadline);
    }
    if (next == Clock::time_point::max()) {
      timer_cv_.wait(l);
      continue;
    }
    if (Clock::now() < next) {
      timer_cv_.wait_until(l, next);
      continue;
    }
    Callbacks callbacks;
    std::vector<RoundKey> expired;
    for (auto& [key, round] : rounds_) {
      if (round->failed.ok() && round->deadline <= Clock::now()) expired.push_back(key);
    }
    for (const RoundKey& key : expired) {
      auto it = rounds_.find(key);
      if (it == rounds_.end()) continue;
      Round& round = *it->second;
      std::vector<std::string> here;
      for (const Member& m : round.members) here.push_back(m.args.device);
      const CollectiveArgs& a = round.members[0].args;
      absl::Status why = absl::DeadlineExceededError(absl::StrCat(
          Describe(a), ": timed out after ", a.timeout_seconds, " s with ", round.members.size(),
          " of ", round.group_size, " members arrived (", absl::StrJoin(here, ", "), ")"));
      std::vector<Member> members = round.members;
      Callbacks c = FailLocked(key, round, why);
      callbacks.insert(callbacks.end(), c.begin(), c.end());
      l.unlock();
      Deregister(members);
      l.lock();
    }
    l.unlock();
    for (auto& [cb, status] : callbacks) cb(status);
    l.lock();
  }
}

void InProcessCollectives::Execute(std::shared_ptr<Round> round) {
  std::vector<Member>& m = round->members;
  std::sort(m.begin(), m.end(),
            [](const Member& a, const Member& b) { return a.args.device < b.args.device; });
  std::vector<const CollectiveArgs*> args;
  std::vector<const Tensor*> inputs;
  for (const Member& x : m) {
    args.push_back(&x.args);
    inputs.push_back(&x.input);
  }
  absl::Status valid = Validate(args, inputs);
  if (valid.ok()) valid = CheckBackends(args);
  if (!valid.ok()) {
    for (Member& x : m) x.done(valid);
    return;
  }
  if (DeviceCollectiveBackend* backend = m[0].args.backend; backend != nullptr) {
    std::vector<DeviceCollectiveBackend::Member> members;
    for (Member& x : m) {
      // Each callback holds the round: its args and inputs live until
      // the backend is done with every member.
      members.push_back(
          {&x.args, &x.input,
           [round, done = std::move(x.done)](absl::StatusOr<Tensor> r) { done(std::move(r)); }});
    }
    backend->RunRound(std::move(members));
    return;
  }
  switch (m[0].args.type) {
    case CollectiveType::kReduce:
      Reduce(std::move(round));
      return;
    case CollectiveType::kGather: {
      int64_t rows = 0;
      for (const Member& x : m) rows += x.input.dim_size(0);
      TensorShape shape = m[0].input.shape();
      shape.set_dim(0, rows);
      Tensor out(m[0].args.dtype, shape);
      char* p = out.raw_data();
      for (const Member& x : m) {
        const size_t bytes = static_cast<size_t>(x.input.TotalBytes());
        if (bytes > 0) std::memcpy(p, x.input.raw_data(), bytes);
        p += bytes;
      }
      for (size_t i = 0; i < m.size(); ++i) m[i].done(i + 1 == m.size() ? out : out.DeepCopy());
      return;
    }
    case CollectiveType::kBroadcastSend:
    case CollectiveType::kBroadcastRecv: {
      const Member* sender = nullptr;
      for (const Member& x : m) {
        if (x.args.type == CollectiveType::kBroadcastSend) sender = &x;
      }
      const Tensor value = sender->input;
      for (Member& x : m) x.done(&x == sender ? value : value.DeepCopy());
      return;
    }
  }
}

void InProcessCollectives::Reduce(std::shared_ptr<Round> round) {
  std::vector<Member>& m = round->members;
  const CollectiveArgs& a = m[0].args;
  const DataType dt = a.dtype;
  const int64_t n = m[0].input.NumElements();
  const int64_t elem = DataTypeSize(dt);
  struct Shared {
    std::vector<Tensor> outputs;
    std::atomic<int64_t> chunks_left{0};
  };
  auto shared = std::make_shared<Shared>();
  for (size_t i = 0; i < m.size(); ++i) shared->outputs.emplace_back(dt, m[0].input.shape());
  // Chunk [begin, end): rank 0's input, merged with every other rank's in
  // rank order, finished, then copied to every other member's output.
  auto do_chunk = [round, shared, dt, elem, &a](int64_t begin, int64_t end) {
    std::vector<Member>& mm = round->members;
    const int64_t count = end - begin;
    char* acc = shared->outputs[0].raw_data() + begin * elem;
    std::memcpy(acc, mm[0].input.raw_data() + begin * elem, static_cast<size_t>(count * elem));
    for (size_t r = 1; r < mm.size(); ++r) {
      collective_math::Merge(dt, a.merge_op, acc, mm[r].input.raw_data() + begin * elem, count);
    }
    collective_math::Finish(dt, a.final_op, acc, count, static_cast<int>(mm.size()));
    for (size_t r = 1; r < mm.size(); ++r) {
      std::memcpy(shared->outputs[r].raw_data() + begin * elem, acc,
                  static_cast<size_t>(count * elem));
    }
  };
  auto finish = [round, shared] {
    std::vector<Member>& mm = round->members;
    for (size_t r = 0; r < mm.size(); ++r) mm[r].done(std::move(shared->outputs[r]));
  };
  const int64_t chunks = runner_ ? std::max<int64_t>(1, n / chunk_elements_) : 1;
  if (chunks == 1) {
    if (n > 0) do_chunk(0, n);
    finish();
    return;
  }
  shared->chunks_left = chunks;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    auto work = [do_chunk, finish, shared, begin, end] {
      do_chunk(begin, end);
      if (shared->chunks_left.fetch_sub(1) == 1) finish();
    };
    if (c + 1 == chunks) {
      work();  // the last chunk on this thread
    } else {
      runner_(work);
    }
  }
}

}  // namespace graphrun
