#include "kernels/data/dataset_util.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/status.h"

namespace graphrun {
namespace data {

std::string DatasetBase::DebugString() const {
  std::vector<std::string> parts;
  for (int i = 0; i < num_components(); ++i) {
    parts.push_back(absl::StrCat(DataTypeString(dtypes_[i]), shapes_[i].DebugString()));
  }
  return absl::StrCat(name(), "Dataset<", absl::StrJoin(parts, ", "), ">");
}

Tensor DatasetToTensor(DatasetPtr dataset) {
  return Tensor::Scalar<Variant>(Variant(std::move(dataset)));
}

absl::StatusOr<DatasetPtr> DatasetFromTensor(const Tensor& t) {
  if (t.dtype() != DT_VARIANT || t.NumElements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a dataset (a scalar variant tensor), got ",
                     DataTypeString(t.dtype()), " ", t.shape().DebugString()));
  }
  const Variant& v = t.scalar<Variant>();
  auto d = std::dynamic_pointer_cast<const DatasetBase>(v.value());
  if (d == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a dataset, the variant holds ", v.DebugString()));
  }
  return d;
}

namespace {
std::string Signature(const DataTypeVector& dtypes, const std::vector<PartialShape>& shapes) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    parts.push_back(
        absl::StrCat(DataTypeString(dtypes[i]), i < shapes.size() ? shapes[i].DebugString() : ""));
  }
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}
}  // namespace

absl::Status VerifySignature(const DataTypeVector& expected_dtypes,
                             const std::vector<PartialShape>& expected_shapes,
                             const DataTypeVector& actual_dtypes,
                             const std::vector<PartialShape>& actual_shapes,
                             absl::string_view what) {
  bool ok = expected_dtypes == actual_dtypes;
  for (size_t i = 0; ok && i < expected_shapes.size() && i < actual_shapes.size(); ++i) {
    ok = expected_shapes[i].IsCompatibleWith(actual_shapes[i]);
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": expected elements ", Signature(expected_dtypes, expected_shapes),
                   ", got ", Signature(actual_dtypes, actual_shapes)));
}

absl::Status GetOutputSignature(const tensorflow::NodeDef& def, DataTypeVector* dtypes,
                                std::vector<PartialShape>* shapes, absl::string_view types_attr) {
  GR_RETURN_IF_ERROR(GetAttr(NodeAttrs(def), types_attr, dtypes));
  shapes->clear();
  const tensorflow::AttrValue* v = nullptr;
  if (HasAttr(NodeAttrs(def), "output_shapes")) {
    GR_RETURN_IF_ERROR(GetAttr(NodeAttrs(def), "output_shapes", &v));
    for (const auto& s : v->list().shape()) shapes->push_back(PartialShape::FromProto(s));
  }
  if (shapes->empty()) shapes->assign(dtypes->size(), PartialShape());
  if (shapes->size() != dtypes->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", def.name(), "': ", types_attr, " has ", dtypes->size(),
                     " entries but output_shapes has ", shapes->size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PerReplicaBatchSize(int64_t global_batch_size, int64_t num_replicas) {
  if (global_batch_size <= 0 || num_replicas <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("global batch size (", global_batch_size,
                                                   ") and replicas (", num_replicas,
                                                   ") must be positive"));
  }
  if (global_batch_size % num_replicas != 0) {
    return absl::InvalidArgumentError(absl::StrCat("global batch size ", global_batch_size,
                                                   " is not divisible by ", num_replicas,
                                                   " replicas"));
  }
  return global_batch_size / num_replicas;
}

}  // namespace data
}  // namespace graphrun
