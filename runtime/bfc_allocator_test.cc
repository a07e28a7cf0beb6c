// The BFC allocator over heap memory: best fit, splitting and coalescing,
// the memory limit with and without growth, alignment and statistics.
#include "runtime/bfc_allocator.h"

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace graphrun {
namespace {

struct HeapStats {
  int allocs = 0;
  int frees = 0;
  std::vector<size_t> sizes;
};

class HeapSubAllocator : public SubAllocator {
 public:
  explicit HeapSubAllocator(HeapStats* s) : s_(s) {}
  void* Alloc(size_t bytes) override {
    ++s_->allocs;
    s_->sizes.push_back(bytes);
    return std::aligned_alloc(BfcAllocator::kAlignment, bytes);
  }
  void Free(void* p, size_t) override {
    ++s_->frees;
    std::free(p);
  }

 private:
  HeapStats* s_;
};

TEST(BfcAllocatorTest, WholeLimitUpFrontSplitsAndCoalesces) {
  HeapStats heap;
  BfcAllocatorOptions o;
  o.memory_limit = 1 << 20;
  o.allow_growth = false;
  {
    BfcAllocator a(std::make_unique<HeapSubAllocator>(&heap), o);
    void* p1 = a.Allocate(1000);  // rounds to 1024
    void* p2 = a.Allocate(1);     // 256
    void* p3 = a.Allocate(4096);
    ASSERT_NE(p1, nullptr);
    ASSERT_NE(p2, nullptr);
    ASSERT_NE(p3, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p1) % 256, 0u);
    EXPECT_EQ(static_cast<char*>(p2) - static_cast<char*>(p1), 1024);
    EXPECT_EQ(static_cast<char*>(p3) - static_cast<char*>(p2), 256);
    EXPECT_EQ(heap.allocs, 1);
    EXPECT_EQ(heap.sizes[0], size_t{1} << 20);
    BfcAllocatorStats s = a.Stats();
    EXPECT_EQ(s.bytes_in_use, 1024 + 256 + 4096);
    EXPECT_EQ(s.bytes_reserved, 1 << 20);
    EXPECT_EQ(s.largest_free_chunk, (1 << 20) - 1024 - 256 - 4096);

    // Freeing the middle leaves a 256-byte hole that a small request fits
    // best; freeing its neighbours merges everything back.
    a.Deallocate(p2);
    void* small = a.Allocate(200);
    EXPECT_EQ(small, p2);
    a.Deallocate(small);
    a.Deallocate(p1);
    a.Deallocate(p3);
    s = a.Stats();
    EXPECT_EQ(s.bytes_in_use, 0);
    EXPECT_EQ(s.largest_free_chunk, 1 << 20);
    EXPECT_EQ(s.peak_bytes_in_use, 1024 + 256 + 4096);
    EXPECT_EQ(s.allocations, 4);

    // Over the limit: refused, not grown.
    EXPECT_EQ(a.Allocate((1 << 20) + 1), nullptr);
    void* all = a.Allocate(1 << 20);
    EXPECT_NE(all, nullptr);
    EXPECT_EQ(a.Allocate(1), nullptr);
    EXPECT_EQ(heap.allocs, 1);
  }
  EXPECT_EQ(heap.frees, 1);
}

TEST(BfcAllocatorTest, GrowthDoublesRegionsUpToTheLimit) {
  HeapStats heap;
  BfcAllocatorOptions o;
  o.memory_limit = 10 << 20;
  o.allow_growth = true;
  o.initial_region = 1 << 20;
  BfcAllocator a(std::make_unique<HeapSubAllocator>(&heap), o);
  EXPECT_EQ(a.Stats().bytes_reserved, 0);  // nothing until asked
  void* p = a.Allocate(512 << 10);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(a.Stats().bytes_reserved, 1 << 20);
  void* q = a.Allocate(1 << 20);  // does not fit the first region's rest
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(a.Stats().regions, 2);
  EXPECT_EQ(heap.sizes[1], size_t{2} << 20);
  void* r = a.Allocate(6 << 20);  // 4 MiB would be next; the request wins
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(heap.sizes[2], size_t{6} << 20);
  EXPECT_EQ(a.Stats().bytes_reserved, 9 << 20);
  EXPECT_EQ(a.Allocate(2 << 20), nullptr);    // 1 MiB of the limit is left
  EXPECT_NE(a.Allocate(512 << 10), nullptr);  // fits the second region
}

TEST(BfcAllocatorTest, RandomWorkloadKeepsChunksDisjointAndReturnsEverything) {
  HeapStats heap;
  BfcAllocatorOptions o;
  o.memory_limit = 64 << 20;
  BfcAllocator a(std::make_unique<HeapSubAllocator>(&heap), o);
  std::mt19937 rng(3);
  std::vector<std::pair<char*, size_t>> live;
  for (int i = 0; i < 5000; ++i) {
    // At most 300 live chunks of <= 100 kB: well under the limit.
    if (live.empty() || (live.size() < 300 && rng() % 2 == 0)) {
      size_t n = 1 + rng() % 100000;
      char* p = static_cast<char*>(a.Allocate(n));
      ASSERT_NE(p, nullptr) << i;
      // Fill it: overlapping chunks would corrupt each other's patterns.
      std::fill(p, p + n, static_cast<char>(i));
      live.push_back({p, n});
    } else {
      size_t k = rng() % live.size();
      auto [p, n] = live[k];
      for (size_t j = 0; j < n; j += 97) {
        ASSERT_EQ(p[j], p[0]) << "chunk " << static_cast<void*>(p) << " was overwritten";
      }
      a.Deallocate(p);
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (auto& [p, n] : live) a.Deallocate(p);
  BfcAllocatorStats s = a.Stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  // Everything merged back: one free chunk per region.
  EXPECT_GT(s.largest_free_chunk, 0);
  EXPECT_LE(s.bytes_reserved, 64 << 20);
}

}  // namespace
}  // namespace graphrun
