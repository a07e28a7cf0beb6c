// GrpcSession: a Session whose target is "grpc://host:port", talking to the
// master service of any task of a cluster. RegisterGrpcSession() makes
// NewSession() create one for such targets. When the target is a server
// running in this process, calls go to its master directly (LocalMaster).
//
// Thread-safety: as Session (Run may be called concurrently).
#ifndef GRAPHRUN_DISTRIBUTED_RPC_GRPC_SESSION_H_
#define GRAPHRUN_DISTRIBUTED_RPC_GRPC_SESSION_H_

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "distributed/master_interface.h"
#include "distributed/protos/master_service.grpc.pb.h"
#include "distributed/rpc/grpc_util.h"
#include "runtime/session.h"

namespace graphrun {
namespace distributed {

class GrpcSession : public Session {
 public:
  // InvalidArgument for a target that is not "grpc://host:port". Does not
  // connect yet: an unreachable master shows at Create (Unavailable naming
  // the address).
  static absl::StatusOr<std::unique_ptr<GrpcSession>> Create(const SessionOptions& options);
  ~GrpcSession() override;

  absl::Status Create(const tensorflow::GraphDef& graph) override;
  absl::Status Extend(const tensorflow::GraphDef& graph) override;
  using Session::Run;
  absl::StatusOr<std::vector<Tensor>> Run(const tensorflow::RunOptions& options,
                                          const NamedTensorList& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets,
                                          tensorflow::RunMetadata* metadata) override;
  absl::StatusOr<std::vector<DeviceAttributes>> ListDevices() override;
  absl::Status Close() override;
  // Drops the named resource containers (all when empty) on every task the
  // session's device_filters name (every task without filters), and closes
  // every session of the master, as TensorFlow's Reset.
  absl::Status Reset(const std::vector<std::string>& containers);

  // Deadline of the calls other than Run (default 30 s).
  void set_control_timeout_ms(int64_t ms) { control_timeout_ms_ = ms; }

 private:
  GrpcSession() = default;
  std::string handle();
  // Runs start(master, opts, done) on the in-process master of the target
  // and waits for `done`; nullopt (nothing called) when the target has no
  // master in this process.
  std::optional<absl::Status> CallLocal(
      const std::function<void(MasterInterface*, CallOptions*, StatusCallback)>& start);

  SessionOptions options_;
  std::string address_, who_;
  std::unique_ptr<MasterService::Stub> stub_;
  int64_t control_timeout_ms_ = 30000;
  std::mutex mu_;
  std::string handle_;
  bool closed_ = false;
};

// Registers the "grpc" session factory with runtime/session_factory.h.
// Call once at program start (idempotent).
void RegisterGrpcSession();

}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_GRPC_SESSION_H_
