// A fixed-size thread pool with a shared FIFO queue, and ParallelFor over
// it. Used for inter-op scheduling (runtime/) and intra-op sharding
// (kernels). Schedule() is thread-safe; the destructor drains the queue and
// joins the threads.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_THREAD_POOL_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace graphrun {

class ThreadPool {
 public:
  // REQUIRES: num_threads >= 1. `max_parallelism` (> 0) caps the shards
  // of a ParallelFor, caller included: 1 runs every ParallelFor inline
  // (a pool kept for Schedule only). 0: num_threads + 1.
  ThreadPool(std::string name, int num_threads, int max_parallelism = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn);
  int num_threads() const { return static_cast<int>(threads_.size()); }
  // Index of the calling thread in this pool, or -1 outside it.
  int CurrentThreadId() const;

  // Runs fn(begin, end) over [0, total) in shards, on the pool and the
  // calling thread, and returns when all are done. `cost_per_unit` is a
  // rough cycle count per element, used to pick how many shards.
  void ParallelFor(int64_t total, int64_t cost_per_unit,
                   const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int id);
  std::string name_;
  int max_parallelism_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_THREAD_POOL_H_
