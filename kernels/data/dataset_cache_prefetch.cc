// CacheDataset (memory or file) and PrefetchDataset (a producer thread with
// a bounded buffer).
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/data/dataset_internal.h"

namespace graphrun {
namespace data {
namespace {

using Element = std::vector<Tensor>;

// ---------------------------------------------------------------------------
// Cache file format (host byte order):
//   "GRCACHE1"  uint32 num_components
//   per element: 'E', then per component: uint32 dtype, uint32 rank,
//                int64 dims[rank], data (fixed-size types: the raw bytes;
//                strings: uint64 length + bytes each)
//   end: 'Z' uint64 element_count
constexpr char kCacheMagic[8] = {'G', 'R', 'C', 'A', 'C', 'H', 'E', '1'};

class CacheFileWriter {
 public:
  CacheFileWriter(std::string filename, int num_components)
      : filename_(std::move(filename)), num_components_(num_components) {
    std::random_device rd;
    tmp_ = absl::StrCat(filename_, ".tmp.", absl::Hex(rd()), absl::Hex(rd()));
  }
  ~CacheFileWriter() {
    if (f_ != nullptr) {
      std::fclose(f_);
      std::remove(tmp_.c_str());  // an unfinished pass leaves no cache
    }
  }
  absl::Status Append(const Element& e) {
    GR_RETURN_IF_ERROR(OpenOnce());
    WritePod('E');
    for (const Tensor& t : e) {
      WritePod(static_cast<uint32_t>(t.dtype()));
      WritePod(static_cast<uint32_t>(t.dims()));
      for (int64_t d : t.shape().dim_sizes()) WritePod(d);
      if (t.dtype() == DT_STRING) {
        for (const std::string& s : t.flat<std::string>()) {
          WritePod(static_cast<uint64_t>(s.size()));
          Write(s.data(), s.size());
        }
      } else {
        Write(t.raw_data(), static_cast<size_t>(t.NumElements() * DataTypeSize(t.dtype())));
      }
    }
    ++count_;
    return ok_ ? absl::OkStatus() : Error(std::strerror(errno));
  }
  // Completes the file and moves it into place.
  absl::Status Finish() {
    GR_RETURN_IF_ERROR(OpenOnce());
    WritePod('Z');
    WritePod(count_);
    const bool closed = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok_ || !closed || std::rename(tmp_.c_str(), filename_.c_str()) != 0) {
      std::string why = std::strerror(errno);
      std::remove(tmp_.c_str());
      return Error(why);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status OpenOnce() {
    if (f_ != nullptr) return absl::OkStatus();
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (f_ == nullptr) return Error(std::strerror(errno));
    Write(kCacheMagic, sizeof(kCacheMagic));
    WritePod(static_cast<uint32_t>(num_components_));
    return absl::OkStatus();
  }
  absl::Status Error(absl::string_view why) {
    return absl::InternalError(absl::StrCat("cannot write cache file '", filename_, "': ", why));
  }
  void Write(const void* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f_) != n) ok_ = false;
  }
  template <typename T>
  void WritePod(T v) {
    Write(&v, sizeof(v));
  }
  std::string filename_, tmp_;
  int num_components_;
  FILE* f_ = nullptr;
  bool ok_ = true;
  uint64_t count_ = 0;
};

class CacheFileReader {
 public:
  // NotFound when the file does not exist.
  static absl::StatusOr<std::unique_ptr<CacheFileReader>> Open(const std::string& filename,
                                                               const DatasetBase& d) {
    FILE* f = std::fopen(filename.c_str(), "rb");
    if (f == nullptr) return absl::NotFoundError(filename);
    auto r = std::unique_ptr<CacheFileReader>(new CacheFileReader(filename, f, d));
    std::fseek(f, 0, SEEK_END);
    r->remaining_ = static_cast<uint64_t>(std::max<long>(std::ftell(f), 0));
    std::fseek(f, 0, SEEK_SET);
    char magic[8];
    uint32_t n = 0;
    GR_RETURN_IF_ERROR(r->Read(magic, 8));
    GR_RETURN_IF_ERROR(r->ReadPod(&n));
    if (std::memcmp(magic, kCacheMagic, 8) != 0) return r->Corrupt("bad magic");
    if (static_cast<int>(n) != d.num_components()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cache file '", filename, "' holds elements of ", n, " components, the dataset has ",
          d.num_components(), "; delete the file to rebuild the cache"));
    }
    return r;
  }
  ~CacheFileReader() { std::fclose(f_); }

  absl::Status Next(Element* out, bool* end) {
    if (done_) {
      *end = true;
      return absl::OkStatus();
    }
    char tag = 0;
    GR_RETURN_IF_ERROR(ReadPod(&tag));
    if (tag == 'Z') {
      uint64_t count = 0;
      GR_RETURN_IF_ERROR(ReadPod(&count));
      if (count != read_) return Corrupt("element count mismatch");
      done_ = *end = true;
      return absl::OkStatus();
    }
    if (tag != 'E') return Corrupt("bad element tag");
    Element e;
    for (int c = 0; c < d_.num_components(); ++c) {
      uint32_t dtype = 0, rank = 0;
      GR_RETURN_IF_ERROR(ReadPod(&dtype));
      GR_RETURN_IF_ERROR(ReadPod(&rank));
      if (static_cast<DataType>(dtype) != d_.output_dtypes()[c]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cache file '", filename_, "' holds ", DataTypeString(static_cast<DataType>(dtype)),
            " in component ", c, ", the dataset has ", DataTypeString(d_.output_dtypes()[c]),
            "; delete the file to rebuild the cache"));
      }
      if (rank > 64) return Corrupt("bad rank");
      std::vector<int64_t> dims(rank);
      for (int64_t& x : dims) GR_RETURN_IF_ERROR(ReadPod(&x));
      auto shape = TensorShape::Make(dims);
      if (!shape.ok()) return Corrupt("bad shape");
      const uint64_t n = static_cast<uint64_t>(shape->num_elements());
      const DataType dt = static_cast<DataType>(dtype);
      // Bound allocations by what the file can hold.
      const uint64_t min_bytes = dt == DT_STRING ? n * 8 : n * DataTypeSize(dt);
      if (min_bytes > remaining_) return Corrupt("truncated");
      Tensor t(dt, *shape);
      if (dt == DT_STRING) {
        for (std::string& s : t.flat<std::string>()) {
          uint64_t len = 0;
          GR_RETURN_IF_ERROR(ReadPod(&len));
          if (len > remaining_) return Corrupt("truncated");
          s.resize(len);
          GR_RETURN_IF_ERROR(Read(&s[0], len));
        }
      } else {
        GR_RETURN_IF_ERROR(Read(t.raw_data(), min_bytes));
      }
      e.push_back(std::move(t));
    }
    ++read_;
    *out = std::move(e);
    *end = false;
    return absl::OkStatus();
  }

 private:
  CacheFileReader(std::string filename, FILE* f, const DatasetBase& d)
      : filename_(std::move(filename)), f_(f), d_(d) {}
  absl::Status Corrupt(absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("cache file '", filename_, "' is corrupt (", what, ")"));
  }
  absl::Status Read(void* p, uint64_t n) {
    if (n == 0) return absl::OkStatus();
    if (n > remaining_ || std::fread(p, 1, n, f_) != n) return Corrupt("truncated");
    remaining_ -= n;
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status ReadPod(T* v) {
    return Read(v, sizeof(T));
  }
  std::string filename_;
  FILE* f_;
  const DatasetBase& d_;
  uint64_t remaining_ = 0;
  uint64_t read_ = 0;
  bool done_ = false;
};

class CacheDataset : public DatasetBase {
 public:
  CacheDataset(DatasetPtr input, std::string filename)
      : DatasetBase(input->output_dtypes(), input->output_shapes()),
        input_(std::move(input)),
        filename_(std::move(filename)) {}
  std::string name() const override { return "Cache"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override;

 private:
  using Elements = std::vector<Element>;
  class MemoryReader;
  class Writer;
  class FileReader;

  // Publishes the first complete in-memory pass.
  void Publish(std::shared_ptr<const Elements> e) const {
    std::lock_guard<std::mutex> l(mu_);
    if (memory_ == nullptr) memory_ = std::move(e);
  }

  DatasetPtr input_;
  std::string filename_;
  mutable std::mutex mu_;
  mutable std::shared_ptr<const Elements> memory_;  // guarded by mu_
};

class CacheDataset::MemoryReader : public DatasetIterator<CacheDataset> {
 public:
  MemoryReader(const CacheDataset* d, std::shared_ptr<const Elements> e)
      : DatasetIterator(d), elems_(std::move(e)) {}
  absl::Status GetNext(IteratorContext*, Element* out, bool* end) override {
    std::lock_guard<std::mutex> l(mu_);
    *end = next_ >= elems_->size();
    if (!*end) *out = (*elems_)[next_++];
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::shared_ptr<const Elements> elems_;
  size_t next_ = 0;
};

// Reads the input and records what passes: into memory, or into a file.
class CacheDataset::Writer : public DatasetIterator<CacheDataset> {
 public:
  Writer(const CacheDataset* d, std::unique_ptr<IteratorBase> in)
      : DatasetIterator(d), input_(std::move(in)) {
    if (d->filename_.empty()) {
      recorded_ = std::make_shared<Elements>();
    } else {
      file_ = std::make_unique<CacheFileWriter>(d->filename_, d->num_components());
    }
  }
  absl::Status GetNext(IteratorContext* ctx, Element* out, bool* end) override {
    std::lock_guard<std::mutex> l(mu_);
    if (finished_) {
      *end = true;
      return absl::OkStatus();
    }
    GR_RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
    if (!*end) {
      if (file_ != nullptr) return file_->Append(*out);
      recorded_->push_back(*out);
      return absl::OkStatus();
    }
    finished_ = true;
    if (file_ != nullptr) return file_->Finish();
    dataset().Publish(std::move(recorded_));
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::unique_ptr<IteratorBase> input_;
  std::shared_ptr<Elements> recorded_;
  std::unique_ptr<CacheFileWriter> file_;
  bool finished_ = false;
};

class CacheDataset::FileReader : public DatasetIterator<CacheDataset> {
 public:
  FileReader(const CacheDataset* d, std::unique_ptr<CacheFileReader> r)
      : DatasetIterator(d), reader_(std::move(r)) {}
  absl::Status GetNext(IteratorContext*, Element* out, bool* end) override {
    std::lock_guard<std::mutex> l(mu_);
    return reader_->Next(out, end);
  }

 private:
  std::mutex mu_;
  std::unique_ptr<CacheFileReader> reader_;
};

absl::StatusOr<std::unique_ptr<IteratorBase>> CacheDataset::MakeIterator() const {
  if (filename_.empty()) {
    std::shared_ptr<const Elements> m;
    {
      std::lock_guard<std::mutex> l(mu_);
      m = memory_;
    }
    if (m != nullptr) return std::unique_ptr<IteratorBase>(new MemoryReader(this, m));
  } else {
    auto r = CacheFileReader::Open(filename_, *this);
    if (r.ok()) return std::unique_ptr<IteratorBase>(new FileReader(this, *std::move(r)));
    if (!absl::IsNotFound(r.status())) return r.status();
  }
  GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input_->MakeIterator());
  return std::unique_ptr<IteratorBase>(new Writer(this, std::move(in)));
}

// ---------------------------------------------------------------------------
// Prefetch.

class PrefetchDataset : public DatasetBase {
 public:
  PrefetchDataset(DatasetPtr input, size_t buffer_size)
      : DatasetBase(input->output_dtypes(), input->output_shapes()),
        input_(std::move(input)),
        buffer_size_(buffer_size) {}
  std::string name() const override { return "Prefetch"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input_->MakeIterator());
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in)));
  }

 private:
  // What the producer thread and consumers share. The producer owns a
  // reference, so cancellation callbacks never touch a dead iterator.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Element> buffer;
    absl::Status status;     // the producer's error, after the buffered elements
    bool input_end = false;  // the producer is done (end or error)
    bool stop = false;       // the iterator is being destroyed
    std::unique_ptr<IteratorBase> input;
    // Cancelled at stop: wakes an input blocked in a nested prefetch.
    CancellationManager producer_cancel;
  };

  // The producer starts on the first GetNext and stops (joined) when the
  // iterator is destroyed; consumers wait with the step's cancellation.
  class Iterator : public DatasetIterator<PrefetchDataset> {
   public:
    Iterator(const PrefetchDataset* d, std::unique_ptr<IteratorBase> in)
        : DatasetIterator(d), state_(std::make_shared<State>()) {
      state_->input = std::move(in);
    }
    ~Iterator() override {
      {
        std::lock_guard<std::mutex> l(state_->mu);
        state_->stop = true;
      }
      state_->cv.notify_all();
      state_->producer_cancel.StartCancel();
      if (thread_.joinable()) thread_.join();
    }

    absl::Status GetNext(IteratorContext* ctx, Element* out, bool* end) override {
      State& s = *state_;
      std::unique_lock<std::mutex> l(s.mu);
      if (!thread_.joinable()) {
        thread_ = std::thread(&Produce, state_, dataset().buffer_size_);
      }
      CancellationManager* cm = ctx != nullptr ? ctx->cancellation_manager : nullptr;
      auto cancelled = std::make_shared<bool>(false);
      CancellationToken token = 0;
      if (cm != nullptr && s.buffer.empty() && !s.input_end) {
        token = cm->NewToken();
        std::shared_ptr<State> st = state_;
        if (!cm->RegisterCallback(token, [st, cancelled] {
              std::lock_guard<std::mutex> g(st->mu);
              *cancelled = true;
              st->cv.notify_all();
            })) {
          return absl::CancelledError("step cancelled before a prefetched element was ready");
        }
      } else {
        cm = nullptr;
      }
      s.cv.wait(l, [&] { return !s.buffer.empty() || s.input_end || *cancelled; });
      if (cm != nullptr) {
        l.unlock();
        cm->DeregisterCallback(token);
        l.lock();
      }
      if (!s.buffer.empty()) {
        *out = std::move(s.buffer.front());
        s.buffer.pop_front();
        *end = false;
        s.cv.notify_all();  // room for the producer
        return absl::OkStatus();
      }
      if (s.input_end) {
        *end = true;
        return s.status;
      }
      return absl::CancelledError("step cancelled while waiting for a prefetched element");
    }

   private:
    static void Produce(std::shared_ptr<State> st, size_t capacity) {
      IteratorContext ctx;
      ctx.cancellation_manager = &st->producer_cancel;
      while (true) {
        {
          std::unique_lock<std::mutex> l(st->mu);
          st->cv.wait(l, [&] { return st->stop || st->buffer.size() < capacity; });
          if (st->stop) return;
        }
        Element e;
        bool end = false;
        absl::Status s;
        // This thread's own: an exception must not escape it (the step's
        // thread would never hear of it, and the process would end).
        try {
          s = st->input->GetNext(&ctx, &e, &end);
        } catch (const std::bad_alloc&) {
          s = absl::ResourceExhaustedError(
              "prefetch: the input pipeline ran out of memory (std::bad_alloc)");
        } catch (const std::exception& ex) {
          s = absl::InternalError(absl::StrCat("prefetch: the input pipeline threw: ", ex.what()));
        }
        std::lock_guard<std::mutex> l(st->mu);
        if (!s.ok() || end) {
          st->status = st->stop ? absl::OkStatus() : s;
          st->input_end = true;
          st->cv.notify_all();
          return;
        }
        st->buffer.push_back(std::move(e));
        st->cv.notify_all();
      }
    }

    std::shared_ptr<State> state_;
    std::thread thread_;  // started under state_->mu
  };

  DatasetPtr input_;
  size_t buffer_size_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeCacheDataset(DatasetPtr input, std::string filename) {
  return std::make_shared<CacheDataset>(std::move(input), std::move(filename));
}

absl::StatusOr<DatasetPtr> MakePrefetchDataset(DatasetPtr input, int64_t buffer_size) {
  if (buffer_size < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer_size must be >= -1 (-1: autotune), got ", buffer_size));
  }
  if (buffer_size == 0) return input;
  if (buffer_size == -1) buffer_size = kAutotunePrefetch;
  return std::make_shared<PrefetchDataset>(std::move(input), static_cast<size_t>(buffer_size));
}

}  // namespace data
}  // namespace graphrun
