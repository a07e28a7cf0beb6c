// CPU kernels for FIFO queues, one of the stateful resources of the
// SyncReplicasOptimizer scheme (docs/distributed.md, "Synchronous
// replication"); the conditional accumulators are in accumulator_kernels.cc.
// A queue lives in the device's ResourceMgr under (container, shared_name or
// node name) and is named by DT_RESOURCE handles, so every session and
// client that names it on a PS shares it. Enqueue on a full queue and
// dequeue on an empty one wait without holding a thread (see
// blocking_resource_internal.h).
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/data/register.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/blocking_resource_internal.h"

namespace graphrun {
namespace {

using array_util::Annotate;
using array_util::GetInput;
using queue_internal::BlockingResource;
using queue_internal::DoneCallback;
using queue_internal::KeyFromAttrs;
using queue_internal::LookupHandle;
using queue_internal::MakeHandle;
using queue_internal::ResourceKey;
using queue_internal::ScalarInt;

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
        GR_RETURN_IF_ERROR(array_util::CopyElements(items_[k][c], 0, out, k * row, row));
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
// Kernels.

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
    GR_ASYNC_RETURN_IF_ERROR(q.status());
    FIFOQueue* queue = q->get();
    GR_ASYNC_RETURN_IF_ERROR(queue->CheckTypes(types_));
    Tuple components;
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      auto t = GetInput(*this, ctx, i);
      GR_ASYNC_RETURN_IF_ERROR(t.status());
      components.push_back(**t);
    }
    std::vector<Tuple> tuples;
    if (!many_) {
      for (size_t i = 0; i < components.size(); ++i) {
        GR_ASYNC_RETURN_IF_ERROR(queue->CheckShape(static_cast<int>(i), components[i].shape()));
      }
      tuples.push_back(std::move(components));
    } else {
      auto split = Split(*queue, components);
      GR_ASYNC_RETURN_IF_ERROR(split.status());
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
        GR_RETURN_IF_ERROR(array_util::CopyElements(c, k * elems, t, 0, elems));
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
    GR_ASYNC_RETURN_IF_ERROR(q.status());
    GR_ASYNC_RETURN_IF_ERROR((*q)->CheckTypes(types_));
    int64_t n = 1;
    if (many_) {
      auto v = ScalarInt(*this, ctx->input(1), "n");
      GR_ASYNC_RETURN_IF_ERROR(v.status());
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

}  // namespace

void RegisterQueueKernels(KernelRegistry& r) {
  r.Add(KernelDef("FIFOQueueV2").Device(kDeviceCpu), MakeKernel<FIFOQueueOp>());
  r.Add(KernelDef("QueueEnqueueV2").Device(kDeviceCpu), MakeKernel<QueueEnqueueOp>());
  r.Add(KernelDef("QueueEnqueueManyV2").Device(kDeviceCpu), MakeKernel<QueueEnqueueManyOp>());
  r.Add(KernelDef("QueueDequeueV2").Device(kDeviceCpu), MakeKernel<QueueDequeueOp>());
  r.Add(KernelDef("QueueDequeueManyV2").Device(kDeviceCpu), MakeKernel<QueueDequeueManyOp>());
  r.Add(KernelDef("QueueSizeV2").Device(kDeviceCpu), MakeKernel<QueueSizeOp>());
  r.Add(KernelDef("QueueCloseV2").Device(kDeviceCpu), MakeKernel<QueueCloseOp>());
  queue_internal::RegisterAccumulatorKernels(r);
}

}  // namespace graphrun
