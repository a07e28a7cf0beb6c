// Worker: the in-process implementation of WorkerInterface for one task.
// Worker sessions isolate registered graphs (one GraphMgr each); devices
// and their resource managers (variables) belong to the task and are shared
// by every session, so variables outlive sessions and between-graph
// clients share them. Per-step state (rendezvous, cancellation) lives from
// the step's first RunGraph or RecvTensor until CleanupGraph.
//
// Thread-safe.
#ifndef GRAPHRUN_DISTRIBUTED_WORKER_H_
#define GRAPHRUN_DISTRIBUTED_WORKER_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "distributed/graph_mgr.h"
#include "distributed/rendezvous_mgr.h"
#include "distributed/worker_env.h"
#include "distributed/worker_interface.h"

namespace graphrun {
namespace distributed {

class Worker : public WorkerInterface {
 public:
  // `env` must outlive the worker.
  explicit Worker(const WorkerEnv* env);
  ~Worker() override;

  void GetStatusAsync(const GetStatusRequest& request, GetStatusResponse* response,
                      StatusCallback done) override;
  void CreateWorkerSessionAsync(const CreateWorkerSessionRequest& request,
                                CreateWorkerSessionResponse* response,
                                StatusCallback done) override;
  void DeleteWorkerSessionAsync(const DeleteWorkerSessionRequest& request,
                                DeleteWorkerSessionResponse* response,
                                StatusCallback done) override;
  void RegisterGraphAsync(const RegisterGraphRequest& request, RegisterGraphResponse* response,
                          StatusCallback done) override;
  void DeregisterGraphAsync(const DeregisterGraphRequest& request,
                            DeregisterGraphResponse* response, StatusCallback done) override;
  void RunGraphAsync(CallOptions* opts, const RunGraphRequest& request, RunGraphResponse* response,
                     StatusCallback done) override;
  void CleanupGraphAsync(const CleanupGraphRequest& request, CleanupGraphResponse* response,
                         StatusCallback done) override;
  void CleanupAllAsync(const CleanupAllRequest& request, CleanupAllResponse* response,
                       StatusCallback done) override;
  void RecvTensorAsync(CallOptions* opts, const RecvTensorRequest& request,
                       RecvTensorResult* response, StatusCallback done) override;
  // Collective pieces only (RemoteCollectives::Deliver); other keys are
  // InvalidArgument.
  void PushTensorAsync(const std::string& key, const Tensor& tensor, StatusCallback done) override;

  // Sessions open now.
  int64_t num_sessions();
  // Steps whose rendezvous this task holds (RendezvousMgr::num_steps).
  size_t num_rendezvous() { return rendezvous_mgr_.num_steps(); }

  // Aborts every running step (server shutdown).
  void AbortAll(const absl::Status& status);

  const WorkerEnv& env() const { return *env_; }

 private:
  struct Step;
  // The session's GraphMgr; `master_task` (optional) gets its master's
  // task ("" when it is this task or unknown).
  absl::StatusOr<std::shared_ptr<GraphMgr>> FindSession(const std::string& handle,
                                                        std::string* master_task = nullptr);

  const WorkerEnv* env_;
  RendezvousMgr rendezvous_mgr_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<GraphMgr>> sessions_;
  // The master task of each session that named one (another task's).
  absl::flat_hash_map<std::string, std::string> session_masters_;
  // Running steps by step id (a step id may run graphs of several sessions).
  std::multimap<int64_t, std::shared_ptr<Step>> steps_;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_WORKER_H_
