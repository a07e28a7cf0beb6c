#include "runtime/executor.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <thread>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/framework/denormal.h"
#include "kernels/framework/variable.h"
#include "runtime/function_call.h"

namespace graphrun {
namespace {

// A kernel's error that does not say which node it is from (the memory
// budget's refusals inside shared helpers) gets the node's name.
absl::Status NameNode(const OpKernel& kernel, absl::Status s) {
  if (s.ok() || s.code() != absl::StatusCode::kResourceExhausted ||
      absl::StartsWith(s.message(), "node '")) {
    return s;
  }
  return absl::Status(s.code(), absl::StrCat("node '", kernel.name(), "' (op ",
                                             kernel.type_string(), "): ", s.message()));
}

// Charges the string contents of a kernel's string outputs that nothing
// charged yet (TensorBuffer::ChargeContents): what kernels wrote into
// strings themselves (restores, parsed examples, received tensors, joined
// strings). Copies charged theirs before copying (array_util).
absl::Status ChargeStringOutputs(const OpKernel& kernel, const std::vector<TensorValue>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i].tensor;
    if (t.dtype() != DT_STRING || t.buffer() == nullptr) continue;
    TensorBuffer* b = t.buffer().get();
    if (b->contents_charged() || b->memory_space() != nullptr) continue;
    // The first charge counts what the buffer's strings hold.
    GR_RETURN_IF_ERROR(
        NameNode(kernel, b->ChargeContents(0, absl::StrCat("the string contents of output ", i,
                                                           " (", t.shape().DebugString(), ")"))));
  }
  return absl::OkStatus();
}

// A kernel's Compute; an exception it throws (an allocation that did not
// go through the memory budget, a library's throw) becomes the step's
// error naming the node, never a crash of the pool thread.
absl::Status ComputeGuarded(OpKernel* kernel, OpKernelContext* ctx) {
  try {
    absl::Status s = NameNode(*kernel, kernel->Compute(ctx));
    if (!s.ok()) return s;
    return ChargeStringOutputs(*kernel, *ctx->mutable_outputs());
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("node '", kernel->name(), "' (op ",
                                                     kernel->type_string(),
                                                     "): out of memory (std::bad_alloc)"));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("node '", kernel->name(), "' (op ", kernel->type_string(), "): ", e.what()));
  }
}

struct OutEdge {
  int dst;
  int src_slot;  // kControlSlot for control edges
  int dst_slot;
};

struct NodeItem {
  const Node* node = nullptr;  // null for removed node ids
  std::unique_ptr<OpKernel> kernel;
  bool is_async = false;
  bool expensive = true;
  bool is_merge = false;
  bool is_enter = false;
  bool is_constant_enter = false;
  bool is_exit = false;
  bool is_next_iteration = false;
  bool is_control_trigger = false;
  bool is_transfer = false;  // _Send / _Recv run even when dead
  int num_inputs = 0;
  int num_outputs = 0;
  int initial_pending = 0;
  // The node's static frame (Impl::frames), its index among that frame's
  // nodes, and where its inputs start in the frame's input slots: an
  // iteration's state holds only the nodes of its frame.
  int frame = 0;
  int local_id = 0;
  int local_input_start = 0;
  std::string frame_name;  // Enter only
  int enter_frame = 0;     // Enter only: the frame it enters
  int parallel_iterations = 10;
  std::vector<OutEdge> out;
};

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// A static frame: the nodes that run in it (TensorFlow's ControlFlowInfo).
// Frame 0 is the root; every other is named by its Enter nodes'
// frame_name.
struct FrameInfo {
  std::string name;
  int parent = -1;                   // static parent frame (-1: root)
  int num_enters = 0;                // Enter nodes into it: inputs a new frame waits for
  int total_inputs = 0;              // input slots of its nodes
  std::vector<int> initial_pending;  // by local id
};

struct Executor::Impl {
  DeviceBase* device = nullptr;
  // For call frames, when the graph has a function library; outlives the
  // kernels (destroyed after `items`).
  std::unique_ptr<FunctionLibraryRuntime> functions;
  // The CPU's kernels read host memory only: an input in an accelerator's
  // memory is a missing copy, reported instead of computed on.
  bool host_only = true;
  std::vector<NodeItem> items;
  std::vector<int> roots;
  std::vector<FrameInfo> frames;
};

namespace {

using Impl = Executor::Impl;

struct IterationState {
  explicit IterationState(const FrameInfo& frame)
      : inputs(frame.total_inputs),
        pending(frame.initial_pending),
        dead(frame.initial_pending.size(), 0) {}
  std::vector<TensorValue> inputs;
  std::vector<int> pending;
  std::vector<int> dead;
  int outstanding_ops = 0;
  int outstanding_frame_count = 0;
};

struct FrameState;
// A live frame: its parent frame's state, the parent's iteration, and the
// static frame.
using FrameKey = std::tuple<FrameState*, int64_t, int>;

struct FrameState {
  FrameKey key;
  const FrameInfo* info = nullptr;
  uint64_t frame_id = 0;
  FrameState* parent = nullptr;
  int64_t parent_iter = 0;
  int max_parallel = 10;
  int num_pending_inputs = 0;
  int64_t iteration_count = 0;
  int num_outstanding_iterations = 1;
  std::map<int64_t, std::unique_ptr<IterationState>> iterations;
  std::vector<std::pair<int, TensorValue>> next_iter_roots;
  std::vector<std::pair<int, TensorValue>> inv_values;
  std::vector<int> dead_exits;

  IterationState* Get(int64_t iter) {
    auto it = iterations.find(iter);
    return it == iterations.end() ? nullptr : it->second.get();
  }
};

struct TaggedNode {
  int id;
  FrameState* frame;
  int64_t iter;
  IterationState* iter_state;
  bool is_dead;
};

using ReadyList = absl::InlinedVector<TaggedNode, 8>;

using OutputList = std::vector<TensorValue>;

class ExecutorState {
 public:
  ExecutorState(const Impl* impl, const Executor::Args& args, Executor::DoneCallback done)
      : impl_(impl), args_(args), done_(std::move(done)) {
    if (!args_.runner) args_.runner = [](std::function<void()> fn) { fn(); };
  }

  void Run() {
    if (args_.cancellation_manager != nullptr) {
      // The callback only touches the shared flag: it may run while this
      // state is being deleted.
      std::shared_ptr<std::atomic<bool>> flag = cancelled_;
      token_ = args_.cancellation_manager->NewToken();
      if (!args_.cancellation_manager->RegisterCallback(token_, [flag] { flag->store(true); })) {
        cancelled_->store(true);
      }
    }
    auto root = std::make_unique<FrameState>();
    root->info = &impl_->frames[0];
    root->frame_id = 0;
    auto it0 = std::make_unique<IterationState>(*root->info);
    IterationState* is0 = it0.get();
    root->iterations[0] = std::move(it0);
    root_ = root.get();
    frames_[{nullptr, 0, 0}] = std::move(root);
    ReadyList ready;
    for (int id : impl_->roots) ready.push_back({id, root_, 0, is0, false});
    is0->outstanding_ops = static_cast<int>(ready.size());
    num_outstanding_ops_ = static_cast<int64_t>(ready.size());
    if (ready.empty()) {
      Finish();
      return;
    }
    std::deque<TaggedNode> inline_ready;
    ScheduleReady(ready, &inline_ready);
    if (!inline_ready.empty()) ProcessLoop(std::move(inline_ready));
  }

 private:
  void ProcessLoop(std::deque<TaggedNode> queue) {
    ScopedFlushDenormal flush;
    while (!queue.empty()) {
      TaggedNode tn = queue.front();
      queue.pop_front();
      if (!Process(tn, &queue)) return;  // the step finished
    }
  }

  // Returns false once the step has finished (state deleted).
  bool Process(const TaggedNode& tn, std::deque<TaggedNode>* inline_ready) {
    const NodeItem& item = impl_->items[tn.id];
    absl::InlinedVector<TensorValue, 4> inputs(item.num_inputs);
    bool any_input_dead = false;
    {
      TensorValue* slots = tn.iter_state->inputs.data() + item.local_input_start;
      for (int i = 0; i < item.num_inputs; ++i) {
        inputs[i] = std::move(slots[i]);
        any_input_dead |= !inputs[i].has_value();
      }
    }
    if (cancelled_->load() && !aborted_.load()) {
      std::lock_guard<std::mutex> l(mu_);
      if (status_.ok()) status_ = absl::CancelledError("step was cancelled");
      aborted_.store(true);
    }
    const bool skip = (tn.is_dead && !item.is_transfer) || aborted_.load();
    if (!skip && impl_->host_only) {
      for (int i = 0; i < item.num_inputs; ++i) {
        const DeviceMemorySpace* space = inputs[i].tensor.memory_space();
        if (space == nullptr) continue;
        OutputList outputs(item.num_outputs);
        return NodeDone(absl::InternalError(absl::StrCat(
                            "node '", item.node->name(), "' (op ", item.node->op(), ") on ",
                            impl_->device->name(), ": input ", i, " lies in the memory of ",
                            space->device_name(), ", which this device cannot read")),
                        tn, std::move(outputs), inline_ready);
      }
    }
    if (skip) {
      OutputList outputs(item.num_outputs);
      return NodeDone(absl::OkStatus(), tn, std::move(outputs), inline_ready);
    }
    tensorflow::NodeExecStats* stats = nullptr;
    if (args_.stats_collector != nullptr) {
      stats = new tensorflow::NodeExecStats();
      stats->set_node_name(item.node->name());
      stats->set_all_start_micros(NowMicros());
      stats->set_thread_id(
          static_cast<uint32_t>(std::hash<std::thread::id>()(std::this_thread::get_id()) & 0xffff));
    }
    OpKernelContext::Params stack_params;
    OpKernelContext::Params* params = &stack_params;
    params->step_id = args_.step_id;
    params->device = impl_->device;
    params->op_kernel = item.kernel.get();
    params->num_inputs = item.num_inputs;
    params->rendezvous = args_.rendezvous;
    params->cancellation_manager = args_.cancellation_manager;
    params->call_frame = args_.call_frame;
    params->frame_iter = FrameAndIter{tn.frame->frame_id, tn.iter};
    params->is_input_dead = any_input_dead;
    params->runner = args_.runner;
    params->collective_executor = args_.collective_executor;
    params->step_resources = &step_resources_;
    params->stats_collector = args_.stats_collector;
    if (item.is_async) {
      struct AsyncState {
        std::unique_ptr<OpKernelContext::Params> params;
        absl::InlinedVector<TensorValue, 4> inputs;
        std::unique_ptr<OpKernelContext> ctx;
      };
      auto* st = new AsyncState();
      st->params = std::make_unique<OpKernelContext::Params>(stack_params);
      st->inputs = std::move(inputs);
      st->params->inputs = st->inputs.data();
      st->ctx = std::make_unique<OpKernelContext>(st->params.get());
      item.kernel->AsAsync()->ComputeAsync(st->ctx.get(), [this, st, tn, stats](absl::Status s) {
        const OpKernel& kernel = *st->params->op_kernel;
        s = NameNode(kernel, std::move(s));
        if (s.ok()) s = ChargeStringOutputs(kernel, *st->ctx->mutable_outputs());
        OutputList outputs = std::move(*st->ctx->mutable_outputs());
        if (stats) FinishStats(stats, impl_->items[tn.id], st->inputs.data(), outputs);
        delete st;
        std::deque<TaggedNode> q;
        if (NodeDone(std::move(s), tn, std::move(outputs), &q) && !q.empty()) {
          // Continue on the pool: the callback may run on a thread that
          // must not be held (e.g. a sender's).
          auto batch = std::make_shared<std::deque<TaggedNode>>(std::move(q));
          args_.runner([this, batch] { ProcessLoop(std::move(*batch)); });
        }
      });
      return true;
    }
    params->inputs = inputs.data();
    if (stats) stats->set_op_start_rel_micros(NowMicros() - stats->all_start_micros());
    OpKernelContext ctx(params);
    absl::Status s = ComputeGuarded(item.kernel.get(), &ctx);
    OutputList outputs = std::move(*ctx.mutable_outputs());
    if (stats) FinishStats(stats, item, inputs.data(), outputs);
    return NodeDone(std::move(s), tn, std::move(outputs), inline_ready);
  }

  // `inputs` (item.num_inputs of them) give a _Send's bytes.
  void FinishStats(tensorflow::NodeExecStats* stats, const NodeItem& item,
                   const TensorValue* inputs, const OutputList& outputs) {
    int64_t now = NowMicros();
    stats->set_op_end_rel_micros(now - stats->all_start_micros());
    stats->set_all_end_rel_micros(now - stats->all_start_micros());
    const Node* n = item.node;
    std::string label = absl::StrCat(n->name(), " = ", n->op(), "()");
    if (n->IsSend() || n->IsRecv()) {
      // "NAME = _Recv(TENSOR_NAME from SEND_DEVICE to RECV_DEVICE;
      //  src_tensor=NODE:K; bytes=N)": what crossed, where, and its size,
      // parsed back by placement::MeasuredTrafficReport.
      std::string tname, sd, rd, src;
      GetAttr(NodeAttrs(n->def()), "tensor_name", &tname).IgnoreError();
      GetAttr(NodeAttrs(n->def()), "send_device", &sd).IgnoreError();
      GetAttr(NodeAttrs(n->def()), "recv_device", &rd).IgnoreError();
      GetAttr(NodeAttrs(n->def()), "_src_tensor", &src).IgnoreError();
      int64_t bytes = 0;
      const TensorValue* v = n->IsSend() ? (item.num_inputs > 0 ? inputs : nullptr)
                                         : (outputs.empty() ? nullptr : &outputs[0]);
      if (v != nullptr && v->tensor.IsInitialized()) {
        bytes = static_cast<int64_t>(v->tensor.TotalBytes());
      } else if (v != nullptr && v->ref != nullptr) {
        std::lock_guard<std::mutex> l(v->ref->mu);
        if (v->ref->initialized) bytes = static_cast<int64_t>(v->ref->tensor.TotalBytes());
      }
      label = absl::StrCat(n->name(), " = ", n->op(), "(", tname, " from ", sd, " to ", rd,
                           "; src_tensor=", src, "; bytes=", bytes, ")");
    }
    stats->set_timeline_label(label);
    for (int i = 0; i < static_cast<int>(outputs.size()); ++i) {
      const TensorValue& v = outputs[i];
      if (!v.tensor.IsInitialized()) continue;
      auto* o = stats->add_output();
      o->set_slot(i);
      auto* d = o->mutable_tensor_description();
      d->set_dtype(v.tensor.dtype());
      v.tensor.shape().AsProto(d->mutable_shape());
      d->mutable_allocation_description()->set_requested_bytes(v.tensor.TotalBytes());
      d->mutable_allocation_description()->set_allocated_bytes(v.tensor.TotalBytes());
      d->mutable_allocation_description()->set_allocator_name("cpu");
    }
    args_.stats_collector->Save(std::move(*stats));
    delete stats;
  }

  // Returns false if the step finished (this object is deleted).
  bool NodeDone(absl::Status s, const TaggedNode& tn, OutputList outputs,
                std::deque<TaggedNode>* inline_ready) {
    ReadyList ready;
    bool first_error = false;
    bool completed;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!s.ok()) {
        if (status_.ok()) {
          status_ = s;
          first_error = true;
          aborted_.store(true);
        }
      } else if (!aborted_.load()) {
        PropagateOutputs(tn, &outputs, &ready);
      }
      // The first error keeps this node outstanding until the abort and
      // cancel below are done: otherwise another thread could finish the
      // step meanwhile, and the step's owner free the rendezvous and the
      // cancellation manager under our feet.
      num_outstanding_ops_ += static_cast<int64_t>(ready.size()) - (first_error ? 0 : 1);
      completed = num_outstanding_ops_ == 0;
    }
    if (first_error) {
      if (args_.rendezvous) args_.rendezvous->StartAbort(s);
      if (args_.cancellation_manager) args_.cancellation_manager->StartCancel();
      std::lock_guard<std::mutex> l(mu_);
      completed = --num_outstanding_ops_ == 0;
    }
    if (completed) {
      Finish();
      return false;
    }
    ScheduleReady(ready, inline_ready);
    return true;
  }

  void ScheduleReady(const ReadyList& ready, std::deque<TaggedNode>* inline_ready) {
    const TaggedNode* keep = nullptr;
    for (const TaggedNode& tn : ready) {
      const NodeItem& item = impl_->items[tn.id];
      if (!item.expensive || tn.is_dead) {
        inline_ready->push_back(tn);
      } else if (keep == nullptr && inline_ready->empty()) {
        keep = &tn;  // run one expensive node on this thread
      } else {
        TaggedNode copy = tn;
        args_.runner([this, copy] {
          std::deque<TaggedNode> q;
          q.push_back(copy);
          ProcessLoop(std::move(q));
        });
      }
    }
    if (keep != nullptr) inline_ready->push_back(*keep);
  }

  // --- Frame bookkeeping; all below REQUIRES mu_ held. ---

  void ActivateNodes(const NodeItem& item, bool is_dead, FrameState* frame, int64_t iter,
                     OutputList* outputs, ReadyList* ready) {
    IterationState* is = frame->Get(iter);
    for (const OutEdge& e : item.out) {
      const NodeItem& dst = impl_->items[e.dst];
      const bool is_control = e.src_slot == kControlSlot;
      bool dst_dead = false, dst_ready = false, dst_need_input = !is_control;
      if (dst.is_merge) {
        if (is_control) {
          is->pending[dst.local_id] -= 2;
          int count = is->pending[dst.local_id];
          int dead_cnt = is->dead[dst.local_id];
          dst_ready = (count == 0) || ((count == 1) && dead_cnt == dst.num_inputs);
          dst_dead = (count == 1) && dead_cnt == dst.num_inputs;
          dst_need_input = false;
        } else if (!is_dead && (*outputs)[e.src_slot].has_value()) {
          int count = is->pending[dst.local_id];
          is->pending[dst.local_id] &= ~1;  // a live input arrived
          dst_ready = (count == 1);
          dst_need_input = (count & 1) == 1;
        } else {
          // A dead Enter makes its Merge dead at once: a while loop on the
          // untaken branch of a conditional must still finish.
          ++is->dead[dst.local_id];
          dst_dead = is->dead[dst.local_id] == dst.num_inputs || item.is_enter;
          dst_ready = dst_dead && is->pending[dst.local_id] == 1;
          dst_need_input = false;
        }
      } else {
        const bool increment_dead = is_dead || (!is_control && !(*outputs)[e.src_slot].has_value());
        if (increment_dead) ++is->dead[dst.local_id];
        dst_dead = is->dead[dst.local_id] > 0;
        dst_ready = --is->pending[dst.local_id] == 0;
      }
      if (dst_need_input) {
        is->inputs[dst.local_input_start + e.dst_slot] = (*outputs)[e.src_slot];
      }
      if (dst_ready) {
        if (dst.is_control_trigger) dst_dead = false;
        ready->push_back({e.dst, frame, iter, is, dst_dead});
        ++is->outstanding_ops;
      }
    }
  }

  FrameState* FindOrCreateChildFrame(FrameState* frame, int64_t iter, const NodeItem& item) {
    FrameKey key{frame, iter, item.enter_frame};
    auto it = frames_.find(key);
    if (it != frames_.end()) return it->second.get();
    auto f = std::make_unique<FrameState>();
    f->key = key;
    f->info = &impl_->frames[item.enter_frame];
    // The same on every task for the same frame and iteration (Send/Recv
    // pairs inside loops key on it), and O(1) to make at any depth.
    f->frame_id =
        std::hash<std::string>()(absl::StrCat(frame->frame_id, ";", iter, ";", item.frame_name)) |
        1;
    f->parent = frame;
    f->parent_iter = iter;
    f->max_parallel = std::max(1, item.parallel_iterations);
    f->num_pending_inputs = std::max(1, f->info->num_enters);
    f->iterations[0] = std::make_unique<IterationState>(*f->info);
    frame->Get(iter)->outstanding_frame_count++;
    FrameState* p = f.get();
    frames_[key] = std::move(f);
    return p;
  }

  bool IsIterationDone(FrameState* f, int64_t iter) {
    IterationState* is = f->Get(iter);
    if (is->outstanding_ops == 0 && is->outstanding_frame_count == 0) {
      if (iter == 0) return f->num_pending_inputs == 0;
      return f->Get(iter - 1) == nullptr;
    }
    return false;
  }

  void IncrementIteration(FrameState* f, ReadyList* ready) {
    f->iteration_count++;
    int64_t next = f->iteration_count;
    f->iterations[next] = std::make_unique<IterationState>(*f->info);
    f->num_outstanding_iterations++;
    f->dead_exits.clear();
    auto roots = std::move(f->next_iter_roots);
    f->next_iter_roots.clear();
    for (auto& [id, v] : roots) {
      OutputList outs{std::move(v)};
      ActivateNodes(impl_->items[id], false, f, next, &outs, ready);
    }
    for (auto& [id, v] : f->inv_values) {
      OutputList outs{v};
      ActivateNodes(impl_->items[id], false, f, next, &outs, ready);
    }
  }

  bool CleanupIterations(FrameState* f, int64_t iter, ReadyList* ready) {
    int64_t curr = iter;
    while (curr <= f->iteration_count && f->Get(curr) != nullptr && IsIterationDone(f, curr)) {
      f->iterations.erase(curr);
      --f->num_outstanding_iterations;
      ++curr;
      if (!f->next_iter_roots.empty()) IncrementIteration(f, ready);
    }
    return f->num_pending_inputs == 0 && f->num_outstanding_iterations == 0;
  }

  bool DecrementOutstandingOps(FrameState* f, int64_t iter, ReadyList* ready) {
    IterationState* is = f->Get(iter);
    if (--is->outstanding_ops != 0) return false;
    return CleanupIterations(f, iter, ready);
  }

  void DeleteFrame(FrameState* f, ReadyList* ready) {
    FrameState* parent = f->parent;
    const int64_t parent_iter = f->parent_iter;
    if (parent != nullptr) {
      IterationState* pis = parent->Get(parent_iter);
      for (int id : f->dead_exits) {
        for (const OutEdge& e : impl_->items[id].out) {
          const NodeItem& dst = impl_->items[e.dst];
          bool dst_dead = true, dst_ready = false;
          if (dst.is_merge) {
            if (e.src_slot == kControlSlot) {
              pis->pending[dst.local_id] -= 2;
              int count = pis->pending[dst.local_id];
              dst_dead = pis->dead[dst.local_id] == dst.num_inputs;
              dst_ready = (count == 0) || ((count == 1) && dst_dead);
            } else {
              ++pis->dead[dst.local_id];
              dst_dead = pis->dead[dst.local_id] == dst.num_inputs;
              dst_ready = pis->pending[dst.local_id] == 1 && dst_dead;
            }
          } else {
            ++pis->dead[dst.local_id];
            dst_ready = --pis->pending[dst.local_id] == 0;
          }
          if (dst_ready) {
            if (dst.is_control_trigger) dst_dead = false;
            ready->push_back({e.dst, parent, parent_iter, pis, dst_dead});
            ++pis->outstanding_ops;
          }
        }
      }
    }
    frames_.erase(f->key);
  }

  // A child frame of `f`'s iteration `iter` ended. A loop, not recursion:
  // frames may nest as deep as a graph is large.
  void CleanupFramesIterations(FrameState* f, int64_t iter, ReadyList* ready) {
    while (f != nullptr) {
      f->Get(iter)->outstanding_frame_count--;
      if (!CleanupIterations(f, iter, ready) || f == root_) return;
      FrameState* parent = f->parent;
      iter = f->parent_iter;
      DeleteFrame(f, ready);
      f = parent;
    }
  }

  void PropagateOutputs(const TaggedNode& tn, OutputList* outputs, ReadyList* ready) {
    const NodeItem& item = impl_->items[tn.id];
    FrameState* in_frame = tn.frame;
    const int64_t in_iter = tn.iter;
    bool is_frame_done = false;
    const bool is_dead = tn.is_dead;
    if (item.is_enter) {
      FrameState* out_frame = FindOrCreateChildFrame(in_frame, in_iter, item);
      if (item.is_constant_enter) {
        out_frame->inv_values.push_back({tn.id, (*outputs)[0]});
        for (int64_t i = 0; i <= out_frame->iteration_count; ++i) {
          if (out_frame->Get(i) == nullptr) continue;
          OutputList copy = *outputs;
          ActivateNodes(item, is_dead, out_frame, i, &copy, ready);
        }
      } else {
        ActivateNodes(item, is_dead, out_frame, 0, outputs, ready);
      }
      out_frame->num_pending_inputs--;
      is_frame_done = DecrementOutstandingOps(in_frame, in_iter, ready);
    } else if (item.is_exit) {
      if (is_dead) {
        if (in_iter == in_frame->iteration_count) in_frame->dead_exits.push_back(tn.id);
      } else {
        ActivateNodes(item, false, in_frame->parent, in_frame->parent_iter, outputs, ready);
      }
      is_frame_done = DecrementOutstandingOps(in_frame, in_iter, ready);
    } else if (item.is_next_iteration) {
      if (!is_dead) {
        if (in_iter == in_frame->iteration_count &&
            in_frame->num_outstanding_iterations == in_frame->max_parallel) {
          in_frame->next_iter_roots.push_back({tn.id, std::move((*outputs)[0])});
        } else {
          if (in_iter == in_frame->iteration_count) IncrementIteration(in_frame, ready);
          ActivateNodes(item, false, in_frame, in_iter + 1, outputs, ready);
        }
      }
      is_frame_done = DecrementOutstandingOps(in_frame, in_iter, ready);
    } else {
      ActivateNodes(item, is_dead, in_frame, in_iter, outputs, ready);
      is_frame_done = DecrementOutstandingOps(in_frame, in_iter, ready);
    }
    if (is_frame_done && in_frame != root_) {
      FrameState* parent = in_frame->parent;
      int64_t parent_iter = in_frame->parent_iter;
      DeleteFrame(in_frame, ready);
      if (parent != nullptr) CleanupFramesIterations(parent, parent_iter, ready);
    }
  }

  void Finish() {
    if (args_.cancellation_manager != nullptr) {
      args_.cancellation_manager->DeregisterCallback(token_);
    }
    step_resources_.ReleaseAll();
    Executor::DoneCallback done = std::move(done_);
    absl::Status s;
    {
      std::lock_guard<std::mutex> l(mu_);
      s = status_;
    }
    delete this;
    done(s);
  }

  const Impl* impl_;
  Executor::Args args_;
  Executor::DoneCallback done_;
  std::mutex mu_;
  absl::Status status_;
  std::atomic<bool> aborted_{false};
  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  CancellationToken token_ = 0;
  StepResources step_resources_;
  int64_t num_outstanding_ops_ = 0;
  FrameState* root_ = nullptr;
  absl::flat_hash_map<FrameKey, std::unique_ptr<FrameState>> frames_;
};

}  // namespace

Executor::~Executor() = default;

namespace {

// Assigns every node its static frame (TensorFlow's BuildControlFlowInfo):
// an Enter's successors are in the frame it names, an Exit's in the parent
// of its own, any other node's in its inputs' frame. Unreachable nodes stay
// in the root frame. InvalidArgument naming the nodes when a node's inputs
// come from different frames, when an Exit or a NextIteration is outside
// every frame, or when one frame is entered from two different frames.
absl::Status BuildFrames(const Graph& graph, Impl* impl) {
  std::vector<NodeItem>& items = impl->items;
  impl->frames.assign(1, FrameInfo{});
  absl::flat_hash_map<std::string, int> by_name;
  std::vector<int> frame_of(items.size(), -1);
  std::vector<const Node*> set_by(items.size(), nullptr);  // the input that set it
  std::deque<int> queue;
  for (int id : impl->roots) {
    frame_of[id] = 0;
    queue.push_back(id);
  }
  auto frame_name = [&](int f) {
    return f == 0 ? std::string("(root)") : absl::StrCat("'", impl->frames[f].name, "'");
  };
  while (!queue.empty()) {
    const int id = queue.front();
    queue.pop_front();
    NodeItem& item = items[id];
    const int in = frame_of[id];
    int out = in;
    if (item.is_enter) {
      auto [it, added] = by_name.try_emplace(item.frame_name, 0);
      if (added) {
        it->second = static_cast<int>(impl->frames.size());
        FrameInfo f;
        f.name = item.frame_name;
        f.parent = in;
        impl->frames.push_back(std::move(f));
      } else if (impl->frames[it->second].parent != in) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", item.node->name(), "' (op Enter) enters frame '", item.frame_name,
            "' from frame ", frame_name(in), ", but other Enter nodes enter it from frame ",
            frame_name(impl->frames[it->second].parent)));
      }
      out = it->second;
      item.enter_frame = out;
      impl->frames[out].num_enters++;
    } else if (item.is_exit) {
      if (in == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", item.node->name(),
                         "' (op Exit) is not inside a frame: no Enter node leads to it"));
      }
      out = impl->frames[in].parent;
    } else if (item.is_next_iteration && in == 0) {
      // The root frame has no iterations: its Merge would loop for ever.
      return absl::InvalidArgumentError(
          absl::StrCat("node '", item.node->name(),
                       "' (op NextIteration) is not inside a frame: no Enter node leads to it"));
    }
    for (const OutEdge& e : item.out) {
      if (frame_of[e.dst] == -1) {
        frame_of[e.dst] = out;
        set_by[e.dst] = item.node;
        queue.push_back(e.dst);
      } else if (frame_of[e.dst] != out) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", items[e.dst].node->name(), "' has inputs from different frames: '",
            item.node->name(), "' is in frame ", frame_name(out), ", '", set_by[e.dst]->name(),
            "' in frame ", frame_name(frame_of[e.dst])));
      }
    }
  }
  for (Node* n : graph.nodes()) {
    NodeItem& item = items[n->id()];
    item.frame = frame_of[n->id()] < 0 ? 0 : frame_of[n->id()];
    FrameInfo& f = impl->frames[item.frame];
    item.local_id = static_cast<int>(f.initial_pending.size());
    f.initial_pending.push_back(item.initial_pending);
    item.local_input_start = f.total_inputs;
    f.total_inputs += item.num_inputs;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const ExecutorParams& params,
                                                           std::unique_ptr<Graph> graph) {
  std::unique_ptr<Executor> ex(new Executor());
  ex->impl_ = std::make_unique<Impl>();
  Impl& impl = *ex->impl_;
  impl.device = params.device;
  impl.host_only = params.device->accelerator() == nullptr;
  impl.items.resize(graph->num_node_ids());
  if (graph->library().function_size() > 0) {
    impl.functions =
        NewFunctionLibraryRuntime(&graph->library(), params.kernel_registry, params.functions);
  }
  for (Node* n : graph->nodes()) {
    NodeItem& item = impl.items[n->id()];
    item.node = n;
    GR_ASSIGN_OR_RETURN(item.kernel, params.kernel_registry->CreateKernel(
                                         n->def(), n->op_def(), n->input_types(), n->output_types(),
                                         params.device, impl.functions.get()));
    item.is_async = item.kernel->AsAsync() != nullptr;
    item.expensive = item.kernel->IsExpensive();
    item.is_merge = n->IsMerge();
    item.is_enter = n->IsEnter();
    item.is_exit = n->IsExit();
    item.is_next_iteration = n->IsNextIteration();
    item.is_control_trigger = n->op() == "ControlTrigger";
    item.is_transfer = n->IsSend() || n->IsRecv();
    item.num_inputs = n->num_inputs();
    item.num_outputs = n->num_outputs();
    if (item.is_enter) {
      GR_RETURN_IF_ERROR(GetAttr(NodeAttrs(n->def()), "frame_name", &item.frame_name));
      GetAttr(NodeAttrs(n->def()), "is_constant", &item.is_constant_enter).IgnoreError();
      int64_t pi = 10;
      GetAttr(NodeAttrs(n->def()), "parallel_iterations", &pi).IgnoreError();
      item.parallel_iterations = static_cast<int>(pi);
    }
    int num_control = 0, num_all = 0;
    for (const Edge* e : n->in_edges()) {
      ++num_all;
      num_control += e->IsControlEdge();
    }
    item.initial_pending = item.is_merge ? 1 + 2 * num_control : num_all;
    for (const Edge* e : n->out_edges()) {
      item.out.push_back({e->dst->id(), e->src_output, e->dst_input});
    }
    if (num_all == 0) impl.roots.push_back(n->id());
  }
  GR_RETURN_IF_ERROR(BuildFrames(*graph, &impl));
  ex->graph_ = std::move(graph);
  return ex;
}

void Executor::RunAsync(const Args& args, DoneCallback done) {
  (new ExecutorState(impl_.get(), args, std::move(done)))->Run();
}

absl::Status Executor::Run(const Args& args) {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  absl::Status status;
  RunAsync(args, [&](const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu);
    status = s;
    finished = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return finished; });
  return status;
}

}  // namespace graphrun
