// CPU kernels of the checkpoint ops (graph/ops/io_ops.cc) over the bundle
// format of kernels/io/checkpoint_util.h. SaveV2 writes one shard on the device
// that runs it (so a PS saves its own variables), MergeV2Checkpoints builds
// the single index, RestoreV2 assembles slices from any number of shards.
// The kernels hold no state between steps: every run opens the files anew.
// Also the string ops the savers use: StringJoin, and the regex full
// matches TensorFlow 2's savers run on the prefix.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/framework/array_util.h"
#include "kernels/framework/file_access.h"
#include "kernels/io/checkpoint_util.h"
#include "kernels/io/register.h"
#include "re2/re2.h"

namespace graphrun {
namespace {

using array_util::Annotate;
using array_util::GetInput;

// Input `i` as a scalar string.
absl::StatusOr<std::string> ScalarString(const OpKernel& k, OpKernelContext* ctx, int i,
                                         absl::string_view what) {
  GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(k, ctx, i));
  if (t->dtype() != DT_STRING || t->dims() != 0) {
    return k.Error(absl::StrCat(what, " must be a scalar string, got ", t->DebugString()));
  }
  return t->scalar<std::string>();
}

// Input `i` as a scalar int32.
absl::StatusOr<int32_t> ScalarInt(const OpKernel& k, OpKernelContext* ctx, int i,
                                  absl::string_view what) {
  GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(k, ctx, i));
  if (t->dtype() != DT_INT32 || t->dims() != 0) {
    return k.Error(absl::StrCat(what, " must be a scalar int32, got ", t->DebugString()));
  }
  return t->scalar<int32_t>();
}

// Inputs 1 and 2 of SaveV2/RestoreV2: tensor_names and shape_and_slices,
// string vectors of `n` elements.
absl::Status NamesAndSlices(const OpKernel& k, OpKernelContext* ctx, int64_t n,
                            absl::Span<const std::string>* names,
                            absl::Span<const std::string>* slices) {
  const char* what[] = {"tensor_names", "shape_and_slices"};
  for (int i : {1, 2}) {
    GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(k, ctx, i));
    if (t->dtype() != DT_STRING || t->dims() != 1 || t->dim_size(0) != n) {
      return k.Error(absl::StrCat(what[i - 1], " must be a string vector of ", n,
                                  " elements, got shape ", t->shape().DebugString()));
    }
    (i == 1 ? *names : *slices) = t->flat<std::string>();
  }
  return absl::OkStatus();
}

class SaveV2Op : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::string prefix, ScalarString(*this, ctx, 0, "prefix"));
    GR_RETURN_IF_ERROR(Annotate(*this, CheckFileAccess(ctx, prefix)));
    const int n = ctx->num_inputs() - 3;
    absl::Span<const std::string> names, slices;
    GR_RETURN_IF_ERROR(NamesAndSlices(*this, ctx, n, &names, &slices));
    auto writer = checkpoint::BundleWriter::Create(prefix);
    if (!writer.ok()) return Annotate(*this, writer.status());
    for (int i = 0; i < n; ++i) {
      GR_ASSIGN_OR_RETURN(const Tensor* value, GetInput(*this, ctx, 3 + i));
      absl::Status s;
      if (slices[i].empty()) {
        s = (*writer)->Add(names[i], *value);
      } else {
        auto spec = checkpoint::ParseShapeAndSlice(slices[i]);
        s = spec.ok() ? (*writer)->AddSlice(names[i], spec->full_shape, spec->slice, *value)
                      : AnnotateStatus(spec.status(), absl::StrCat("tensor '", names[i], "': "));
      }
      if (!s.ok()) return Annotate(*this, s);
    }
    return Annotate(*this, (*writer)->Finish());
  }
};

class RestoreV2Op : public OpKernel {
 public:
  explicit RestoreV2Op(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("dtypes", &dtypes_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::string prefix, ScalarString(*this, ctx, 0, "prefix"));
    GR_RETURN_IF_ERROR(Annotate(*this, CheckFileAccess(ctx, prefix)));
    const int n = static_cast<int>(dtypes_.size());
    absl::Span<const std::string> names, slices;
    GR_RETURN_IF_ERROR(NamesAndSlices(*this, ctx, n, &names, &slices));
    auto reader = checkpoint::BundleReader::Open(prefix);
    if (!reader.ok()) return Annotate(*this, reader.status());
    for (int i = 0; i < n; ++i) {
      auto t = (*reader)->Restore(names[i], dtypes_[i], slices[i]);
      if (!t.ok()) return Annotate(*this, t.status());
      ctx->set_output(i, std::move(*t));
    }
    return absl::OkStatus();
  }

 private:
  DataTypeVector dtypes_;
};

class MergeV2CheckpointsOp : public OpKernel {
 public:
  explicit MergeV2CheckpointsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("delete_old_dirs", &options_.delete_old_dirs));
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("allow_missing_files", &options_.allow_missing_files));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* sources, GetInput(*this, ctx, 0));
    if (sources->dtype() != DT_STRING || sources->dims() > 1) {
      return Error(absl::StrCat("checkpoint_prefixes must be a string vector, got shape ",
                                sources->shape().DebugString()));
    }
    GR_ASSIGN_OR_RETURN(std::string dest, ScalarString(*this, ctx, 1, "destination_prefix"));
    absl::Span<const std::string> s = sources->flat<std::string>();
    GR_RETURN_IF_ERROR(Annotate(*this, CheckFileAccess(ctx, dest)));
    for (const std::string& source : s) {
      GR_RETURN_IF_ERROR(Annotate(*this, CheckFileAccess(ctx, source)));
    }
    return Annotate(*this, checkpoint::MergeBundles(std::vector<std::string>(s.begin(), s.end()),
                                                    dest, options_));
  }

 private:
  checkpoint::MergeOptions options_;
};

class ShardedFilenameOp : public OpKernel {
 public:
  explicit ShardedFilenameOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::string base, ScalarString(*this, ctx, 0, "basename"));
    GR_ASSIGN_OR_RETURN(int32_t shard, ScalarInt(*this, ctx, 1, "shard"));
    GR_ASSIGN_OR_RETURN(int32_t num, ScalarInt(*this, ctx, 2, "num_shards"));
    if (num < 1 || shard < 0 || shard >= num) {
      return Error(absl::StrCat("shard ", shard, " of ", num, " shards"));
    }
    ctx->set_output(0, Tensor::Scalar<std::string>(checkpoint::ShardedFilename(base, shard, num)));
    return absl::OkStatus();
  }
};

class ShardedFilespecOp : public OpKernel {
 public:
  explicit ShardedFilespecOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(std::string base, ScalarString(*this, ctx, 0, "basename"));
    GR_ASSIGN_OR_RETURN(int32_t num, ScalarInt(*this, ctx, 1, "num_shards"));
    if (num < 1) return Error(absl::StrCat("num_shards ", num));
    ctx->set_output(0, Tensor::Scalar<std::string>(checkpoint::ShardedFilespec(base, num)));
    return absl::OkStatus();
  }
};

class StringJoinOp : public OpKernel {
 public:
  explicit StringJoinOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("separator", &separator_));
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    std::vector<const Tensor*> in;
    TensorShape shape;  // scalar unless some input is not
    bool have_shape = false;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      GR_ASSIGN_OR_RETURN(const Tensor* t, GetInput(*this, ctx, i));
      if (t->dtype() != DT_STRING) return Error(absl::StrCat("input ", i, " is not a string"));
      in.push_back(t);
      if (t->dims() == 0) continue;
      if (have_shape && t->shape() != shape) {
        return Error(absl::StrCat("inputs must be scalars or of one shape: ", shape.DebugString(),
                                  " vs ", t->shape().DebugString()));
      }
      shape = t->shape();
      have_shape = true;
    }
    GR_ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    // The joined sizes first: a long scalar joined to every element of a
    // vector is charged to the memory budget before it is copied.
    const int64_t n = out->NumElements();
    std::vector<int64_t> sizes(static_cast<size_t>(n), 0);
    int64_t total = 0;
    for (int64_t j = 0; j < n; ++j) {
      int64_t size = static_cast<int64_t>(separator_.size()) *
                     (in.empty() ? 0 : static_cast<int64_t>(in.size()) - 1);
      for (const Tensor* t : in) {
        size += static_cast<int64_t>(t->base<std::string>()[t->dims() == 0 ? 0 : j].size());
      }
      sizes[j] = size;
      const int64_t heap = StringHeapBytes(size);
      total = total > INT64_MAX - heap ? INT64_MAX : total + heap;
    }
    GR_RETURN_IF_ERROR(out->buffer()->ChargeContents(
        total, absl::StrCat("the joined strings (", shape.DebugString(), ")")));
    std::string* o = out->base<std::string>();
    for (int64_t j = 0; j < n; ++j) {
      o[j].reserve(static_cast<size_t>(sizes[j]));
      for (size_t i = 0; i < in.size(); ++i) {
        if (i > 0) o[j] += separator_;
        o[j] += in[i]->base<std::string>()[in[i]->dims() == 0 ? 0 : j];
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string separator_;
};

// StaticRegexFullMatch (the pattern an attr, compiled once) and
// RegexFullMatch (a scalar pattern input): RE2 full matches, element-wise.
class RegexFullMatchOp : public OpKernel {
 public:
  explicit RegexFullMatchOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    set_expensive(false);
    if (!ctx->HasAttr("pattern")) return;
    std::string pattern;
    GR_CTX_CHECK_OK(ctx, ctx->GetAttr("pattern", &pattern));
    auto re = Compile(pattern);
    GR_CTX_CHECK_OK(ctx, re.status());
    static_re_ = *std::move(re);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    GR_ASSIGN_OR_RETURN(const Tensor* in, GetInput(*this, ctx, 0));
    std::unique_ptr<RE2> dynamic;
    const RE2* re = static_re_.get();
    if (re == nullptr) {
      GR_ASSIGN_OR_RETURN(const Tensor* p, GetInput(*this, ctx, 1));
      if (p->dims() != 0 || p->dtype() != DT_STRING) {
        return Error(
            absl::StrCat("pattern must be a string scalar, got ", p->shape().DebugString()));
      }
      GR_ASSIGN_OR_RETURN(dynamic, Compile(p->scalar<std::string>()));
      re = dynamic.get();
    }
    Tensor out(DT_BOOL, in->shape());
    const std::string* s = in->base<std::string>();
    bool* o = out.base<bool>();
    for (int64_t i = 0; i < in->NumElements(); ++i) o[i] = RE2::FullMatch(s[i], *re);
    ctx->set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<std::unique_ptr<RE2>> Compile(const std::string& pattern) const {
    auto re = std::make_unique<RE2>(pattern, RE2::Quiet);
    if (!re->ok()) {
      return Error(absl::StrCat("invalid pattern '", pattern, "': ", re->error()));
    }
    return re;
  }
  std::unique_ptr<RE2> static_re_;
};

// DisableCopyOnRead: graphrun's variable reads share buffers already.
class DisableCopyOnReadOp : public OpKernel {
 public:
  explicit DisableCopyOnReadOp(OpKernelConstruction* ctx) : OpKernel(ctx) { set_expensive(false); }
  absl::Status Compute(OpKernelContext* ctx) override { return absl::OkStatus(); }
};

}  // namespace

void RegisterCheckpointKernels(KernelRegistry& r) {
  r.Add(KernelDef("SaveV2"), MakeKernel<SaveV2Op>());
  r.Add(KernelDef("RestoreV2"), MakeKernel<RestoreV2Op>());
  r.Add(KernelDef("MergeV2Checkpoints"), MakeKernel<MergeV2CheckpointsOp>());
  r.Add(KernelDef("ShardedFilename"), MakeKernel<ShardedFilenameOp>());
  r.Add(KernelDef("ShardedFilespec"), MakeKernel<ShardedFilespecOp>());
  r.Add(KernelDef("StringJoin"), MakeKernel<StringJoinOp>());
  r.Add(KernelDef("StaticRegexFullMatch"), MakeKernel<RegexFullMatchOp>());
  r.Add(KernelDef("RegexFullMatch"), MakeKernel<RegexFullMatchOp>());
  r.Add(KernelDef("DisableCopyOnRead"), MakeKernel<DisableCopyOnReadOp>());
}

}  // namespace graphrun
