// Transformation datasets: shuffle, batch, repeat, take, skip, shard, zip.
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "graph/status.h"
#include "kernels/data/dataset_internal.h"
#include "kernels/framework/array_util.h"

namespace graphrun {
namespace data {
namespace {

// Datasets with one input whose elements keep the input's signature.
class UnaryDataset : public DatasetBase {
 public:
  explicit UnaryDataset(DatasetPtr input)
      : DatasetBase(input->output_dtypes(), input->output_shapes()), input_(std::move(input)) {}
  UnaryDataset(DatasetPtr input, std::vector<PartialShape> shapes)
      : DatasetBase(input->output_dtypes(), std::move(shapes)), input_(std::move(input)) {}
  const DatasetPtr& input() const { return input_; }

 private:
  DatasetPtr input_;
};

// ---------------------------------------------------------------------------
// Shuffle.

// SplitMix64 (Steele, Lea, Flood 2014): the same sequence on every machine,
// unlike the std:: engines' distributions.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

uint64_t Mix(uint64_t x) { return SplitMix64(x).Next(); }

class ShuffleDataset : public UnaryDataset {
 public:
  ShuffleDataset(DatasetPtr input, ShuffleOptions o) : UnaryDataset(std::move(input)), o_(o) {
    if (o_.seed == 0 && o_.seed2 == 0) {
      std::random_device rd;
      o_.seed = static_cast<int64_t>((uint64_t{rd()} << 32) | rd());
      o_.seed2 = static_cast<int64_t>((uint64_t{rd()} << 32) | rd());
    }
    if (o_.epoch_counter == nullptr) {
      o_.epoch_counter = std::make_shared<std::atomic<int64_t>>(0);
    }
  }
  std::string name() const override { return "Shuffle"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input()->MakeIterator());
    const uint64_t epoch =
        o_.reshuffle_each_iteration ? static_cast<uint64_t>(o_.epoch_counter->fetch_add(1)) : 0;
    // The generator's seed: a hash of (seed, seed2, epoch).
    const uint64_t seed =
        Mix(static_cast<uint64_t>(o_.seed) ^ Mix(static_cast<uint64_t>(o_.seed2) ^ Mix(epoch)));
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in), seed));
  }

 private:
  // Keeps a buffer of up to buffer_size elements; each GetNext refills it
  // from the input, then returns the element at a uniformly drawn index
  // (Next() % size) and moves the last element into its slot.
  class Iterator : public DatasetIterator<ShuffleDataset> {
   public:
    Iterator(const ShuffleDataset* d, std::unique_ptr<IteratorBase> in, uint64_t seed)
        : DatasetIterator(d), input_(std::move(in)), rng_(seed) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::lock_guard<std::mutex> l(mu_);
      const size_t cap = static_cast<size_t>(dataset().o_.buffer_size);
      while (!input_end_ && buffer_.size() < cap) {
        if (ctx != nullptr && ctx->cancellation_manager != nullptr &&
            buffer_.size() % 1024 == 1023 && ctx->cancellation_manager->IsCancelled()) {
          return absl::CancelledError("shuffle cancelled while filling its buffer");
        }
        std::vector<Tensor> e;
        bool in_end = false;
        GR_RETURN_IF_ERROR(input_->GetNext(ctx, &e, &in_end));
        if (in_end) {
          input_end_ = true;
        } else {
          buffer_.push_back(std::move(e));
        }
      }
      *end = buffer_.empty();
      if (*end) return absl::OkStatus();
      const size_t j = static_cast<size_t>(rng_.Next() % buffer_.size());
      *out = std::move(buffer_[j]);
      if (j + 1 != buffer_.size()) buffer_[j] = std::move(buffer_.back());
      buffer_.pop_back();
      return absl::OkStatus();
    }

   private:
    std::mutex mu_;
    std::unique_ptr<IteratorBase> input_;
    SplitMix64 rng_;
    std::vector<std::vector<Tensor>> buffer_;
    bool input_end_ = false;
  };
  ShuffleOptions o_;
};

// ---------------------------------------------------------------------------
// Batch.

std::vector<PartialShape> BatchedShapes(const DatasetBase& in, int64_t batch_dim) {
  std::vector<PartialShape> shapes;
  for (const PartialShape& s : in.output_shapes()) {
    if (!s.known_rank()) {
      shapes.push_back(PartialShape());
      continue;
    }
    DimVector d{batch_dim};
    d.insert(d.end(), s.dims().begin(), s.dims().end());
    shapes.push_back(PartialShape(absl::MakeConstSpan(d)));
  }
  return shapes;
}

// Stacks component `c` of `elems` along a new dimension 0.
absl::StatusOr<Tensor> Stack(const std::vector<std::vector<Tensor>>& elems, size_t c) {
  const Tensor& first = elems[0][c];
  if (first.dtype() == DT_VARIANT || first.dtype() == DT_RESOURCE) {
    return absl::UnimplementedError(
        absl::StrCat("cannot batch ", DataTypeString(first.dtype()), " components"));
  }
  TensorShape s = first.shape();
  s.InsertDim(0, static_cast<int64_t>(elems.size()));
  GR_ASSIGN_OR_RETURN(
      Tensor out, Tensor::Allocate(first.dtype(), s, absl::StrCat("batch component ", c, ": ")));
  const int64_t n = first.NumElements();
  for (size_t i = 0; i < elems.size(); ++i) {
    const Tensor& t = elems[i][c];
    if (t.shape() != first.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot batch tensors with different shapes in component ", c,
                       ": the first element had shape ", first.shape().DebugString(),
                       " and element ", i, " had shape ", t.shape().DebugString()));
    }
    GR_RETURN_IF_ERROR(array_util::CopyElements(t, 0, out, static_cast<int64_t>(i) * n, n));
  }
  return out;
}

class BatchDataset : public UnaryDataset {
 public:
  BatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder)
      : UnaryDataset(input, BatchedShapes(*input, drop_remainder ? batch_size : -1)),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder) {}
  std::string name() const override { return "Batch"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input()->MakeIterator());
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in)));
  }

 private:
  class Iterator : public DatasetIterator<BatchDataset> {
   public:
    Iterator(const BatchDataset* d, std::unique_ptr<IteratorBase> in)
        : DatasetIterator(d), input_(std::move(in)) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::vector<std::vector<Tensor>> elems;
      {
        std::lock_guard<std::mutex> l(mu_);
        while (!input_end_ && static_cast<int64_t>(elems.size()) < dataset().batch_size_) {
          std::vector<Tensor> e;
          bool in_end = false;
          GR_RETURN_IF_ERROR(input_->GetNext(ctx, &e, &in_end));
          if (in_end) {
            input_end_ = true;
          } else {
            elems.push_back(std::move(e));
          }
        }
      }
      *end = elems.empty() || (dataset().drop_remainder_ &&
                               static_cast<int64_t>(elems.size()) < dataset().batch_size_);
      if (*end) return absl::OkStatus();
      // Copying runs outside the lock so concurrent callers overlap.
      std::vector<Tensor> batch;
      for (size_t c = 0; c < elems[0].size(); ++c) {
        GR_ASSIGN_OR_RETURN(Tensor t, Stack(elems, c));
        batch.push_back(std::move(t));
      }
      *out = std::move(batch);
      return absl::OkStatus();
    }

   private:
    std::mutex mu_;
    std::unique_ptr<IteratorBase> input_;
    bool input_end_ = false;
  };
  int64_t batch_size_;
  bool drop_remainder_;
};

// ---------------------------------------------------------------------------
// Repeat.

class RepeatDataset : public UnaryDataset {
 public:
  RepeatDataset(DatasetPtr input, int64_t count) : UnaryDataset(std::move(input)), count_(count) {}
  std::string name() const override { return "Repeat"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    return std::unique_ptr<IteratorBase>(new Iterator(this));
  }

 private:
  // A new input iterator per pass; a pass that yields nothing ends the
  // repetition (an empty input repeated forever is empty, not a hang).
  class Iterator : public DatasetIterator<RepeatDataset> {
   public:
    using DatasetIterator::DatasetIterator;
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::lock_guard<std::mutex> l(mu_);
      const int64_t count = dataset().count_;
      while (true) {
        if (done_ || (count >= 0 && pass_ >= count)) {
          *end = true;
          return absl::OkStatus();
        }
        if (input_ == nullptr) {
          GR_ASSIGN_OR_RETURN(input_, dataset().input()->MakeIterator());
          produced_in_pass_ = false;
        }
        GR_RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
        if (!*end) {
          produced_in_pass_ = true;
          return absl::OkStatus();
        }
        input_.reset();
        ++pass_;
        if (!produced_in_pass_) done_ = true;
      }
    }

   private:
    std::mutex mu_;
    std::unique_ptr<IteratorBase> input_;
    int64_t pass_ = 0;
    bool produced_in_pass_ = false;
    bool done_ = false;
  };
  int64_t count_;
};

// ---------------------------------------------------------------------------
// Take, Skip, Shard: pass through a subset of the input's elements.

class TakeDataset : public UnaryDataset {
 public:
  TakeDataset(DatasetPtr input, int64_t count) : UnaryDataset(std::move(input)), count_(count) {}
  std::string name() const override { return "Take"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input()->MakeIterator());
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in)));
  }

 private:
  class Iterator : public DatasetIterator<TakeDataset> {
   public:
    Iterator(const TakeDataset* d, std::unique_ptr<IteratorBase> in)
        : DatasetIterator(d), input_(std::move(in)) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::lock_guard<std::mutex> l(mu_);
      if (dataset().count_ >= 0 && taken_ >= dataset().count_) {
        *end = true;
        return absl::OkStatus();
      }
      GR_RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
      if (!*end) ++taken_;
      return absl::OkStatus();
    }

   private:
    std::mutex mu_;
    std::unique_ptr<IteratorBase> input_;
    int64_t taken_ = 0;
  };
  int64_t count_;
};

class SkipDataset : public UnaryDataset {
 public:
  SkipDataset(DatasetPtr input, int64_t count) : UnaryDataset(std::move(input)), count_(count) {}
  std::string name() const override { return "Skip"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input()->MakeIterator());
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in)));
  }

 private:
  class Iterator : public DatasetIterator<SkipDataset> {
   public:
    Iterator(const SkipDataset* d, std::unique_ptr<IteratorBase> in)
        : DatasetIterator(d), input_(std::move(in)) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::lock_guard<std::mutex> l(mu_);
      const int64_t count = dataset().count_;
      while (count < 0 || skipped_ < count) {
        GR_RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
        if (*end) return absl::OkStatus();
        ++skipped_;
      }
      return input_->GetNext(ctx, out, end);
    }

   private:
    std::mutex mu_;
    std::unique_ptr<IteratorBase> input_;
    int64_t skipped_ = 0;
  };
  int64_t count_;
};

class ShardDataset : public UnaryDataset {
 public:
  ShardDataset(DatasetPtr input, int64_t num_shards, int64_t index, bool require_non_empty)
      : UnaryDataset(std::move(input)),
        num_shards_(num_shards),
        index_(index),
        require_non_empty_(require_non_empty) {}
  std::string name() const override { return "Shard"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input()->MakeIterator());
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in)));
  }

 private:
  class Iterator : public DatasetIterator<ShardDataset> {
   public:
    Iterator(const ShardDataset* d, std::unique_ptr<IteratorBase> in)
        : DatasetIterator(d), input_(std::move(in)) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::lock_guard<std::mutex> l(mu_);
      const ShardDataset& d = dataset();
      while (true) {
        GR_RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
        if (*end) {
          if (d.require_non_empty_ && produced_ == 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "shard ", d.index_, " of ", d.num_shards_, " is empty: the input has fewer than ",
                d.index_ + 1, " elements (require_non_empty is set)"));
          }
          return absl::OkStatus();
        }
        if (position_++ % d.num_shards_ == d.index_) {
          ++produced_;
          return absl::OkStatus();
        }
      }
    }

   private:
    std::mutex mu_;
    std::unique_ptr<IteratorBase> input_;
    int64_t position_ = 0;
    int64_t produced_ = 0;
  };
  int64_t num_shards_, index_;
  bool require_non_empty_;
};

// ---------------------------------------------------------------------------
// Zip.

DataTypeVector ConcatDtypes(const std::vector<DatasetPtr>& in) {
  DataTypeVector d;
  for (const DatasetPtr& x : in)
    d.insert(d.end(), x->output_dtypes().begin(), x->output_dtypes().end());
  return d;
}
std::vector<PartialShape> ConcatShapes(const std::vector<DatasetPtr>& in) {
  std::vector<PartialShape> s;
  for (const DatasetPtr& x : in)
    s.insert(s.end(), x->output_shapes().begin(), x->output_shapes().end());
  return s;
}

// Element i is the components of element i of every input, in order; ends
// with the shortest input.
class ZipDataset : public DatasetBase {
 public:
  explicit ZipDataset(std::vector<DatasetPtr> inputs)
      : DatasetBase(ConcatDtypes(inputs), ConcatShapes(inputs)), inputs_(std::move(inputs)) {}
  std::string name() const override { return "Zip"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    std::vector<std::unique_ptr<IteratorBase>> its;
    for (const DatasetPtr& d : inputs_) {
      GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> it, d->MakeIterator());
      its.push_back(std::move(it));
    }
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(its)));
  }

 private:
  class Iterator : public DatasetIterator<ZipDataset> {
   public:
    Iterator(const ZipDataset* d, std::vector<std::unique_ptr<IteratorBase>> its)
        : DatasetIterator(d), inputs_(std::move(its)) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::lock_guard<std::mutex> l(mu_);
      std::vector<Tensor> all;
      *end = ended_;
      for (size_t i = 0; i < inputs_.size() && !*end; ++i) {
        std::vector<Tensor> part;
        GR_RETURN_IF_ERROR(inputs_[i]->GetNext(ctx, &part, end));
        all.insert(all.end(), part.begin(), part.end());
      }
      ended_ = *end;
      if (!*end) *out = std::move(all);
      return absl::OkStatus();
    }

   private:
    std::mutex mu_;
    std::vector<std::unique_ptr<IteratorBase>> inputs_;
    bool ended_ = false;
  };
  std::vector<DatasetPtr> inputs_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeZipDataset(std::vector<DatasetPtr> inputs) {
  if (inputs.empty()) return absl::InvalidArgumentError("Zip needs at least one input");
  return std::make_shared<ZipDataset>(std::move(inputs));
}

absl::StatusOr<DatasetPtr> MakeShuffleDataset(DatasetPtr input, ShuffleOptions options) {
  if (options.buffer_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer_size must be positive, got ", options.buffer_size));
  }
  return std::make_shared<ShuffleDataset>(std::move(input), std::move(options));
}

absl::StatusOr<DatasetPtr> MakeBatchDataset(DatasetPtr input, int64_t batch_size,
                                            bool drop_remainder) {
  if (batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size must be positive, got ", batch_size));
  }
  return std::make_shared<BatchDataset>(std::move(input), batch_size, drop_remainder);
}

absl::StatusOr<DatasetPtr> MakeRepeatDataset(DatasetPtr input, int64_t count) {
  if (count < -1) {
    return absl::InvalidArgumentError(absl::StrCat("count must be >= -1, got ", count));
  }
  return std::make_shared<RepeatDataset>(std::move(input), count);
}

absl::StatusOr<DatasetPtr> MakeTakeDataset(DatasetPtr input, int64_t count) {
  if (count < -1) {
    return absl::InvalidArgumentError(absl::StrCat("count must be >= -1, got ", count));
  }
  return std::make_shared<TakeDataset>(std::move(input), count);
}

absl::StatusOr<DatasetPtr> MakeSkipDataset(DatasetPtr input, int64_t count) {
  if (count < -1) {
    return absl::InvalidArgumentError(absl::StrCat("count must be >= -1, got ", count));
  }
  return std::make_shared<SkipDataset>(std::move(input), count);
}

absl::StatusOr<DatasetPtr> MakeShardDataset(DatasetPtr input, int64_t num_shards, int64_t index,
                                            bool require_non_empty) {
  if (num_shards <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_shards must be positive, got ", num_shards));
  }
  if (index < 0 || index >= num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("index must be in [0, ", num_shards, "), got ", index));
  }
  return std::make_shared<ShardDataset>(std::move(input), num_shards, index, require_non_empty);
}

}  // namespace data
}  // namespace graphrun
