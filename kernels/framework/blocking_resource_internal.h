// The machinery shared by the queue kernels (queue_kernels.cc) and the
// conditional accumulator kernels (accumulator_kernels.cc): BlockingResource,
// a ResourceMgr resource whose ops may wait, and the helpers their kernels
// use to create, name and look up such resources.
//
// Blocking: the ops that may wait (enqueue on a full queue, dequeue on an
// empty one, TakeGradient below num_required) are AsyncOpKernels. A wait
// holds no thread: it is a waiter on the resource, retried under the
// resource's lock after every change and completed (its `done` called
// outside the lock) by whichever thread made it possible. A waiter ends
// early when the step is cancelled (its CancellationManager: an error
// elsewhere in the step, a step deadline, CleanupGraph) with Cancelled, or
// after the op's own timeout_ms (> 0) with DeadlineExceeded, or when the
// resource is dropped from its manager (a session Reset of its container)
// with Aborted: nothing could change it any more. Waiters of one kind are
// served in arrival order (a DequeueMany(5) is not overtaken by a later
// Dequeue).
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_BLOCKING_RESOURCE_INTERNAL_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_BLOCKING_RESOURCE_INTERNAL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/resource_mgr.h"

namespace graphrun {
namespace queue_internal {

using DoneCallback = AsyncOpKernel::DoneCallback;

// ---------------------------------------------------------------------------
// Waiting on a resource.

// Signals a timeout thread that its waiter finished, so it exits early.
struct TimerState {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  void Finish() {
    std::lock_guard<std::mutex> l(mu);
    finished = true;
    cv.notify_all();
  }
};

// A resource whose ops may block. Subclasses keep their state under mu_
// and call Mutate() to change it; Wait() parks an op until its attempt
// succeeds. Thread-safe.
class BlockingResource : public ResourceBase,
                         public std::enable_shared_from_this<BlockingResource> {
 public:
  // Called under mu_: the final status once the op can finish (outputs set
  // on its context), nullopt to keep waiting.
  using Attempt = std::function<std::optional<absl::Status>()>;

  // Runs `attempt` now and after every Mutate until it finishes, then calls
  // `done` with its status (on this thread or on the mutating one). `kind`
  // groups waiters served in arrival order.
  void Wait(OpKernelContext* ctx, int kind, int64_t timeout_ms, Attempt attempt,
            DoneCallback done) {
    std::vector<Completion> completions;
    {
      std::lock_guard<std::mutex> l(mu_);
      bool blocked_kind = false;
      for (const Waiter& w : waiters_) blocked_kind |= w.kind == kind;
      std::optional<absl::Status> now;
      if (dropped_) {
        // Looked up before a Reset dropped it: nothing could serve a wait.
        now = DroppedError();
      } else if (!blocked_kind) {
        now = attempt();
      }
      if (now.has_value()) {
        completions.push_back({std::move(done), *std::move(now), nullptr, 0, nullptr});
      } else {
        Waiter w;
        w.id = next_id_++;
        w.kind = kind;
        w.attempt = std::move(attempt);
        w.done = std::move(done);
        w.cm = ctx->cancellation_manager();
        if (w.cm != nullptr) {
          w.token = w.cm->NewToken();
          std::weak_ptr<BlockingResource> weak = weak_from_this();
          const int64_t id = w.id;
          // Registered under mu_, so the callback (which takes mu_) cannot
          // run before the waiter is in the list.
          if (!w.cm->RegisterCallback(w.token, [weak, id] {
                if (auto self = weak.lock()) {
                  self->Abandon(id, absl::CancelledError("the step was cancelled"));
                }
              })) {
            completions.push_back({std::move(w.done),
                                   absl::CancelledError("the step was cancelled"), nullptr, 0,
                                   nullptr});
          }
        }
        if (completions.empty()) {
          if (timeout_ms > 0) {
            w.timer = std::make_shared<TimerState>();
            StartTimer(w.id, timeout_ms, w.timer);
          }
          waiters_.push_back(std::move(w));
        }
      }
      // The attempt may have changed the state (an enqueue, a partial
      // EnqueueMany): others may proceed now.
      RetryWaitersLocked(&completions);
    }
    RunCompletions(std::move(completions));
  }

  // Fails every waiter, and every later wait or change, with Aborted
  // naming the resource.
  void Dropped() override {
    std::vector<Completion> completions;
    {
      std::lock_guard<std::mutex> l(mu_);
      dropped_ = true;
      for (Waiter& w : waiters_) completions.push_back(Finish(w, DroppedError()));
      waiters_.clear();
    }
    RunCompletions(std::move(completions));
  }

  // Runs `fn` under mu_, then retries the waiters. Returns fn's status.
  absl::Status Mutate(const std::function<absl::Status()>& fn) {
    std::vector<Completion> completions;
    absl::Status s;
    {
      std::lock_guard<std::mutex> l(mu_);
      // A change to a dropped resource would be lost without a trace.
      if (dropped_) return DroppedError();
      s = fn();
      RetryWaitersLocked(&completions);
    }
    RunCompletions(std::move(completions));
    return s;
  }

 protected:
  mutable std::mutex mu_;

 private:
  struct Waiter {
    int64_t id = 0;
    int kind = 0;
    Attempt attempt;
    DoneCallback done;
    CancellationManager* cm = nullptr;
    CancellationToken token = 0;
    std::shared_ptr<TimerState> timer;
  };
  struct Completion {
    DoneCallback done;
    absl::Status status;
    CancellationManager* cm;
    CancellationToken token;
    std::shared_ptr<TimerState> timer;
  };

  static Completion Finish(Waiter& w, absl::Status s) {
    return {std::move(w.done), std::move(s), w.cm, w.token, std::move(w.timer)};
  }

  // Retries until a full pass makes no progress (an enqueue may enable a
  // dequeue and the reverse). REQUIRES: mu_ held.
  void RetryWaitersLocked(std::vector<Completion>* out) {
    bool progress = true;
    while (progress) {
      progress = false;
      std::vector<int> blocked_kinds;
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        bool blocked = false;
        for (int k : blocked_kinds) blocked |= k == it->kind;
        std::optional<absl::Status> s;
        if (!blocked) s = it->attempt();
        if (s.has_value()) {
          out->push_back(Finish(*it, *std::move(s)));
          it = waiters_.erase(it);
          progress = true;
        } else {
          if (!blocked) blocked_kinds.push_back(it->kind);
          ++it;
        }
      }
    }
  }

  // Ends waiter `id` (if still waiting) with `status`.
  void Abandon(int64_t id, absl::Status status) {
    std::vector<Completion> completions;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
        if (it->id != id) continue;
        completions.push_back(Finish(*it, std::move(status)));
        waiters_.erase(it);
        // A waiter behind it of the same kind may now proceed.
        RetryWaitersLocked(&completions);
        break;
      }
    }
    RunCompletions(std::move(completions));
  }

  void StartTimer(int64_t id, int64_t timeout_ms, std::shared_ptr<TimerState> timer) {
    std::weak_ptr<BlockingResource> weak = weak_from_this();
    std::thread([weak, id, timeout_ms, timer] {
      {
        std::unique_lock<std::mutex> l(timer->mu);
        if (timer->cv.wait_for(l, std::chrono::milliseconds(timeout_ms),
                               [&] { return timer->finished; })) {
          return;
        }
      }
      if (auto self = weak.lock()) {
        self->Abandon(id, absl::DeadlineExceededError(
                              absl::StrCat("timed out after ", timeout_ms, " ms (timeout_ms)")));
      }
    }).detach();
  }

  // Outside mu_: the context (and its cancellation manager) stay alive
  // until `done` runs, so deregister first.
  static void RunCompletions(std::vector<Completion> completions) {
    for (Completion& c : completions) {
      if (c.cm != nullptr) c.cm->DeregisterCallback(c.token);
      if (c.timer != nullptr) c.timer->Finish();
      c.done(std::move(c.status));
    }
  }

  absl::Status DroppedError() const {
    return absl::AbortedError(absl::StrCat(DebugString(), " was reset (its container dropped)"));
  }

  std::list<Waiter> waiters_;
  int64_t next_id_ = 0;
  bool dropped_ = false;  // guarded by mu_
};

// ---------------------------------------------------------------------------
// Kernel helpers.

// Where a resource lives in the ResourceMgr: the op's container and
// shared_name attrs (an empty container is the default one).
struct ResourceKey {
  std::string container;
  std::string name;
};
// The key from the op's attrs; shared_name defaults to the node's name.
inline absl::StatusOr<ResourceKey> KeyFromAttrs(OpKernelConstruction* ctx) {
  ResourceKey k;
  GR_RETURN_IF_ERROR(ctx->GetAttr("container", &k.container));
  GR_RETURN_IF_ERROR(ctx->GetAttr("shared_name", &k.name));
  if (k.name.empty()) k.name = ctx->def().name();
  return k;
}

// A scalar DT_RESOURCE handle naming `key` on ctx's device.
inline Tensor MakeHandle(OpKernelContext* ctx, const ResourceKey& key, const char* type_name) {
  ResourceHandle h;
  h.device = ctx->device()->name();
  h.container =
      key.container.empty() ? ctx->resource_manager()->default_container() : key.container;
  h.name = key.name;
  h.type_name = type_name;
  return Tensor::Scalar<ResourceHandle>(std::move(h));
}

// The resource named by input 0; NotFound naming it.
template <typename R>
absl::StatusOr<std::shared_ptr<R>> LookupHandle(const OpKernel& k, OpKernelContext* ctx) {
  const Tensor& t = ctx->input(0);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return k.Error("input 0 must be a scalar resource handle");
  }
  const ResourceHandle& h = t.scalar<ResourceHandle>();
  auto r = ctx->resource_manager()->Lookup<R>(h.container, h.name);
  if (!r.ok()) return array_util::Annotate(k, r.status());
  return *r;
}

// The int32 or int64 scalar `t` (input `what`); InvalidArgument otherwise.
inline absl::StatusOr<int64_t> ScalarInt(const OpKernel& k, const Tensor& t, const char* what) {
  if (t.NumElements() != 1 || t.dims() != 0) {
    return k.Error(absl::StrCat(what, " must be a scalar, got shape ", t.shape().DebugString()));
  }
  if (t.dtype() == DT_INT32) return t.scalar<int32_t>();
  if (t.dtype() == DT_INT64) return t.scalar<int64_t>();
  return k.Error(absl::StrCat(what, " must be int32 or int64"));
}

}  // namespace queue_internal
}  // namespace graphrun

// In an AsyncOpKernel's ComputeAsync: evaluates `expr` (an absl::Status);
// on error calls `done` with it annotated and returns.
#define GR_ASYNC_RETURN_IF_ERROR(expr)                      \
  do {                                                      \
    ::absl::Status gr_s_ = (expr);                          \
    if (!gr_s_.ok()) {                                      \
      done(::graphrun::array_util::Annotate(*this, gr_s_)); \
      return;                                               \
    }                                                       \
  } while (0)

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_BLOCKING_RESOURCE_INTERNAL_H_
