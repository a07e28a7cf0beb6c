// libFuzzer target: the checkpoint readers (kernels/io/checkpoint_internal.h):
// a corrupt index file (DecodeIndex) and, for each entry it yields, data
// bytes that may not fit it (DecodeTensor); and the whole input as a file of
// a TensorFlow V1 checkpoint (DecodeTfV1Checkpoint). Input: a 4-byte
// little-endian length N, N bytes of index, the rest as one shard's data. Any input must
// give DataLoss or another Status naming the file, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "graph/memory_budget.h"
#include "kernels/io/checkpoint_internal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphrun;
  using namespace graphrun::checkpoint;
  static const bool limited = [] {
    SetMemoryLimits(int64_t{256} << 20, int64_t{64} << 20);
    return true;
  }();
  (void)limited;
  if (size < 4 || size > (1 << 18)) return 0;
  uint32_t n = 0;
  std::memcpy(&n, data, 4);
  if (n > size - 4) n = static_cast<uint32_t>(size - 4);
  absl::string_view index(reinterpret_cast<const char*>(data) + 4, n);
  absl::string_view shard(reinterpret_cast<const char*>(data) + 4 + n, size - 4 - n);
  // The whole input as a file of a TensorFlow V1 checkpoint too.
  {
    std::vector<BundleEntry> v1_entries;
    std::vector<Tensor> v1_values;
    absl::string_view whole(reinterpret_cast<const char*>(data), size);
    if (DecodeTfV1Checkpoint(whole, &v1_entries, &v1_values).ok()) {
      for (const BundleEntry& e : v1_entries) {
        if (e.v1_value < 0 || static_cast<size_t>(e.v1_value) >= v1_values.size() ||
            v1_values[e.v1_value].shape() != e.slice.SliceShape()) {
          std::abort();  // an entry whose values do not fit it
        }
      }
      (void)CheckConsistent(v1_entries);
    }
  }
  int num_shards = 0;
  std::vector<BundleEntry> entries;
  absl::Status s = DecodeIndex(index, "fuzz.index", &num_shards, &entries);
  if (!s.ok()) {
    if (s.message().find("fuzz.index") == absl::string_view::npos) std::abort();
    return 0;
  }
  (void)CheckConsistent(entries);
  for (const BundleEntry& e : entries) {
    if (e.offset > shard.size() || e.size > shard.size() - e.offset) continue;
    absl::StatusOr<Tensor> t = DecodeTensor(e, shard.substr(e.offset, e.size), "fuzz.data");
    (void)t;
  }
  return 0;
}
