// Cancellation of a step: kernels that block (Recv, queue ops) register a
// callback that StartCancel() runs once.
//
// Thread-safe.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_CANCELLATION_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_CANCELLATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace graphrun {

using CancellationToken = int64_t;

class CancellationManager {
 public:
  CancellationToken NewToken() {
    std::lock_guard<std::mutex> l(mu_);
    return next_++;
  }
  // Registers `fn` under `token`. Returns false (and does not register) if
  // cancellation already started; the caller must then act as cancelled.
  bool RegisterCallback(CancellationToken token, std::function<void()> fn) {
    std::lock_guard<std::mutex> l(mu_);
    if (cancelled_) return false;
    callbacks_[token] = std::move(fn);
    return true;
  }
  // Returns true if the callback was removed before it could run.
  bool DeregisterCallback(CancellationToken token) {
    std::lock_guard<std::mutex> l(mu_);
    return callbacks_.erase(token) > 0;
  }
  // Runs every registered callback once; later registrations fail.
  void StartCancel() {
    std::map<CancellationToken, std::function<void()>> cbs;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (cancelled_) return;
      cancelled_ = true;
      cbs.swap(callbacks_);
    }
    for (auto& [t, fn] : cbs) fn();
  }
  bool IsCancelled() const {
    std::lock_guard<std::mutex> l(mu_);
    return cancelled_;
  }

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  CancellationToken next_ = 0;
  std::map<CancellationToken, std::function<void()>> callbacks_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_CANCELLATION_H_
