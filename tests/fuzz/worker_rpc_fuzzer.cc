// libFuzzer target: the worker service's request handling, as a gRPC
// handler calls it (distributed/worker.h, in process): a sequence of
// requests — CreateWorkerSession, RegisterGraph, RunGraph, RecvTensor,
// CleanupGraph, DeregisterGraph, DeleteWorkerSession — each decoded from
// binary or text protobuf, against one task with a worker session "s"
// already open. Graphs, handles, step ids, keys and arguments are the
// fuzzer's. Every request must end with a Status (a step that waits is
// cancelled after 200 ms), never a crash, hang or sanitizer report.
//
// Input: records of [1 byte: request kind][2 bytes little-endian: length]
// [length bytes: the request].
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
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

// Peers: none reachable (a fuzzed graph may name other tasks).
class NoPeers : public WorkerCacheInterface {
 public:
  std::vector<std::string> ListTasks() const override { return {kTask}; }
  absl::StatusOr<std::shared_ptr<WorkerInterface>> GetWorker(const std::string& task) override {
    return absl::NotFoundError("no task " + task + " in the fuzzer's cluster");
  }
};

struct Task {
  std::unique_ptr<DeviceMgr> devices;
  std::unique_ptr<ThreadPool> pool;
  NoPeers peers;
  WorkerEnv env;
  std::unique_ptr<Worker> worker;

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
    env.worker_cache = &peers;
    env.limits.max_graph_nodes = 256;
    worker = std::make_unique<Worker>(&env);
  }
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
template <typename Start>
void Call(CallOptions* opts, Start start) {
  auto done = std::make_shared<absl::Notification>();
  start([done](const absl::Status&) { done->Notify(); });
  if (!done->WaitForNotificationWithTimeout(absl::Milliseconds(200)) && opts != nullptr) {
    opts->StartCancel();
  }
  done->WaitForNotification();
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
  {
    CreateWorkerSessionRequest req;
    req.set_session_handle("s");
    CreateWorkerSessionResponse resp;
    Call(nullptr, [&](StatusCallback d) {
      task.worker->CreateWorkerSessionAsync(req, &resp, std::move(d));
    });
  }
  size_t pos = 0;
  for (int n = 0; n < 8 && pos + 3 <= size; ++n) {
    const uint8_t kind = data[pos];
    uint16_t len = 0;
    std::memcpy(&len, data + pos + 1, 2);
    pos += 3;
    if (len > size - pos) len = static_cast<uint16_t>(size - pos);
    absl::string_view bytes(reinterpret_cast<const char*>(data) + pos, len);
    pos += len;
    Worker* w = task.worker.get();
    switch (kind % 7) {
      case 0: {
        CreateWorkerSessionRequest req;
        CreateWorkerSessionResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->CreateWorkerSessionAsync(req, &resp, d); });
        break;
      }
      case 1: {
        RegisterGraphRequest req;
        RegisterGraphResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->RegisterGraphAsync(req, &resp, d); });
        break;
      }
      case 2: {
        RunGraphRequest req;
        RunGraphResponse resp;
        if (!Decode(bytes, &req)) break;
        CallOptions opts;
        Call(&opts, [&](StatusCallback d) { w->RunGraphAsync(&opts, req, &resp, d); });
        CleanupGraphRequest cleanup;
        cleanup.set_step_id(req.step_id());
        CleanupGraphResponse cresp;
        Call(nullptr, [&](StatusCallback d) { w->CleanupGraphAsync(cleanup, &cresp, d); });
        break;
      }
      case 3: {
        RecvTensorRequest req;
        RecvTensorResult result;
        if (!Decode(bytes, &req)) break;
        CallOptions opts;
        Call(&opts, [&](StatusCallback d) { w->RecvTensorAsync(&opts, req, &result, d); });
        break;
      }
      case 4: {
        CleanupGraphRequest req;
        CleanupGraphResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->CleanupGraphAsync(req, &resp, d); });
        break;
      }
      case 5: {
        DeregisterGraphRequest req;
        DeregisterGraphResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->DeregisterGraphAsync(req, &resp, d); });
        break;
      }
      default: {
        DeleteWorkerSessionRequest req;
        DeleteWorkerSessionResponse resp;
        if (!Decode(bytes, &req)) break;
        Call(nullptr, [&](StatusCallback d) { w->DeleteWorkerSessionAsync(req, &resp, d); });
        break;
      }
    }
  }
  return 0;
}
