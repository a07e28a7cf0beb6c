// WorkerInterface: what a master (and a peer worker's rendezvous) may ask
// of one task. No transport types: the in-process Worker implements it
// directly, distributed/rpc/ adapts it to gRPC (GrpcWorkerClient on the
// calling side, the worker service on the serving side).
//
// Every *Async method calls `done` exactly once, possibly inline, possibly
// on another thread; request and response must outlive the call.
// Implementations are thread-safe.
#ifndef GRAPHRUN_DISTRIBUTED_WORKER_INTERFACE_H_
#define GRAPHRUN_DISTRIBUTED_WORKER_INTERFACE_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "distributed/call_options.h"
#include "distributed/protos/worker.pb.h"
#include "graph/tensor.h"

namespace graphrun {
namespace distributed {

using StatusCallback = std::function<void(const absl::Status&)>;

// RecvTensor's result stays a Tensor (no proto): the transport receives
// straight into an aligned buffer and in-process calls share the buffer.
struct RecvTensorResult {
  Tensor tensor;
  bool is_dead = false;
  // Optional, set by the caller: where the bytes may go. A transport that
  // receives a fixed-size tensor of the same dtype and byte count may
  // write it straight into this buffer; `tensor` then shares it (reshaped
  // to the received shape). Others ignore it (the gRPC stream, calls in
  // process): compare buffers before copying. A call that ended early
  // (cancelled, timed out) may still be written into: pass only memory
  // that is not reused after a failed call.
  Tensor destination;
};

class WorkerInterface {
 public:
  virtual ~WorkerInterface() = default;

  virtual void GetStatusAsync(const GetStatusRequest& request, GetStatusResponse* response,
                              StatusCallback done) = 0;
  // A liveness probe (distributed/health.h): OK when the task answers
  // within `timeout_ms`. In process: GetStatus.
  virtual void HeartbeatAsync(int64_t timeout_ms, StatusCallback done) {
    auto req = std::make_shared<GetStatusRequest>();
    auto resp = std::make_shared<GetStatusResponse>();
    GetStatusAsync(*req, resp.get(),
                   [req, resp, done = std::move(done)](const absl::Status& s) { done(s); });
  }
  // AlreadyExists if the handle is taken on this task.
  virtual void CreateWorkerSessionAsync(const CreateWorkerSessionRequest& request,
                                        CreateWorkerSessionResponse* response,
                                        StatusCallback done) = 0;
  // Deregisters the session's graphs; NotFound-free (deleting twice is OK).
  virtual void DeleteWorkerSessionAsync(const DeleteWorkerSessionRequest& request,
                                        DeleteWorkerSessionResponse* response,
                                        StatusCallback done) = 0;
  // InvalidArgument naming the node for a graph with nodes on other tasks,
  // unknown ops/kernels; FailedPrecondition for a _Send whose incarnation
  // is not this task's (the master's view of the task is stale).
  virtual void RegisterGraphAsync(const RegisterGraphRequest& request,
                                  RegisterGraphResponse* response, StatusCallback done) = 0;
  virtual void DeregisterGraphAsync(const DeregisterGraphRequest& request,
                                    DeregisterGraphResponse* response, StatusCallback done) = 0;
  // Runs a registered graph for one step. `opts` (may be null) cancels it.
  virtual void RunGraphAsync(CallOptions* opts, const RunGraphRequest& request,
                             RunGraphResponse* response, StatusCallback done) = 0;
  virtual void CleanupGraphAsync(const CleanupGraphRequest& request, CleanupGraphResponse* response,
                                 StatusCallback done) = 0;
  virtual void CleanupAllAsync(const CleanupAllRequest& request, CleanupAllResponse* response,
                               StatusCallback done) = 0;
  // Waits for the tensor sent under request.rendezvous_key in step
  // request.step_id on this task. Aborted naming the task when the key's
  // incarnation is not the serving device's (the task restarted).
  virtual void RecvTensorAsync(CallOptions* opts, const RecvTensorRequest& request,
                               RecvTensorResult* response, StatusCallback done) = 0;
  // Hands `tensor` to this task unasked, under `key` (collectives' push
  // transport: one message instead of a request and its answer). OK once
  // the task has it, or once the transport wrote it (the data channel's
  // pushes are one-way). Unimplemented where the task takes no pushes.
  virtual void PushTensorAsync(const std::string& key, const Tensor& tensor, StatusCallback done) {
    done(absl::UnimplementedError(
        absl::StrCat("PushTensor of '", key, "': this worker takes no pushed tensors")));
  }
  // Calls `on_lost` once (with an Unavailable naming the task) if the
  // transport's open connection to the task closes, until the returned
  // function is called. Never called where there is no such connection,
  // or the transport cannot tell (heartbeats tell there).
  virtual std::function<void()> WatchLoss(std::function<void(const absl::Status&)> on_lost) {
    return [] {};
  }
};

// Blocks until `start(done)` calls done; returns its status.
inline absl::Status CallAndWait(const std::function<void(StatusCallback)>& start) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
  };
  auto st = std::make_shared<State>();
  start([st](const absl::Status& s) {
    std::lock_guard<std::mutex> l(st->mu);
    st->status = s;
    st->done = true;
    st->cv.notify_all();
  });
  std::unique_lock<std::mutex> l(st->mu);
  st->cv.wait(l, [&] { return st->done; });
  return st->status;
}

// Maps task names ("/job:ps/replica:0/task:0") to workers.
// Thread-safe.
class WorkerCacheInterface {
 public:
  virtual ~WorkerCacheInterface() = default;
  // Every task of the cluster, sorted.
  virtual std::vector<std::string> ListTasks() const = 0;
  // NotFound naming the task when the cluster has no such task. The
  // returned worker stays valid while the cache lives.
  virtual absl::StatusOr<std::shared_ptr<WorkerInterface>> GetWorker(const std::string& task) = 0;
  // Every task whose address this cache knows, with it ("host:port").
  virtual std::map<std::string, std::string> Addresses() const { return {}; }
  // Addresses another task told (CreateWorkerSession): those of tasks its
  // own cluster does not name are used by GetWorker (not ListTasks); the
  // cluster's own never change. InvalidArgument naming a bad entry.
  virtual absl::Status LearnAddresses(const std::map<std::string, std::string>& addresses) {
    return absl::OkStatus();
  }
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_WORKER_INTERFACE_H_
