// CPU kernels for FIFO queues and conditional accumulators, the stateful
// resources of the SyncReplicasOptimizer scheme (docs/distributed.md,
// "Synchronous replication"). Both live in the device's ResourceMgr under
// (container, shared_name or node name) and are named by DT_RESOURCE
// handles, so every session and client that names them on a PS shares them.
// The sparse accumulator (SparseConditionalAccumulator, TensorFlow's, which
// has only a ref handle) is named by a ref to a variable holding the string
// [container, name] that the accumulator owns; its ops look it up by that.
//
// Blocking: the ops that may wait (enqueue on a full queue, dequeue on an
// empty one, TakeGradient below num_required) are AsyncOpKernels. A wait
// holds no thread: it is a waiter on the resource, retried under the
// resource's lock after every change and completed (its `done` called
// outside the lock) by whichever thread made it possible. A waiter ends
// early when the step is cancelled (its CancellationManager: an error
// elsewhere in the step, a step deadline, CleanupGraph) with Cancelled, or
// after the op's own timeout_ms (> 0) with DeadlineExceeded. Waiters of one
// kind are served in arrival order (a DequeueMany(5) is not overtaken by a
// later Dequeue).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "kernels/all_kernels.h"
#include "kernels/array_util.h"
#include "kernels/variable.h"

namespace graphrun {
namespace {

using array_util::Annotate;
using array_util::GetInput;
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
      if (!blocked_kind) now = attempt();
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

  // Runs `fn` under mu_, then retries the waiters. Returns fn's status.
  absl::Status Mutate(const std::function<absl::Status()>& fn) {
    std::vector<Completion> completions;
    absl::Status s;
    {
      std::lock_guard<std::mutex> l(mu_);
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

  std::list<Waiter> waiters_;
  int64_t next_id_ = 0;
};

// ---------------------------------------------------------------------------
// FIFOQueue.

using Tuple = std::vector<Tensor>;

class FIFOQueue : public BlockingResource {
 public:
  enum Kind { kEnqueue = 0, kDequeue = 1 };

  FIFOQueue(std::string name, DataTypeVector types, std::vector<PartialShape> shapes,
            int64_t capacity)
      : name_(std::move(name)),
        types_(std::move(types)),
        shapes_(std::move(shapes)),
        capacity_(capacity) {}

  std::string DebugString() const override { return absl::StrCat("FIFOQueue ", name_); }
  const std::string& name() const { return name_; }
  const DataTypeVector& types() const { return types_; }
  const std::vector<PartialShape>& shapes() const { return shapes_; }
  int64_t capacity() const { return capacity_; }

  // InvalidArgument unless `dtypes` are the component types.
  absl::Status CheckTypes(const DataTypeVector& dtypes) const {
    if (dtypes != types_) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue '", name_, "' has component types ", DataTypeVectorString(types_),
                       " but the op expects ", DataTypeVectorString(dtypes)));
    }
    return absl::OkStatus();
  }
  // InvalidArgument unless component `i` may have shape `s`.
  absl::Status CheckShape(int i, const TensorShape& s) const {
    if (!shapes_.empty() && !shapes_[i].IsCompatibleWith(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape mismatch in component ", i, " of queue '", name_, "': expected ",
                       shapes_[i].DebugString(), ", got ", s.DebugString()));
    }
    return absl::OkStatus();
  }

  // Enqueues `tuples` in order, waiting for room.
  void Enqueue(OpKernelContext* ctx, int64_t timeout_ms, std::vector<Tuple> tuples,
               DoneCallback done) {
    struct State {
      std::vector<Tuple> tuples;
      size_t next = 0;
      bool first = true;
    };
    auto st = std::make_shared<State>();
    st->tuples = std::move(tuples);
    Wait(
        ctx, kEnqueue, timeout_ms,
        [this, st]() -> std::optional<absl::Status> {
          const bool first = st->first;
          st->first = false;
          if (closed_ && (first || cancel_pending_enqueues_)) {
            return absl::CancelledError(absl::StrCat("queue '", name_, "' is closed"));
          }
          while (st->next < st->tuples.size() &&
                 (capacity_ < 0 || static_cast<int64_t>(items_.size()) < capacity_)) {
            items_.push_back(std::move(st->tuples[st->next++]));
          }
          if (st->next == st->tuples.size()) return absl::OkStatus();
          return std::nullopt;
        },
        std::move(done));
  }

  // Dequeues `n` tuples into ctx's outputs: one tuple as is (stacked ==
  // false), or `n` stacked along a new dimension 0.
  void Dequeue(OpKernelContext* ctx, int64_t timeout_ms, int64_t n, bool stacked,
               DoneCallback done) {
    Wait(
        ctx, kDequeue, timeout_ms,
        [this, ctx, n, stacked]() -> std::optional<absl::Status> {
          if (static_cast<int64_t>(items_.size()) < n) {
            if (!closed_) return std::nullopt;
            return absl::OutOfRangeError(absl::StrCat(
                "queue '", name_, "' is closed and has insufficient elements (requested ", n,
                ", current size ", items_.size(), ")"));
          }
          if (!stacked) {
            Tuple t = std::move(items_.front());
            items_.pop_front();
            for (size_t i = 0; i < t.size(); ++i) ctx->set_output(static_cast<int>(i), t[i]);
            return absl::OkStatus();
          }
          return DequeueStackedLocked(ctx, n);
        },
        std::move(done));
  }

  absl::Status Close(bool cancel_pending_enqueues) {
    return Mutate([&] {
      closed_ = true;
      cancel_pending_enqueues_ |= cancel_pending_enqueues;
      return absl::OkStatus();
    });
  }

  int64_t size() const {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int64_t>(items_.size());
  }

 private:
  static std::string DataTypeVectorString(const DataTypeVector& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      absl::StrAppend(&s, i ? ", " : "", DataTypeString(v[i]));
    }
    return s + "]";
  }

  // REQUIRES: mu_ held, at least n items.
  absl::Status DequeueStackedLocked(OpKernelContext* ctx, int64_t n) {
    for (size_t c = 0; c < types_.size(); ++c) {
      TensorShape elem;
      if (n == 0) {
        if (shapes_.empty() || !shapes_[c].fully_defined()) {
          return absl::InvalidArgumentError(absl::StrCat("DequeueMany(0) on queue '", name_,
                                                         "' needs fully defined component shapes"));
        }
        elem = shapes_[c].ToTensorShape();
      } else {
        elem = items_[0][c].shape();
        for (int64_t k = 1; k < n; ++k) {
          if (items_[k][c].shape() != elem) {
            return absl::InvalidArgumentError(
                absl::StrCat("DequeueMany on queue '", name_, "': component ", c, " has shape ",
                             elem.DebugString(), " in element 0 but ",
                             items_[k][c].shape().DebugString(), " in element ", k));
          }
        }
      }
      TensorShape out_shape = elem;
      out_shape.InsertDim(0, n);
      Tensor out(types_[c], out_shape);
      const int64_t row = elem.num_elements();
      for (int64_t k = 0; k < n; ++k) {
        array_util::CopyElements(items_[k][c], 0, out, k * row, row);
      }
      ctx->set_output(static_cast<int>(c), std::move(out));
    }
    items_.erase(items_.begin(), items_.begin() + n);
    return absl::OkStatus();
  }

  const std::string name_;
  const DataTypeVector types_;
  const std::vector<PartialShape> shapes_;
  const int64_t capacity_;
  std::deque<Tuple> items_;  // guarded by mu_
  bool closed_ = false;      // guarded by mu_
  bool cancel_pending_enqueues_ = false;
};

// ---------------------------------------------------------------------------
// Conditional accumulator.

template <typename T>
void AddInto(const Tensor& dst, const Tensor& src) {
  T* d = dst.base<T>();
  const T* s = src.base<T>();
  for (int64_t i = 0, n = dst.NumElements(); i < n; ++i) d[i] = static_cast<T>(d[i] + s[i]);
}
template <typename T>
void DivideInto(const Tensor& dst, const Tensor& src, int64_t count) {
  T* d = dst.base<T>();
  const T* s = src.base<T>();
  const T c = static_cast<T>(count);
  for (int64_t i = 0, n = dst.NumElements(); i < n; ++i) d[i] = static_cast<T>(s[i] / c);
}

#define GR_ACCUM_TYPES_(M) \
  M(DT_FLOAT, float) M(DT_DOUBLE, double) M(DT_INT32, int32_t) M(DT_INT64, int64_t)

class Accumulator : public BlockingResource {
 public:
  Accumulator(std::string name, DataType dtype, PartialShape shape, bool mean)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)), mean_(mean) {}

  std::string DebugString() const override { return absl::StrCat("Accumulator ", name_); }
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }

  // Adds `grad` unless local_step < the global step (then drops it: OK).
  absl::Status Apply(int64_t local_step, const Tensor& grad) {
    return Mutate([&]() -> absl::Status {
      if (local_step < global_step_) return absl::OkStatus();  // stale
      if (grad.dtype() != dtype_) {
        return absl::InvalidArgumentError(absl::StrCat("accumulator '", name_, "' holds ",
                                                       DataTypeString(dtype_), ", got a ",
                                                       DataTypeString(grad.dtype()), " gradient"));
      }
      if (!shape_.IsCompatibleWith(grad.shape()) || (count_ > 0 && sum_.shape() != grad.shape())) {
        return absl::InvalidArgumentError(
            absl::StrCat("accumulator '", name_, "' of shape ",
                         count_ > 0 ? sum_.shape().DebugString() : shape_.DebugString(),
                         " got a gradient of shape ", grad.shape().DebugString()));
      }
      if (count_ == 0) {
        sum_ = grad.DeepCopy();
      } else {
        switch (dtype_) {
#define GR_CASE_(E, T)      \
  case E:                   \
    AddInto<T>(sum_, grad); \
    break;
          GR_ACCUM_TYPES_(GR_CASE_)
#undef GR_CASE_
          default:
            return absl::UnimplementedError(DataTypeString(dtype_));
        }
      }
      ++count_;
      return absl::OkStatus();
    });
  }

  // Waits for num_required gradients; outputs their mean (or sum) as
  // output 0, clears and increments the global step.
  void Take(OpKernelContext* ctx, int64_t num_required, DoneCallback done) {
    Wait(
        ctx, /*kind=*/0, /*timeout_ms=*/0,
        [this, ctx, num_required]() -> std::optional<absl::Status> {
          if (count_ < num_required) return std::nullopt;
          Tensor out = sum_;
          if (mean_ && count_ > 1) {
            out = Tensor(dtype_, sum_.shape());
            switch (dtype_) {
#define GR_CASE_(E, T)                \
  case E:                             \
    DivideInto<T>(out, sum_, count_); \
    break;
              GR_ACCUM_TYPES_(GR_CASE_)
#undef GR_CASE_
              default:
                return absl::UnimplementedError(DataTypeString(dtype_));
            }
          }
          ctx->set_output(0, std::move(out));
          sum_ = Tensor();
          count_ = 0;
          ++global_step_;
          return absl::OkStatus();
        },
        std::move(done));
  }

  absl::Status SetGlobalStep(int64_t step) {
    return Mutate([&] {
      global_step_ = step;
      return absl::OkStatus();
    });
  }

  int64_t num_accumulated() const {
    std::lock_guard<std::mutex> l(mu_);
    return count_;
  }

 private:
  const std::string name_;
  const DataType dtype_;
  const PartialShape shape_;
  const bool mean_;
  Tensor sum_;               // guarded by mu_
  int64_t count_ = 0;        // guarded by mu_
  int64_t global_step_ = 0;  // guarded by mu_
};

// ---------------------------------------------------------------------------
// Sparse conditional accumulator.
//
// Holds the sum of IndexedSlices gradients as rows at sorted, unique
// indices, with per index the number of gradients that had it. A gradient's
// repeated indices are first summed (in their order in the gradient), so
// each counts once. MEAN divides each row by its own count (TensorFlow's
// "average element-wise": a row only one worker touched is that worker's
// row, not half of it); SUM returns the sums.

// One row of a merged sum: the accumulated row it extends (-1: none) and
// the gradient rows order[first, last) added to it (none when equal).
struct MergedRow {
  int64_t acc_row;
  int64_t first, last;
};

template <typename T>
void SumRows(const std::vector<MergedRow>& plan, const std::vector<int64_t>& order,
             const Tensor& acc, const Tensor& grad, int64_t row, const Tensor& out) {
  const T* a = acc.IsInitialized() ? acc.base<T>() : nullptr;
  const T* g = grad.base<T>();
  T* o = out.base<T>();
  for (size_t r = 0; r < plan.size(); ++r) {
    const MergedRow& m = plan[r];
    T* d = o + static_cast<int64_t>(r) * row;
    const T* ar = m.acc_row >= 0 ? a + m.acc_row * row : nullptr;
    if (m.first == m.last) {
      for (int64_t k = 0; k < row; ++k) d[k] = ar[k];
      continue;
    }
    const T* first = g + order[m.first] * row;
    for (int64_t k = 0; k < row; ++k) d[k] = first[k];
    for (int64_t p = m.first + 1; p < m.last; ++p) {
      const T* s = g + order[p] * row;
      for (int64_t k = 0; k < row; ++k) d[k] = static_cast<T>(d[k] + s[k]);
    }
    if (ar != nullptr) {
      for (int64_t k = 0; k < row; ++k) d[k] = static_cast<T>(ar[k] + d[k]);
    }
  }
}

template <typename T>
void DivideRows(const Tensor& sum, const std::vector<int64_t>& counts, int64_t row,
                const Tensor& out) {
  const T* s = sum.base<T>();
  T* d = out.base<T>();
  for (size_t r = 0; r < counts.size(); ++r) {
    const T c = static_cast<T>(counts[r]);
    const int64_t base = static_cast<int64_t>(r) * row;
    for (int64_t k = 0; k < row; ++k) d[base + k] = static_cast<T>(s[base + k] / c);
  }
}

class SparseAccumulator : public BlockingResource {
 public:
  // `container`: resolved (never empty); it and `name` make the handle.
  SparseAccumulator(const std::string& container, std::string name, DataType dtype,
                    PartialShape shape, bool mean)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)), mean_(mean) {
    handle_ = std::make_shared<Var>(name_, DT_STRING, PartialShape({2}));
    handle_->tensor = Tensor::FromVector<std::string>({container, name_});
    handle_->initialized = true;
  }

  std::string DebugString() const override { return absl::StrCat("SparseAccumulator ", name_); }
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }
  // The ref-handle ops' handle: a variable holding [container, name].
  const std::shared_ptr<Var>& handle() const { return handle_; }

  // Adds the rows `values` at `indices` unless local_step < the global step
  // (then drops them: OK). `dense_shape` (null: unknown) is checked against
  // the accumulator's shape. A malformed gradient is InvalidArgument even
  // when stale, so a bug does not hide behind timing.
  absl::Status Apply(int64_t local_step, const Tensor& indices, const Tensor& values,
                     const Tensor* dense_shape) {
    GR_RETURN_IF_ERROR(CheckGradient(indices, values, dense_shape));
    return Mutate([&]() -> absl::Status {
      TensorShape row_shape = values.shape();
      row_shape.RemoveDim(0);
      if (count_ > 0 && row_shape != row_shape_) {
        return Error(absl::StrCat("holds rows of shape ", row_shape_.DebugString(),
                                  " but got gradient_values of shape ",
                                  values.shape().DebugString()));
      }
      if (dense_shape != nullptr && !KnownDim0()) {
        const int64_t dim0 = dense_shape->base<int64_t>()[0];
        if (dense_dim0_ >= 0 && dim0 != dense_dim0_) {
          return Error(absl::StrCat("gradient_shape[0] is ", dim0, " but earlier gradients had ",
                                    dense_dim0_));
        }
        dense_dim0_ = dim0;
      }
      if (local_step < global_step_) return absl::OkStatus();  // stale
      Merge(indices, values, row_shape);
      ++count_;
      return absl::OkStatus();
    });
  }

  // Waits for num_required gradients; outputs (indices, values, dense
  // shape), clears and increments the global step.
  void Take(OpKernelContext* ctx, int64_t num_required, DoneCallback done) {
    Wait(
        ctx, /*kind=*/0, /*timeout_ms=*/0,
        [this, ctx, num_required]() -> std::optional<absl::Status> {
          if (count_ < num_required) return std::nullopt;
          Tensor out = values_;
          const int64_t row = row_shape_.num_elements();
          if (mean_ && count_ > 1) {
            out = Tensor(dtype_, values_.shape());
            switch (dtype_) {
#define GR_CASE_(E, T)                         \
  case E:                                      \
    DivideRows<T>(values_, counts_, row, out); \
    break;
              GR_ACCUM_TYPES_(GR_CASE_)
#undef GR_CASE_
              default:
                return absl::UnimplementedError(DataTypeString(dtype_));
            }
          }
          Tensor dense_shape(DT_INT64, TensorShape({row_shape_.dims() + 1}));
          int64_t* ds = dense_shape.base<int64_t>();
          ds[0] = KnownDim0() ? shape_.dim(0) : dense_dim0_;
          for (int i = 0; i < row_shape_.dims(); ++i) ds[i + 1] = row_shape_.dim_size(i);
          ctx->set_output(0, Tensor::FromVector<int64_t>(indices_));
          ctx->set_output(1, std::move(out));
          ctx->set_output(2, std::move(dense_shape));
          indices_.clear();
          counts_.clear();
          values_ = Tensor();
          count_ = 0;
          ++global_step_;
          return absl::OkStatus();
        },
        std::move(done));
  }

  absl::Status SetGlobalStep(int64_t step) {
    return Mutate([&] {
      global_step_ = step;
      return absl::OkStatus();
    });
  }

  int64_t num_accumulated() const {
    std::lock_guard<std::mutex> l(mu_);
    return count_;
  }

 private:
  bool KnownDim0() const { return shape_.known_rank() && shape_.rank() >= 1 && shape_.dim(0) >= 0; }
  absl::Status Error(absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat("sparse accumulator '", name_, "': ", msg));
  }

  // The checks that need no state.
  absl::Status CheckGradient(const Tensor& indices, const Tensor& values,
                             const Tensor* dense_shape) const {
    if (indices.dtype() != DT_INT64 || indices.dims() != 1) {
      return Error(absl::StrCat("gradient_indices must be an int64 vector, got ",
                                DataTypeString(indices.dtype()), " of shape ",
                                indices.shape().DebugString()));
    }
    if (values.dtype() != dtype_) {
      return Error(absl::StrCat("holds ", DataTypeString(dtype_), ", got ",
                                DataTypeString(values.dtype()), " gradient_values"));
    }
    const int64_t n = indices.dim_size(0);
    if (values.dims() < 1 || values.dim_size(0) != n) {
      return Error(absl::StrCat("gradient_values must have one row per index: ", n,
                                " indices but values of shape ", values.shape().DebugString()));
    }
    if (shape_.known_rank()) {
      bool fits = values.dims() == shape_.rank();
      for (int i = 1; fits && i < shape_.rank(); ++i) {
        fits = shape_.dim(i) < 0 || shape_.dim(i) == values.dim_size(i);
      }
      if (!fits) {
        return Error(absl::StrCat("gradient_values of shape ", values.shape().DebugString(),
                                  " are not rows of the accumulator's shape ",
                                  shape_.DebugString()));
      }
    }
    int64_t limit = KnownDim0() ? shape_.dim(0) : -1;
    if (dense_shape != nullptr) {
      if (dense_shape->dtype() != DT_INT64 || dense_shape->dims() != 1) {
        return Error(absl::StrCat("gradient_shape must be an int64 vector, got ",
                                  DataTypeString(dense_shape->dtype()), " of shape ",
                                  dense_shape->shape().DebugString()));
      }
      const int64_t* ds = dense_shape->base<int64_t>();
      bool fits = dense_shape->dim_size(0) == values.dims() && ds[0] >= 0;
      for (int i = 1; fits && i < values.dims(); ++i) fits = ds[i] == values.dim_size(i);
      if (fits && shape_.known_rank()) {
        fits = shape_.IsCompatibleWith(PartialShape(absl::Span<const int64_t>(ds, values.dims())));
      }
      if (!fits) {
        std::vector<int64_t> dims(ds, ds + dense_shape->dim_size(0));
        return Error(absl::StrCat("gradient_shape [", absl::StrJoin(dims, ","),
                                  "] does not fit gradient_values of shape ",
                                  values.shape().DebugString(), " and the accumulator's shape ",
                                  shape_.DebugString()));
      }
      if (limit < 0) limit = ds[0];
    }
    const int64_t* idx = indices.base<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (idx[i] < 0 || (limit >= 0 && idx[i] >= limit)) {
        return Error(absl::StrCat("gradient_indices[", i, "] = ", idx[i], " is out of range [0, ",
                                  limit >= 0 ? absl::StrCat(limit) : std::string("inf"), ")"));
      }
    }
    return absl::OkStatus();
  }

  // Adds the gradient to the sums. REQUIRES: mu_ held, CheckGradient passed
  // and the rows are of row_shape_ (or count_ == 0).
  void Merge(const Tensor& indices, const Tensor& values, const TensorShape& row_shape) {
    const int64_t n = indices.dim_size(0);
    const int64_t* idx = indices.base<int64_t>();
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [idx](int64_t a, int64_t b) { return idx[a] < idx[b]; });
    std::vector<MergedRow> plan;
    std::vector<int64_t> merged, counts;
    plan.reserve(indices_.size() + n);
    merged.reserve(indices_.size() + n);
    counts.reserve(indices_.size() + n);
    size_t i = 0;
    int64_t j = 0;
    while (i < indices_.size() || j < n) {
      int64_t j_end = j, g = 0;
      if (j < n) {
        g = idx[order[j]];
        while (j_end < n && idx[order[j_end]] == g) ++j_end;
      }
      const int64_t ai = static_cast<int64_t>(i);
      if (j == n || (i < indices_.size() && indices_[i] < g)) {
        plan.push_back({ai, 0, 0});
        merged.push_back(indices_[i]);
        counts.push_back(counts_[i]);
        ++i;
      } else if (i < indices_.size() && indices_[i] == g) {
        plan.push_back({ai, j, j_end});
        merged.push_back(g);
        counts.push_back(counts_[i] + 1);
        ++i;
        j = j_end;
      } else {
        plan.push_back({-1, j, j_end});
        merged.push_back(g);
        counts.push_back(1);
        j = j_end;
      }
    }
    TensorShape out_shape = row_shape;
    out_shape.InsertDim(0, static_cast<int64_t>(plan.size()));
    Tensor out(dtype_, out_shape);
    const int64_t row = row_shape.num_elements();
    switch (dtype_) {
#define GR_CASE_(E, T)                                  \
  case E:                                               \
    SumRows<T>(plan, order, values_, values, row, out); \
    break;
      GR_ACCUM_TYPES_(GR_CASE_)
#undef GR_CASE_
      default:
        break;  // the kernel is registered for GR_ACCUM_TYPES_ only
    }
    indices_ = std::move(merged);
    counts_ = std::move(counts);
    values_ = std::move(out);
    row_shape_ = row_shape;
  }

  const std::string name_;
  const DataType dtype_;
  const PartialShape shape_;
  const bool mean_;
  std::shared_ptr<Var> handle_;
  // Guarded by mu_: the sums (values_ rows at indices_, counts_ gradients
  // each), the gradients accumulated, the global step.
  std::vector<int64_t> indices_;
  std::vector<int64_t> counts_;
  Tensor values_;
  TensorShape row_shape_;
  int64_t count_ = 0;
  int64_t global_step_ = 0;
  int64_t dense_dim0_ = -1;  // from gradient_shape when shape_'s is unknown
};

// ---------------------------------------------------------------------------
// Kernels.

struct ResourceKey {
  std::string container;
  std::string name;
};
absl::StatusOr<ResourceKey> KeyFromAttrs(OpKernelConstruction* ctx) {
  ResourceKey k;
  GR_RETURN_IF_ERROR(ctx->GetAttr("container", &k.container));
  GR_RETURN_IF_ERROR(ctx->GetAttr("shared_name", &k.name));
  if (k.name.empty()) k.name = ctx->def().name();
  return k;
}

Tensor MakeHandle(OpKernelContext* ctx, const ResourceKey& key, const char* type_name) {
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
  if (!r.ok()) return Annotate(k, r.status());
  return *r;
}

absl::StatusOr<int64_t> ScalarInt(const OpKernel& k, const Tensor& t, const char* what) {
  if (t.NumElements() != 1 || t.dims() != 0) {
    return k.Error(absl::StrCat(what, " must be a scalar, got shape ", t.shape().DebugString()));
  }
  if (t.dtype() == DT_INT32) return t.scalar<int32_t>();
  if (t.dtype() == DT_INT64) return t.scalar<int64_t>();
  return k.Error(absl::StrCat(what, " must be int32 or int64"));
}

// Runs `fn`; on error calls done with it annotated.
#define GR_ASYNC_RETURN_IF_ERROR_(expr) \
  do {                                  \
    ::absl::Status gr_s_ = (expr);      \
    if (!gr_s_.ok()) {                  \
      done(Annotate(*this, gr_s_));     \
      return;                           \
    }                                   \
  } while (0)

class FIFOQueueOp : public OpKernel {
 public:
  explicit FIFOQueueOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("component_types", &types_));
    const tensorflow::AttrValue* shapes = nullptr;
    GR_CTX_CHECK_OK(ctx, GetAttr(NodeAttrs(ctx->def()), "shapes", &shapes));
    for (const auto& s : shapes->list().shape()) shapes_.push_back(PartialShape::FromProto(s));
    if (!shapes_.empty() && shapes_.size() != types_.size()) {
      ctx->SetStatus(ctx->Error(absl::StrCat("shapes has ", shapes_.size(),
                                             " entries but component_types has ", types_.size())));
      return;
    }
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("capacity", &capacity_));
    auto k = KeyFromAttrs(ctx);
    GR_CTX_CHECK_OK(ctx, k.status());
    key_ = *k;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    auto q = ctx->resource_manager()->LookupOrCreate<FIFOQueue>(
        key_.container, key_.name, [this]() -> absl::StatusOr<std::shared_ptr<FIFOQueue>> {
          return std::make_shared<FIFOQueue>(key_.name, types_, shapes_, capacity_);
        });
    if (!q.ok()) return Annotate(*this, q.status());
    if ((*q)->types() != types_ || (*q)->shapes() != shapes_ || (*q)->capacity() != capacity_) {
      return Error(absl::StrCat("queue '", key_.name,
                                "' exists with other component types, shapes or capacity"));
    }
    ctx->set_output(0, MakeHandle(ctx, key_, "FIFOQueue"));
    return absl::OkStatus();
  }

 private:
  DataTypeVector types_;
  std::vector<PartialShape> shapes_;
  int64_t capacity_ = -1;
  ResourceKey key_;
};

class EnqueueOp : public AsyncOpKernel {
 public:
  EnqueueOp(OpKernelConstruction* ctx, bool many) : AsyncOpKernel(ctx), many_(many) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("Tcomponents", &types_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("timeout_ms", &timeout_ms_));
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto q = LookupHandle<FIFOQueue>(*this, ctx);
    GR_ASYNC_RETURN_IF_ERROR_(q.status());
    FIFOQueue* queue = q->get();
    GR_ASYNC_RETURN_IF_ERROR_(queue->CheckTypes(types_));
    Tuple components;
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      auto t = GetInput(*this, ctx, i);
      GR_ASYNC_RETURN_IF_ERROR_(t.status());
      components.push_back(**t);
    }
    std::vector<Tuple> tuples;
    if (!many_) {
      for (size_t i = 0; i < components.size(); ++i) {
        GR_ASYNC_RETURN_IF_ERROR_(queue->CheckShape(static_cast<int>(i), components[i].shape()));
      }
      tuples.push_back(std::move(components));
    } else {
      auto split = Split(*queue, components);
      GR_ASYNC_RETURN_IF_ERROR_(split.status());
      tuples = *std::move(split);
    }
    // The queue stays alive (shared_ptr) until the enqueue finishes.
    std::shared_ptr<FIFOQueue> keep = *q;
    queue->Enqueue(ctx, timeout_ms_, std::move(tuples),
                   [this, keep, done = std::move(done)](absl::Status s) {
                     done(s.ok() ? s : Annotate(*this, s));
                   });
  }

 private:
  // Rows along dimension 0 of every component, as tuples.
  absl::StatusOr<std::vector<Tuple>> Split(const FIFOQueue& q, const Tuple& components) const {
    int64_t n = -1;
    for (size_t i = 0; i < components.size(); ++i) {
      const Tensor& c = components[i];
      if (c.dims() < 1) {
        return Error(absl::StrCat("component ", i, " of EnqueueMany must be at least 1-D"));
      }
      if (n >= 0 && c.dim_size(0) != n) {
        return Error(absl::StrCat("EnqueueMany components have different batch sizes: ", n, " and ",
                                  c.dim_size(0)));
      }
      n = c.dim_size(0);
    }
    std::vector<Tuple> tuples(static_cast<size_t>(n));
    for (size_t i = 0; i < components.size(); ++i) {
      const Tensor& c = components[i];
      TensorShape row = c.shape();
      row.RemoveDim(0);
      GR_RETURN_IF_ERROR(q.CheckShape(static_cast<int>(i), row));
      const int64_t elems = row.num_elements();
      for (int64_t k = 0; k < n; ++k) {
        Tensor t(c.dtype(), row);
        array_util::CopyElements(c, k * elems, t, 0, elems);
        tuples[k].push_back(std::move(t));
      }
    }
    return tuples;
  }

  bool many_;
  DataTypeVector types_;
  int64_t timeout_ms_ = -1;
};
class QueueEnqueueOp : public EnqueueOp {
 public:
  explicit QueueEnqueueOp(OpKernelConstruction* ctx) : EnqueueOp(ctx, false) {}
};
class QueueEnqueueManyOp : public EnqueueOp {
 public:
  explicit QueueEnqueueManyOp(OpKernelConstruction* ctx) : EnqueueOp(ctx, true) {}
};

class DequeueOp : public AsyncOpKernel {
 public:
  DequeueOp(OpKernelConstruction* ctx, bool many) : AsyncOpKernel(ctx), many_(many) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("component_types", &types_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("timeout_ms", &timeout_ms_));
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto q = LookupHandle<FIFOQueue>(*this, ctx);
    GR_ASYNC_RETURN_IF_ERROR_(q.status());
    GR_ASYNC_RETURN_IF_ERROR_((*q)->CheckTypes(types_));
    int64_t n = 1;
    if (many_) {
      auto v = ScalarInt(*this, ctx->input(1), "n");
      GR_ASYNC_RETURN_IF_ERROR_(v.status());
      n = *v;
      if (n < 0) {
        done(Error(absl::StrCat("n must be >= 0, got ", n)));
        return;
      }
    }
    std::shared_ptr<FIFOQueue> keep = *q;
    keep->Dequeue(ctx, timeout_ms_, n, many_, [this, keep, done = std::move(done)](absl::Status s) {
      done(s.ok() ? s : Annotate(*this, s));
    });
  }

 private:
  bool many_;
  DataTypeVector types_;
  int64_t timeout_ms_ = -1;
};
class QueueDequeueOp : public DequeueOp {
 public:
  explicit QueueDequeueOp(OpKernelConstruction* ctx) : DequeueOp(ctx, false) {}
};
class QueueDequeueManyOp : public DequeueOp {
 public:
  explicit QueueDequeueManyOp(OpKernelConstruction* ctx) : DequeueOp(ctx, true) {}
};

class QueueSizeOp : public OpKernel {
 public:
  explicit QueueSizeOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<FIFOQueue> q, LookupHandle<FIFOQueue>(*this, ctx));
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(q->size())));
    return absl::OkStatus();
  }
};

class QueueCloseOp : public OpKernel {
 public:
  explicit QueueCloseOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("cancel_pending_enqueues", &cancel_pending_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<FIFOQueue> q, LookupHandle<FIFOQueue>(*this, ctx));
    return q->Close(cancel_pending_);
  }

 private:
  bool cancel_pending_ = false;
};

class AccumulatorOp : public OpKernel {
 public:
  explicit AccumulatorOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("shape", &shape_));
    std::string reduction;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("reduction_type", &reduction));
    mean_ = reduction != "SUM";
    auto k = KeyFromAttrs(ctx);
    GR_CTX_CHECK_OK(ctx, k.status());
    key_ = *k;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    auto a = ctx->resource_manager()->LookupOrCreate<Accumulator>(
        key_.container, key_.name, [this]() -> absl::StatusOr<std::shared_ptr<Accumulator>> {
          return std::make_shared<Accumulator>(key_.name, dtype_, shape_, mean_);
        });
    if (!a.ok()) return Annotate(*this, a.status());
    if ((*a)->dtype() != dtype_ || !((*a)->shape() == shape_)) {
      return Error(absl::StrCat("accumulator '", key_.name, "' exists with dtype ",
                                DataTypeString((*a)->dtype()), " and shape ",
                                (*a)->shape().DebugString()));
    }
    ctx->set_output(0, MakeHandle(ctx, key_, "ConditionalAccumulator"));
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
  bool mean_ = true;
  ResourceKey key_;
};

class AccumulatorApplyOp : public OpKernel {
 public:
  explicit AccumulatorApplyOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> a, LookupHandle<Accumulator>(*this, ctx));
    GR_ASSIGN_OR_RETURN(int64_t local_step, ScalarInt(*this, ctx->input(1), "local_step"));
    GR_ASSIGN_OR_RETURN(const Tensor* grad, GetInput(*this, ctx, 2));
    absl::Status s = a->Apply(local_step, *grad);
    return s.ok() ? s : Annotate(*this, s);
  }
};

class AccumulatorTakeOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto a = LookupHandle<Accumulator>(*this, ctx);
    GR_ASYNC_RETURN_IF_ERROR_(a.status());
    auto n = ScalarInt(*this, ctx->input(1), "num_required");
    GR_ASYNC_RETURN_IF_ERROR_(n.status());
    if (*n < 1) {
      done(Error(absl::StrCat("num_required must be >= 1, got ", *n)));
      return;
    }
    std::shared_ptr<Accumulator> keep = *a;
    keep->Take(ctx, *n, [this, keep, done = std::move(done)](absl::Status s) {
      done(s.ok() ? s : Annotate(*this, s));
    });
  }
};

class AccumulatorNumAccumulatedOp : public OpKernel {
 public:
  explicit AccumulatorNumAccumulatedOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> a, LookupHandle<Accumulator>(*this, ctx));
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(a->num_accumulated())));
    return absl::OkStatus();
  }
};

class AccumulatorSetGlobalStepOp : public OpKernel {
 public:
  explicit AccumulatorSetGlobalStepOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> a, LookupHandle<Accumulator>(*this, ctx));
    GR_ASSIGN_OR_RETURN(int64_t step, ScalarInt(*this, ctx->input(1), "new_global_step"));
    return a->SetGlobalStep(step);
  }
};

// The accumulator named by a ref (or plain) string handle [container, name]
// at input 0; NotFound naming it.
template <typename R>
absl::StatusOr<std::shared_ptr<R>> LookupRefHandle(const OpKernel& k, OpKernelContext* ctx) {
  const Tensor& t = ctx->input(0);
  if (!t.IsInitialized() || t.dtype() != DT_STRING || t.NumElements() != 2) {
    return k.Error("input 0 must be an accumulator handle: a string [container, name]");
  }
  const std::string* h = t.base<std::string>();
  auto r = ctx->resource_manager()->Lookup<R>(h[0], h[1]);
  if (!r.ok()) return Annotate(k, r.status());
  return *r;
}

class SparseAccumulatorOp : public OpKernel {
 public:
  explicit SparseAccumulatorOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtype", &dtype_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("shape", &shape_));
    if (shape_.known_rank() && shape_.rank() < 1) {
      ctx->SetStatus(
          ctx->Error(absl::StrCat("shape must have rank >= 1 (rows of the gradient), "
                                  "got ",
                                  shape_.DebugString())));
      return;
    }
    std::string reduction;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("reduction_type", &reduction));
    mean_ = reduction != "SUM";
    auto k = KeyFromAttrs(ctx);
    GR_CTX_CHECK_OK(ctx, k.status());
    key_ = *k;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string container =
        key_.container.empty() ? ctx->resource_manager()->default_container() : key_.container;
    auto a = ctx->resource_manager()->LookupOrCreate<SparseAccumulator>(
        container, key_.name,
        [this, &container]() -> absl::StatusOr<std::shared_ptr<SparseAccumulator>> {
          return std::make_shared<SparseAccumulator>(container, key_.name, dtype_, shape_, mean_);
        });
    if (!a.ok()) return Annotate(*this, a.status());
    if ((*a)->dtype() != dtype_ || !((*a)->shape() == shape_)) {
      return Error(absl::StrCat("sparse accumulator '", key_.name, "' exists with dtype ",
                                DataTypeString((*a)->dtype()), " and shape ",
                                (*a)->shape().DebugString()));
    }
    ctx->set_output_ref(0, (*a)->handle());
    return absl::OkStatus();
  }

 private:
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
  bool mean_ = true;
  ResourceKey key_;
};

class SparseAccumulatorApplyOp : public OpKernel {
 public:
  explicit SparseAccumulatorApplyOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("has_known_shape", &has_known_shape_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<SparseAccumulator> a,
                        LookupRefHandle<SparseAccumulator>(*this, ctx));
    GR_ASSIGN_OR_RETURN(int64_t local_step, ScalarInt(*this, ctx->input(1), "local_step"));
    GR_ASSIGN_OR_RETURN(const Tensor* indices, GetInput(*this, ctx, 2));
    GR_ASSIGN_OR_RETURN(const Tensor* values, GetInput(*this, ctx, 3));
    GR_ASSIGN_OR_RETURN(const Tensor* shape, GetInput(*this, ctx, 4));
    absl::Status s = a->Apply(local_step, *indices, *values, has_known_shape_ ? shape : nullptr);
    return s.ok() ? s : Annotate(*this, s);
  }

 private:
  bool has_known_shape_ = false;
};

class SparseAccumulatorTakeOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto a = LookupRefHandle<SparseAccumulator>(*this, ctx);
    GR_ASYNC_RETURN_IF_ERROR_(a.status());
    auto n = ScalarInt(*this, ctx->input(1), "num_required");
    GR_ASYNC_RETURN_IF_ERROR_(n.status());
    if (*n < 1) {
      done(Error(absl::StrCat("num_required must be >= 1, got ", *n)));
      return;
    }
    std::shared_ptr<SparseAccumulator> keep = *a;
    keep->Take(ctx, *n, [this, keep, done = std::move(done)](absl::Status s) {
      done(s.ok() ? s : Annotate(*this, s));
    });
  }
};

class RefAccumulatorNumAccumulatedOp : public OpKernel {
 public:
  explicit RefAccumulatorNumAccumulatedOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<SparseAccumulator> a,
                        LookupRefHandle<SparseAccumulator>(*this, ctx));
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(a->num_accumulated())));
    return absl::OkStatus();
  }
};

class RefAccumulatorSetGlobalStepOp : public OpKernel {
 public:
  explicit RefAccumulatorSetGlobalStepOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::shared_ptr<SparseAccumulator> a,
                        LookupRefHandle<SparseAccumulator>(*this, ctx));
    GR_ASSIGN_OR_RETURN(int64_t step, ScalarInt(*this, ctx->input(1), "new_global_step"));
    return a->SetGlobalStep(step);
  }
};

#undef GR_ASYNC_RETURN_IF_ERROR_

}  // namespace

void RegisterQueueKernels(KernelRegistry& r) {
  r.Add(KernelDef("FIFOQueueV2").Device(kDeviceCpu), MakeKernel<FIFOQueueOp>());
  r.Add(KernelDef("QueueEnqueueV2").Device(kDeviceCpu), MakeKernel<QueueEnqueueOp>());
  r.Add(KernelDef("QueueEnqueueManyV2").Device(kDeviceCpu), MakeKernel<QueueEnqueueManyOp>());
  r.Add(KernelDef("QueueDequeueV2").Device(kDeviceCpu), MakeKernel<QueueDequeueOp>());
  r.Add(KernelDef("QueueDequeueManyV2").Device(kDeviceCpu), MakeKernel<QueueDequeueManyOp>());
  r.Add(KernelDef("QueueSizeV2").Device(kDeviceCpu), MakeKernel<QueueSizeOp>());
  r.Add(KernelDef("QueueCloseV2").Device(kDeviceCpu), MakeKernel<QueueCloseOp>());
  const std::vector<DataType> types = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
  r.Add(
      KernelDef("ResourceConditionalAccumulator").Device(kDeviceCpu).TypeConstraint("dtype", types),
      MakeKernel<AccumulatorOp>());
  r.Add(KernelDef("ResourceAccumulatorApplyGradient")
            .Device(kDeviceCpu)
            .TypeConstraint("dtype", types),
        MakeKernel<AccumulatorApplyOp>());
  r.Add(KernelDef("ResourceAccumulatorTakeGradient")
            .Device(kDeviceCpu)
            .TypeConstraint("dtype", types),
        MakeKernel<AccumulatorTakeOp>());
  r.Add(KernelDef("ResourceAccumulatorNumAccumulated").Device(kDeviceCpu),
        MakeKernel<AccumulatorNumAccumulatedOp>());
  r.Add(KernelDef("ResourceAccumulatorSetGlobalStep").Device(kDeviceCpu),
        MakeKernel<AccumulatorSetGlobalStepOp>());
  r.Add(KernelDef("SparseConditionalAccumulator").Device(kDeviceCpu).TypeConstraint("dtype", types),
        MakeKernel<SparseAccumulatorOp>());
  r.Add(
      KernelDef("SparseAccumulatorApplyGradient").Device(kDeviceCpu).TypeConstraint("dtype", types),
      MakeKernel<SparseAccumulatorApplyOp>());
  r.Add(
      KernelDef("SparseAccumulatorTakeGradient").Device(kDeviceCpu).TypeConstraint("dtype", types),
      MakeKernel<SparseAccumulatorTakeOp>());
  r.Add(KernelDef("AccumulatorNumAccumulated").Device(kDeviceCpu),
        MakeKernel<RefAccumulatorNumAccumulatedOp>());
  r.Add(KernelDef("AccumulatorSetGlobalStep").Device(kDeviceCpu),
        MakeKernel<RefAccumulatorSetGlobalStepOp>());
}

}  // namespace graphrun
