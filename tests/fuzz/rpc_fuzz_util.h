// What the worker and master RPC fuzzers share: one in-process task (a
// Worker on 2 CPU devices), request decoding (binary or text protobuf), the
// input's records, and running one call with a bounded wait.
#ifndef GRAPHRUN_TESTS_FUZZ_RPC_FUZZ_UTIL_H_
#define GRAPHRUN_TESTS_FUZZ_RPC_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "distributed/worker.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "graph/memory_budget.h"
#include "graph/ops/all_ops.h"
#include "kernels/all_kernels.h"
#include "util/notification.h"

namespace graphrun {
namespace distributed {
namespace fuzz {

inline constexpr char kTask[] = "/job:worker/replica:0/task:0";

// Once per process: memory limits a fuzzed graph runs into, and no log line
// for each of the thousands of malformed protos.
inline void SetUpProcess() {
  static const bool done = [] {
    SetMemoryLimits(int64_t{512} << 20, int64_t{64} << 20);
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)done;
}

// Task kTask: 2 CPU devices, an inter-op pool of 2, graphs of at most 256
// nodes, and `peers` as its cluster (must outlive it).
struct FuzzWorker {
  std::unique_ptr<DeviceMgr> devices;
  std::unique_ptr<ThreadPool> pool;
  WorkerEnv env;
  std::unique_ptr<Worker> worker;

  explicit FuzzWorker(WorkerCacheInterface* peers) {
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
    env.worker_cache = peers;
    env.limits.max_graph_nodes = 256;
    worker = std::make_unique<Worker>(&env);
  }
};

// A request from binary protobuf, else from text; false if neither parses.
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

// Calls fn(kind, bytes) for each of the first 8 records of the input:
// [1 byte: kind][2 bytes little-endian: length][length bytes].
template <typename Fn>
void ForEachRecord(const uint8_t* data, size_t size, Fn fn) {
  size_t pos = 0;
  for (int n = 0; n < 8 && pos + 3 <= size; ++n) {
    const uint8_t kind = data[pos];
    uint16_t len = 0;
    std::memcpy(&len, data + pos + 1, 2);
    pos += 3;
    if (len > size - pos) len = static_cast<uint16_t>(size - pos);
    fn(kind, absl::string_view(reinterpret_cast<const char*>(data) + pos, len));
    pos += len;
  }
}

// Runs one call, start(done), on its own thread (the master runs a step on
// the caller's thread until it ends, as a gRPC handler does); cancels it
// through `opts` if it has not ended in 200 ms (a while loop over a fed
// bound, a dequeue), then waits for it: a call that never ends is a
// finding (libFuzzer's -timeout). Returns the call's status.
template <typename Start>
absl::Status Call(CallOptions* opts, Start start) {
  struct Done {
    Notification n;
    absl::Status status;
  };
  auto done = std::make_shared<Done>();
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
  return done->status;
}

}  // namespace fuzz
}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_TESTS_FUZZ_RPC_FUZZ_UTIL_H_
