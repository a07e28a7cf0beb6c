// A best-fit-with-coalescing allocator (the design of TensorFlow's GPU
// allocator): large regions come from a SubAllocator (cudaMalloc for a GPU,
// the heap in tests), and requests are carved out of them by best fit,
// with neighbouring free chunks merged on free. It holds device memory to a
// limit: either the whole limit at the first request, or, with
// allow_growth, regions that double in size as needed.
//
// Thread-safe.
#ifndef GRAPHRUN_RUNTIME_BFC_ALLOCATOR_H_
#define GRAPHRUN_RUNTIME_BFC_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace graphrun {

class SubAllocator {
 public:
  virtual ~SubAllocator() = default;
  // Null when the memory is not there.
  virtual void* Alloc(size_t bytes) = 0;
  virtual void Free(void* p, size_t bytes) = 0;
};

struct BfcAllocatorOptions {
  int64_t memory_limit = 0;  // bytes the allocator may hold from the SubAllocator
  // false: one region of memory_limit at the first request; true: regions
  // as needed, each at least twice the last (and at least initial_region).
  bool allow_growth = true;
  int64_t initial_region = int64_t{2} << 20;
};

struct BfcAllocatorStats {
  int64_t bytes_in_use = 0;  // by live allocations (rounded sizes)
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_reserved = 0;  // held from the SubAllocator
  int64_t allocations = 0;     // successful Allocate calls
  int64_t regions = 0;
  int64_t largest_free_chunk = 0;
};

class BfcAllocator {
 public:
  static constexpr size_t kAlignment = 256;

  BfcAllocator(std::unique_ptr<SubAllocator> sub, const BfcAllocatorOptions& options);
  ~BfcAllocator();
  BfcAllocator(const BfcAllocator&) = delete;
  BfcAllocator& operator=(const BfcAllocator&) = delete;

  // kAlignment-aligned memory for `bytes` (0 gets a minimal chunk); null
  // when the limit or the SubAllocator refuses.
  void* Allocate(size_t bytes);
  // REQUIRES: `p` came from Allocate and was not freed.
  void Deallocate(void* p);
  BfcAllocatorStats Stats() const;

 private:
  struct Chunk {
    char* ptr = nullptr;
    size_t size = 0;
    bool in_use = false;
    Chunk* prev = nullptr;  // neighbours in address order, same region
    Chunk* next = nullptr;
  };
  struct Region {
    char* ptr;
    size_t size;
  };

  bool Grow(size_t min_bytes);  // REQUIRES: mu_ held
  void InsertFree(Chunk* c);
  void RemoveFree(Chunk* c);

  std::unique_ptr<SubAllocator> sub_;
  const BfcAllocatorOptions options_;
  mutable std::mutex mu_;
  std::vector<Region> regions_;
  std::map<char*, std::unique_ptr<Chunk>> chunks_;  // by address
  std::set<std::pair<size_t, char*>> free_;         // (size, address): best fit
  int64_t reserved_ = 0;
  int64_t in_use_ = 0;
  int64_t peak_ = 0;
  int64_t allocations_ = 0;
  size_t last_region_ = 0;
};

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_BFC_ALLOCATOR_H_
