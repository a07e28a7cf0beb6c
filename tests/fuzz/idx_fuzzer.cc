// libFuzzer target: the IDX reader (kernels/data/dataset_io_util.h ParseIdx),
// the format of the MNIST / Fashion-MNIST files the trainer reads: corrupt
// magic, types, dimension counts, dims that overflow or disagree with the
// file's size. Any input must give a Status (naming the file), never a
// crash; a decoded tensor holds exactly the bytes after the header.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "graph/memory_budget.h"
#include "kernels/data/dataset_io_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphrun;
  static const bool limited = [] {
    SetMemoryLimits(int64_t{256} << 20, int64_t{64} << 20);
    return true;
  }();
  (void)limited;
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Tensor> t = data::ParseIdx(bytes, "fuzz.idx");
  if (!t.ok()) {
    if (t.status().message().find("fuzz.idx") == absl::string_view::npos) std::abort();
    return 0;
  }
  const size_t header = 4 + 4 * static_cast<size_t>(t->dims());
  if (header + static_cast<size_t>(t->TotalBytes()) != size) std::abort();
  return 0;
}
