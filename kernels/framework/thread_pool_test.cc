// ParallelFor shards over the pool and the caller, up to max_parallelism
// shards; max_parallelism 1 runs inline on the caller.
#include "kernels/framework/thread_pool.h"

#include <mutex>
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

}  // namespace
}  // namespace graphrun
