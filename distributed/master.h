// Master: the in-process MasterInterface of a task. Owns the client
// sessions created on it (MasterSession each); reaches the cluster's tasks
// through the worker cache.
//
// Thread-safe.
#ifndef GRAPHRUN_DISTRIBUTED_MASTER_H_
#define GRAPHRUN_DISTRIBUTED_MASTER_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "distributed/master_interface.h"
#include "distributed/master_session.h"

namespace graphrun {
namespace distributed {

class Master : public MasterInterface {
 public:
  // `env` must outlive the master.
  explicit Master(const MasterEnv* env) : env_(env) {}
  ~Master() override;

  void CreateSessionAsync(const CreateSessionRequest& request, CreateSessionResponse* response,
                          StatusCallback done) override;
  void ExtendSessionAsync(const ExtendSessionRequest& request, ExtendSessionResponse* response,
                          StatusCallback done) override;
  void RunStepAsync(CallOptions* opts, const RunStepRequest& request, RunStepResponse* response,
                    StatusCallback done) override;
  void CloseSessionAsync(const CloseSessionRequest& request, CloseSessionResponse* response,
                         StatusCallback done) override;
  void ListDevicesAsync(const ListDevicesRequest& request, ListDevicesResponse* response,
                        StatusCallback done) override;
  void ResetAsync(const ResetRequest& request, ResetResponse* response,
                  StatusCallback done) override;

  size_t num_sessions();
  // Plans cached by all sessions (tests).
  size_t num_plans();

 private:
  absl::StatusOr<std::shared_ptr<MasterSession>> Find(const std::string& handle);

  const MasterEnv* env_;
  std::atomic<int64_t> running_steps_{0};
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<MasterSession>> sessions_;
};

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_MASTER_H_
