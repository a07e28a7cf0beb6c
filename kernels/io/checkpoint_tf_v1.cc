// TensorFlow's first checkpoint format (V1): the reader (declared in
// checkpoint_internal.h) and the writer of TensorFlow's Save and SaveSlices
// (WriteTfV1Checkpoint, checkpoint_util.h).
//
// - A checkpoint is one file per shard ("model.ckpt", or
//   "model.ckpt-00000-of-00002" ...), each a table as TensorFlow writes it
//   (ForEachTableRecord: the layout of a V2 .index).
// - Each record's value is a SavedTensorSlices
//   (graph/proto/saved_tensor_slice.proto). The empty key's holds `meta`:
//   every tensor of the file with its shape, dtype and saved slices. Every
//   other record holds `data`: one slice of one tensor (its key is the
//   slice's OrderedCode, EncodeTensorNameSlice; the slice and the name are
//   in the value too), its values in the TensorProto's typed fields
//   (float_val, int_val, ...), with no dtype and no shape.
#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "graph/proto/saved_tensor_slice.pb.h"
#include "graph/status.h"
#include "kernels/io/checkpoint_internal.h"

namespace graphrun {
namespace checkpoint {
namespace {

// The number of values a slice's TensorProto holds in the field TensorFlow
// fills for `dtype`; -1 for a dtype V1 checkpoints never held.
int64_t ValueCount(const tensorflow::TensorProto& p, DataType dtype) {
  if (!p.tensor_content().empty()) {
    const int64_t size = DataTypeSize(dtype);
    return size > 0 && p.tensor_content().size() % size == 0
               ? static_cast<int64_t>(p.tensor_content().size()) / size
               : -1;
  }
  switch (dtype) {
    case DT_FLOAT:
      return p.float_val_size();
    case DT_DOUBLE:
      return p.double_val_size();
    case DT_INT32:
    case DT_INT16:
    case DT_INT8:
    case DT_UINT8:
    case DT_UINT16:
      return p.int_val_size();
    case DT_INT64:
      return p.int64_val_size();
    case DT_UINT32:
      return p.uint32_val_size();
    case DT_UINT64:
      return p.uint64_val_size();
    case DT_BOOL:
      return p.bool_val_size();
    case DT_STRING:
      return p.string_val_size();
    case DT_HALF:
    case DT_BFLOAT16:
      return p.half_val_size();
    case DT_COMPLEX64:
      return p.scomplex_val_size() % 2 == 0 ? p.scomplex_val_size() / 2 : -1;
    case DT_COMPLEX128:
      return p.dcomplex_val_size() % 2 == 0 ? p.dcomplex_val_size() / 2 : -1;
    default:
      return -1;
  }
}

}  // namespace

absl::Status DecodeTfV1Checkpoint(absl::string_view bytes, std::vector<BundleEntry>* entries,
                                  std::vector<Tensor>* values) {
  // Name -> its meta (dtype, shape, the slices listed).
  std::map<std::string, BundleEntry> tensors;
  // Name -> the slices listed, resolved and as written (for messages).
  std::map<std::string, std::vector<std::pair<TensorSlice, TensorSlice>>> listed;
  std::map<std::string, std::set<TensorSlice>> listed_set;  // the same, to look up
  bool have_meta = false;
  std::vector<BundleEntry> found;
  GR_RETURN_IF_ERROR(ForEachTableRecord(
      bytes, [&](const std::string& key, absl::string_view value) -> absl::Status {
        tensorflow::SavedTensorSlices record;
        if (!record.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          return absl::InvalidArgumentError("an unparsable record");
        }
        if (key.empty()) {
          if (!record.has_meta()) return absl::InvalidArgumentError("no meta under the empty key");
          for (const auto& m : record.meta().tensor()) {
            BundleEntry e;
            e.name = m.name();
            e.dtype = static_cast<DataType>(m.type());
            if (!tensorflow::DataType_IsValid(m.type()) || !Storable(e.dtype)) {
              return absl::InvalidArgumentError(
                  absl::StrCat("tensor '", e.name, "': dtype ", m.type(), " cannot be restored"));
            }
            GR_ASSIGN_OR_RETURN(e.shape, ShapeFromProto(e.name, m.shape()));
            if (tensors.count(e.name) > 0) {
              return absl::InvalidArgumentError(
                  absl::StrCat("tensor '", e.name, "' is listed twice"));
            }
            auto& slices = listed[e.name];
            auto& slice_set = listed_set[e.name];
            for (const auto& sp : m.slice()) {
              TensorSlice written;
              GR_ASSIGN_OR_RETURN(TensorSlice s, SliceFromProto(e.name, sp, e.shape, &written));
              slices.emplace_back(s, written);
              slice_set.insert(s);
            }
            tensors.emplace(e.name, std::move(e));
          }
          have_meta = true;
          return absl::OkStatus();
        }
        if (!have_meta) return absl::InvalidArgumentError("a data record before the meta");
        if (!record.has_data()) return absl::InvalidArgumentError("a record without data");
        const tensorflow::SavedSlice& d = record.data();
        auto t = tensors.find(d.name());
        if (t == tensors.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("data for tensor '", d.name(), "', which the meta does not list"));
        }
        BundleEntry e = t->second;
        TensorSlice written;
        GR_ASSIGN_OR_RETURN(e.slice, SliceFromProto(e.name, d.slice(), e.shape, &written));
        if (listed_set[e.name].count(e.slice) == 0) {
          return absl::InvalidArgumentError(absl::StrCat("tensor '", e.name, "': data for slice ",
                                                         written.DebugString(),
                                                         ", which the meta does not list"));
        }
        const TensorShape shape = e.slice.SliceShape();
        const int64_t count = ValueCount(d.data(), e.dtype);
        if (count != shape.num_elements()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tensor '", e.name, "': slice ", written.DebugString(), " holds ", count,
              " values of ", DataTypeString(e.dtype), " for ", shape.num_elements(), " elements"));
        }
        // Taken from the record, not copied (a string tensor's values would
        // be held three times while it decodes).
        tensorflow::TensorProto p;
        p.Swap(record.mutable_data()->mutable_data());
        p.set_dtype(static_cast<tensorflow::DataType>(e.dtype));
        for (int64_t n : shape.dim_sizes()) p.mutable_tensor_shape()->add_dim()->set_size(n);
        absl::StatusOr<Tensor> v = Tensor::FromProto(p);
        if (!v.ok()) {  // malformed (InvalidArgument) or over the memory budget
          return absl::Status(v.status().code(),
                              absl::StrCat("tensor '", e.name, "': ", v.status().message()));
        }
        e.v1_value = static_cast<int64_t>(values->size());
        values->push_back(*std::move(v));
        found.push_back(std::move(e));
        return absl::OkStatus();
      }));
  if (!have_meta) return absl::InvalidArgumentError("no meta record");
  // Every slice the meta lists has its data.
  std::set<std::pair<std::string, TensorSlice>> have;
  for (const BundleEntry& e : found) have.emplace(e.name, e.slice);
  for (const auto& [name, slices] : listed) {
    for (const auto& [s, written] : slices) {
      if (have.count({name, s}) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", name, "': slice ", written.DebugString(), " has no data"));
      }
    }
  }
  for (BundleEntry& e : found) entries->push_back(std::move(e));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> TfV1Files(const std::string& prefix) {
  struct stat st;
  if (::stat(prefix.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return std::vector{prefix};
  if (prefix.find_first_of("*?[") != std::string::npos) {
    // A file pattern, as TensorFlow's V1 readers take one: the sharded
    // filespec "P-?????-of-00002" that a V1 Saver's save returns.
    std::vector<std::string> files;
    glob_t g;
    const int rc = ::glob(prefix.c_str(), 0, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        const std::string f = g.gl_pathv[i];
        if (f.find(kTempMarker) == std::string::npos && ::stat(f.c_str(), &st) == 0 &&
            S_ISREG(st.st_mode)) {
          files.push_back(f);
        }
      }
    }
    if (rc == 0 || rc == GLOB_NOMATCH) ::globfree(&g);
    return files;
  }
  const std::string dir = Dirname(prefix);
  const std::string base = Basename(prefix) + "-";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return std::vector<std::string>{};
  std::map<int64_t, std::string> shards;
  std::set<int64_t> totals;
  while (const dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (!absl::StartsWith(name, base)) continue;
    // "NNNNN-of-MMMMM"
    const absl::string_view rest = absl::string_view(name).substr(base.size());
    int64_t k = 0, n = 0;
    if (rest.size() != 14 || rest.substr(5, 4) != "-of-" ||
        !absl::SimpleAtoi(rest.substr(0, 5), &k) || !absl::SimpleAtoi(rest.substr(9), &n) ||
        !std::all_of(rest.begin(), rest.begin() + 5, ::isdigit) ||
        !std::all_of(rest.begin() + 9, rest.end(), ::isdigit)) {
      continue;
    }
    shards[k] = JoinPath(dir, name);
    totals.insert(n);
  }
  ::closedir(d);
  if (shards.empty()) return std::vector<std::string>{};
  const int64_t n = *totals.begin();
  if (totals.size() != 1 || static_cast<int64_t>(shards.size()) != n ||
      shards.rbegin()->first != n - 1) {
    return absl::DataLossError(absl::StrCat("V1 checkpoint '", prefix, "': ", shards.size(),
                                            " shard files for ", n, " shards"));
  }
  std::vector<std::string> files;
  for (auto& [k, f] : shards) files.push_back(std::move(f));
  return files;
}

namespace {

// A conservative bound on a slice's serialized values: a record is one
// protobuf message, which cannot pass 2 GiB.
int64_t RecordBound(const Tensor& t) {
  const int64_t n = t.NumElements();
  if (t.dtype() != DT_STRING) return n * 20;  // varints take at most 10 bytes, complex 2 values
  int64_t bytes = 0;
  for (int64_t i = 0; i < n; ++i)
    bytes += static_cast<int64_t>(t.base<std::string>()[i].size()) + 11;
  return bytes;
}

// The values of a slice as TensorSliceWriter stores them: the TensorProto's
// typed field for the dtype, with no dtype and no shape.
tensorflow::TensorProto V1Values(const Tensor& t) {
  tensorflow::TensorProto p;
  const int64_t n = t.NumElements();
  switch (t.dtype()) {
    case DT_STRING:
      for (int64_t i = 0; i < n; ++i) p.add_string_val(t.base<std::string>()[i]);
      break;
    case DT_COMPLEX64:
      for (int64_t i = 0; i < 2 * n; ++i) p.add_scomplex_val(t.base<float>()[i]);
      break;
    case DT_COMPLEX128:
      for (int64_t i = 0; i < 2 * n; ++i) p.add_dcomplex_val(t.base<double>()[i]);
      break;
    default:
      t.AsProtoField(&p);
      break;
  }
  p.clear_dtype();
  p.clear_tensor_shape();
  return p;
}

void SliceAsProto(const TensorSlice& s, tensorflow::TensorSliceProto* p) {
  for (int d = 0; d < s.dims(); ++d) {
    auto* e = p->add_extent();
    if (s.IsFullAt(d)) continue;  // an empty extent: the whole dimension
    e->set_start(s.start(d));
    e->set_length(s.length(d));
  }
}

}  // namespace

absl::Status WriteTfV1Checkpoint(const std::string& filename,
                                 const std::vector<V1SliceToSave>& slices) {
  std::vector<BundleEntry> entries;
  tensorflow::SavedTensorSlices meta_record;
  tensorflow::SavedTensorSliceMeta* meta = meta_record.mutable_meta();
  meta->mutable_versions()->set_producer(1);  // TF_CHECKPOINT_VERSION
  absl::flat_hash_map<std::string, tensorflow::SavedSliceMeta*> listed;
  std::map<std::string, std::string> records;
  for (const V1SliceToSave& s : slices) {
    auto fail = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "': ", why));
    };
    const DataType dt = s.value.dtype();
    if (!Storable(dt)) {
      return fail(absl::StrCat("a ", DataTypeString(dt), " tensor cannot be saved"));
    }
    if (s.name.empty()) return fail("an empty tensor name cannot be saved");
    BundleEntry e;
    e.name = s.name;
    e.dtype = dt;
    e.shape = s.full_shape;
    absl::StatusOr<TensorSlice> resolved = s.slice.Resolve(s.full_shape);
    if (!resolved.ok()) return fail(resolved.status().message());
    e.slice = *resolved;
    if (e.slice.SliceShape() != s.value.shape()) {
      return fail(absl::StrCat("slice ", s.slice.DebugString(), " of ", s.full_shape.DebugString(),
                               " has shape ", e.slice.SliceShape().DebugString(), ", the value ",
                               s.value.shape().DebugString()));
    }
    if (RecordBound(s.value) > std::numeric_limits<int32_t>::max() - 4096) {
      return fail(absl::StrCat("slice ", s.slice.DebugString(), " of ", s.value.NumElements(),
                               " elements may not fit one V1 record (2 GiB); use SaveV2"));
    }
    tensorflow::SavedSliceMeta*& m = listed[s.name];
    if (m == nullptr) {
      m = meta->add_tensor();
      m->set_name(s.name);
      s.full_shape.AsProto(m->mutable_shape());
      m->set_type(static_cast<tensorflow::DataType>(dt));
    }
    SliceAsProto(s.slice, m->add_slice());
    tensorflow::SavedTensorSlices data;
    tensorflow::SavedSlice* d = data.mutable_data();
    d->set_name(s.name);
    SliceAsProto(s.slice, d->mutable_slice());
    *d->mutable_data() = V1Values(s.value);
    records[EncodeTensorNameSlice(s.name, s.slice)] = data.SerializeAsString();
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), EntryLess);
  GR_RETURN_IF_ERROR(CheckConsistent(entries));
  records[""] = meta_record.SerializeAsString();
  GR_RETURN_IF_ERROR(RecursivelyCreateDir(Dirname(filename)));
  return WriteFileAtomically(filename, EncodeTable(records, 256 * 1024));
}

}  // namespace checkpoint
}  // namespace graphrun
