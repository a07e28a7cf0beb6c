// A one-shot event: Notify() once, any number of waiters. The same calls
// as absl::Notification, on std::mutex and std::condition_variable, so
// that ThreadSanitizer sees its happens-before edges: Debian's Abseil is
// not built for TSan, and an absl::Notification handing a value from one
// thread to another shows up there as a data race.
#ifndef GRAPHRUN_UTIL_NOTIFICATION_H_
#define GRAPHRUN_UTIL_NOTIFICATION_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace graphrun {

class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    std::lock_guard<std::mutex> l(mu_);
    notified_ = true;
    cv_.notify_all();
  }

  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> l(mu_);
    return notified_;
  }

  void WaitForNotification() const {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return notified_; });
  }

  // True when notified within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, absl::ToChronoNanoseconds(timeout), [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace graphrun

#endif  // GRAPHRUN_UTIL_NOTIFICATION_H_
