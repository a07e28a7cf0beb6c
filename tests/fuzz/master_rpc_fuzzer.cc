// libFuzzer target: the master service's request handling, as its gRPC
// handlers call it (distributed/master.h, in process): a sequence of
// CreateSession, ExtendSession, RunStep, ListDevices, CloseSession and
// Reset requests, each decoded from binary or text protobuf, against a
// master whose cluster is its own task (a real Worker on two CPU devices).
// Graphs (placement, partitioning, lowering of function libraries), feeds,
// fetches, targets, options and handles are the fuzzer's; a request whose
// session_handle is empty goes to the session the last CreateSession made,
// so later requests reach a live session. Every request must end with a
// Status (a step still running after 20 ms is cancelled, as a client that
// goes away cancels its call), never a crash, hang or sanitizer report.
//
// Input: records of [1 byte: request kind][2 bytes little-endian: length]
// [length bytes: the request].
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "distributed/master.h"
#include "tests/fuzz/rpc_fuzz_util.h"

namespace graphrun {
namespace distributed {
namespace {

using fuzz::kTask;

// The cluster: this task only.
class OwnTask : public WorkerCacheInterface {
 public:
  void set(WorkerInterface* w) { worker_ = w; }
  std::vector<std::string> ListTasks() const override { return {kTask}; }
  absl::StatusOr<std::shared_ptr<WorkerInterface>> GetWorker(const std::string& task) override {
    if (task != kTask) return absl::NotFoundError("no task " + task + " in the fuzzer's cluster");
    return std::shared_ptr<WorkerInterface>(worker_, [](WorkerInterface*) {});
  }

 private:
  WorkerInterface* worker_ = nullptr;
};

struct Task {
  OwnTask cluster;
  fuzz::FuzzWorker task{&cluster};
  MasterEnv master_env;
  std::unique_ptr<Master> master;

  Task() {
    cluster.set(task.worker.get());
    master_env.task = kTask;
    master_env.worker_cache = &cluster;
    master_env.op_registry = &DefaultOpRegistry();
    master_env.kernel_registry = &DefaultKernelRegistry();
    master_env.control_timeout_ms = 2000;
    master_env.limits.max_graph_nodes = 256;
    master_env.limits.max_sessions = 8;
    master_env.limits.max_plans_per_session = 8;
    master = std::make_unique<Master>(&master_env);
  }
  ~Task() { master.reset(); }  // its sessions close on the worker
};

// fuzz::Call; with MASTER_RPC_FUZZER_VERBOSE set, each call's status goes
// to stderr (to check that seeds reach what they mean to).
template <typename Start>
void Call(CallOptions* opts, Start start) {
  absl::Status s = fuzz::Call(opts, std::move(start));
  static const bool verbose = std::getenv("MASTER_RPC_FUZZER_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "master_rpc_fuzzer: %s\n", s.ToString().c_str());
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun

namespace {

// One input, on a task of its own (gone when this returns).
void RunInput(const uint8_t* data, size_t size) {
  using namespace graphrun;
  using namespace graphrun::distributed;
  fuzz::SetUpProcess();
  if (size > (1 << 15)) return;
  Task task;
  Master* m = task.master.get();
  std::string last;  // the handle the last CreateSession returned
  auto route = [&last](auto* req) {
    if (req->session_handle().empty()) req->set_session_handle(last);
  };
  fuzz::ForEachRecord(data, size, [&](uint8_t kind, absl::string_view bytes) {
    using fuzz::Decode;
    switch (kind % 6) {
      case 0: {
        CreateSessionRequest req;
        CreateSessionResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { m->CreateSessionAsync(req, &resp, d); });
        if (!resp.session_handle().empty()) last = resp.session_handle();
        break;
      }
      case 1: {
        ExtendSessionRequest req;
        ExtendSessionResponse resp;
        if (!Decode(bytes, &req)) break;
        route(&req);
        Call(nullptr, [&](StatusCallback d) { m->ExtendSessionAsync(req, &resp, d); });
        break;
      }
      case 2: {
        RunStepRequest req;
        RunStepResponse resp;
        if (!Decode(bytes, &req)) break;
        route(&req);
        CallOptions opts;
        Call(&opts, [&](StatusCallback d) { m->RunStepAsync(&opts, req, &resp, d); });
        break;
      }
      case 3: {
        ListDevicesRequest req;
        ListDevicesResponse resp;
        if (!Decode(bytes, &req)) break;
        route(&req);
        Call(nullptr, [&](StatusCallback d) { m->ListDevicesAsync(req, &resp, d); });
        break;
      }
      case 4: {
        CloseSessionRequest req;
        CloseSessionResponse resp;
        if (!Decode(bytes, &req)) break;
        route(&req);
        Call(nullptr, [&](StatusCallback d) { m->CloseSessionAsync(req, &resp, d); });
        break;
      }
      default: {
        ResetRequest req;
        ResetResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { m->ResetAsync(req, &resp, d); });
        break;
      }
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RunInput(data, size);
  graphrun::distributed::fuzz::Quiesce();
  return 0;
}
