// CPU kernels of TensorFlow's first checkpoint ops (graph/ops/io_ops.cc),
// as a V1 tf.train.Saver builds them: Save and SaveSlices write one V1
// file (checkpoint::WriteTfV1Checkpoint), Restore and RestoreSlice read one
// tensor or slice from the files a pattern names.
//
// A V1 checkpoint's values are all decoded when it is opened, and a V1
// Saver restores each variable with its own op, so the ops of one step
// share the readers, as TensorFlow's per-step reader cache has them: a
// reader lives until its step ends, and serves the ops of that step that
// name the same pattern while its files keep their inode, size and
// modification time.
#include <sys/stat.h>

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/file_access.h"
#include "kernels/io/checkpoint_internal.h"
#include "kernels/io/checkpoint_util.h"
#include "kernels/io/register.h"

namespace graphrun {
namespace {

using array_util::Annotate;
using array_util::GetInput;

// Input `i` as a string of `n` elements (a scalar when n < 0).
absl::StatusOr<const Tensor*> Strings(const OpKernel& k, OpKernelContext* ctx, int i,
                                      absl::string_view what, int64_t n) {
  GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(k, ctx, i));
  const bool ok =
      t->dtype() == DT_STRING && (n < 0 ? t->dims() == 0 : t->dims() == 1 && t->dim_size(0) == n);
  if (!ok) {
    return k.Error(absl::StrCat(what, " must be a string ",
                                n < 0 ? std::string("scalar") : absl::StrCat("vector of ", n),
                                ", got ", DataTypeString(t->dtype()), t->shape().DebugString()));
  }
  return t;
}

// Save(filename, tensor_names, data) and SaveSlices(filename, tensor_names,
// shapes_and_slices, data).
class SaveV1Op : public OpKernel {
 public:
  explicit SaveV1Op(OpKernelConstruction* ctx)
      : OpKernel(ctx), slices_(type_string() == "SaveSlices") {}
  absl::Status Compute(OpKernelContext* ctx) override {
    const int first = slices_ ? 3 : 2;
    const int n = ctx->num_inputs() - first;
    GR_ASSIGN_OR_RETURN(const Tensor* file, Strings(*this, ctx, 0, "filename", -1));
    const std::string& filename = file->scalar<std::string>();
    GR_RETURN_IF_ERROR(Annotate(*this, CheckFileAccess(ctx, filename)));
    GR_ASSIGN_OR_RETURN(const Tensor* names, Strings(*this, ctx, 1, "tensor_names", n));
    const Tensor* specs = nullptr;
    if (slices_) {
      GR_ASSIGN_OR_RETURN(specs, Strings(*this, ctx, 2, "shapes_and_slices", n));
    }
    std::vector<checkpoint::V1SliceToSave> saved(n);
    for (int i = 0; i < n; ++i) {
      checkpoint::V1SliceToSave& s = saved[i];
      s.name = names->base<std::string>()[i];
      GR_ASSIGN_OR_RETURN(const Tensor* value, GetInput(*this, ctx, first + i));
      s.value = *value;
      const std::string spec = specs == nullptr ? "" : specs->base<std::string>()[i];
      if (spec.empty()) {
        s.full_shape = value->shape();
        s.slice = checkpoint::TensorSlice::Full(value->dims());
        continue;
      }
      // "4 10 0,2:-": the full shape, then the slice as written (its "-"
      // dimensions stay whole in the file, as TensorFlow keys them).
      auto parsed = checkpoint::ParseShapeAndSlice(spec);
      absl::StatusOr<checkpoint::TensorSlice> slice =
          parsed.ok() ? checkpoint::TensorSlice::Parse(spec.substr(spec.rfind(' ') + 1))
                      : parsed.status();
      if (!slice.ok()) {
        return Error(absl::StrCat("tensor '", s.name, "': shape_and_slice '", spec,
                                  "': ", slice.status().message()));
      }
      s.full_shape = parsed->full_shape;
      s.slice = *std::move(slice);
    }
    return Annotate(*this, checkpoint::WriteTfV1Checkpoint(filename, saved));
  }

 private:
  const bool slices_;
};

// What identifies the files of an opened checkpoint.
using Signature = std::vector<std::tuple<std::string, ino_t, off_t, int64_t, int64_t>>;

Signature SignatureOf(const std::vector<std::string>& files) {
  Signature sig;
  for (const std::string& f : files) {
    struct stat st;
    if (::stat(f.c_str(), &st) != 0) return {};
    sig.emplace_back(f, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  }
  return sig;
}

// The checkpoints the Restore and RestoreSlice ops of running steps opened.
class ReaderCache {
 public:
  // The checkpoint at `pattern`, whose files are `files` (CheckpointFiles),
  // kept for the step of `ctx` when it has step resources.
  absl::StatusOr<std::shared_ptr<const checkpoint::BundleReader>> Open(
      OpKernelContext* ctx, const std::string& pattern, const std::vector<std::string>& files) {
    StepResources* step = ctx->step_resources();
    const int64_t id = ctx->step_id();
    const Signature sig = SignatureOf(files);
    if (step == nullptr || sig.empty()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++opens_;
      }
      return OpenShared(pattern);
    }
    // One open per checkpoint and step, and no lock held while it reads
    // the files: the step's other Restore ops wait for that open, and
    // other steps (another checkpoint, another session) do not.
    std::promise<Opened> promise;
    std::shared_future<Opened> opened;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<Entry>& entries = steps_[id];
      for (const Entry& e : entries) {
        if (e.pattern == pattern && e.signature == sig) opened = e.reader;
      }
      if (!opened.valid()) {
        if (entries.empty()) step->Add([this, id] { Forget(id); });
        opened = promise.get_future().share();
        entries.push_back({pattern, sig, opened});
        ++opens_;
        mine = true;
      }
    }
    if (mine) promise.set_value(OpenShared(pattern));
    return opened.get();
  }

  // For tests: checkpoints opened so far; steps holding readers now.
  int64_t opens() {
    std::lock_guard<std::mutex> lock(mu_);
    return opens_;
  }
  size_t steps() {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_.size();
  }

 private:
  using Opened = absl::StatusOr<std::shared_ptr<const checkpoint::BundleReader>>;
  struct Entry {
    std::string pattern;
    Signature signature;
    std::shared_future<Opened> reader;  // ready once the first Open read the files
  };
  static Opened OpenShared(const std::string& pattern) {
    GR_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::BundleReader> reader,
                        checkpoint::BundleReader::Open(pattern));
    return std::shared_ptr<const checkpoint::BundleReader>(std::move(reader));
  }
  void Forget(int64_t id) {
    std::vector<Entry> gone;  // freed outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    auto it = steps_.find(id);
    if (it == steps_.end()) return;
    gone.swap(it->second);
    steps_.erase(it);
  }
  std::mutex mu_;
  std::map<int64_t, std::vector<Entry>> steps_;  // guarded by mu_
  int64_t opens_ = 0;                            // guarded by mu_
};

// The files a checkpoint pattern names: P.index when it exists (a V2
// checkpoint is read too), else the V1 files. NotFound when none.
absl::StatusOr<std::vector<std::string>> CheckpointFiles(const std::string& pattern) {
  std::vector<std::string> files = {checkpoint::IndexFilename(pattern)};
  if (!checkpoint::FileExists(files[0])) {
    GR_ASSIGN_OR_RETURN(files, checkpoint::TfV1Files(pattern));
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint file matches '", pattern, "'"));
  }
  return files;
}

ReaderCache& Readers() {
  static ReaderCache* cache = new ReaderCache;
  return *cache;
}

// Restore(file_pattern, tensor_name) and RestoreSlice(file_pattern,
// tensor_name, shape_and_slice). preferred_shard is a hint TensorFlow may
// ignore; every matching file is read.
class RestoreV1Op : public OpKernel {
 public:
  explicit RestoreV1Op(OpKernelConstruction* ctx)
      : OpKernel(ctx), slice_(type_string() == "RestoreSlice") {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dt", &dtype_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* pattern, Strings(*this, ctx, 0, "file_pattern", -1));
    GR_ASSIGN_OR_RETURN(const Tensor* name, Strings(*this, ctx, 1, "tensor_name", -1));
    std::string spec;
    if (slice_) {
      GR_ASSIGN_OR_RETURN(const Tensor* s, Strings(*this, ctx, 2, "shape_and_slice", -1));
      spec = s->scalar<std::string>();
    }
    const std::string& p = pattern->scalar<std::string>();
    GR_RETURN_IF_ERROR(Annotate(*this, CheckFileAccess(ctx, p)));
    auto files = CheckpointFiles(p);
    if (!files.ok()) return Annotate(*this, files.status());
    for (const std::string& f : *files) {
      GR_RETURN_IF_ERROR(Annotate(*this, CheckFileAccess(ctx, f)));
    }
    auto reader = Readers().Open(ctx, p, *files);
    if (!reader.ok()) return Annotate(*this, reader.status());
    auto t = (*reader)->Restore(name->scalar<std::string>(), dtype_, spec);
    if (!t.ok()) return Annotate(*this, t.status());
    ctx->set_output(0, *std::move(t));
    return absl::OkStatus();
  }

 private:
  const bool slice_;
  DataType dtype_ = DT_INVALID;
};

}  // namespace

int64_t V1CheckpointOpensForTesting() { return Readers().opens(); }
size_t V1CheckpointStepsForTesting() { return Readers().steps(); }

void RegisterCheckpointV1Kernels(KernelRegistry& r) {
  r.Add(KernelDef("Save"), MakeKernel<SaveV1Op>());
  r.Add(KernelDef("SaveSlices"), MakeKernel<SaveV1Op>());
  r.Add(KernelDef("Restore"), MakeKernel<RestoreV1Op>());
  r.Add(KernelDef("RestoreSlice"), MakeKernel<RestoreV1Op>());
}

}  // namespace graphrun
