// tf.Example parsing: ParseExample and ParseExampleV2, as TensorFlow
// Serving's classify and regress signatures use them on serialized
// examples fed as strings. Names, arguments and attrs follow TensorFlow's
// parsing_ops.cc.
#include "absl/strings/str_cat.h"
#include "graph/ops/all_ops.h"
#include "graph/status.h"

namespace graphrun {
namespace {

constexpr char kFeatureTypes[] = "{float, int64, string}";

// serialized [B] (or a scalar for V2): sparse outputs [?, rank+1], [?],
// [rank+1]; dense outputs [B] + dense_shapes[j]; ragged ones below.
absl::Status ParseExampleShape(ShapeContext& c, int num_sparse, int num_dense) {
  const PartialShape& s = c.input(0);
  const bool scalar = s.known_rank() && s.rank() == 0;
  const int64_t batch = s.known_rank() && s.rank() == 1 ? s.dim(0) : -1;
  const tensorflow::AttrValue* shapes_attr = nullptr;
  GR_RETURN_IF_ERROR(c.GetAttr("dense_shapes", &shapes_attr));
  std::vector<PartialShape> dense_shapes;
  for (const auto& p : shapes_attr->list().shape()) {
    dense_shapes.push_back(PartialShape::FromProto(p));
  }
  if (static_cast<int>(dense_shapes.size()) != num_dense) {
    return c.Error(absl::StrCat("dense_shapes has ", dense_shapes.size(), " shapes for ", num_dense,
                                " dense keys"));
  }
  int out = 0;
  const int64_t rank = scalar ? 1 : 2;
  for (int i = 0; i < num_sparse; ++i) c.set_output(out++, PartialShape({-1, rank}));
  for (int i = 0; i < num_sparse; ++i) c.set_output(out++, PartialShape({-1}));
  for (int i = 0; i < num_sparse; ++i) c.set_output(out++, PartialShape({rank}));
  for (int j = 0; j < num_dense; ++j) {
    DimVector d;
    if (!scalar) d.push_back(batch);
    if (!dense_shapes[j].known_rank()) {
      c.set_output(out++, PartialShape());
      continue;
    }
    for (int64_t x : dense_shapes[j].dims()) d.push_back(x);
    c.set_output(out++, PartialShape(absl::MakeConstSpan(d)));
  }
  // V2's ragged keys: values [?] each, then row splits [B + 1] ([0] for
  // a scalar input).
  const int num_ragged = (c.num_outputs() - out) / 2;
  for (int k = 0; k < num_ragged; ++k) c.set_output(out++, PartialShape({-1}));
  for (int k = 0; k < num_ragged; ++k) {
    c.set_output(out++, PartialShape({scalar ? 0 : batch >= 0 ? batch + 1 : -1}));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterParsingOps(OpRegistry& r) {
  r.Add(OpDefBuilder("ParseExample")
            .Input("serialized: string")
            .Input("names: string")
            .Input("sparse_keys: Nsparse * string")
            .Input("dense_keys: Ndense * string")
            .Input("dense_defaults: Tdense")
            .Output("sparse_indices: Nsparse * int64")
            .Output("sparse_values: sparse_types")
            .Output("sparse_shapes: Nsparse * int64")
            .Output("dense_values: Tdense")
            .Attr("Nsparse: int >= 0")
            .Attr("Ndense: int >= 0")
            .Attr(absl::StrCat("sparse_types: list(", kFeatureTypes, ") >= 0"))
            .Attr(absl::StrCat("Tdense: list(", kFeatureTypes, ") >= 0"))
            .Attr("dense_shapes: list(shape) >= 0")
            .SetShapeFn([](ShapeContext& c) {
              int64_t ns = 0, nd = 0;
              GR_RETURN_IF_ERROR(c.GetAttr("Nsparse", &ns));
              GR_RETURN_IF_ERROR(c.GetAttr("Ndense", &nd));
              return ParseExampleShape(c, static_cast<int>(ns), static_cast<int>(nd));
            })
            .Doc("Parses a batch of serialized tf.Example protos."));
  r.Add(OpDefBuilder("ParseExampleV2")
            .Input("serialized: string")
            .Input("names: string")
            .Input("sparse_keys: string")
            .Input("dense_keys: string")
            .Input("ragged_keys: string")
            .Input("dense_defaults: Tdense")
            .Output("sparse_indices: num_sparse * int64")
            .Output("sparse_values: sparse_types")
            .Output("sparse_shapes: num_sparse * int64")
            .Output("dense_values: Tdense")
            .Output("ragged_values: ragged_value_types")
            .Output("ragged_row_splits: ragged_split_types")
            .Attr(absl::StrCat("Tdense: list(", kFeatureTypes, ") >= 0"))
            .Attr("num_sparse: int >= 0")
            .Attr(absl::StrCat("sparse_types: list(", kFeatureTypes, ") >= 0"))
            .Attr(absl::StrCat("ragged_value_types: list(", kFeatureTypes, ") >= 0"))
            .Attr("ragged_split_types: list({int32, int64}) >= 0")
            .Attr("dense_shapes: list(shape) >= 0")
            .SetShapeFn([](ShapeContext& c) {
              int64_t ns = 0;
              GR_RETURN_IF_ERROR(c.GetAttr("num_sparse", &ns));
              DataTypeVector tdense;
              GR_RETURN_IF_ERROR(c.GetAttr("Tdense", &tdense));
              return ParseExampleShape(c, static_cast<int>(ns), static_cast<int>(tdense.size()));
            })
            .Doc("Parses a batch (or one) of serialized tf.Example protos."));
}

}  // namespace graphrun
