// Tensor: a typed, shaped view of a reference-counted, 64-byte-aligned
// buffer. Copying a Tensor shares the buffer (no data copy); Slice() and
// Reshaped() are zero-copy views. Element types: every fixed-size type of
// graph/types.h, std::string (DT_STRING), ResourceHandle (DT_RESOURCE) and
// Variant (DT_VARIANT).
//
// Thread-safety: a Tensor object is a value; concurrent reads are safe,
// writes to shared buffers must be synchronised by the caller (variables do
// this in kernels/).
#ifndef GRAPHRUN_GRAPH_TENSOR_H_
#define GRAPHRUN_GRAPH_TENSOR_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/proto/tensor.pb.h"
#include "graph/resource_handle.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "graph/variant.h"

namespace graphrun {

// An accelerator's own memory (runtime/ implements it with the device's
// allocator). A buffer that lives there may be read and written only by
// that device's kernels and copy functions; host code sees its bytes as
// meaningless. Host memory has no memory space (null).
class DeviceMemorySpace {
 public:
  virtual ~DeviceMemorySpace() = default;
  // The device's full name, for messages.
  virtual const std::string& device_name() const = 0;
};

// Owns raw storage for `n` elements of one type; constructs and destroys
// non-POD elements (strings, resource handles).
class TensorBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  // REQUIRES: DataTypeSupported(dtype), n >= 0. Counted in the memory
  // budget (graph/memory_budget.h) but never refused by it.
  TensorBuffer(DataType dtype, int64_t n);
  // The same, refused with ResourceExhausted (naming `what`) when it is
  // over the per-allocation cap or the process's limit, or the memory is
  // not there; InvalidArgument when n elements overflow a size.
  static absl::StatusOr<std::shared_ptr<TensorBuffer>> Create(DataType dtype, int64_t n,
                                                              absl::string_view what);
  // Wraps memory owned elsewhere; `release` runs when the buffer dies.
  // `space`: the device memory it lies in (null: host memory); `release`
  // must keep it alive.
  TensorBuffer(void* data, size_t bytes, std::function<void()> release,
               const DeviceMemorySpace* space = nullptr);
  ~TensorBuffer();
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const DeviceMemorySpace* memory_space() const { return space_; }

  // String contents: the bytes string elements hold on the heap beyond
  // the buffer, counted in the memory budget while the buffer lives.
  // Data-movement kernels charge what they copy in before they copy it
  // (kernels/framework/array_util.h); the executor charges what other
  // kernels wrote into their string outputs after they ran. Adds `delta`
  // (negative: contents overwritten by smaller ones; the charge never goes
  // below 0); the first charge adds what the strings held already.
  // ResourceExhausted naming `what` when a limit would be passed; nothing
  // is counted then.
  absl::Status ChargeContents(int64_t delta, absl::string_view what);
  // Whether contents were ever charged (even 0 bytes).
  bool contents_charged() const { return contents_charged_.load(std::memory_order_relaxed); }
  int64_t contents_bytes() const { return contents_.load(std::memory_order_relaxed); }

 private:
  DataType dtype_ = DT_INVALID;
  int64_t n_ = 0;
  char* data_ = nullptr;
  size_t bytes_ = 0;
  // Size of the block when it is large enough to be recycled (tensor.cc's
  // buffer cache), else 0.
  size_t cached_bytes_ = 0;
  // Counted in the memory budget.
  int64_t accounted_ = 0;
  std::atomic<int64_t> contents_{0};
  std::atomic<bool> contents_charged_{false};

  struct Unallocated {};
  TensorBuffer(DataType dtype, int64_t n, Unallocated) : dtype_(dtype), n_(n) {}
  absl::Status Allocate(bool checked, absl::string_view what);
  std::function<void()> release_;
  const DeviceMemorySpace* space_ = nullptr;
};

// Heap bytes of a string of `size` characters: 0 when it lives inside the
// std::string itself (libstdc++ keeps up to 15 characters inline).
inline int64_t StringHeapBytes(int64_t size) { return size > 15 ? size : 0; }
// The same for `n` strings.
int64_t StringContentsBytes(const std::string* s, int64_t n);

class Tensor {
 public:
  // An uninitialised tensor (dtype DT_INVALID, no buffer).
  Tensor() = default;
  // Allocates an uninitialised (POD) or default-constructed buffer.
  // REQUIRES: DataTypeSupported(dtype).
  Tensor(DataType dtype, const TensorShape& shape);
  // The same, checked against the memory budget: ResourceExhausted naming
  // the dtype, shape and bytes (after `context`, e.g. "node 'x' (op
  // Fill): ") instead of std::bad_alloc. Use it wherever a size comes
  // from outside (a graph, a feed, a request, a file).
  static absl::StatusOr<Tensor> Allocate(DataType dtype, const TensorShape& shape,
                                         absl::string_view context = "");
  // Views `buffer` from `data`, which must lie inside it.
  Tensor(DataType dtype, const TensorShape& shape, std::shared_ptr<TensorBuffer> buffer,
         char* data);

  template <typename T>
  static Tensor Scalar(T v) {
    Tensor t(DataTypeToEnum<T>::value, TensorShape());
    t.base<T>()[0] = std::move(v);
    return t;
  }
  // REQUIRES: values.size() == shape.num_elements().
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, const TensorShape& shape) {
    Tensor t(DataTypeToEnum<T>::value, shape);
    T* p = t.base<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
    return t;
  }
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values) {
    return FromVector(values, TensorShape({static_cast<int64_t>(values.size())}));
  }

  // Decodes TensorFlow's TensorProto: tensor_content, typed *_val fields,
  // the splat rule (fewer values than elements: the last repeats), and no
  // values at all (zeros). InvalidArgument on any inconsistency.
  static absl::StatusOr<Tensor> FromProto(const tensorflow::TensorProto& proto);
  // Encodes with tensor_content for fixed-size types, string_val for strings.
  void AsProtoTensorContent(tensorflow::TensorProto* proto) const;
  // Encodes with the typed *_val fields.
  void AsProtoField(tensorflow::TensorProto* proto) const;

  bool IsInitialized() const { return dtype_ != DT_INVALID; }
  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int dims() const { return shape_.dims(); }
  int64_t dim_size(int i) const { return shape_.dim_size(i); }
  int64_t NumElements() const { return shape_.num_elements(); }
  // Bytes of element storage (strings: the sum of their lengths).
  int64_t TotalBytes() const;

  template <typename T>
  T* base() const {
    return reinterpret_cast<T*>(data_);
  }
  template <typename T>
  absl::Span<T> flat() const {
    return absl::Span<T>(base<T>(), NumElements());
  }
  template <typename T>
  T& scalar() const {
    return *base<T>();
  }
  char* raw_data() const { return data_; }
  const std::shared_ptr<TensorBuffer>& buffer() const { return buffer_; }
  bool SharesBufferWith(const Tensor& o) const {
    return buffer_ != nullptr && buffer_ == o.buffer_;
  }
  // The device memory holding the elements; null for host memory (and for
  // a tensor without a buffer).
  const DeviceMemorySpace* memory_space() const {
    return buffer_ ? buffer_->memory_space() : nullptr;
  }
  // True if no other Tensor shares this buffer (safe to update in place):
  // every access through the other owners that let go of it happens before
  // the caller's writes.
  bool RefCountIsOne() const;

  // Rows [start, limit) of dimension 0, sharing the buffer.
  // REQUIRES: dims() >= 1, 0 <= start <= limit <= dim_size(0).
  Tensor Slice(int64_t start, int64_t limit) const;
  // The same buffer seen with another shape of the same element count.
  absl::StatusOr<Tensor> Reshaped(const TensorShape& shape) const;
  // A copy with its own buffer.
  Tensor DeepCopy() const;

  // e.g. "Tensor<float, [2,2]: 1 2 3 4>", at most `max_entries` values.
  std::string DebugString(int max_entries = 6) const;
  // Just the values, space separated.
  std::string SummarizeValue(int64_t max_entries) const;

 private:
  DataType dtype_ = DT_INVALID;
  TensorShape shape_;
  std::shared_ptr<TensorBuffer> buffer_;
  char* data_ = nullptr;
};

}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_TENSOR_H_
