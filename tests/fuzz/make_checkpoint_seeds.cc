// Writes the checkpoint fuzzer's seeds (tests/fuzz/corpus_checkpoint/):
// real index bytes (EncodeIndex) and data for a few tensors, in the
// fuzzer's input layout (4-byte little-endian index length, index, data),
// and a TensorFlow V1 checkpoint file (tf_v1.seed).
//   bazel run //tests/fuzz:make_checkpoint_seeds -- $PWD/tests/fuzz/corpus_checkpoint
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "graph/proto/saved_tensor_slice.pb.h"
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

// A TensorFlow V1 checkpoint file (the fuzzer reads the whole input as
// one): a float [2,3] "w" whole, and a float [4,2] "p" in two row slices.
void WriteV1(const std::string& path) {
  std::map<std::string, std::string> records;
  tensorflow::SavedTensorSlices meta;
  auto add_meta = [&](const std::string& name, std::vector<int64_t> dims,
                      std::vector<TensorSlice> slices) {
    tensorflow::SavedSliceMeta* m = meta.mutable_meta()->add_tensor();
    m->set_name(name);
    m->set_type(tensorflow::DT_FLOAT);
    for (int64_t d : dims) m->mutable_shape()->add_dim()->set_size(d);
    for (const TensorSlice& sl : slices) {
      tensorflow::TensorSliceProto* p = m->add_slice();
      for (int d = 0; d < sl.dims(); ++d) {
        auto* e = p->add_extent();
        if (!sl.IsFullAt(d)) {
          e->set_start(sl.start(d));
          e->set_length(sl.length(d));
        }
      }
    }
  };
  auto add_data = [&](const std::string& name, const TensorSlice& sl, std::vector<float> v) {
    tensorflow::SavedTensorSlices r;
    tensorflow::SavedSlice* d = r.mutable_data();
    d->set_name(name);
    for (int i = 0; i < sl.dims(); ++i) {
      auto* e = d->mutable_slice()->add_extent();
      if (!sl.IsFullAt(i)) {
        e->set_start(sl.start(i));
        e->set_length(sl.length(i));
      }
    }
    for (float x : v) d->mutable_data()->add_float_val(x);
    records[EncodeTensorNameSlice(name, sl)] = r.SerializeAsString();
  };
  TensorSlice whole2 = TensorSlice::Full(2);
  TensorSlice top, bottom;
  top.AddDim(0, 2);
  top.AddDim(0, -1);
  bottom.AddDim(2, 2);
  bottom.AddDim(0, -1);
  add_meta("w", {2, 3}, {whole2});
  add_meta("p", {4, 2}, {top, bottom});
  records[""] = meta.SerializeAsString();
  add_data("w", whole2, {1, 2, 3, 4, 5, 6});
  add_data("p", top, {0, 1, 2, 3});
  add_data("p", bottom, {4, 5, 6, 7});
  std::ofstream(path, std::ios::binary) << EncodeTable(records, 128);
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
  WriteV1(dir + "/tf_v1.seed");
  return 0;
}
