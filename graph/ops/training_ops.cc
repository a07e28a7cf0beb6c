// Training op schemas: the optimizer update ops (TensorFlow's
// training_ops.cc: Apply* on ref variables, outputting the ref, and
// Resource* on resource handles, with no outputs), the sparse variants that
// update rows named by indices, the resource scatter ops and
// UnsortedSegmentSum, which sums sparse gradient slices. Names, arguments,
// attrs and defaults are TensorFlow's.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/status.h"

namespace graphrun {
namespace {

// How one optimizer's inputs are laid out: the variable and its slots come
// first, then the named T inputs; `sparse` adds "indices: Tindices" after
// the gradient.
struct ApplySpec {
  const char* name;  // without the Apply / ResourceApply prefix
  std::vector<const char*> vars;
  std::vector<const char*> values;  // T inputs in order, "grad" among them
  std::vector<const char*> flags;   // extra bool attrs with defaults
  bool sparse = false;
};

// Ref versions: every variable input has the variable's shape, every other
// T input but grad (and indices) is a scalar; outputs the var's shape.
absl::Status ApplyShape(ShapeContext& c, const ApplySpec& spec) {
  const int nvars = static_cast<int>(spec.vars.size());
  const bool resource = c.op_def().input_arg(0).type() == DT_RESOURCE;
  PartialShape var = resource ? PartialShape::Unknown() : c.input(0);
  if (!resource) {
    for (int i = 1; i < nvars; ++i) {
      auto m = var.Merge(c.input(i));
      if (!m.ok()) {
        return c.Error(absl::StrCat(spec.vars[i], " ", c.input(i).DebugString(), " and var ",
                                    var.DebugString(), " must have the same shape"));
      }
      var = *m;
    }
  }
  for (size_t j = 0; j < spec.values.size(); ++j) {
    const int i = nvars + static_cast<int>(j);
    const std::string value = spec.values[j];
    const PartialShape& s = c.input(i);
    if (value == "grad" || value == "delta") {  // delta: GradientDescent's gradient
      if (!spec.sparse && !resource && !var.IsCompatibleWith(s)) {
        return c.Error(absl::StrCat("grad ", s.DebugString(), " and var ", var.DebugString(),
                                    " must have the same shape"));
      }
      continue;
    }
    if (value == "indices") continue;
    if (s.known_rank() && s.rank() != 0) {
      return c.Error(absl::StrCat(value, " must be a scalar, got ", s.DebugString()));
    }
  }
  if (c.num_outputs() > 0) c.set_output(0, var);
  return absl::OkStatus();
}

void AddApply(OpRegistry& r, const ApplySpec& spec, bool resource) {
  const std::string prefix = resource ? "Resource" : "";
  OpDefBuilder b(prefix + (spec.sparse ? "SparseApply" : "Apply") + spec.name);
  for (const char* v : spec.vars) {
    b.Input(absl::StrCat(v, resource ? ": resource" : ": Ref(T)"));
  }
  for (const char* v : spec.values) {
    b.Input(absl::StrCat(v, std::string(v) == "indices" ? ": Tindices" : ": T"));
  }
  if (!resource) b.Output("out: Ref(T)");
  b.Attr("T: numbertype");
  if (spec.sparse) b.Attr("Tindices: {int32, int64}");
  b.Attr("use_locking: bool = false");
  for (const char* f : spec.flags) b.Attr(f);
  if (resource) b.SetIsStateful();
  ApplySpec copy = spec;
  b.SetShapeFn([copy](ShapeContext& c) { return ApplyShape(c, copy); });
  r.Add(b);
}

void AddBoth(OpRegistry& r, const ApplySpec& spec) {
  AddApply(r, spec, false);
  AddApply(r, spec, true);
}

absl::Status UnsortedSegmentSumShape(ShapeContext& c) {
  const PartialShape& data = c.input(0);
  const PartialShape& ids = c.input(1);
  const Tensor* n = c.input_tensor(2);
  int64_t segments = -1;
  if (n != nullptr) {
    if (n->NumElements() != 1) return c.Error("num_segments must be a scalar");
    segments = n->dtype() == DT_INT32 ? n->base<int32_t>()[0] : n->base<int64_t>()[0];
    if (segments < 0) return c.Error("num_segments must be >= 0");
  }
  if (!data.known_rank() || !ids.known_rank()) {
    c.set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (ids.rank() > data.rank()) {
    return c.Error(absl::StrCat("segment_ids ", ids.DebugString(), " must be a prefix of data ",
                                data.DebugString()));
  }
  for (int d = 0; d < ids.rank(); ++d) {
    if (ids.dim(d) >= 0 && data.dim(d) >= 0 && ids.dim(d) != data.dim(d)) {
      return c.Error(absl::StrCat("segment_ids ", ids.DebugString(), " must be a prefix of data ",
                                  data.DebugString()));
    }
  }
  DimVector out = {segments};
  for (int d = ids.rank(); d < data.rank(); ++d) out.push_back(data.dim(d));
  c.set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

}  // namespace

void RegisterTrainingOps(OpRegistry& r) {
  AddBoth(r, {"GradientDescent", {"var"}, {"alpha", "delta"}, {}});
  AddBoth(
      r,
      {"Momentum", {"var", "accum"}, {"lr", "grad", "momentum"}, {"use_nesterov: bool = false"}});
  {
    // Keras' SGD with momentum: accum = momentum * accum - lr * grad.
    ApplySpec keras{"KerasMomentum",
                    {"var", "accum"},
                    {"lr", "grad", "momentum"},
                    {"use_nesterov: bool = false"}};
    AddApply(r, keras, true);
  }
  AddBoth(r, {"Adam",
              {"var", "m", "v"},
              {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"},
              {"use_nesterov: bool = false"}});
  AddBoth(r, {"Adagrad", {"var", "accum"}, {"lr", "grad"}, {"update_slots: bool = true"}});
  AddBoth(
      r, {"AdagradV2", {"var", "accum"}, {"lr", "epsilon", "grad"}, {"update_slots: bool = true"}});
  AddBoth(r, {"RMSProp", {"var", "ms", "mom"}, {"lr", "rho", "momentum", "epsilon", "grad"}, {}});
  AddBoth(r, {"Adagrad",
              {"var", "accum"},
              {"lr", "grad", "indices"},
              {"update_slots: bool = true"},
              /*sparse=*/true});
  AddBoth(r, {"Momentum",
              {"var", "accum"},
              {"lr", "grad", "indices", "momentum"},
              {"use_nesterov: bool = false"},
              /*sparse=*/true});
  AddBoth(r, {"RMSProp",
              {"var", "ms", "mom"},
              {"lr", "rho", "momentum", "epsilon", "grad", "indices"},
              {},
              /*sparse=*/true});

  for (const char* op : {"ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate"}) {
    const bool update = std::string(op) == "ResourceScatterUpdate";
    r.Add(OpDefBuilder(op)
              .Input("resource: resource")
              .Input("indices: Tindices")
              .Input("updates: dtype")
              .Attr(update ? "dtype: type" : "dtype: numbertype")
              .Attr("Tindices: {int32, int64}")
              .SetIsStateful()
              .SetShapeFn(shape_fns::NoOutputs)
              .Doc("Sparse update of rows of a resource variable."));
  }

  r.Add(OpDefBuilder("UnsortedSegmentSum")
            .Input("data: T")
            .Input("segment_ids: Tindices")
            .Input("num_segments: Tnumsegments")
            .Output("output: T")
            .Attr("T: numbertype")
            .Attr("Tindices: {int32, int64}")
            .Attr("Tnumsegments: {int32, int64} = DT_INT32")
            .SetShapeFn(UnsortedSegmentSumShape)
            .Doc("Sums the rows of data that share a segment id; negative ids "
                 "are dropped."));
}

}  // namespace graphrun
