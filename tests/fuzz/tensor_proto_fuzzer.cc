// libFuzzer target: TensorProto decoding (Tensor::FromProto), as feeds,
// Const values and fetched tensors arrive: binary or text format, splat
// rules (fewer values than elements), tensor_content whose size lies,
// shapes that overflow or exceed the memory budget. Any input must give a
// Status, never a crash, an allocation outside the budget or a sanitizer
// report; a decoded tensor must survive a round trip to tensor_content.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "graph/memory_budget.h"
#include "graph/tensor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphrun;
  static const bool limited = [] {
    // Far below libFuzzer's -rss_limit_mb: a shape asking for more is
    // refused by the budget, which is what is being tested.
    SetMemoryLimits(int64_t{256} << 20, int64_t{64} << 20);
    // Malformed strings are expected by the thousand: no log line each.
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)limited;
  if (size > (1 << 16)) return 0;
  tensorflow::TensorProto proto;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // Text-format errors are expected by the thousand: parsed silently.
  struct Silent : google::protobuf::io::ErrorCollector {
    void AddError(int, int, const std::string&) override {}
  } silent;
  google::protobuf::TextFormat::Parser text;
  text.RecordErrorsTo(&silent);
  if (!proto.ParseFromString(bytes) && !text.ParseFromString(bytes, &proto)) return 0;
  absl::StatusOr<Tensor> t = Tensor::FromProto(proto);
  if (!t.ok()) return 0;
  tensorflow::TensorProto again;
  t->AsProtoTensorContent(&again);
  absl::StatusOr<Tensor> back = Tensor::FromProto(again);
  if (!back.ok() || back->dtype() != t->dtype() || back->shape() != t->shape()) std::abort();
  if (DataTypeSize(t->dtype()) > 0 &&
      std::memcmp(back->raw_data(), t->raw_data(), t->TotalBytes()) != 0) {
    std::abort();
  }
  return 0;
}
