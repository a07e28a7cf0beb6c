// What the worker and master RPC fuzzers share: one in-process task (a
// Worker on 2 CPU devices), request decoding (binary or text protobuf), the
// input's records, and running one call with a bounded wait.
#ifndef GRAPHRUN_TESTS_FUZZ_RPC_FUZZ_UTIL_H_
#define GRAPHRUN_TESTS_FUZZ_RPC_FUZZ_UTIL_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "distributed/collective_remote.h"
#include "distributed/worker.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "graph/memory_budget.h"
#include "graph/ops/all_ops.h"
#include "kernels/all_kernels.h"
#include "runtime/device.h"
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
    // The tasks' own messages (an importer's "dropped attr" warning for
    // most mutated graphs) would be most of a campaign's log and slow it;
    // libFuzzer and the sanitizers write to file descriptor 2 directly.
    std::cerr.rdbuf(nullptr);
    return true;
  }();
  (void)done;
}

// Threads live as long as the process: the pools below and Call's caller.
// Made per input, their stacks' mmap and munmap under ASan (and the TLB
// shootdowns they cause) took a third of the fuzzer's time; the tasks
// themselves (devices, resources, worker, master) are still new for each
// input, so an input's outcome does not depend on the ones before it.
inline std::shared_ptr<ThreadPool> IntraOpPool() {
  static auto* pool = new std::shared_ptr<ThreadPool>(
      std::make_shared<ThreadPool>("fuzz_intra_op", 1, /*max_parallelism=*/1));
  return *pool;
}
inline ThreadPool* InterOpPool() {
  static auto* pool = new ThreadPool("fuzz_inter_op", 2);
  return pool;
}

// Reaches one worker, as task kTask (set before the first call).
class SelfCache : public WorkerCacheInterface {
 public:
  void set(WorkerInterface* w) { worker_ = w; }
  std::vector<std::string> ListTasks() const override { return {kTask}; }
  absl::StatusOr<std::shared_ptr<WorkerInterface>> GetWorker(const std::string& task) override {
    if (task != kTask || worker_ == nullptr) {
      return absl::NotFoundError("no task " + task + " in the fuzzer's cluster");
    }
    return std::shared_ptr<WorkerInterface>(worker_, [](WorkerInterface*) {});
  }

 private:
  WorkerInterface* worker_ = nullptr;
};

// Task kTask: 2 CPU devices (as DeviceMgr::NewLocal makes them, with
// incarnations from a counter instead of the random device), the shared
// inter-op pool of 2, graphs of at most 256 nodes, and `peers` as its
// cluster (must outlive it). With `collectives`, the task runs collectives
// as a server's does, as the leader of a cluster of itself (its joins and
// fetches reach its own worker); it stops as a server does (the worker's
// calls aborted, then the collectives').
struct FuzzWorker {
  std::unique_ptr<DeviceMgr> devices;
  SelfCache self;
  std::unique_ptr<RemoteCollectives> collectives;  // destroyed after the worker
  WorkerEnv env;
  std::unique_ptr<Worker> worker;

  explicit FuzzWorker(WorkerCacheInterface* peers, bool with_collectives = false) {
    static uint64_t incarnation = 0;
    std::vector<std::unique_ptr<Device>> cpus;
    for (int i = 0; i < 2; ++i) {
      DeviceAttributes a;
      a.name = std::string(kTask) + "/device:CPU:" + std::to_string(i);
      a.device_type = kDeviceCpu;
      a.memory_limit = int64_t{1} << 34;
      a.incarnation = ++incarnation;
      cpus.push_back(
          std::make_unique<Device>(a, IntraOpPool(), std::make_shared<ResourceMgr>("worker")));
      cpus.back()->set_intra_op_parallelism(1);
    }
    devices = std::make_unique<DeviceMgr>(std::move(cpus));
    env.task = kTask;
    env.device_mgr = devices.get();
    env.op_registry = &DefaultOpRegistry();
    env.kernel_registry = &DefaultKernelRegistry();
    env.inter_op_pool = InterOpPool();
    env.worker_cache = peers;
    env.limits.max_graph_nodes = 256;
    if (with_collectives) {
      collectives = std::make_unique<RemoteCollectives>(kTask, &self, kTask);
      env.collectives = collectives.get();
    }
    worker = std::make_unique<Worker>(&env);
    self.set(worker.get());
  }
  ~FuzzWorker() {
    if (collectives == nullptr) return;
    const absl::Status stopping = absl::UnavailableError("the fuzzer's task is stopping");
    worker->AbortAll(stopping);
    collectives->AbortAll(stopping);
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

// The one thread that starts every call (the master runs a step on the
// caller's thread until it ends, as a gRPC handler does).
class Caller {
 public:
  static Caller& Get() {
    static Caller* caller = new Caller();
    return *caller;
  }
  void Run(std::function<void()> fn) {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(std::move(fn));
    cv_.notify_one();
  }

 private:
  Caller() : thread_([this] { Loop(); }) {}
  void Loop() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return !queue_.empty(); });
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::thread thread_;
};

// Waits until every thread of `pool` has finished (and destroyed) the work
// scheduled on it before this call: one task per thread, each holding its
// thread until all have started (the queue is FIFO).
inline void DrainPool(ThreadPool* pool) {
  struct Barrier {
    std::mutex mu;
    std::condition_variable cv;
    int started = 0;
  };
  auto b = std::make_shared<Barrier>();
  const int n = pool->num_threads();
  for (int i = 0; i < n; ++i) {
    pool->Schedule([b, n] {
      std::unique_lock<std::mutex> l(b->mu);
      if (++b->started == n) b->cv.notify_all();
      b->cv.wait(l, [&] { return b->started >= n; });
    });
  }
  std::unique_lock<std::mutex> l(b->mu);
  b->cv.wait(l, [&] { return b->started >= n; });
}

// Called at the end of each input, once its task is gone: the shared
// threads finish what the input left them (closures, last callbacks), so
// that its allocations are freed before libFuzzer compares mallocs and
// frees. An input with more mallocs than frees gets a LeakSanitizer check
// (the whole heap, every thread stopped): with threads still freeing
// after the input returned, most inputs got one, and the checks took
// about two thirds of master_rpc_fuzzer's time.
inline void Quiesce();

// Runs one call, start(done), on the caller thread; cancels it through
// `opts` if it has not ended in kCancelAfter (a while loop over a fed
// bound, a dequeue), then waits both for its callback and for start to
// return: a call that never ends is a finding (libFuzzer's -timeout).
// Returns the call's status.
// 20 ms: a grown master_rpc corpus had about one call in twenty wait to
// be cancelled, and at 200 ms those waits were more than half its time.
inline constexpr absl::Duration kCancelAfter = absl::Milliseconds(20);

template <typename Start>
absl::Status Call(CallOptions* opts, Start start) {
  struct Done {
    Notification called, returned;
    absl::Status status;
  };
  auto done = std::make_shared<Done>();
  Caller::Get().Run([&start, done] {
    start([done](const absl::Status& s) {
      done->status = s;
      done->called.Notify();
    });
    done->returned.Notify();
  });
  if (!done->called.WaitForNotificationWithTimeout(kCancelAfter) && opts != nullptr) {
    opts->StartCancel();
  }
  done->called.WaitForNotification();
  done->returned.WaitForNotification();
  return done->status;
}

inline void Quiesce() {
  Notification ran;
  Caller::Get().Run([&ran] { ran.Notify(); });  // the earlier closures are destroyed
  ran.WaitForNotification();
  DrainPool(InterOpPool());
  DrainPool(IntraOpPool().get());
}

}  // namespace fuzz
}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_TESTS_FUZZ_RPC_FUZZ_UTIL_H_
