// libFuzzer target: the master service's request handling, as its gRPC
// handlers call it (distributed/master.h, in process): a sequence of
// CreateSession, ExtendSession, RunStep, ListDevices, CloseSession and
// Reset requests, each decoded from binary or text protobuf, against a
// master whose cluster is its own task (a real Worker on two CPU devices).
// Graphs (placement, partitioning, lowering of function libraries), feeds,
// fetches, targets, options and handles are the fuzzer's; a request whose
// session_handle is empty goes to the session the last CreateSession made,
// so later requests reach a live session. Every request must end with a
// Status (a step still running after 200 ms is cancelled, as a client that
// goes away cancels its call), never a crash, hang or sanitizer report.
//
// Input: records of [1 byte: request kind][2 bytes little-endian: length]
// [length bytes: the request].
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "distributed/master.h"
#include "distributed/worker.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "graph/memory_budget.h"
#include "graph/ops/all_ops.h"
#include "kernels/all_kernels.h"

namespace graphrun {
namespace distributed {
namespace {

constexpr char kTask[] = "/job:worker/replica:0/task:0";

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
  std::unique_ptr<DeviceMgr> devices;
  std::unique_ptr<ThreadPool> pool;
  OwnTask cluster;
  WorkerEnv env;
  std::unique_ptr<Worker> worker;
  MasterEnv master_env;
  std::unique_ptr<Master> master;

  Task() {
    DeviceMgrOptions dm;
    dm.job = "worker";
    dm.num_cpus = 2;
    dm.intra_op_threads = 1;
    devices = *DeviceMgr::NewLocal(dm);
    pool = std::make_unique<ThreadPool>("fuzz", 2);
    env.task = kTask;
    env.device_mgr = devices.get();
    env.op_registry = &DefaultOpRegistry();
    env.kernel_registry = &DefaultKernelRegistry();
    env.inter_op_pool = pool.get();
    env.worker_cache = &cluster;
    env.limits.max_graph_nodes = 256;
    worker = std::make_unique<Worker>(&env);
    cluster.set(worker.get());
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

template <typename Proto>
bool Decode(absl::string_view bytes, Proto* p) {
  if (p->ParseFromString(std::string(bytes))) return true;
  struct Silent : google::protobuf::io::ErrorCollector {
    void AddError(int, int, const std::string&) override {}
  } silent;
  google::protobuf::TextFormat::Parser text;
  text.RecordErrorsTo(&silent);
  return text.ParseFromString(std::string(bytes), p);
}

// Runs one asynchronous call; cancels it if it has not ended in 200 ms,
// then waits for it (a call that never ends is a finding: libFuzzer's
// -timeout).
// With MASTER_RPC_FUZZER_VERBOSE set, each call's status goes to stderr
// (to check that seeds reach what they mean to).
template <typename Start>
void Call(CallOptions* opts, Start start) {
  struct Done {
    absl::Notification n;
    absl::Status status;
  };
  auto done = std::make_shared<Done>();
  // On its own thread: the master runs a step on the caller's thread until
  // it ends (a gRPC handler's), and a step may run until cancelled (a
  // while loop over a fed bound, a dequeue).
  std::thread caller([&] {
    start([done](const absl::Status& s) {
      done->status = s;
      done->n.Notify();
    });
  });
  if (!done->n.WaitForNotificationWithTimeout(absl::Milliseconds(200)) && opts != nullptr) {
    opts->StartCancel();
  }
  done->n.WaitForNotification();
  caller.join();
  static const bool verbose = std::getenv("MASTER_RPC_FUZZER_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "master_rpc_fuzzer: %s\n", done->status.ToString().c_str());
}

}  // namespace
}  // namespace distributed
}  // namespace graphrun

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphrun;
  using namespace graphrun::distributed;
  static const bool limited = [] {
    SetMemoryLimits(int64_t{512} << 20, int64_t{64} << 20);
    // Malformed strings are expected by the thousand: no log line each.
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)limited;
  if (size > (1 << 15)) return 0;
  Task task;
  Master* m = task.master.get();
  std::string last;  // the handle the last CreateSession returned
  auto route = [&last](auto* req) {
    if (req->session_handle().empty()) req->set_session_handle(last);
  };
  size_t pos = 0;
  for (int n = 0; n < 8 && pos + 3 <= size; ++n) {
    const uint8_t kind = data[pos];
    uint16_t len = 0;
    std::memcpy(&len, data + pos + 1, 2);
    pos += 3;
    if (len > size - pos) len = static_cast<uint16_t>(size - pos);
    absl::string_view bytes(reinterpret_cast<const char*>(data) + pos, len);
    pos += len;
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
  }
  return 0;
}
