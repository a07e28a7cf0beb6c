// RandomBytes(n, seed): n pseudo-random bytes, made once per (n, seed) and
// shared after (tests only read them; a 64 MiB tensor made per test case
// took about 2 s under ASan).
// FakeRecvWorker: a WorkerInterface that serves RecvTensor from a table of
// tensors, for transport tests and benchmarks (no graphs, no rendezvous).
//   "t:NAME"  the tensor added as NAME
//   "dead"    a dead tensor
//   "stale"   Aborted, as a restarted task answers a stale incarnation
//   "hang"    waits until the call is cancelled (Cancelled)
// PushTensor keeps what is pushed (Pushed(KEY)), except keys starting with
// "refuse" (InvalidArgument). Every other method is Unimplemented, except
// GetStatus (OK, no devices). Thread-safe once the tensors are added.
#ifndef GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_TESTLIB_H_
#define GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_TESTLIB_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "distributed/worker_interface.h"

namespace graphrun {
namespace distributed {
namespace test {

inline Tensor RandomBytes(int64_t n, uint32_t seed) {
  static std::mutex mu;
  static auto* const made = new std::map<std::pair<int64_t, uint32_t>, Tensor>();
  std::lock_guard<std::mutex> l(mu);
  auto it = made->find({n, seed});
  if (it != made->end()) return it->second;
  Tensor t(DT_UINT8, TensorShape({n}));
  uint64_t x = seed;
  for (int64_t i = 0; i < n; i += 8) {  // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(t.raw_data() + i, &z, static_cast<size_t>(std::min<int64_t>(8, n - i)));
  }
  made->emplace(std::make_pair(n, seed), t);
  return t;
}

class FakeRecvWorker : public WorkerInterface {
 public:
  explicit FakeRecvWorker(std::string task = "/job:ps/replica:0/task:0") : task_(task) {}
  // REQUIRES: no call in flight.
  void Add(const std::string& name, Tensor t) { tensors_[name] = std::move(t); }
  int num_cancelled() const { return cancelled_.load(); }
  // What was pushed under `key`, waiting for it up to `timeout_ms`.
  std::optional<Tensor> Pushed(const std::string& key, int timeout_ms = 5000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      {
        std::lock_guard<std::mutex> l(mu_);
        auto it = pushed_.find(key);
        if (it != pushed_.end()) return it->second;
      }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  void PushTensorAsync(const std::string& key, const Tensor& tensor, StatusCallback done) override {
    if (key.rfind("refuse", 0) == 0) {
      done(absl::InvalidArgumentError(absl::StrCat("refused '", key, "'")));
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      if (pushed_.size() >= 1024) pushed_.clear();  // bounded: the fuzzer pushes millions
      pushed_[key] = tensor;
    }
    done(absl::OkStatus());
  }

  void GetStatusAsync(const GetStatusRequest&, GetStatusResponse* response,
                      StatusCallback done) override {
    response->set_task(task_);
    done(absl::OkStatus());
  }
  void CreateWorkerSessionAsync(const CreateWorkerSessionRequest&, CreateWorkerSessionResponse*,
                                StatusCallback done) override {
    done(Unimplemented());
  }
  void DeleteWorkerSessionAsync(const DeleteWorkerSessionRequest&, DeleteWorkerSessionResponse*,
                                StatusCallback done) override {
    done(Unimplemented());
  }
  void RegisterGraphAsync(const RegisterGraphRequest&, RegisterGraphResponse*,
                          StatusCallback done) override {
    done(Unimplemented());
  }
  void DeregisterGraphAsync(const DeregisterGraphRequest&, DeregisterGraphResponse*,
                            StatusCallback done) override {
    done(Unimplemented());
  }
  void RunGraphAsync(CallOptions*, const RunGraphRequest&, RunGraphResponse*,
                     StatusCallback done) override {
    done(Unimplemented());
  }
  void CleanupGraphAsync(const CleanupGraphRequest&, CleanupGraphResponse*,
                         StatusCallback done) override {
    done(Unimplemented());
  }
  void CleanupAllAsync(const CleanupAllRequest&, CleanupAllResponse*,
                       StatusCallback done) override {
    done(Unimplemented());
  }
  void RecvTensorAsync(CallOptions* opts, const RecvTensorRequest& request,
                       RecvTensorResult* response, StatusCallback done) override {
    const std::string& key = request.rendezvous_key();
    if (key == "dead") {
      response->is_dead = true;
      done(absl::OkStatus());
    } else if (key == "stale") {
      done(absl::AbortedError(absl::StrCat("task ", task_,
                                           " was restarted: the tensor was planned for "
                                           "incarnation 1, which is now 2")));
    } else if (key == "hang" && opts != nullptr) {
      opts->SetCancelCallback([this, done] {
        cancelled_.fetch_add(1);
        done(absl::CancelledError("RecvTensor cancelled"));
      });
    } else if (auto it = tensors_.find(key.substr(key.find(':') + 1));
               key.rfind("t:", 0) == 0 && it != tensors_.end()) {
      response->tensor = it->second;
      done(absl::OkStatus());
    } else {
      done(absl::InvalidArgumentError(absl::StrCat("no tensor '", key, "'")));
    }
  }

 private:
  static absl::Status Unimplemented() { return absl::UnimplementedError("fake worker"); }
  const std::string task_;
  std::map<std::string, Tensor> tensors_;
  std::atomic<int> cancelled_{0};
  std::mutex mu_;
  std::map<std::string, Tensor> pushed_;
};

}  // namespace test
}  // namespace distributed
}  // namespace graphrun

#endif  // GRAPHRUN_DISTRIBUTED_RPC_DATA_CHANNEL_TESTLIB_H_
