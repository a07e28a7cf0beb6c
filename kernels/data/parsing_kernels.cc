// ParseExample and ParseExampleV2 (graph/ops/parsing_ops.cc): serialized
// tf.Example protos (graph/proto/example.proto) to dense and sparse
// tensors, as TensorFlow's example parser does:
// - dense key j: a [B] + dense_shapes[j] tensor; an example without the
//   feature takes dense_defaults[j] (one value broadcast, or the whole
//   shape), or is an error when the default is empty (required); a shape
//   whose first dimension is unknown ([-1] + rest, a variable-length
//   feature, tf.io.FixedLenSequenceFeature) gives [B, longest] + rest,
//   each example's rows padded with the default (zeros or "" without one);
// - sparse key i: indices [N, 2] (example, position), values [N], shape
//   [B, longest list];
// - ragged key k (V2): values [N] of every example's list in turn, and row
//   splits [B + 1] (int32 or int64, ragged_split_types[k]) where example b's
//   values are [splits[b], splits[b + 1]);
// a scalar `serialized` (V2) drops the batch dimension (a ragged key's
// values are then the one example's list, and its row splits are empty,
// as tf.io.parse_single_example builds no RaggedTensor there). A feature
// of the wrong type or count and an unparsable proto are InvalidArgument
// naming the example and the key.
#include <algorithm>
#include <climits>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/proto/example.pb.h"
#include "graph/status.h"
#include "kernels/data/register.h"
#include "kernels/framework/array_util.h"

namespace graphrun {
namespace {

const char* TypeName(DataType t) {
  return t == DT_FLOAT ? "float" : t == DT_INT64 ? "int64" : "string";
}

// The number of values of `f`, and its dtype (DT_INVALID when empty kind).
std::pair<int64_t, DataType> Describe(const tensorflow::Feature& f) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kFloatList:
      return {f.float_list().value_size(), DT_FLOAT};
    case tensorflow::Feature::kInt64List:
      return {f.int64_list().value_size(), DT_INT64};
    case tensorflow::Feature::kBytesList:
      return {f.bytes_list().value_size(), DT_STRING};
    default:
      return {0, DT_INVALID};
  }
}

// Copies the values of `f` (of dtype `t`) to elements [at, at + n) of `out`
// (strings' contents charged to the memory budget first).
absl::Status CopyValues(const tensorflow::Feature& f, DataType t, Tensor* out, int64_t at) {
  switch (t) {
    case DT_FLOAT:
      for (int i = 0; i < f.float_list().value_size(); ++i) {
        out->base<float>()[at + i] = f.float_list().value(i);
      }
      break;
    case DT_INT64:
      for (int i = 0; i < f.int64_list().value_size(); ++i) {
        out->base<int64_t>()[at + i] = f.int64_list().value(i);
      }
      break;
    default: {
      const auto& v = f.bytes_list().value();
      int64_t delta = 0;
      for (int i = 0; i < v.size(); ++i) {
        delta += StringHeapBytes(static_cast<int64_t>(v.Get(i).size())) -
                 StringContentsBytes(out->base<std::string>() + at + i, 1);
      }
      GR_RETURN_IF_ERROR(out->buffer()->ChargeContents(
          delta,
          absl::StrCat("the string values parsed into a ", out->shape().DebugString(), " tensor")));
      for (int i = 0; i < v.size(); ++i) out->base<std::string>()[at + i] = v.Get(i);
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status CopyDefault(const Tensor& def, int64_t n, Tensor* out, int64_t at) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = def.NumElements() == 1 ? 0 : i;
    switch (def.dtype()) {
      case DT_FLOAT:
        out->base<float>()[at + i] = def.base<float>()[src];
        break;
      case DT_INT64:
        out->base<int64_t>()[at + i] = def.base<int64_t>()[src];
        break;
      default:  // strings: their contents charged to the memory budget
        GR_RETURN_IF_ERROR(array_util::CopyElements(def, src, *out, at + i, 1));
        break;
    }
  }
  return absl::OkStatus();
}

class ParseExampleOp : public OpKernel {
 public:
  ParseExampleOp(OpKernelConstruction* c, bool v2) : OpKernel(c), v2_(v2) {
    GR_CTX_CHECK_OK(c, c->GetAttr("sparse_types", &sparse_types_));
    GR_CTX_CHECK_OK(c, c->GetAttr("Tdense", &dense_types_));
    const tensorflow::AttrValue* shapes = nullptr;
    GR_CTX_CHECK_OK(c, c->GetAttr("dense_shapes", &shapes));
    for (const auto& p : shapes->list().shape())
      dense_shapes_.push_back(PartialShape::FromProto(p));
    if (v2) {
      GR_CTX_CHECK_OK(c, c->GetAttr("ragged_value_types", &ragged_types_));
      GR_CTX_CHECK_OK(c, c->GetAttr("ragged_split_types", &ragged_split_types_));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const size_t ns = sparse_types_.size(), nd = dense_types_.size();
    if (dense_shapes_.size() != nd) return Error("dense_shapes and Tdense differ in length");
    const size_t nr = ragged_types_.size();
    if (ragged_split_types_.size() != nr) {
      return Error("ragged_value_types and ragged_split_types differ in length");
    }
    // Inputs: serialized, names, then keys (V1: one scalar per key; V2:
    // one vector per kind), then the dense defaults.
    const Tensor& serialized = ctx->input(0);
    if (serialized.dtype() != DT_STRING || serialized.dims() > 1 ||
        (!v2_ && serialized.dims() != 1)) {
      return Error(absl::StrCat("serialized must be a vector of strings, got ",
                                serialized.shape().DebugString()));
    }
    const bool scalar = serialized.dims() == 0;
    const int64_t batch = scalar ? 1 : serialized.dim_size(0);
    std::vector<std::string> sparse_keys, dense_keys, ragged_keys;
    int next = 2;
    if (v2_) {
      for (std::vector<std::string>* keys : {&sparse_keys, &dense_keys, &ragged_keys}) {
        const Tensor& k = ctx->input(next++);
        if (k.dtype() != DT_STRING) return Error("keys must be strings");
        for (const std::string& s : k.flat<std::string>()) keys->push_back(s);
      }
      if (ragged_keys.size() != nr) {
        return Error(absl::StrCat("got ", ragged_keys.size(), " ragged keys for ", nr,
                                  " ragged_value_types"));
      }
    } else {
      for (size_t i = 0; i < ns; ++i)
        sparse_keys.push_back(ctx->input(next++).flat<std::string>()[0]);
      for (size_t j = 0; j < nd; ++j)
        dense_keys.push_back(ctx->input(next++).flat<std::string>()[0]);
    }
    if (sparse_keys.size() != ns || dense_keys.size() != nd) {
      return Error(absl::StrCat("got ", sparse_keys.size(), " sparse and ", dense_keys.size(),
                                " dense keys for ", ns, " sparse and ", nd, " dense types"));
    }
    std::vector<const Tensor*> defaults(nd);
    for (size_t j = 0; j < nd; ++j) defaults[j] = &ctx->input(next++);

    std::vector<tensorflow::Example> examples(batch);
    for (int64_t b = 0; b < batch; ++b) {
      const std::string& bytes = serialized.flat<std::string>()[b];
      if (!examples[b].ParseFromString(bytes)) {
        return Error(absl::StrCat("example ", b, ": could not parse a tf.Example"));
      }
    }
    std::function<const tensorflow::Feature*(int64_t, const std::string&)> find =
        [&](int64_t b, const std::string& key) -> const tensorflow::Feature* {
      const auto& m = examples[b].features().feature();
      auto it = m.find(key);
      return it == m.end() ? nullptr : &it->second;
    };
    auto wrong = [&](int64_t b, const std::string& key, absl::string_view why) {
      return Error(absl::StrCat("example ", b, ", key '", key, "': ", why));
    };

    // Sparse features.
    std::vector<Tensor> indices(ns), values(ns), shapes(ns);
    for (size_t i = 0; i < ns; ++i) {
      int64_t total = 0, longest = 0;
      for (int64_t b = 0; b < batch; ++b) {
        const tensorflow::Feature* f = find(b, sparse_keys[i]);
        if (f == nullptr) continue;
        auto [n, t] = Describe(*f);
        if (n > 0 && t != sparse_types_[i]) {
          return wrong(b, sparse_keys[i],
                       absl::StrCat("data type ", TypeName(t), " but expected ",
                                    TypeName(sparse_types_[i])));
        }
        total += n;
        longest = std::max(longest, n);
      }
      const int64_t rank = scalar ? 1 : 2;
      indices[i] = Tensor(DT_INT64, TensorShape({total, rank}));
      values[i] = Tensor(sparse_types_[i], TensorShape({total}));
      shapes[i] = scalar ? Tensor::FromVector<int64_t>({longest})
                         : Tensor::FromVector<int64_t>({batch, longest});
      int64_t at = 0;
      for (int64_t b = 0; b < batch; ++b) {
        const tensorflow::Feature* f = find(b, sparse_keys[i]);
        if (f == nullptr) continue;
        const int64_t n = Describe(*f).first;
        if (n == 0) continue;
        GR_RETURN_IF_ERROR(CopyValues(*f, sparse_types_[i], &values[i], at));
        for (int64_t k = 0; k < n; ++k) {
          int64_t* row = indices[i].base<int64_t>() + (at + k) * rank;
          if (!scalar) *row++ = b;
          *row = k;
        }
        at += n;
      }
    }

    // Dense features.
    std::vector<Tensor> dense(nd);
    for (size_t j = 0; j < nd; ++j) {
      if (!dense_shapes_[j].fully_defined()) {
        GR_ASSIGN_OR_RETURN(dense[j], VarLenDense(dense_keys[j], dense_types_[j], dense_shapes_[j],
                                                  *defaults[j], batch, scalar, find));
        continue;
      }
      const TensorShape row = dense_shapes_[j].ToTensorShape();
      const int64_t per = row.num_elements();
      const Tensor& def = *defaults[j];
      if (def.dtype() != dense_types_[j]) {
        return Error(absl::StrCat("dense key '", dense_keys[j], "': default of type ",
                                  DataTypeString(def.dtype()), " for ", TypeName(dense_types_[j])));
      }
      if (def.NumElements() != 0 && def.NumElements() != 1 && def.NumElements() != per) {
        return Error(absl::StrCat("dense key '", dense_keys[j], "': default has ",
                                  def.NumElements(), " values for shape ", row.DebugString()));
      }
      TensorShape shape = row;
      if (!scalar) shape.InsertDim(0, batch);
      dense[j] = Tensor(dense_types_[j], shape);
      for (int64_t b = 0; b < batch; ++b) {
        const tensorflow::Feature* f = find(b, dense_keys[j]);
        auto [n, t] = f == nullptr ? std::pair<int64_t, DataType>{0, DT_INVALID} : Describe(*f);
        if (f == nullptr || (n == 0 && t == DT_INVALID)) {
          if (def.NumElements() == 0) {
            return wrong(
                b, dense_keys[j],
                absl::StrCat("required (data type ", TypeName(dense_types_[j]), ") but not found"));
          }
          GR_RETURN_IF_ERROR(CopyDefault(def, per, &dense[j], b * per));
          continue;
        }
        if (t != dense_types_[j]) {
          return wrong(
              b, dense_keys[j],
              absl::StrCat("data type ", TypeName(t), " but expected ", TypeName(dense_types_[j])));
        }
        if (n != per) {
          return wrong(
              b, dense_keys[j],
              absl::StrCat(n, " values but the shape ", row.DebugString(), " needs ", per));
        }
        GR_RETURN_IF_ERROR(CopyValues(*f, t, &dense[j], b * per));
      }
    }

    // Ragged features.
    std::vector<Tensor> ragged_values(nr), ragged_splits(nr);
    for (size_t k = 0; k < nr; ++k) {
      std::vector<int64_t> splits = {0};
      for (int64_t b = 0; b < batch; ++b) {
        const tensorflow::Feature* f = find(b, ragged_keys[k]);
        int64_t n = 0;
        if (f != nullptr) {
          DataType t;
          std::tie(n, t) = Describe(*f);
          if (n > 0 && t != ragged_types_[k]) {
            return wrong(b, ragged_keys[k],
                         absl::StrCat("data type ", TypeName(t), " but expected ",
                                      TypeName(ragged_types_[k])));
          }
        }
        splits.push_back(splits.back() + n);
      }
      if (ragged_split_types_[k] == DT_INT32 && splits.back() > INT32_MAX) {
        return Error(absl::StrCat("ragged key '", ragged_keys[k], "': ", splits.back(),
                                  " values do not fit int32 row splits"));
      }
      ragged_values[k] = Tensor(ragged_types_[k], TensorShape({splits.back()}));
      for (int64_t b = 0; b < batch; ++b) {
        if (splits[b + 1] == splits[b]) continue;
        GR_RETURN_IF_ERROR(
            CopyValues(*find(b, ragged_keys[k]), ragged_types_[k], &ragged_values[k], splits[b]));
      }
      const int64_t num_splits = scalar ? 0 : batch + 1;
      ragged_splits[k] = Tensor(ragged_split_types_[k], TensorShape({num_splits}));
      for (int64_t i = 0; i < num_splits; ++i) {
        if (ragged_split_types_[k] == DT_INT32) {
          ragged_splits[k].base<int32_t>()[i] = static_cast<int32_t>(splits[i]);
        } else {
          ragged_splits[k].base<int64_t>()[i] = splits[i];
        }
      }
    }

    int out = 0;
    for (auto& t : indices) ctx->set_output(out++, std::move(t));
    for (auto& t : values) ctx->set_output(out++, std::move(t));
    for (auto& t : shapes) ctx->set_output(out++, std::move(t));
    for (auto& t : dense) ctx->set_output(out++, std::move(t));
    for (auto& t : ragged_values) ctx->set_output(out++, std::move(t));
    for (auto& t : ragged_splits) ctx->set_output(out++, std::move(t));
    return absl::OkStatus();
  }

 private:
  // A variable-length dense key (tf.io.FixedLenSequenceFeature): its shape
  // [-1] + rest, each example's values as rows of `rest`, the batch padded
  // to the longest with the default (one value; none: zeros or "").
  absl::StatusOr<Tensor> VarLenDense(
      const std::string& key, DataType dtype, const PartialShape& shape, const Tensor& def,
      int64_t batch, bool scalar,
      const std::function<const tensorflow::Feature*(int64_t, const std::string&)>& find) const {
    bool varlen = shape.known_rank() && shape.rank() >= 1 && shape.dim(0) < 0;
    TensorShape rest;
    for (int d = 1; varlen && d < shape.rank(); ++d) {
      if (shape.dim(d) < 0) varlen = false;
      if (varlen) rest.AddDim(shape.dim(d));
    }
    if (!varlen) {
      return Error(absl::StrCat("dense key '", key, "': shape ", shape.DebugString(),
                                " is not fully defined (only the first dimension may be unknown, "
                                "for a variable-length feature)"));
    }
    if (def.dtype() != dtype) {
      return Error(absl::StrCat("dense key '", key, "': default of type ",
                                DataTypeString(def.dtype()), " for ", TypeName(dtype)));
    }
    if (def.NumElements() > 1) {
      return Error(absl::StrCat("dense key '", key, "': a variable-length feature's default is ",
                                "one padding value, got ", def.NumElements()));
    }
    const int64_t stride = rest.num_elements();
    std::vector<int64_t> rows(static_cast<size_t>(batch), 0);
    int64_t longest = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const tensorflow::Feature* f = find(b, key);
      if (f == nullptr) continue;
      auto [n, t] = Describe(*f);
      if (n == 0) continue;
      auto wrong = [&](absl::string_view why) {
        return Error(absl::StrCat("example ", b, ", key '", key, "': ", why));
      };
      if (t != dtype) {
        return wrong(absl::StrCat("data type ", TypeName(t), " but expected ", TypeName(dtype)));
      }
      if (stride == 0 || n % stride != 0) {
        return wrong(absl::StrCat(n, " values are not rows of ", rest.DebugString(), " (the shape ",
                                  shape.DebugString(), ")"));
      }
      rows[b] = n / stride;
      longest = std::max(longest, rows[b]);
    }
    TensorShape out_shape = rest;
    out_shape.InsertDim(0, longest);
    if (!scalar) out_shape.InsertDim(0, batch);
    GR_ASSIGN_OR_RETURN(Tensor out,
                        Tensor::Allocate(dtype, out_shape,
                                         absl::StrCat("node '", name(), "' (op ", type_string(),
                                                      "), dense key '", key, "': ")));
    const Tensor pad = def.NumElements() == 1 ? def
                       : dtype == DT_FLOAT    ? Tensor::Scalar<float>(0)
                       : dtype == DT_INT64    ? Tensor::Scalar<int64_t>(0)
                                              : Tensor::Scalar<std::string>("");
    const int64_t per = longest * stride;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t filled = rows[b] * stride;
      if (filled > 0) {
        GR_RETURN_IF_ERROR(CopyValues(*find(b, key), dtype, &out, b * per));
      }
      GR_RETURN_IF_ERROR(CopyDefault(pad, per - filled, &out, b * per + filled));
    }
    return out;
  }

  bool v2_;
  DataTypeVector sparse_types_, dense_types_, ragged_types_, ragged_split_types_;
  std::vector<PartialShape> dense_shapes_;
};

}  // namespace

void RegisterParsingKernels(KernelRegistry& r) {
  r.Add(KernelDef("ParseExample").Device(kDeviceCpu),
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<ParseExampleOp>(c, false);
        });
  r.Add(KernelDef("ParseExampleV2").Device(kDeviceCpu),
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<ParseExampleOp>(c, true);
        });
}

}  // namespace graphrun
