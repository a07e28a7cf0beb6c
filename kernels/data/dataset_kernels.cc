// CPU kernels of the dataset and iterator ops (graph/ops/dataset_ops.cc).
// Dataset kernels translate inputs and attrs into a dataset
// (kernels/data/dataset_internal.h) and check its element signature against the
// node's output_types/output_shapes. Iterators are IteratorResource objects
// in the device's ResourceMgr under (container, shared_name or node name).
#include <sys/stat.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/data/dataset_internal.h"
#include "kernels/data/dataset_io_util.h"
#include "kernels/data/register.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/file_access.h"

namespace graphrun {
namespace data {
namespace {

using array_util::Annotate;

// ---------------------------------------------------------------------------
// Input helpers.

// Input helpers: plain errors, which the kernels annotate with the node.

absl::StatusOr<int64_t> ScalarInt(OpKernelContext* ctx, int i, absl::string_view what) {
  const Tensor& t = ctx->input(i);
  if (t.NumElements() != 1 || (t.dtype() != DT_INT64 && t.dtype() != DT_INT32)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be an int64 scalar, got ",
                                                   DataTypeString(t.dtype()), " ",
                                                   t.shape().DebugString()));
  }
  return t.dtype() == DT_INT64 ? t.scalar<int64_t>() : int64_t{t.scalar<int32_t>()};
}

absl::StatusOr<std::string> ScalarString(OpKernelContext* ctx, int i, absl::string_view what) {
  const Tensor& t = ctx->input(i);
  if (t.dtype() != DT_STRING || t.NumElements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a string scalar"));
  }
  return t.scalar<std::string>();
}

absl::StatusOr<DatasetPtr> DatasetInput(OpKernelContext* ctx, int i) {
  return DatasetFromTensor(ctx->input(i));
}

// ---------------------------------------------------------------------------
// Dataset kernels.

// Base: reads the node's signature; Compute() checks the built dataset
// against it and outputs it.
class DatasetOpKernel : public OpKernel {
 public:
  explicit DatasetOpKernel(OpKernelConstruction* ctx, const char* types_attr = "output_types")
      : OpKernel(ctx) {
    set_expensive(false);
    if (ctx->HasAttr(types_attr)) {
      GR_CTX_CHECK_OK(ctx, GetOutputSignature(ctx->def(), &dtypes_, &shapes_, types_attr));
      has_signature_ = true;
    }
  }
  absl::Status Compute(OpKernelContext* ctx) final {
    auto d = MakeDataset(ctx);
    if (!d.ok()) return Annotate(*this, d.status());
    if (has_signature_) {
      absl::Status s = VerifySignature(dtypes_, shapes_, (*d)->output_dtypes(),
                                       (*d)->output_shapes(), "dataset signature");
      if (!s.ok()) return Annotate(*this, s);
    }
    ctx->set_output(0, DatasetToTensor(*std::move(d)));
    return absl::OkStatus();
  }

 protected:
  virtual absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) = 0;

 private:
  bool has_signature_ = false;
  DataTypeVector dtypes_;
  std::vector<PartialShape> shapes_;
};

std::vector<Tensor> AllInputs(OpKernelContext* ctx) {
  std::vector<Tensor> v;
  for (int i = 0; i < ctx->num_inputs(); ++i) v.push_back(ctx->input(i));
  return v;
}

class TensorDatasetOp : public DatasetOpKernel {
 public:
  explicit TensorDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx, "Toutput_types") {}
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    return MakeTensorDataset(AllInputs(ctx));
  }
};

class TensorSliceDatasetOp : public DatasetOpKernel {
 public:
  explicit TensorSliceDatasetOp(OpKernelConstruction* ctx)
      : DatasetOpKernel(ctx, "Toutput_types") {}
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    return MakeTensorSliceDataset(AllInputs(ctx));
  }
};

// Reads the whole file when it runs; keeps the last file's records so an
// initialiser re-run every epoch does not re-read an unchanged file.
class IdxDatasetOp : public DatasetOpKernel {
 public:
  explicit IdxDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) { set_expensive(true); }
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::string filename, ScalarString(ctx, 0, "filename"));
    GR_RETURN_IF_ERROR(CheckFileAccess(ctx, filename));
    struct stat st;
    if (::stat(filename.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("IDX file '", filename, "' does not exist"));
    }
    const std::string key =
        absl::StrCat(filename, "|", st.st_size, "|", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
    Tensor records;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (key == cached_key_) records = cached_;
    }
    if (!records.IsInitialized()) {
      GR_ASSIGN_OR_RETURN(records, ReadIdxFile(filename));
      std::lock_guard<std::mutex> l(mu_);
      cached_key_ = key;
      cached_ = records;
    }
    return MakeIdxDataset(filename, records);
  }

 private:
  std::mutex mu_;
  std::string cached_key_;
  Tensor cached_;
};

class FixedLengthRecordDatasetOp : public DatasetOpKernel {
 public:
  explicit FixedLengthRecordDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {}
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    FixedLengthRecordOptions o;
    const Tensor& f = ctx->input(0);
    if (f.dtype() != DT_STRING || f.dims() > 1) {
      return absl::InvalidArgumentError("filenames must be a string scalar or vector");
    }
    for (const std::string& s : f.flat<std::string>()) {
      GR_RETURN_IF_ERROR(CheckFileAccess(ctx, s));
      o.filenames.push_back(s);
    }
    GR_ASSIGN_OR_RETURN(o.header_bytes, ScalarInt(ctx, 1, "header_bytes"));
    GR_ASSIGN_OR_RETURN(o.record_bytes, ScalarInt(ctx, 2, "record_bytes"));
    GR_ASSIGN_OR_RETURN(o.footer_bytes, ScalarInt(ctx, 3, "footer_bytes"));
    GR_ASSIGN_OR_RETURN(o.buffer_size, ScalarInt(ctx, 4, "buffer_size"));
    if (ctx->num_inputs() > 5) {
      GR_ASSIGN_OR_RETURN(o.compression_type, ScalarString(ctx, 5, "compression_type"));
    }
    return MakeFixedLengthRecordDataset(std::move(o));
  }
};

class MapTransformDatasetOp : public DatasetOpKernel {
 public:
  explicit MapTransformDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    std::vector<std::string> specs;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("transforms", &specs));
    for (const std::string& s : specs) {
      auto t = ParseTransform(s);
      if (!t.ok()) {
        ctx->SetStatus(ctx->Error(t.status().message()));
        return;
      }
      transforms_.push_back(*std::move(t));
    }
  }
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(DatasetPtr in, DatasetInput(ctx, 0));
    return MakeMapTransformDataset(std::move(in), transforms_);
  }

 private:
  std::vector<Transform> transforms_;
};

class ShuffleDatasetOp : public DatasetOpKernel {
 public:
  explicit ShuffleDatasetOp(OpKernelConstruction* ctx)
      : DatasetOpKernel(ctx), epochs_(std::make_shared<std::atomic<int64_t>>(0)) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("reshuffle_each_iteration", &reshuffle_));
  }
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(DatasetPtr in, DatasetInput(ctx, 0));
    ShuffleOptions o;
    GR_ASSIGN_OR_RETURN(o.buffer_size, ScalarInt(ctx, 1, "buffer_size"));
    GR_ASSIGN_OR_RETURN(o.seed, ScalarInt(ctx, 2, "seed"));
    GR_ASSIGN_OR_RETURN(o.seed2, ScalarInt(ctx, 3, "seed2"));
    o.reshuffle_each_iteration = reshuffle_;
    o.epoch_counter = epochs_;
    return MakeShuffleDataset(std::move(in), std::move(o));
  }

 private:
  bool reshuffle_ = true;
  // Shared by every dataset this node makes: re-running the initialiser
  // each epoch still gives each epoch a new (deterministic) order.
  std::shared_ptr<std::atomic<int64_t>> epochs_;
};

class BatchDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(DatasetPtr in, DatasetInput(ctx, 0));
    GR_ASSIGN_OR_RETURN(int64_t batch, ScalarInt(ctx, 1, "batch_size"));
    bool drop = false;
    if (ctx->num_inputs() > 2) {
      const Tensor& t = ctx->input(2);
      if (t.dtype() != DT_BOOL || t.NumElements() != 1) {
        return absl::InvalidArgumentError("drop_remainder must be a bool scalar");
      }
      drop = t.scalar<bool>();
    }
    return MakeBatchDataset(std::move(in), batch, drop);
  }
};

// Datasets made from the input dataset and one int64 scalar.
template <absl::StatusOr<DatasetPtr> (*Make)(DatasetPtr, int64_t)>
class UnaryIntDatasetOp : public DatasetOpKernel {
 public:
  explicit UnaryIntDatasetOp(OpKernelConstruction* ctx)
      : DatasetOpKernel(ctx), arg_(ctx->op_def().input_arg(1).name()) {}
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(DatasetPtr in, DatasetInput(ctx, 0));
    GR_ASSIGN_OR_RETURN(int64_t n, ScalarInt(ctx, 1, arg_));
    return Make(std::move(in), n);
  }

 private:
  std::string arg_;  // the int input's name, for messages
};

class ShardDatasetOp : public DatasetOpKernel {
 public:
  explicit ShardDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("require_non_empty", &require_non_empty_));
  }
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(DatasetPtr in, DatasetInput(ctx, 0));
    GR_ASSIGN_OR_RETURN(int64_t num_shards, ScalarInt(ctx, 1, "num_shards"));
    GR_ASSIGN_OR_RETURN(int64_t index, ScalarInt(ctx, 2, "index"));
    return MakeShardDataset(std::move(in), num_shards, index, require_non_empty_);
  }

 private:
  bool require_non_empty_ = false;
};

class ZipDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    std::vector<DatasetPtr> inputs;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      GR_ASSIGN_OR_RETURN(DatasetPtr d, DatasetInput(ctx, i));
      inputs.push_back(std::move(d));
    }
    return MakeZipDataset(std::move(inputs));
  }
};

class CacheDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(DatasetPtr in, DatasetInput(ctx, 0));
    GR_ASSIGN_OR_RETURN(std::string filename, ScalarString(ctx, 1, "filename"));
    // "" caches in memory.
    if (!filename.empty()) GR_RETURN_IF_ERROR(CheckFileAccess(ctx, filename));
    return MakeCacheDataset(std::move(in), std::move(filename));
  }
};

// ---------------------------------------------------------------------------
// Iterators.

// The state behind an iterator handle: the current pass over the dataset
// MakeIterator last installed. Thread-safe.
class IteratorResource : public ResourceBase {
 public:
  IteratorResource(DataTypeVector dtypes, std::vector<PartialShape> shapes)
      : dtypes_(std::move(dtypes)), shapes_(std::move(shapes)) {}
  std::string DebugString() const override { return "Iterator"; }
  const DataTypeVector& dtypes() const { return dtypes_; }

  // Starts a new pass over `d`; the previous pass (and its prefetch
  // threads) ends once no GetNext uses it. InvalidArgument when the
  // dataset's elements do not match the iterator's.
  absl::Status Reset(const DatasetPtr& d) {
    GR_RETURN_IF_ERROR(
        VerifySignature(dtypes_, shapes_, d->output_dtypes(), d->output_shapes(), "MakeIterator"));
    GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> it, d->MakeIterator());
    std::shared_ptr<IteratorBase> old;
    {
      std::lock_guard<std::mutex> l(mu_);
      old = std::move(iterator_);
      iterator_ = std::move(it);
    }
    return absl::OkStatus();  // `old` is released here, outside the lock
  }

  // FailedPrecondition when MakeIterator never ran.
  absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) {
    std::shared_ptr<IteratorBase> it;
    {
      std::lock_guard<std::mutex> l(mu_);
      it = iterator_;
    }
    if (it == nullptr) {
      return absl::FailedPreconditionError(
          "GetNext() failed because the iterator has not been initialized. Ensure that "
          "you have run the initializer operation for this iterator before getting the "
          "next element.");
    }
    return it->GetNext(ctx, out, end);
  }

 private:
  const DataTypeVector dtypes_;
  const std::vector<PartialShape> shapes_;
  std::mutex mu_;
  std::shared_ptr<IteratorBase> iterator_;
};

class IteratorHandleOp : public OpKernel {
 public:
  explicit IteratorHandleOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, GetOutputSignature(ctx->def(), &dtypes_, &shapes_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("container", &container_));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("shared_name", &name_));
    if (name_.empty()) name_ = ctx->def().name();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ResourceMgr* rm = ctx->resource_manager();
    auto r = rm->LookupOrCreate<IteratorResource>(
        container_, name_, [this]() -> absl::StatusOr<std::shared_ptr<IteratorResource>> {
          return std::make_shared<IteratorResource>(dtypes_, shapes_);
        });
    if (!r.ok()) return Annotate(*this, r.status());
    if ((*r)->dtypes() != dtypes_) {
      return Error(absl::StrCat("iterator ", name_, " exists with other output_types"));
    }
    ResourceHandle h;
    h.device = ctx->device()->name();
    h.container = container_.empty() ? rm->default_container() : container_;
    h.name = name_;
    h.type_name = "Iterator";
    ctx->set_output(0, Tensor::Scalar<ResourceHandle>(std::move(h)));
    return absl::OkStatus();
  }

 private:
  DataTypeVector dtypes_;
  std::vector<PartialShape> shapes_;
  std::string container_, name_;
};

absl::StatusOr<std::shared_ptr<IteratorResource>> LookupIterator(OpKernelContext* ctx, int i) {
  const Tensor& t = ctx->input(i);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " must be a scalar iterator handle"));
  }
  const ResourceHandle& h = t.scalar<ResourceHandle>();
  auto r = ctx->resource_manager()->Lookup<IteratorResource>(h.container, h.name);
  if (!r.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("iterator ", h.name, " does not exist: ", r.status().message()));
  }
  return *r;
}

class MakeIteratorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    absl::Status s = Reset(ctx);
    return s.ok() ? s : Annotate(*this, s);
  }

 private:
  static absl::Status Reset(OpKernelContext* ctx) {
    GR_ASSIGN_OR_RETURN(DatasetPtr d, DatasetInput(ctx, 0));
    GR_ASSIGN_OR_RETURN(std::shared_ptr<IteratorResource> it, LookupIterator(ctx, 1));
    return it->Reset(d);
  }
};

// Blocks while a prefetch buffer is empty; the wait ends with Cancelled
// when the step is cancelled (deadline, another node's error, Close()).
class IteratorGetNextOp : public OpKernel {
 public:
  explicit IteratorGetNextOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, GetOutputSignature(ctx->def(), &dtypes_, &shapes_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    auto it = LookupIterator(ctx, 0);
    if (!it.ok()) return Annotate(*this, it.status());
    IteratorContext ictx;
    ictx.cancellation_manager = ctx->cancellation_manager();
    std::vector<Tensor> out;
    bool end = false;
    absl::Status s = (*it)->GetNext(&ictx, &out, &end);
    if (!s.ok()) return Annotate(*this, s);
    if (end) return Annotate(*this, absl::OutOfRangeError("End of sequence"));
    if (static_cast<int>(out.size()) != num_outputs()) {
      return Error(
          absl::StrCat("the element has ", out.size(), " components, expected ", num_outputs()));
    }
    for (int i = 0; i < num_outputs(); ++i) {
      if (out[i].dtype() != dtypes_[i] || !shapes_[i].IsCompatibleWith(out[i].shape())) {
        return Error(absl::StrCat("component ", i, " is ", DataTypeString(out[i].dtype()),
                                  out[i].shape().DebugString(), ", expected ",
                                  DataTypeString(dtypes_[i]), shapes_[i].DebugString()));
      }
      ctx->set_output(i, std::move(out[i]));
    }
    return absl::OkStatus();
  }

 private:
  DataTypeVector dtypes_;
  std::vector<PartialShape> shapes_;
};

}  // namespace
}  // namespace data

void RegisterDatasetKernels(KernelRegistry& r) {
  using namespace data;  // NOLINT: kernel classes of this file
  auto add = [&r](const char* op, KernelFactory f) {
    r.Add(KernelDef(op).Device(kDeviceCpu), std::move(f));
  };
  add("TensorDataset", MakeKernel<TensorDatasetOp>());
  add("TensorSliceDataset", MakeKernel<TensorSliceDatasetOp>());
  add("IdxDataset", MakeKernel<IdxDatasetOp>());
  add("FixedLengthRecordDataset", MakeKernel<FixedLengthRecordDatasetOp>());
  add("FixedLengthRecordDatasetV2", MakeKernel<FixedLengthRecordDatasetOp>());
  add("MapTransformDataset", MakeKernel<MapTransformDatasetOp>());
  add("ShuffleDataset", MakeKernel<ShuffleDatasetOp>());
  add("BatchDataset", MakeKernel<BatchDatasetOp>());
  add("BatchDatasetV2", MakeKernel<BatchDatasetOp>());
  add("RepeatDataset", MakeKernel<UnaryIntDatasetOp<MakeRepeatDataset>>());
  add("TakeDataset", MakeKernel<UnaryIntDatasetOp<MakeTakeDataset>>());
  add("SkipDataset", MakeKernel<UnaryIntDatasetOp<MakeSkipDataset>>());
  add("PrefetchDataset", MakeKernel<UnaryIntDatasetOp<MakePrefetchDataset>>());
  add("ShardDataset", MakeKernel<ShardDatasetOp>());
  add("ZipDataset", MakeKernel<ZipDatasetOp>());
  add("CacheDataset", MakeKernel<CacheDatasetOp>());
  add("Iterator", MakeKernel<IteratorHandleOp>());
  add("IteratorV2", MakeKernel<IteratorHandleOp>());
  add("MakeIterator", MakeKernel<MakeIteratorOp>());
  add("IteratorGetNext", MakeKernel<IteratorGetNextOp>());
  add("IteratorGetNextSync", MakeKernel<IteratorGetNextOp>());
}

}  // namespace graphrun
