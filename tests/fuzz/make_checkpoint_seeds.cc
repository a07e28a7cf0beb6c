// Writes the checkpoint fuzzer's seeds (tests/fuzz/corpus_checkpoint/):
// real index bytes (EncodeIndex) and data for a few tensors, in the
// fuzzer's input layout (4-byte little-endian index length, index, data).
//   bazel run //tests/fuzz:make_checkpoint_seeds -- $PWD/tests/fuzz/corpus_checkpoint
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/io/checkpoint_internal.h"

namespace graphrun {
namespace checkpoint {
namespace {

struct Seed {
  std::vector<BundleEntry> entries;
  std::string data;
};

void Add(Seed* seed, const std::string& name, const Tensor& t) {
  BundleEntry e;
  e.name = name;
  e.dtype = t.dtype();
  e.shape = t.shape();
  e.slice = *TensorSlice::Full(t.dims()).Resolve(t.shape());
  uint32_t string_crc = 0;
  const std::string bytes = t.dtype() == DT_STRING ? EncodeStrings(t, &string_crc)
                                                   : std::string(t.raw_data(), t.TotalBytes());
  e.offset = seed->data.size();
  e.size = bytes.size();
  e.crc32c = t.dtype() == DT_STRING ? string_crc : Crc32c(0, bytes.data(), bytes.size());
  seed->data += bytes;
  seed->entries.push_back(e);
}

void Write(const std::string& path, Seed seed) {
  std::sort(seed.entries.begin(), seed.entries.end(), EntryLess);
  const std::string index = EncodeIndex(1, seed.entries);
  const uint32_t n = static_cast<uint32_t>(index.size());
  std::string out(4, '\0');
  std::memcpy(out.data(), &n, 4);
  out += index;
  out += seed.data;
  std::ofstream(path, std::ios::binary) << out;
}

}  // namespace
}  // namespace checkpoint
}  // namespace graphrun

int main(int argc, char** argv) {
  using namespace graphrun;
  using namespace graphrun::checkpoint;
  if (argc != 2) {
    std::cerr << "usage: make_checkpoint_seeds DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  Seed one;
  Add(&one, "w", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})));
  Write(dir + "/one_float.seed", one);
  Seed mixed;
  Add(&mixed, "global_step", Tensor::Scalar<int64_t>(42));
  Add(&mixed, "b", Tensor::FromVector<int32_t>({7, 8}, TensorShape({2})));
  Tensor s(DT_STRING, TensorShape({2}));
  s.base<std::string>()[0] = "abc";
  s.base<std::string>()[1] = "";
  Add(&mixed, "names", s);
  Write(dir + "/mixed.seed", mixed);
  return 0;
}
