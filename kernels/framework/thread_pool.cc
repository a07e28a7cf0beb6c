#include "kernels/framework/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>

namespace graphrun {
namespace {
thread_local const ThreadPool* tls_pool = nullptr;
thread_local int tls_id = -1;
}  // namespace

ThreadPool::ThreadPool(std::string name, int num_threads, int max_parallelism)
    : name_(std::move(name)), max_parallelism_(max_parallelism) {
  if (num_threads < 1) num_threads = 1;
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  // Notified under the lock: a thread outside the pool (an accelerator's
  // stream finishing a kernel) may schedule the step's last work, and the
  // step's owner may destroy the pool as soon as that work ran. Once the
  // destructor holds mu_, no Schedule call is still touching cv_.
  std::lock_guard<std::mutex> l(mu_);
  queue_.push_back(std::move(fn));
  cv_.notify_one();
}

int ThreadPool::CurrentThreadId() const { return tls_pool == this ? tls_id : -1; }

void ThreadPool::WorkerLoop(int id) {
  tls_pool = this;
  tls_id = id;
  while (true) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

void ThreadPool::ParallelFor(int64_t total, int64_t cost_per_unit,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (total <= 0) return;
  // ~10k cycles per shard minimum keeps scheduling overhead small.
  const int64_t min_units = std::max<int64_t>(1, 10000 / std::max<int64_t>(1, cost_per_unit));
  const int64_t parallelism = max_parallelism_ > 0 ? max_parallelism_ : num_threads() + 1;
  int64_t shards = std::min<int64_t>(parallelism, (total + min_units - 1) / min_units);
  if (shards <= 1 || CurrentThreadId() >= 0) {
    fn(0, total);
    return;
  }
  const int64_t block = (total + shards - 1) / shards;
  // A shard that throws (std::bad_alloc from a vector a kernel grows) must
  // not end the process on a pool thread, nor unwind the caller while other
  // shards still use this frame: every shard is caught, the caller waits
  // for all of them, then rethrows the first exception, which the
  // executor's ComputeGuarded turns into the node's error.
  std::mutex m;
  std::condition_variable cv;
  int64_t pending = 0;
  std::exception_ptr first;
  auto run = [&](int64_t b, int64_t e) {
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> l(m);
      if (!first) first = std::current_exception();
    }
  };
  for (int64_t s = 1; s < shards; ++s) {
    int64_t b = s * block, e = std::min(total, b + block);
    if (b >= e) break;
    {
      std::lock_guard<std::mutex> l(m);
      ++pending;
    }
    try {
      Schedule([&, b, e] {
        run(b, e);
        std::lock_guard<std::mutex> l(m);
        if (--pending == 0) cv.notify_all();
      });
    } catch (...) {  // the queue could not grow: this shard runs here
      {
        std::lock_guard<std::mutex> l(m);
        --pending;
      }
      run(b, e);
    }
  }
  run(0, std::min(total, block));
  std::unique_lock<std::mutex> l(m);
  cv.wait(l, [&] { return pending == 0; });
  if (first) std::rethrow_exception(first);
}

}  // namespace graphrun
