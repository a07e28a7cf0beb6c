// Session: runs steps of a graph. The local session (runtime/) places and
// partitions the graph over this process's devices and runs one executor per
// partition; the distributed runtime adds a "grpc://" session behind the same
// interface.
//
// Thread-safety: Run() may be called concurrently; Create/Extend/Close must
// not race with each other.
#ifndef GRAPHRUN_RUNTIME_SESSION_H_
#define GRAPHRUN_RUNTIME_SESSION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/op_registry.h"
#include "graph/proto/config.pb.h"
#include "graph/proto/graph.pb.h"
#include "graph/tensor.h"
#include "util/tls_credentials.h"

namespace graphrun {

class DeviceFactoryRegistry;
class KernelRegistry;

struct SessionOptions {
  // device_count {"CPU": N} gives N CPU devices, {"TEST_ACCEL": 0} none of
  // that type (a type not named: every device available); intra/inter-op
  // threads;
  // allow_soft_placement; log_device_placement (one line per node to
  // stderr: name, op, device); operation_timeout_in_ms (default step
  // deadline when RunOptions has none).
  tensorflow::ConfigProto config;
  // "" (or "local") for an in-process session.
  std::string target;
  // grpc:// targets: the cluster token sent with every call ("": the
  // GRAPHRUN_AUTH_TOKEN environment variable, if set).
  std::string auth_token;
  // grpc:// targets: mutual TLS with these (not enabled(): the
  // GRAPHRUN_TLS_* environment variables, if set).
  TlsCredentials tls;
  // Registries; null means the defaults.
  const OpRegistry* op_registry = nullptr;
  const KernelRegistry* kernel_registry = nullptr;
  const DeviceFactoryRegistry* device_factories = nullptr;
};

// One device of a session: "/job:localhost/replica:0/task:0/device:CPU:0".
struct DeviceAttributes {
  std::string name;
  std::string device_type;
  int64_t memory_limit = 0;
  uint64_t incarnation = 0;
};

using NamedTensorList = std::vector<std::pair<std::string, Tensor>>;

class Session {
 public:
  virtual ~Session() = default;

  // Installs the graph. InvalidArgument naming the node for a bad graph;
  // FailedPrecondition if a graph was already created.
  virtual absl::Status Create(const tensorflow::GraphDef& graph) = 0;
  // Adds nodes to the graph (new names only).
  virtual absl::Status Extend(const tensorflow::GraphDef& graph) = 0;

  // Runs one step: feeds any node outputs ("name" or "name:i"), computes
  // `fetches` and runs `targets` (node names) for their effects. Returns the
  // fetched tensors in order. `metadata` (optional) receives step stats per
  // node when options.trace_level != NO_TRACE, and the partition graphs when
  // options.output_partition_graphs. Errors name the node; a step past its
  // deadline is DeadlineExceeded; unfed placeholders that the fetches need
  // are InvalidArgument.
  virtual absl::StatusOr<std::vector<Tensor>> Run(const tensorflow::RunOptions& options,
                                                  const NamedTensorList& feeds,
                                                  const std::vector<std::string>& fetches,
                                                  const std::vector<std::string>& targets,
                                                  tensorflow::RunMetadata* metadata) = 0;

  absl::StatusOr<std::vector<Tensor>> Run(const NamedTensorList& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets = {}) {
    return Run(tensorflow::RunOptions(), feeds, fetches, targets, nullptr);
  }

  virtual absl::StatusOr<std::vector<DeviceAttributes>> ListDevices() = 0;
  // Cancels running steps and releases per-session state.
  virtual absl::Status Close() = 0;
};

// Creates a session for options.target ("" = local; "grpc://host:port" once
// the distributed runtime is linked in). InvalidArgument for an unknown
// target scheme.
absl::StatusOr<std::unique_ptr<Session>> NewSession(const SessionOptions& options);

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_SESSION_H_
