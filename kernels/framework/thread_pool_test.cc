// ParallelFor shards over the pool and the caller, up to max_parallelism
// shards; max_parallelism 1 runs inline on the caller.
#include "kernels/framework/thread_pool.h"

#include <atomic>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include "gtest/gtest.h"

namespace graphrun {
namespace {

// The threads that ran shards of a ParallelFor over `total` cheap units.
std::set<std::thread::id> ShardThreads(ThreadPool& pool, int64_t* covered) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  *covered = 0;
  pool.ParallelFor(1 << 20, 1000, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> l(mu);
    ids.insert(std::this_thread::get_id());
    *covered += e - b;
  });
  return ids;
}

TEST(ThreadPoolTest, MaxParallelismCapsTheShards) {
  int64_t covered = 0;
  ThreadPool inline_pool("inline", 1, /*max_parallelism=*/1);
  auto ids = ShardThreads(inline_pool, &covered);
  EXPECT_EQ(covered, 1 << 20);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(*ids.begin(), std::this_thread::get_id());

  ThreadPool pool("pool", 3);  // up to 4 shards: 3 workers and the caller
  ids = ShardThreads(pool, &covered);
  EXPECT_EQ(covered, 1 << 20);
  EXPECT_GE(ids.size(), 1u);
  EXPECT_LE(ids.size(), 4u);
  EXPECT_TRUE(ids.count(std::this_thread::get_id()));

  ThreadPool capped("capped", 3, /*max_parallelism=*/2);
  ids = ShardThreads(capped, &covered);
  EXPECT_EQ(covered, 1 << 20);
  EXPECT_LE(ids.size(), 2u);
}

// A shard that throws on a pool thread (std::bad_alloc from a vector a
// kernel grows) does not end the process: the other shards finish and the
// caller gets the exception, which the executor turns into the node's
// ResourceExhausted.
TEST(ThreadPoolTest, AShardsExceptionReachesTheCaller) {
  ThreadPool pool("pool", 3);
  for (int thrower = 0; thrower < 4; ++thrower) {
    std::atomic<int64_t> covered{0};
    std::atomic<int> shards{0};
    const std::thread::id caller = std::this_thread::get_id();
    bool caught = false;
    try {
      pool.ParallelFor(1 << 20, 1000, [&](int64_t b, int64_t e) {
        const int k = shards.fetch_add(1);
        covered += e - b;
        // thrower 0: the caller's shard; 1: the first pool shard to run;
        // 2, 3: every shard.
        const bool on_caller = std::this_thread::get_id() == caller;
        if ((thrower == 0 && on_caller) || (thrower == 1 && !on_caller && k <= 1) || thrower >= 2) {
          throw std::bad_alloc();
        }
      });
    } catch (const std::bad_alloc&) {
      caught = true;
    }
    EXPECT_TRUE(caught) << "thrower " << thrower;
    EXPECT_EQ(covered.load(), 1 << 20) << "every shard ran before the caller returned";
    EXPECT_EQ(shards.load(), 4) << "thrower " << thrower;
  }
  // The pool still works.
  int64_t covered = 0;
  auto ids = ShardThreads(pool, &covered);
  EXPECT_EQ(covered, 1 << 20);
}

}  // namespace
}  // namespace graphrun
