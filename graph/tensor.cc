#include "graph/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "graph/memory_budget.h"
#include "graph/status.h"

// AddressSanitizer must see every free: no buffer cache under it.
#if defined(__SANITIZE_ADDRESS__)
#define GRAPHRUN_TENSOR_BUFFER_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRAPHRUN_TENSOR_BUFFER_CACHE 0
#endif
#endif
#ifndef GRAPHRUN_TENSOR_BUFFER_CACHE
#define GRAPHRUN_TENSOR_BUFFER_CACHE 1
#endif

namespace graphrun {
namespace {

// Recycles large buffers of fixed-size types. A training step allocates
// and frees the same large tensors every step (received variables and
// gradients, MatMul outputs); through malloc each such free consolidates
// the arena (glibc does that for every free of 64 KiB or more) and may trim
// the heap, so the next step page-faults the memory back in. Freed buffers
// of at least kMinBytes wait here, by size, for the next allocation of the
// same size, up to kMaxBytes in all and kMaxPerSize per size; the rest go
// back to malloc. Thread-safe.
class BufferCache {
 public:
  static constexpr size_t kMinBytes =
      GRAPHRUN_TENSOR_BUFFER_CACHE ? size_t{64} << 10 : std::numeric_limits<size_t>::max();
  static constexpr size_t kMaxBytes = size_t{256} << 20;
  static constexpr size_t kMaxPerSize = 16;

  // Large sizes are rounded up to whole pages so near sizes share blocks.
  static size_t RoundUp(size_t bytes) {
    constexpr size_t kPage = 4096;
    return bytes < kMinBytes ? bytes : (bytes + kPage - 1) / kPage * kPage;
  }

  // A cached block of exactly `bytes` (a RoundUp value), or null.
  char* Take(size_t bytes) {
    if (bytes < kMinBytes) return nullptr;
    std::lock_guard<std::mutex> l(mu_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    char* p = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= bytes;
    return p;
  }

  // Keeps `p` (a block of `bytes`) for reuse; false when the caller must
  // free it.
  bool Give(char* p, size_t bytes) {
    if (bytes < kMinBytes) return false;
    std::lock_guard<std::mutex> l(mu_);
    if (cached_bytes_ + bytes > kMaxBytes) return false;
    std::vector<char*>& v = free_[bytes];
    if (v.size() >= kMaxPerSize) return false;
    v.push_back(p);
    cached_bytes_ += bytes;
    return true;
  }

 private:
  std::mutex mu_;
  absl::flat_hash_map<size_t, std::vector<char*>> free_;
  size_t cached_bytes_ = 0;
};

BufferCache& TheBufferCache() {
  static BufferCache* cache = new BufferCache();  // never destroyed: used at exit
  return *cache;
}

template <typename Fn>
void ForNonPod(DataType dt, Fn&& fn) {
  if (dt == DT_STRING) fn(static_cast<std::string*>(nullptr));
  if (dt == DT_RESOURCE) fn(static_cast<ResourceHandle*>(nullptr));
  if (dt == DT_VARIANT) fn(static_cast<Variant*>(nullptr));
}

size_t ElementBytes(DataType dt) {
  if (dt == DT_STRING) return sizeof(std::string);
  if (dt == DT_RESOURCE) return sizeof(ResourceHandle);
  if (dt == DT_VARIANT) return sizeof(Variant);
  return DataTypeSize(dt);
}

}  // namespace

TensorBuffer::TensorBuffer(DataType dtype, int64_t n) : dtype_(dtype), n_(n) {
  absl::Status s = Allocate(/*checked=*/false, "");
  if (!s.ok()) throw std::bad_alloc();
}

absl::StatusOr<std::shared_ptr<TensorBuffer>> TensorBuffer::Create(DataType dtype, int64_t n,
                                                                   absl::string_view what) {
  std::shared_ptr<TensorBuffer> b(new TensorBuffer(dtype, n, Unallocated{}));
  GR_RETURN_IF_ERROR(b->Allocate(/*checked=*/true, what));
  return b;
}

absl::Status TensorBuffer::Allocate(bool checked, absl::string_view what) {
  const size_t element = ElementBytes(dtype_);
  if (n_ < 0 || (element > 0 && static_cast<uint64_t>(n_) >
                                    (std::numeric_limits<uint64_t>::max() >> 2) / element)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate ", what, ": ", n_, " elements overflow a size"));
  }
  bytes_ = static_cast<size_t>(n_) * element;
  if (bytes_ > static_cast<size_t>(std::numeric_limits<int64_t>::max() / 2)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", what, ": ", bytes_, " bytes"));
  }
  GR_RETURN_IF_ERROR(memory_internal::Reserve(static_cast<int64_t>(bytes_), checked, what));
  accounted_ = static_cast<int64_t>(bytes_);
  size_t alloc = (bytes_ + kAlignment - 1) / kAlignment * kAlignment;
  if (alloc == 0) alloc = kAlignment;
  if (DataTypeSize(dtype_) > 0) {  // fixed-size elements: recyclable
    alloc = BufferCache::RoundUp(alloc);
    data_ = TheBufferCache().Take(alloc);
    if (data_ != nullptr) {
      cached_bytes_ = alloc;
      return absl::OkStatus();
    }
    if (alloc >= BufferCache::kMinBytes) cached_bytes_ = alloc;
  }
  // From 2 MiB up: 2 MiB-aligned and marked for transparent huge pages, so
  // filling fresh memory faults once per 2 MiB instead of per 4 KiB (a
  // large share of the cost of receiving a big tensor).
  constexpr size_t kHuge = size_t{2} << 20;
  if (alloc >= kHuge) {
    alloc = (alloc + 4095) / 4096 * 4096;  // whole pages (already so with the cache)
    // posix_memalign: aligned_alloc wants a size that is a multiple of
    // the alignment, and these are only whole pages.
    void* p = nullptr;
    data_ = posix_memalign(&p, kHuge, alloc) == 0 ? static_cast<char*>(p) : nullptr;
    if (data_ != nullptr) madvise(data_, alloc, MADV_HUGEPAGE);
  } else {
    data_ = static_cast<char*>(std::aligned_alloc(kAlignment, alloc));
  }
  if (data_ == nullptr) {
    memory_internal::Release(accounted_);
    accounted_ = 0;
    cached_bytes_ = 0;
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", what, ": ", bytes_,
                                                     " bytes: the system has no more memory"));
  }
  ForNonPod(dtype_, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* p = reinterpret_cast<T*>(data_);
    for (int64_t i = 0; i < n_; ++i) new (p + i) T();
  });
  return absl::OkStatus();
}

TensorBuffer::TensorBuffer(void* data, size_t bytes, std::function<void()> release,
                           const DeviceMemorySpace* space)
    : data_(static_cast<char*>(data)), bytes_(bytes), release_(std::move(release)), space_(space) {}

TensorBuffer::~TensorBuffer() {
  if (release_) {
    release_();
    return;
  }
  if (accounted_ > 0) memory_internal::Release(accounted_);
  const int64_t contents = contents_.load(std::memory_order_relaxed);
  if (contents > 0) memory_internal::ReleaseMore(contents);
  if (data_ == nullptr) return;  // a refused allocation
  if (cached_bytes_ > 0 && TheBufferCache().Give(data_, cached_bytes_)) return;
  ForNonPod(dtype_, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* p = reinterpret_cast<T*>(data_);
    for (int64_t i = 0; i < n_; ++i) p[i].~T();
  });
  std::free(data_);
}

absl::Status TensorBuffer::ChargeContents(int64_t delta, absl::string_view what) {
  if (!contents_charged_.exchange(true, std::memory_order_relaxed) && dtype_ == DT_STRING &&
      data_ != nullptr && !release_) {
    // The first charge counts what the strings hold already.
    const int64_t existing = StringContentsBytes(reinterpret_cast<const std::string*>(data_), n_);
    delta = delta > std::numeric_limits<int64_t>::max() - existing
                ? std::numeric_limits<int64_t>::max()
                : delta + existing;
  }
  if (delta > 0) {
    const int64_t now = contents_.load(std::memory_order_relaxed);
    const int64_t total = delta > std::numeric_limits<int64_t>::max() / 2 - now
                              ? std::numeric_limits<int64_t>::max()
                              : static_cast<int64_t>(bytes_) + now + delta;
    GR_RETURN_IF_ERROR(memory_internal::ReserveMore(delta, total, what));
    contents_.fetch_add(delta, std::memory_order_relaxed);
  } else if (delta < 0) {
    int64_t now = contents_.load(std::memory_order_relaxed);
    int64_t take;
    do {
      take = std::min(now, -delta);
    } while (!contents_.compare_exchange_weak(now, now - take, std::memory_order_relaxed));
    if (take > 0) memory_internal::ReleaseMore(take);
  }
  return absl::OkStatus();
}

int64_t StringContentsBytes(const std::string* s, int64_t n) {
  int64_t bytes = 0;
  for (int64_t i = 0; i < n; ++i) bytes += StringHeapBytes(static_cast<int64_t>(s[i].size()));
  return bytes;
}

Tensor::Tensor(DataType dtype, const TensorShape& shape) : dtype_(dtype), shape_(shape) {
  buffer_ = std::make_shared<TensorBuffer>(dtype, shape.num_elements());
  data_ = buffer_->data();
}

absl::StatusOr<Tensor> Tensor::Allocate(DataType dtype, const TensorShape& shape,
                                        absl::string_view context) {
  if (!DataTypeSupported(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, "cannot allocate a tensor of type ", DataTypeString(dtype)));
  }
  if (shape.dims() > TensorShape::kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(context, "cannot allocate a tensor of ",
                                                   shape.dims(), " dimensions, more than the ",
                                                   TensorShape::kMaxDims, " a tensor may have"));
  }
  const std::string what =
      absl::StrCat("a ", DataTypeString(dtype), " tensor of shape ", shape.DebugString());
  absl::StatusOr<std::shared_ptr<TensorBuffer>> made =
      TensorBuffer::Create(dtype, shape.num_elements(), what);
  if (!made.ok()) {
    return absl::Status(made.status().code(), absl::StrCat(context, made.status().message()));
  }
  std::shared_ptr<TensorBuffer> b = *std::move(made);
  char* data = b->data();
  return Tensor(dtype, shape, std::move(b), data);
}

Tensor::Tensor(DataType dtype, const TensorShape& shape, std::shared_ptr<TensorBuffer> buffer,
               char* data)
    : dtype_(dtype), shape_(shape), buffer_(std::move(buffer)), data_(data) {}

int64_t Tensor::TotalBytes() const {
  if (dtype_ == DT_STRING) {
    int64_t n = 0;
    for (const auto& s : flat<std::string>()) n += s.size();
    return n;
  }
  if (dtype_ == DT_RESOURCE) return NumElements() * sizeof(ResourceHandle);
  if (dtype_ == DT_VARIANT) return NumElements() * sizeof(Variant);
  return NumElements() * DataTypeSize(dtype_);
}

Tensor Tensor::Slice(int64_t start, int64_t limit) const {
  TensorShape s = shape_;
  int64_t row = s.dims() ? NumElements() / std::max<int64_t>(1, s.dim_size(0)) : 0;
  s.set_dim(0, limit - start);
  return Tensor(dtype_, s, buffer_,
                data_ + start * row * static_cast<int64_t>(ElementBytes(dtype_)));
}

absl::StatusOr<Tensor> Tensor::Reshaped(const TensorShape& shape) const {
  if (shape.dims() > TensorShape::kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape to ", shape.dims(),
                                                   " dimensions, more than the ",
                                                   TensorShape::kMaxDims, " a tensor may have"));
  }
  if (shape.num_elements() != NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape a tensor with ", NumElements(),
                                                   " elements to shape ", shape.DebugString(), " (",
                                                   shape.num_elements(), " elements)"));
  }
  return Tensor(dtype_, shape, buffer_, data_);
}

bool Tensor::RefCountIsOne() const {
  if (buffer_ == nullptr || buffer_.use_count() != 1) return false;
  // use_count() is a relaxed load: seeing 1 does not order the caller after
  // the last other owner's reads (a RecvTensor still sending the buffer,
  // say). Taking and dropping a reference are acq_rel operations on the
  // same count, which synchronize with that owner's release of it.
  std::shared_ptr<TensorBuffer> sync = buffer_;
  return true;
}

Tensor Tensor::DeepCopy() const {
  if (!IsInitialized()) return Tensor();
  Tensor t(dtype_, shape_);
  if (dtype_ == DT_STRING) {
    auto src = flat<std::string>();
    auto dst = t.flat<std::string>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (dtype_ == DT_RESOURCE) {
    auto src = flat<ResourceHandle>();
    auto dst = t.flat<ResourceHandle>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (dtype_ == DT_VARIANT) {
    auto src = flat<Variant>();
    auto dst = t.flat<Variant>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (NumElements() > 0) {
    std::memcpy(t.data_, data_, NumElements() * DataTypeSize(dtype_));
  }
  return t;
}

namespace {

// Fills `n` elements from a repeated proto field, applying the splat rule.
template <typename T, typename Field, typename Conv>
absl::Status FillFromField(const Field& field, int64_t n, T* out, Conv conv,
                           const char* field_name) {
  int64_t have = field.size();
  if (have > n) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto has ", have, " values in ",
                                                   field_name, " but the shape holds ", n));
  }
  if (have == 0) {
    for (int64_t i = 0; i < n; ++i) out[i] = T();
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < have; ++i) out[i] = conv(field.Get(i));
  for (int64_t i = have; i < n; ++i) out[i] = out[have - 1];
  return absl::OkStatus();
}

template <typename T>
T Id(T v) {
  return v;
}

// A string tensor's tensor_content as TensorFlow encodes it
// (port::EncodeStringList): every element's length as a varint32, then
// all the bytes. `t` is the allocated tensor of `shape`.
absl::StatusOr<Tensor> StringsFromContent(const std::string& content, const TensorShape& shape,
                                          Tensor t) {
  const int64_t n = shape.num_elements();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto tensor_content of a string ",
                                                   shape.DebugString(), " tensor: ", why));
  };
  size_t pos = 0;
  std::vector<uint32_t> sizes;
  sizes.reserve(static_cast<size_t>(std::min<int64_t>(n, content.size())));
  uint64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t v = 0;
    int shift = 0;
    while (true) {
      if (pos == content.size() || shift > 28) {
        return bad(absl::StrCat("the length of element ", i, " is cut off or malformed"));
      }
      const uint8_t b = static_cast<uint8_t>(content[pos++]);
      v |= static_cast<uint32_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
      shift += 7;
    }
    sizes.push_back(v);
    total += v;
  }
  if (total != content.size() - pos) {
    return bad(absl::StrCat("the lengths add up to ", total, " bytes but ", content.size() - pos,
                            " follow them"));
  }
  int64_t heap = 0;
  for (uint32_t v : sizes) heap += StringHeapBytes(v);
  GR_RETURN_IF_ERROR(
      t.buffer()->ChargeContents(heap, absl::StrCat("TensorProto: the string contents of a ",
                                                    shape.DebugString(), " string tensor")));
  std::string* out = t.base<std::string>();
  for (int64_t i = 0; i < n; ++i) {
    out[i].assign(content, pos, sizes[i]);
    pos += sizes[i];
  }
  return t;
}

// scomplex_val / dcomplex_val: (real, imaginary) pairs; fewer than `n`
// values repeat the last, as the other *_val fields do.
template <typename Field, typename C>
absl::Status FillComplex(const Field& f, int64_t n, C* out, const char* name) {
  if (f.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorProto ", name, " has an odd number of values (", f.size(), ")"));
  }
  const int64_t k = f.size() / 2;
  if (k > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorProto ", name, " has ", k, " values for ", n, " elements"));
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = k == 0 ? -1 : std::min(i, k - 1);
    out[i] = j < 0 ? C() : C(f.Get(2 * j), f.Get(2 * j + 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> Tensor::FromProto(const tensorflow::TensorProto& proto) {
  DataType dt = proto.dtype();
  if (!DataTypeSupported(dt) || IsRefType(dt) || dt == DT_VARIANT) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorProto has unsupported dtype ", DataTypeEnumName(dt)));
  }
  GR_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromProto(proto.tensor_shape()));
  const int64_t n = shape.num_elements();
  GR_ASSIGN_OR_RETURN(Tensor t, Allocate(dt, shape, "TensorProto: "));
  if (dt == DT_RESOURCE) {
    const auto& hs = proto.resource_handle_val();
    if (hs.size() != n && !(hs.empty())) {
      return absl::InvalidArgumentError("TensorProto resource_handle_val count mismatch");
    }
    for (int64_t i = 0; i < hs.size(); ++i) {
      ResourceHandle& h = t.base<ResourceHandle>()[i];
      h.device = hs.Get(i).device();
      h.container = hs.Get(i).container();
      h.name = hs.Get(i).name();
      h.type_name = hs.Get(i).maybe_type_name();
    }
    return t;
  }
  if (dt == DT_STRING && !proto.tensor_content().empty()) {
    return StringsFromContent(proto.tensor_content(), shape, std::move(t));
  }
  if (dt == DT_STRING) {
    // The contents first (the last value repeats to fill the shape).
    const auto& v = proto.string_val();
    if (!v.empty() && v.size() <= n) {
      int64_t contents = 0;
      for (const std::string& s : v) contents += StringHeapBytes(static_cast<int64_t>(s.size()));
      const int64_t last = StringHeapBytes(static_cast<int64_t>(v.Get(v.size() - 1).size()));
      const int64_t rest = n - v.size();
      contents = last > 0 && rest > (std::numeric_limits<int64_t>::max() - contents) / last
                     ? std::numeric_limits<int64_t>::max()
                     : contents + rest * last;
      GR_RETURN_IF_ERROR(
          t.buffer_->ChargeContents(contents, absl::StrCat("TensorProto: the string contents of a ",
                                                           shape.DebugString(), " string tensor")));
    }
    GR_RETURN_IF_ERROR(FillFromField(
        proto.string_val(), n, t.base<std::string>(), [](const std::string& s) { return s; },
        "string_val"));
    return t;
  }
  const size_t elem = DataTypeSize(dt);
  if (!proto.tensor_content().empty()) {
    if (proto.tensor_content().size() != n * elem) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorProto tensor_content has ", proto.tensor_content().size(), " bytes but ",
          DataTypeString(dt), " shape ", shape.DebugString(), " needs ", n * elem));
    }
    std::memcpy(t.data_, proto.tensor_content().data(), n * elem);
    return t;
  }
  switch (dt) {
    case DT_FLOAT:
      GR_RETURN_IF_ERROR(
          FillFromField(proto.float_val(), n, t.base<float>(), Id<float>, "float_val"));
      break;
    case DT_DOUBLE:
      GR_RETURN_IF_ERROR(
          FillFromField(proto.double_val(), n, t.base<double>(), Id<double>, "double_val"));
      break;
    case DT_INT32:
      GR_RETURN_IF_ERROR(
          FillFromField(proto.int_val(), n, t.base<int32_t>(), Id<int32_t>, "int_val"));
      break;
    case DT_INT16:
      GR_RETURN_IF_ERROR(FillFromField(
          proto.int_val(), n, t.base<int16_t>(), [](int32_t v) { return static_cast<int16_t>(v); },
          "int_val"));
      break;
    case DT_INT8:
      GR_RETURN_IF_ERROR(FillFromField(
          proto.int_val(), n, t.base<int8_t>(), [](int32_t v) { return static_cast<int8_t>(v); },
          "int_val"));
      break;
    case DT_UINT8:
      GR_RETURN_IF_ERROR(FillFromField(
          proto.int_val(), n, t.base<uint8_t>(), [](int32_t v) { return static_cast<uint8_t>(v); },
          "int_val"));
      break;
    case DT_UINT16:
      GR_RETURN_IF_ERROR(FillFromField(
          proto.int_val(), n, t.base<uint16_t>(),
          [](int32_t v) { return static_cast<uint16_t>(v); }, "int_val"));
      break;
    case DT_INT64:
      GR_RETURN_IF_ERROR(
          FillFromField(proto.int64_val(), n, t.base<int64_t>(), Id<int64_t>, "int64_val"));
      break;
    case DT_UINT32:
      GR_RETURN_IF_ERROR(
          FillFromField(proto.uint32_val(), n, t.base<uint32_t>(), Id<uint32_t>, "uint32_val"));
      break;
    case DT_UINT64:
      GR_RETURN_IF_ERROR(
          FillFromField(proto.uint64_val(), n, t.base<uint64_t>(), Id<uint64_t>, "uint64_val"));
      break;
    case DT_BOOL:
      GR_RETURN_IF_ERROR(FillFromField(proto.bool_val(), n, t.base<bool>(), Id<bool>, "bool_val"));
      break;
    case DT_HALF:
    case DT_BFLOAT16:
      GR_RETURN_IF_ERROR(FillFromField(
          proto.half_val(), n, t.base<uint16_t>(),
          [](int32_t v) { return static_cast<uint16_t>(v); }, "half_val"));
      break;
    case DT_COMPLEX64:
      GR_RETURN_IF_ERROR(
          FillComplex(proto.scomplex_val(), n, t.base<std::complex<float>>(), "scomplex_val"));
      break;
    case DT_COMPLEX128:
      GR_RETURN_IF_ERROR(
          FillComplex(proto.dcomplex_val(), n, t.base<std::complex<double>>(), "dcomplex_val"));
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("TensorProto dtype ", DataTypeEnumName(dt), " cannot be decoded"));
  }
  return t;
}

void Tensor::AsProtoTensorContent(tensorflow::TensorProto* proto) const {
  proto->Clear();
  proto->set_dtype(dtype_);
  shape_.AsProto(proto->mutable_tensor_shape());
  if (dtype_ == DT_STRING) {
    for (const auto& s : flat<std::string>()) proto->add_string_val(s);
  } else if (dtype_ == DT_RESOURCE) {
    for (const auto& h : flat<ResourceHandle>()) {
      auto* p = proto->add_resource_handle_val();
      p->set_device(h.device);
      p->set_container(h.container);
      p->set_name(h.name);
      p->set_maybe_type_name(h.type_name);
    }
  } else if (NumElements() > 0) {
    proto->set_tensor_content(data_, NumElements() * DataTypeSize(dtype_));
  }
}

void Tensor::AsProtoField(tensorflow::TensorProto* proto) const {
  proto->Clear();
  proto->set_dtype(dtype_);
  shape_.AsProto(proto->mutable_tensor_shape());
  const int64_t n = NumElements();
  switch (dtype_) {
    case DT_FLOAT:
      for (int64_t i = 0; i < n; ++i) proto->add_float_val(base<float>()[i]);
      break;
    case DT_DOUBLE:
      for (int64_t i = 0; i < n; ++i) proto->add_double_val(base<double>()[i]);
      break;
    case DT_INT32:
      for (int64_t i = 0; i < n; ++i) proto->add_int_val(base<int32_t>()[i]);
      break;
    case DT_INT16:
      for (int64_t i = 0; i < n; ++i) proto->add_int_val(base<int16_t>()[i]);
      break;
    case DT_INT8:
      for (int64_t i = 0; i < n; ++i) proto->add_int_val(base<int8_t>()[i]);
      break;
    case DT_UINT8:
      for (int64_t i = 0; i < n; ++i) proto->add_int_val(base<uint8_t>()[i]);
      break;
    case DT_UINT16:
      for (int64_t i = 0; i < n; ++i) proto->add_int_val(base<uint16_t>()[i]);
      break;
    case DT_INT64:
      for (int64_t i = 0; i < n; ++i) proto->add_int64_val(base<int64_t>()[i]);
      break;
    case DT_UINT32:
      for (int64_t i = 0; i < n; ++i) proto->add_uint32_val(base<uint32_t>()[i]);
      break;
    case DT_UINT64:
      for (int64_t i = 0; i < n; ++i) proto->add_uint64_val(base<uint64_t>()[i]);
      break;
    case DT_BOOL:
      for (int64_t i = 0; i < n; ++i) proto->add_bool_val(base<bool>()[i]);
      break;
    case DT_HALF:
    case DT_BFLOAT16:
      for (int64_t i = 0; i < n; ++i) proto->add_half_val(base<uint16_t>()[i]);
      break;
    default:
      AsProtoTensorContent(proto);
      break;
  }
}

std::string Tensor::SummarizeValue(int64_t max_entries) const {
  std::string out;
  const int64_t n = std::min<int64_t>(NumElements(), max_entries);
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += " ";
    switch (dtype_) {
      case DT_FLOAT:
        absl::StrAppend(&out, base<float>()[i]);
        break;
      case DT_DOUBLE:
        absl::StrAppend(&out, base<double>()[i]);
        break;
      case DT_INT32:
        absl::StrAppend(&out, base<int32_t>()[i]);
        break;
      case DT_INT64:
        absl::StrAppend(&out, base<int64_t>()[i]);
        break;
      case DT_INT16:
        absl::StrAppend(&out, base<int16_t>()[i]);
        break;
      case DT_INT8:
        absl::StrAppend(&out, base<int8_t>()[i]);
        break;
      case DT_UINT8:
        absl::StrAppend(&out, base<uint8_t>()[i]);
        break;
      case DT_UINT16:
        absl::StrAppend(&out, base<uint16_t>()[i]);
        break;
      case DT_UINT32:
        absl::StrAppend(&out, base<uint32_t>()[i]);
        break;
      case DT_UINT64:
        absl::StrAppend(&out, base<uint64_t>()[i]);
        break;
      case DT_BOOL:
        absl::StrAppend(&out, base<bool>()[i] ? "true" : "false");
        break;
      case DT_HALF:
        absl::StrAppend(&out, HalfToFloat(base<uint16_t>()[i]));
        break;
      case DT_BFLOAT16:
        absl::StrAppend(&out, BFloat16ToFloat(base<uint16_t>()[i]));
        break;
      case DT_COMPLEX64:
        absl::StrAppend(&out, "(", base<std::complex<float>>()[i].real(), ",",
                        base<std::complex<float>>()[i].imag(), ")");
        break;
      case DT_COMPLEX128:
        absl::StrAppend(&out, "(", base<std::complex<double>>()[i].real(), ",",
                        base<std::complex<double>>()[i].imag(), ")");
        break;
      case DT_STRING:
        // Escaped as TensorFlow's DebugString does: one line, no control
        // characters from the data.
        absl::StrAppend(&out, "\"", absl::CEscape(base<std::string>()[i]), "\"");
        break;
      case DT_RESOURCE:  // names come from graphs: escaped as strings are
        absl::StrAppend(&out, absl::CEscape(base<ResourceHandle>()[i].DebugString()));
        break;
      case DT_VARIANT:
        absl::StrAppend(&out, base<Variant>()[i].DebugString());
        break;
      default:
        out += "?";
        break;
    }
  }
  if (NumElements() > n) out += "...";
  return out;
}

std::string Tensor::DebugString(int max_entries) const {
  if (!IsInitialized()) return "Tensor<uninitialized>";
  return absl::StrCat("Tensor<", DataTypeString(dtype_), ", ", shape_.DebugString(), ": ",
                      SummarizeValue(max_entries), ">");
}

}  // namespace graphrun
