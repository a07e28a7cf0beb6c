// Source datasets: from tensors, from IDX files, from fixed-length record
// files (raw or gzip, streamed).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/data/dataset_internal.h"

namespace graphrun {
namespace data {
namespace {

std::vector<PartialShape> ShapesOf(const std::vector<Tensor>& ts, bool drop_first) {
  std::vector<PartialShape> s;
  for (const Tensor& t : ts) {
    auto dims = t.shape().dim_sizes();
    if (drop_first) dims.remove_prefix(1);
    s.push_back(PartialShape(dims));
  }
  return s;
}
DataTypeVector DtypesOf(const std::vector<Tensor>& ts) {
  DataTypeVector d;
  for (const Tensor& t : ts) d.push_back(t.dtype());
  return d;
}

// Row `i` of `t` as a tensor of shape t.shape[1:], sharing t's buffer.
Tensor Row(const Tensor& t, int64_t i) {
  TensorShape s(t.shape().dim_sizes().subspan(1));
  return *t.Slice(i, i + 1).Reshaped(s);  // same element count: cannot fail
}

// ---------------------------------------------------------------------------

class TensorDataset : public DatasetBase {
 public:
  explicit TensorDataset(std::vector<Tensor> c)
      : DatasetBase(DtypesOf(c), ShapesOf(c, false)), components_(std::move(c)) {}
  std::string name() const override { return "Tensor"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    return std::unique_ptr<IteratorBase>(new Iterator(this));
  }

 private:
  class Iterator : public DatasetIterator<TensorDataset> {
   public:
    using DatasetIterator::DatasetIterator;
    absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
      std::lock_guard<std::mutex> l(mu_);
      *end = done_;
      if (!done_) *out = dataset().components_;
      done_ = true;
      return absl::OkStatus();
    }

   private:
    std::mutex mu_;
    bool done_ = false;
  };
  std::vector<Tensor> components_;
};

// Elements are rows of dimension 0 of `components_` (shared by SliceDataset
// and IdxDataset, which differ only in name).
class RowsDataset : public DatasetBase {
 public:
  RowsDataset(std::string name, std::vector<Tensor> c)
      : DatasetBase(DtypesOf(c), ShapesOf(c, true)),
        name_(std::move(name)),
        components_(std::move(c)),
        rows_(components_[0].dim_size(0)) {}
  std::string name() const override { return name_; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    return std::unique_ptr<IteratorBase>(new Iterator(this));
  }

 private:
  class Iterator : public DatasetIterator<RowsDataset> {
   public:
    using DatasetIterator::DatasetIterator;
    absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
      int64_t i;
      {
        std::lock_guard<std::mutex> l(mu_);
        i = next_;
        if (next_ < dataset().rows_) ++next_;
      }
      *end = i >= dataset().rows_;
      if (*end) return absl::OkStatus();
      out->clear();
      for (const Tensor& c : dataset().components_) out->push_back(Row(c, i));
      return absl::OkStatus();
    }

   private:
    std::mutex mu_;
    int64_t next_ = 0;
  };
  std::string name_;
  std::vector<Tensor> components_;
  int64_t rows_;
};

// ---------------------------------------------------------------------------
// Fixed-length records.

// A sequential byte source over one file: raw (stdio) or gzip (zlib).
class ByteSource {
 public:
  static absl::StatusOr<std::unique_ptr<ByteSource>> Open(const std::string& filename, bool gzip) {
    auto s = std::unique_ptr<ByteSource>(new ByteSource(filename));
    if (gzip) {
      s->gz_ = gzopen(filename.c_str(), "rb");
      if (s->gz_ == nullptr) {
        return absl::NotFoundError(
            absl::StrCat("cannot open '", filename, "': ", std::strerror(errno)));
      }
    } else {
      s->f_ = std::fopen(filename.c_str(), "rb");
      if (s->f_ == nullptr) {
        return absl::NotFoundError(
            absl::StrCat("cannot open '", filename, "': ", std::strerror(errno)));
      }
    }
    return s;
  }
  ~ByteSource() {
    if (f_ != nullptr) std::fclose(f_);
    if (gz_ != nullptr) gzclose(gz_);
  }
  // Appends up to `n` bytes to `buf`; 0 at end of file.
  absl::StatusOr<size_t> Read(size_t n, std::string* buf) {
    const size_t old = buf->size();
    buf->resize(old + n);
    size_t got;
    if (gz_ != nullptr) {
      int r = gzread(gz_, &(*buf)[old], static_cast<unsigned>(n));
      int errnum = Z_OK;
      const char* msg = gzerror(gz_, &errnum);
      if (r < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
        buf->resize(old);
        return absl::InvalidArgumentError(
            absl::StrCat("gzip file '", filename_, "': ", msg != nullptr ? msg : "read error"));
      }
      got = static_cast<size_t>(r);
    } else {
      got = std::fread(&(*buf)[old], 1, n, f_);
      if (got < n && std::ferror(f_)) {
        buf->resize(old);
        return absl::DataLossError(absl::StrCat("error reading '", filename_, "'"));
      }
    }
    buf->resize(old + got);
    return got;
  }

 private:
  explicit ByteSource(std::string filename) : filename_(std::move(filename)) {}
  std::string filename_;
  FILE* f_ = nullptr;
  gzFile gz_ = nullptr;
};

class FixedLengthRecordDataset : public DatasetBase {
 public:
  explicit FixedLengthRecordDataset(FixedLengthRecordOptions o)
      : DatasetBase({DT_STRING}, {PartialShape({})}), o_(std::move(o)) {}
  std::string name() const override { return "FixedLengthRecord"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    return std::unique_ptr<IteratorBase>(new Iterator(this));
  }

 private:
  class Iterator : public DatasetIterator<FixedLengthRecordDataset> {
   public:
    using DatasetIterator::DatasetIterator;
    absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
      std::lock_guard<std::mutex> l(mu_);
      const FixedLengthRecordOptions& o = dataset().o_;
      const size_t record = static_cast<size_t>(o.record_bytes);
      const size_t footer = static_cast<size_t>(o.footer_bytes);
      while (true) {
        if (source_ == nullptr) {
          if (file_ >= o.filenames.size()) {
            *end = true;
            return absl::OkStatus();
          }
          GR_RETURN_IF_ERROR(OpenFile(o.filenames[file_]));
        }
        // Keep record + footer bytes ahead so the footer is never returned.
        GR_RETURN_IF_ERROR(Fill(record + footer));
        if (buf_.size() - pos_ >= record + footer) {
          out->assign(1, Tensor::Scalar<std::string>(buf_.substr(pos_, record)));
          pos_ += record;
          *end = false;
          return absl::OkStatus();
        }
        const size_t left = buf_.size() - pos_;
        const std::string& name = o.filenames[file_];
        if (left < footer) {
          return absl::InvalidArgumentError(
              absl::StrCat("file '", name, "' is too short for its ", footer, "-byte footer"));
        }
        if (left != footer) {
          return absl::InvalidArgumentError(absl::StrCat(
              "file '", name, "': excluding header (", o.header_bytes, " bytes) and footer (",
              footer, " bytes), the body ends with a partial record of ", left - footer,
              " bytes (record_bytes ", record, ")"));
        }
        source_.reset();
        ++file_;
      }
    }

   private:
    absl::Status OpenFile(const std::string& name) {
      const FixedLengthRecordOptions& o = dataset().o_;
      GR_ASSIGN_OR_RETURN(source_, ByteSource::Open(name, o.compression_type == "GZIP"));
      buf_.clear();
      pos_ = 0;
      eof_ = false;
      const size_t header = static_cast<size_t>(o.header_bytes);
      GR_RETURN_IF_ERROR(Fill(header));
      if (buf_.size() < header) {
        return absl::InvalidArgumentError(
            absl::StrCat("file '", name, "' is too short for its ", header, "-byte header"));
      }
      pos_ = header;
      return absl::OkStatus();
    }
    // Reads until `want` bytes are buffered past pos_ or the file ends.
    absl::Status Fill(size_t want) {
      if (pos_ > 0 && pos_ >= buf_.size() / 2) {
        buf_.erase(0, pos_);
        pos_ = 0;
      }
      const int64_t bs = dataset().o_.buffer_size;
      const size_t chunk = bs > 0 ? static_cast<size_t>(bs) : size_t{256} << 10;
      while (!eof_ && buf_.size() - pos_ < want) {
        const size_t need = want - (buf_.size() - pos_);
        GR_ASSIGN_OR_RETURN(size_t got, source_->Read(std::max(need, chunk), &buf_));
        if (got == 0) eof_ = true;
      }
      return absl::OkStatus();
    }

    std::mutex mu_;
    size_t file_ = 0;
    std::unique_ptr<ByteSource> source_;
    std::string buf_;
    size_t pos_ = 0;
    bool eof_ = false;
  };
  FixedLengthRecordOptions o_;
};

}  // namespace

DatasetPtr MakeTensorDataset(std::vector<Tensor> components) {
  return std::make_shared<TensorDataset>(std::move(components));
}

absl::StatusOr<DatasetPtr> MakeTensorSliceDataset(std::vector<Tensor> components) {
  if (components.empty()) return absl::InvalidArgumentError("no components to slice");
  for (size_t i = 0; i < components.size(); ++i) {
    const Tensor& t = components[i];
    if (t.dims() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("component ", i, " is a scalar; slicing needs rank >= 1"));
    }
    if (t.dim_size(0) != components[0].dim_size(0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("all components must have the same size in dimension 0: component 0 has ",
                       components[0].dim_size(0), ", component ", i, " has ", t.dim_size(0)));
    }
  }
  return std::make_shared<RowsDataset>("TensorSlice", std::move(components));
}

absl::StatusOr<DatasetPtr> MakeIdxDataset(std::string filename, Tensor records) {
  if (records.dims() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("IDX file '", filename, "': records must have rank >= 1"));
  }
  return std::make_shared<RowsDataset>("Idx", std::vector<Tensor>{std::move(records)});
}

absl::StatusOr<DatasetPtr> MakeFixedLengthRecordDataset(FixedLengthRecordOptions o) {
  if (o.record_bytes <= 0 || o.header_bytes < 0 || o.footer_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "record_bytes must be positive and header_bytes, footer_bytes non-negative; got ",
        o.record_bytes, ", ", o.header_bytes, ", ", o.footer_bytes));
  }
  if (o.compression_type != "" && o.compression_type != "GZIP") {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported compression_type '", o.compression_type, "' (\"\" or \"GZIP\")"));
  }
  return std::make_shared<FixedLengthRecordDataset>(std::move(o));
}

}  // namespace data
}  // namespace graphrun
