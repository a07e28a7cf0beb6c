#include "runtime/bfc_allocator.h"

#include <algorithm>

namespace graphrun {

BfcAllocator::BfcAllocator(std::unique_ptr<SubAllocator> sub, const BfcAllocatorOptions& options)
    : sub_(std::move(sub)), options_(options) {}

BfcAllocator::~BfcAllocator() {
  for (const Region& r : regions_) sub_->Free(r.ptr, r.size);
}

void BfcAllocator::InsertFree(Chunk* c) { free_.insert({c->size, c->ptr}); }
void BfcAllocator::RemoveFree(Chunk* c) { free_.erase({c->size, c->ptr}); }

bool BfcAllocator::Grow(size_t min_bytes) {
  const int64_t left = options_.memory_limit - reserved_;
  if (left < static_cast<int64_t>(min_bytes)) return false;
  size_t size;
  if (!options_.allow_growth) {
    if (!regions_.empty()) return false;
    size = static_cast<size_t>(options_.memory_limit) / kAlignment * kAlignment;
  } else {
    size = std::max<size_t>(
        {min_bytes, last_region_ * 2, static_cast<size_t>(options_.initial_region)});
    size = std::min<size_t>(size, static_cast<size_t>(left));
    size = size / kAlignment * kAlignment;
  }
  if (size < min_bytes) return false;
  void* p = sub_->Alloc(size);
  if (p == nullptr && options_.allow_growth && size > min_bytes) {
    size = min_bytes;  // the doubling did not fit; the request alone may
    p = sub_->Alloc(size);
  }
  if (p == nullptr) return false;
  regions_.push_back({static_cast<char*>(p), size});
  reserved_ += static_cast<int64_t>(size);
  last_region_ = size;
  auto c = std::make_unique<Chunk>();
  c->ptr = static_cast<char*>(p);
  c->size = size;
  InsertFree(c.get());
  chunks_[c->ptr] = std::move(c);
  return true;
}

void* BfcAllocator::Allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes) return nullptr;  // overflow
  std::lock_guard<std::mutex> l(mu_);
  auto it = free_.lower_bound({rounded, nullptr});
  if (it == free_.end()) {
    if (!Grow(rounded)) return nullptr;
    it = free_.lower_bound({rounded, nullptr});
    if (it == free_.end()) return nullptr;
  }
  Chunk* c = chunks_[it->second].get();
  RemoveFree(c);
  if (c->size - rounded >= kAlignment) {
    // Split: the rest stays free, after this chunk.
    auto rest = std::make_unique<Chunk>();
    rest->ptr = c->ptr + rounded;
    rest->size = c->size - rounded;
    rest->prev = c;
    rest->next = c->next;
    if (c->next != nullptr) c->next->prev = rest.get();
    c->next = rest.get();
    c->size = rounded;
    InsertFree(rest.get());
    chunks_[rest->ptr] = std::move(rest);
  }
  c->in_use = true;
  in_use_ += static_cast<int64_t>(c->size);
  peak_ = std::max(peak_, in_use_);
  ++allocations_;
  return c->ptr;
}

void BfcAllocator::Deallocate(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> l(mu_);
  auto it = chunks_.find(static_cast<char*>(p));
  if (it == chunks_.end() || !it->second->in_use) return;
  Chunk* c = it->second.get();
  c->in_use = false;
  in_use_ -= static_cast<int64_t>(c->size);
  // Coalesce with free neighbours.
  if (c->next != nullptr && !c->next->in_use) {
    Chunk* n = c->next;
    RemoveFree(n);
    c->size += n->size;
    c->next = n->next;
    if (n->next != nullptr) n->next->prev = c;
    chunks_.erase(n->ptr);
  }
  if (c->prev != nullptr && !c->prev->in_use) {
    Chunk* prev = c->prev;
    RemoveFree(prev);
    prev->size += c->size;
    prev->next = c->next;
    if (c->next != nullptr) c->next->prev = prev;
    chunks_.erase(c->ptr);
    c = prev;
  }
  InsertFree(c);
}

BfcAllocatorStats BfcAllocator::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  BfcAllocatorStats s;
  s.bytes_in_use = in_use_;
  s.peak_bytes_in_use = peak_;
  s.bytes_reserved = reserved_;
  s.allocations = allocations_;
  s.regions = static_cast<int64_t>(regions_.size());
  s.largest_free_chunk = free_.empty() ? 0 : static_cast<int64_t>(free_.rbegin()->first);
  return s;
}

}  // namespace graphrun
