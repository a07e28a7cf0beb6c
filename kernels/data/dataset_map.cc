// MapTransformDataset: built-in element-wise transforms (cast, scale,
// normalize, reshape, one_hot, decode_raw, slice) in place of user functions,
// which need function support. Spec syntax: docs/datasets.md.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "graph/status.h"
#include "kernels/data/dataset_internal.h"

namespace graphrun {
namespace data {
namespace {

bool IsCastable(DataType t) {
  switch (t) {
    case DT_FLOAT:
    case DT_DOUBLE:
    case DT_INT32:
    case DT_INT64:
    case DT_UINT8:
    case DT_INT8:
    case DT_INT16:
    case DT_UINT16:
    case DT_BOOL:
      return true;
    default:
      return false;
  }
}
bool IsFloating(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }
bool IsIndex(DataType t) { return IsCastable(t) && !IsFloating(t) && t != DT_BOOL; }

// Calls fn(T{}) with T the C++ type of `dt`. REQUIRES: IsCastable(dt).
template <typename F>
void Dispatch(DataType dt, F&& fn) {
  switch (dt) {
    case DT_FLOAT:
      fn(float{});
      break;
    case DT_DOUBLE:
      fn(double{});
      break;
    case DT_INT32:
      fn(int32_t{});
      break;
    case DT_INT64:
      fn(int64_t{});
      break;
    case DT_UINT8:
      fn(uint8_t{});
      break;
    case DT_INT8:
      fn(int8_t{});
      break;
    case DT_INT16:
      fn(int16_t{});
      break;
    case DT_UINT16:
      fn(uint16_t{});
      break;
    case DT_BOOL:
      fn(bool{});
      break;
    default:
      break;
  }
}

Tensor Cast(const Tensor& in, DataType to) {
  Tensor out(to, in.shape());
  const int64_t n = in.NumElements();
  Dispatch(in.dtype(), [&](auto src_tag) {
    using Src = decltype(src_tag);
    Dispatch(to, [&](auto dst_tag) {
      using Dst = decltype(dst_tag);
      const Src* s = in.base<Src>();
      Dst* d = out.base<Dst>();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<Dst>(s[i]);
    });
  });
  return out;
}

// out = (in - shift) * mul, in in's (floating) type.
Tensor Affine(const Tensor& in, double shift, double mul) {
  Tensor out(in.dtype(), in.shape());
  const int64_t n = in.NumElements();
  if (in.dtype() == DT_FLOAT) {
    const float* s = in.base<float>();
    float* d = out.base<float>();
    const float fs = static_cast<float>(shift), fm = static_cast<float>(mul);
    for (int64_t i = 0; i < n; ++i) d[i] = (s[i] - fs) * fm;
  } else {
    const double* s = in.base<double>();
    double* d = out.base<double>();
    for (int64_t i = 0; i < n; ++i) d[i] = (s[i] - shift) * mul;
  }
  return out;
}

absl::Status SpecError(absl::string_view spec, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("transform '", spec, "': ", what));
}

// The reshape target for `n` elements (one -1 resolved), or an error.
absl::StatusOr<TensorShape> ReshapeTarget(const Transform& t, int64_t n) {
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (t.dims[i] == -1) {
      unknown = static_cast<int>(i);
    } else {
      known *= t.dims[i];
    }
  }
  TensorShape s(t.dims);
  if (unknown >= 0) {
    if (known == 0 || n % known != 0) {
      return SpecError(t.spec, absl::StrCat("cannot reshape ", n, " elements"));
    }
    s.set_dim(unknown, n / known);
  } else if (known != n) {
    return SpecError(t.spec, absl::StrCat("cannot reshape ", n, " elements"));
  }
  return s;
}

// The dtype and shape a transform makes of (dtype, shape); InvalidArgument
// when it does not apply.
absl::Status Infer(const Transform& t, DataType* dtype, PartialShape* shape) {
  auto need = [&](bool ok, absl::string_view what) {
    return ok ? absl::OkStatus()
              : SpecError(t.spec, absl::StrCat("needs ", what, ", the component is ",
                                               DataTypeString(*dtype)));
  };
  switch (t.kind) {
    case Transform::kCast:
      GR_RETURN_IF_ERROR(need(IsCastable(*dtype), "a real or bool type"));
      *dtype = t.dtype;
      return absl::OkStatus();
    case Transform::kScale:
    case Transform::kNormalize:
      return need(IsFloating(*dtype), "float or double (cast first)");
    case Transform::kReshape: {
      const int64_t n = shape->num_elements();
      if (n >= 0) {
        GR_ASSIGN_OR_RETURN(TensorShape s, ReshapeTarget(t, n));
        *shape = PartialShape(s);
      } else {
        *shape = PartialShape(absl::MakeConstSpan(t.dims));
      }
      return absl::OkStatus();
    }
    case Transform::kOneHot: {
      GR_RETURN_IF_ERROR(need(IsIndex(*dtype), "an integer type"));
      *dtype = DT_FLOAT;
      if (shape->known_rank()) {
        DimVector d(shape->dims().begin(), shape->dims().end());
        d.push_back(t.depth);
        *shape = PartialShape(absl::MakeConstSpan(d));
      }
      return absl::OkStatus();
    }
    case Transform::kSlice: {
      if (shape->known_rank() && shape->rank() == 0) {
        return SpecError(t.spec, "needs rank >= 1, the component is a scalar");
      }
      if (shape->known_rank()) {
        DimVector d(shape->dims().begin(), shape->dims().end());
        if (d[0] >= 0 && t.begin + std::max<int64_t>(t.size, 0) > d[0]) {
          return SpecError(t.spec, absl::StrCat("out of range for dimension 0 of ", d[0]));
        }
        d[0] = t.size >= 0 ? t.size : d[0] >= 0 ? d[0] - t.begin : -1;
        *shape = PartialShape(absl::MakeConstSpan(d));
      }
      return absl::OkStatus();
    }
    case Transform::kDecodeRaw: {
      GR_RETURN_IF_ERROR(need(*dtype == DT_STRING, "string"));
      *dtype = t.dtype;
      if (shape->known_rank()) {
        DimVector d(shape->dims().begin(), shape->dims().end());
        d.push_back(-1);
        *shape = PartialShape(absl::MakeConstSpan(d));
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Apply(const Transform& t, const Tensor& in) {
  switch (t.kind) {
    case Transform::kCast:
      return in.dtype() == t.dtype ? in : Cast(in, t.dtype);
    case Transform::kScale:
      return Affine(in, 0, t.a);
    case Transform::kNormalize:
      return Affine(in, t.a, 1.0 / t.b);
    case Transform::kReshape: {
      GR_ASSIGN_OR_RETURN(TensorShape s, ReshapeTarget(t, in.NumElements()));
      return in.Reshaped(s);
    }
    case Transform::kSlice: {
      const int64_t n = in.dims() >= 1 ? in.dim_size(0) : -1;
      const int64_t limit = t.size >= 0 ? t.begin + t.size : n;
      if (n < 0 || t.begin > n || limit > n) {
        return SpecError(t.spec, absl::StrCat("out of range for shape ", in.shape().DebugString()));
      }
      return in.Slice(t.begin, limit);
    }
    case Transform::kOneHot: {
      DimVector dims(in.shape().dim_sizes().begin(), in.shape().dim_sizes().end());
      dims.push_back(t.depth);
      absl::StatusOr<TensorShape> s = TensorShape::Make(dims);
      if (!s.ok()) return SpecError(t.spec, s.status().message());
      GR_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Allocate(DT_FLOAT, *s, absl::StrCat("map '", t.spec, "': ")));
      std::memset(out.raw_data(), 0, sizeof(float) * out.NumElements());
      absl::Status st;
      Dispatch(in.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* idx = in.base<T>();
        for (int64_t i = 0; i < in.NumElements() && st.ok(); ++i) {
          const int64_t v = static_cast<int64_t>(idx[i]);
          if (v < 0 || v >= t.depth) {
            st = SpecError(t.spec, absl::StrCat("index ", v, " is not in [0, ", t.depth, ")"));
          } else {
            out.base<float>()[i * t.depth + v] = 1.0f;
          }
        }
      });
      if (!st.ok()) return st;
      return out;
    }
    case Transform::kDecodeRaw: {
      const int64_t size = DataTypeSize(t.dtype);
      const int64_t n = in.NumElements();
      const std::string* strs = in.base<std::string>();
      const int64_t len = n > 0 ? static_cast<int64_t>(strs[0].size()) : 0;
      if (len % size != 0) {
        return SpecError(t.spec,
                         absl::StrCat("input of ", len, " bytes is not a multiple of ", size));
      }
      TensorShape s = in.shape();
      s.AddDim(len / size);
      GR_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Allocate(t.dtype, s, absl::StrCat("map '", t.spec, "': ")));
      for (int64_t i = 0; i < n; ++i) {
        if (static_cast<int64_t>(strs[i].size()) != len) {
          return SpecError(t.spec, "all input strings must have the same length");
        }
        // Little-endian, as TensorFlow's DecodeRaw by default (and the host).
        std::memcpy(out.raw_data() + i * len, strs[i].data(), static_cast<size_t>(len));
      }
      return out;
    }
  }
  return in;
}

class MapTransformDataset : public DatasetBase {
 public:
  MapTransformDataset(DatasetPtr input, std::vector<Transform> transforms, DataTypeVector dtypes,
                      std::vector<PartialShape> shapes)
      : DatasetBase(std::move(dtypes), std::move(shapes)),
        input_(std::move(input)),
        transforms_(std::move(transforms)) {}
  std::string name() const override { return "MapTransform"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator() const override {
    GR_ASSIGN_OR_RETURN(std::unique_ptr<IteratorBase> in, input_->MakeIterator());
    return std::unique_ptr<IteratorBase>(new Iterator(this, std::move(in)));
  }

 private:
  class Iterator : public DatasetIterator<MapTransformDataset> {
   public:
    Iterator(const MapTransformDataset* d, std::unique_ptr<IteratorBase> in)
        : DatasetIterator(d), input_(std::move(in)) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      // The input is thread-safe; the transforms run outside any lock.
      GR_RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
      if (*end) return absl::OkStatus();
      for (const Transform& t : dataset().transforms_) {
        for (size_t c = 0; c < out->size(); ++c) {
          if (t.component >= 0 && static_cast<size_t>(t.component) != c) continue;
          GR_ASSIGN_OR_RETURN((*out)[c], Apply(t, (*out)[c]));
        }
      }
      return absl::OkStatus();
    }

   private:
    std::unique_ptr<IteratorBase> input_;
  };
  DatasetPtr input_;
  std::vector<Transform> transforms_;
};

}  // namespace

absl::StatusOr<Transform> ParseTransform(absl::string_view spec) {
  Transform t;
  t.spec = std::string(spec);
  absl::string_view rest = absl::StripAsciiWhitespace(spec);
  const size_t eq = rest.find('=');
  if (eq != absl::string_view::npos) {
    if (!absl::SimpleAtoi(rest.substr(0, eq), &t.component) || t.component < 0) {
      return SpecError(spec, "the component before '=' must be an index >= 0");
    }
    rest = rest.substr(eq + 1);
  }
  const size_t colon = rest.find(':');
  const absl::string_view name = rest.substr(0, colon);
  const absl::string_view args =
      colon == absl::string_view::npos ? absl::string_view() : rest.substr(colon + 1);
  std::vector<absl::string_view> parts = absl::StrSplit(args, ',', absl::SkipWhitespace());
  auto number = [&](absl::string_view s, double* v) {
    return absl::SimpleAtod(s, v) ? absl::OkStatus()
                                  : SpecError(spec, absl::StrCat("bad number '", s, "'"));
  };
  if (name == "cast" || name == "decode_raw") {
    t.kind = name == "cast" ? Transform::kCast : Transform::kDecodeRaw;
    auto dt = ParseDataType(args);
    if (!dt.ok()) return SpecError(spec, dt.status().message());
    t.dtype = *dt;
    bool ok = t.kind == Transform::kCast ? IsCastable(t.dtype)
                                         : IsCastable(t.dtype) && t.dtype != DT_BOOL;
    if (!ok) return SpecError(spec, absl::StrCat("unsupported type ", DataTypeString(t.dtype)));
  } else if (name == "scale") {
    t.kind = Transform::kScale;
    if (parts.size() != 1) return SpecError(spec, "expected scale:FACTOR");
    GR_RETURN_IF_ERROR(number(parts[0], &t.a));
  } else if (name == "normalize") {
    t.kind = Transform::kNormalize;
    if (parts.size() != 2) return SpecError(spec, "expected normalize:MEAN,STD");
    GR_RETURN_IF_ERROR(number(parts[0], &t.a));
    GR_RETURN_IF_ERROR(number(parts[1], &t.b));
    if (t.b == 0) return SpecError(spec, "std must not be 0");
  } else if (name == "reshape") {
    t.kind = Transform::kReshape;
    int unknown = 0;
    for (absl::string_view p : parts) {
      int64_t d;
      if (!absl::SimpleAtoi(p, &d) || d < -1) {
        return SpecError(spec, absl::StrCat("bad dimension '", p, "'"));
      }
      unknown += d == -1;
      t.dims.push_back(d);
    }
    if (unknown > 1) return SpecError(spec, "only one dimension may be -1");
  } else if (name == "slice") {
    t.kind = Transform::kSlice;
    if (parts.empty() || parts.size() > 2 || !absl::SimpleAtoi(parts[0], &t.begin) || t.begin < 0 ||
        (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &t.size) || t.size < -1))) {
      return SpecError(spec, "expected slice:BEGIN[,SIZE] with BEGIN >= 0, SIZE >= -1");
    }
  } else if (name == "one_hot") {
    t.kind = Transform::kOneHot;
    if (parts.size() != 1 || !absl::SimpleAtoi(parts[0], &t.depth) || t.depth <= 0) {
      return SpecError(spec, "expected one_hot:DEPTH with DEPTH > 0");
    }
  } else {
    return SpecError(spec, absl::StrCat("unknown transform '", name,
                                        "' (cast, scale, normalize, reshape, one_hot, "
                                        "decode_raw, slice)"));
  }
  return t;
}

absl::StatusOr<DatasetPtr> MakeMapTransformDataset(DatasetPtr input,
                                                   std::vector<Transform> transforms) {
  DataTypeVector dtypes = input->output_dtypes();
  std::vector<PartialShape> shapes = input->output_shapes();
  for (const Transform& t : transforms) {
    if (t.component >= static_cast<int>(dtypes.size())) {
      return SpecError(t.spec, absl::StrCat("component ", t.component, " does not exist (",
                                            dtypes.size(), " components)"));
    }
    for (size_t c = 0; c < dtypes.size(); ++c) {
      if (t.component >= 0 && static_cast<size_t>(t.component) != c) continue;
      absl::Status s = Infer(t, &dtypes[c], &shapes[c]);
      if (!s.ok()) return AnnotateStatus(s, absl::StrCat("component ", c, ": "));
    }
  }
  return std::make_shared<MapTransformDataset>(std::move(input), std::move(transforms),
                                               std::move(dtypes), std::move(shapes));
}

}  // namespace data
}  // namespace graphrun
