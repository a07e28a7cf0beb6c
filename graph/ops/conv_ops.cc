// Convolution, pooling and batch-normalisation op schemas (and L2Loss), the
// layers of a small CNN and their gradients. Names, arguments, attrs and
// defaults are TensorFlow's nn_ops.cc, so TensorFlow GraphDefs load; output
// sizes follow graph/ops/window_util.h, which the kernels share.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/ops/window_util.h"
#include "graph/status.h"

namespace graphrun {
namespace {

constexpr char kConvPadding[] = "padding: {'SAME', 'VALID', 'EXPLICIT'}";
constexpr char kExplicitPaddings[] = "explicit_paddings: list(int) = []";
constexpr char kDataFormat[] = "data_format: {'NHWC', 'NCHW'} = 'NHWC'";

// Where the spatial and channel dimensions of a rank-4 tensor are.
struct Layout {
  int h = 1, w = 2, c = 3;
};
absl::StatusOr<Layout> GetLayout(ShapeContext& c) {
  std::string format;
  GR_RETURN_IF_ERROR(c.GetAttr("data_format", &format));
  Layout l;
  if (format == "NCHW" || format == "NCHW_VECT_C") l = Layout{2, 3, 1};
  return l;
}

// A list attr of exactly 4 ints (one per dimension of the data format).
absl::StatusOr<std::vector<int64_t>> Attr4(ShapeContext& c, const char* name) {
  std::vector<int64_t> v;
  GR_RETURN_IF_ERROR(c.GetAttr(name, &v));
  if (v.size() != 4) {
    return c.Error(absl::StrCat(name, " must have 4 elements, got ", v.size()));
  }
  return v;
}

// The window attributes of a conv or pooling node.
struct WindowAttrs {
  std::vector<int64_t> strides, dilations;
  window::Padding padding = window::Padding::kValid;
  std::vector<int64_t> explicit_paddings;  // 8 values, or empty
};
absl::StatusOr<WindowAttrs> GetWindowAttrs(ShapeContext& c) {
  WindowAttrs a;
  GR_ASSIGN_OR_RETURN(a.strides, Attr4(c, "strides"));
  if (c.op_def().name().rfind("Conv", 0) == 0) {
    GR_ASSIGN_OR_RETURN(a.dilations, Attr4(c, "dilations"));
  } else {
    a.dilations = {1, 1, 1, 1};
  }
  std::string padding;
  GR_RETURN_IF_ERROR(c.GetAttr("padding", &padding));
  auto p = window::ParsePadding(padding);
  if (!p.ok()) return c.Error(p.status().message());
  a.padding = *p;
  if (a.padding == window::Padding::kExplicit) {
    GR_RETURN_IF_ERROR(c.GetAttr("explicit_paddings", &a.explicit_paddings));
    if (a.explicit_paddings.size() != 8) {
      return c.Error(
          absl::StrCat("explicit_paddings must have 8 elements for EXPLICIT padding, got ",
                       a.explicit_paddings.size()));
    }
  }
  return a;
}

// One spatial output size, -1 when the input or window size is unknown.
absl::StatusOr<int64_t> SpatialOut(ShapeContext& c, const WindowAttrs& a, int dim, int64_t in,
                                   int64_t window) {
  if (in < 0 || window < 0) return int64_t{-1};
  int64_t before = 0, after = 0;
  if (!a.explicit_paddings.empty()) {
    before = a.explicit_paddings[2 * dim];
    after = a.explicit_paddings[2 * dim + 1];
  }
  auto d =
      window::ComputeDim(in, window, a.dilations[dim], a.strides[dim], a.padding, before, after);
  if (!d.ok()) return c.Error(d.status().message());
  return d->out;
}

absl::Status Conv2DShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape in, c.WithRank(0, 4));
  GR_ASSIGN_OR_RETURN(PartialShape filter, c.WithRank(1, 4));
  GR_ASSIGN_OR_RETURN(Layout l, GetLayout(c));
  GR_ASSIGN_OR_RETURN(WindowAttrs a, GetWindowAttrs(c));
  if (!in.known_rank()) in = PartialShape::UnknownOfRank(4);
  if (!filter.known_rank()) filter = PartialShape::UnknownOfRank(4);
  const int64_t in_depth = in.dim(l.c), filter_depth = filter.dim(2);
  if (in_depth >= 0 && filter_depth > 0 && in_depth % filter_depth != 0) {
    return c.Error(absl::StrCat("input depth ", in_depth, " is not a multiple of the filter's ",
                                filter_depth, " (input ", in.DebugString(), ", filter ",
                                filter.DebugString(), ")"));
  }
  GR_ASSIGN_OR_RETURN(int64_t oh, SpatialOut(c, a, l.h, in.dim(l.h), filter.dim(0)));
  GR_ASSIGN_OR_RETURN(int64_t ow, SpatialOut(c, a, l.w, in.dim(l.w), filter.dim(1)));
  DimVector out(4);
  out[0] = in.dim(0);
  out[l.h] = oh;
  out[l.w] = ow;
  out[l.c] = filter.dim(3);
  c.set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

// DepthwiseConv2dNative: filter [kh, kw, in_c, multiplier], output
// channels in_c * multiplier.
absl::Status DepthwiseConvShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape in, c.WithRank(0, 4));
  GR_ASSIGN_OR_RETURN(PartialShape filter, c.WithRank(1, 4));
  GR_ASSIGN_OR_RETURN(Layout l, GetLayout(c));
  GR_ASSIGN_OR_RETURN(WindowAttrs a, GetWindowAttrs(c));
  if (!in.known_rank()) in = PartialShape::UnknownOfRank(4);
  if (!filter.known_rank()) filter = PartialShape::UnknownOfRank(4);
  if (in.dim(l.c) >= 0 && filter.dim(2) >= 0 && in.dim(l.c) != filter.dim(2)) {
    return c.Error(absl::StrCat("input depth ", in.dim(l.c), " must equal the filter's in-depth ",
                                filter.dim(2)));
  }
  GR_ASSIGN_OR_RETURN(int64_t oh, SpatialOut(c, a, l.h, in.dim(l.h), filter.dim(0)));
  GR_ASSIGN_OR_RETURN(int64_t ow, SpatialOut(c, a, l.w, in.dim(l.w), filter.dim(1)));
  DimVector out(4);
  out[0] = in.dim(0);
  out[l.h] = oh;
  out[l.w] = ow;
  out[l.c] = filter.dim(2) >= 0 && filter.dim(3) >= 0 ? filter.dim(2) * filter.dim(3) : -1;
  c.set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status PoolShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape in, c.WithRank(0, 4));
  GR_ASSIGN_OR_RETURN(Layout l, GetLayout(c));
  GR_ASSIGN_OR_RETURN(WindowAttrs a, GetWindowAttrs(c));
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> ksize, Attr4(c, "ksize"));
  if (!in.known_rank()) in = PartialShape::UnknownOfRank(4);
  GR_ASSIGN_OR_RETURN(int64_t oh, SpatialOut(c, a, l.h, in.dim(l.h), ksize[l.h]));
  GR_ASSIGN_OR_RETURN(int64_t ow, SpatialOut(c, a, l.w, in.dim(l.w), ksize[l.w]));
  DimVector out(4);
  out[0] = in.dim(0);
  out[l.h] = oh;
  out[l.w] = ow;
  out[l.c] = in.dim(l.c);
  c.set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

// Output 0 is the rank-4 shape held by constant input `i`.
absl::Status ShapeFromInput(ShapeContext& c, int i) {
  GR_ASSIGN_OR_RETURN(PartialShape s, c.ShapeFromInputTensor(i));
  if (s.known_rank() && s.rank() != 4) {
    return c.Error(
        absl::StrCat("input ", i, " must hold a shape of rank 4, got ", s.DebugString()));
  }
  c.set_output(0, s.known_rank() ? s : PartialShape::UnknownOfRank(4));
  return absl::OkStatus();
}

// The channel dimension of x, merged with the rank-1 inputs [first, last).
absl::StatusOr<int64_t> BatchNormChannels(ShapeContext& c, const PartialShape& x, int first,
                                          int last) {
  GR_ASSIGN_OR_RETURN(Layout l, GetLayout(c));
  int64_t channels = x.known_rank() ? x.dim(l.c) : -1;
  for (int i = first; i < last; ++i) {
    GR_ASSIGN_OR_RETURN(PartialShape v, c.WithRank(i, 1));
    const int64_t d = v.known_rank() ? v.dim(0) : -1;
    // In training the mean and variance inputs may be empty.
    if (d == 0 && i >= 3) continue;
    if (d >= 0 && channels >= 0 && d != channels) {
      return c.Error(
          absl::StrCat("input ", i, " has ", d, " elements but x has ", channels, " channels"));
    }
    if (channels < 0) channels = d;
  }
  return channels;
}

absl::Status FusedBatchNormShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape x, c.WithRank(0, 4));
  GR_ASSIGN_OR_RETURN(int64_t channels, BatchNormChannels(c, x, 1, 5));
  c.set_output(0, x.known_rank() ? x : PartialShape::UnknownOfRank(4));
  for (int i = 1; i < 5; ++i) c.set_output(i, PartialShape({channels}));
  if (c.num_outputs() > 5) c.set_output(5, PartialShape::Unknown());
  return absl::OkStatus();
}

absl::Status FusedBatchNormGradShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape dy, c.WithRank(0, 4));
  GR_ASSIGN_OR_RETURN(PartialShape x, c.WithRank(1, 4));
  auto merged = dy.Merge(x);
  if (!merged.ok()) {
    return c.Error(absl::StrCat("y_backprop ", dy.DebugString(), " and x ", x.DebugString(),
                                " must have the same shape"));
  }
  GR_ASSIGN_OR_RETURN(int64_t channels, BatchNormChannels(c, *merged, 2, 5));
  c.set_output(0, merged->known_rank() ? *merged : PartialShape::UnknownOfRank(4));
  c.set_output(1, PartialShape({channels}));
  c.set_output(2, PartialShape({channels}));
  c.set_output(3, PartialShape({0}));
  c.set_output(4, PartialShape({0}));
  return absl::OkStatus();
}

void AddConvAttrs(OpDefBuilder& b, const char* types) {
  b.Attr(types)
      .Attr("strides: list(int)")
      .Attr("use_cudnn_on_gpu: bool = true")
      .Attr(kConvPadding)
      .Attr(kExplicitPaddings)
      .Attr(kDataFormat)
      .Attr("dilations: list(int) = [1, 1, 1, 1]");
}

// FusedBatchNorm, V2 and V3 differ in the types of the statistics (V2+:
// attr U) and V3's sixth output.
void AddFusedBatchNorm(OpRegistry& r, const char* name, int version) {
  const char* stat = version == 1 ? "T" : "U";
  OpDefBuilder b(name);
  b.Input("x: T")
      .Input(absl::StrCat("scale: ", stat))
      .Input(absl::StrCat("offset: ", stat))
      .Input(absl::StrCat("mean: ", stat))
      .Input(absl::StrCat("variance: ", stat))
      .Output("y: T")
      .Output(absl::StrCat("batch_mean: ", stat))
      .Output(absl::StrCat("batch_variance: ", stat))
      .Output(absl::StrCat("reserve_space_1: ", stat))
      .Output(absl::StrCat("reserve_space_2: ", stat));
  if (version == 3) b.Output("reserve_space_3: U");
  b.Attr(version == 1 ? "T: {float}" : "T: {half, bfloat16, float}");
  if (version != 1) b.Attr("U: {float}");
  b.Attr("epsilon: float = 0.0001")
      .Attr("exponential_avg_factor: float = 1.0")
      .Attr(version == 3 ? "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'" : kDataFormat)
      .Attr("is_training: bool = true")
      .SetShapeFn(FusedBatchNormShape);
  r.Add(b);
}

void AddFusedBatchNormGrad(OpRegistry& r, const char* name, int version) {
  const char* stat = version == 1 ? "T" : "U";
  OpDefBuilder b(name);
  b.Input("y_backprop: T")
      .Input("x: T")
      .Input(version == 1 ? "scale: T" : "scale: float")
      .Input(absl::StrCat("reserve_space_1: ", stat))
      .Input(absl::StrCat("reserve_space_2: ", stat));
  if (version == 3) b.Input("reserve_space_3: U");
  b.Output("x_backprop: T")
      .Output(absl::StrCat("scale_backprop: ", stat))
      .Output(absl::StrCat("offset_backprop: ", stat))
      .Output(absl::StrCat(version == 3 ? "reserve_space_4: " : "reserve_space_3: ", stat))
      .Output(absl::StrCat(version == 3 ? "reserve_space_5: " : "reserve_space_4: ", stat));
  b.Attr(version == 1 ? "T: {float}" : "T: {half, bfloat16, float}");
  if (version != 1) b.Attr("U: {float}");
  b.Attr("epsilon: float = 0.0001")
      .Attr(version == 3 ? "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'" : kDataFormat)
      .Attr("is_training: bool = true")
      .SetShapeFn(FusedBatchNormGradShape);
  r.Add(b);
}

}  // namespace

void RegisterConvOps(OpRegistry& r) {
  {
    OpDefBuilder b("Conv2D");
    b.Input("input: T").Input("filter: T").Output("output: T");
    AddConvAttrs(b, "T: {half, bfloat16, float, double, int32}");
    r.Add(b.SetShapeFn(Conv2DShape));
  }
  {
    OpDefBuilder b("DepthwiseConv2dNative");
    b.Input("input: T").Input("filter: T").Output("output: T");
    b.Attr("T: {half, bfloat16, float, double}")
        .Attr("strides: list(int)")
        .Attr(kConvPadding)
        .Attr(kExplicitPaddings)
        .Attr(kDataFormat)
        .Attr("dilations: list(int) = [1, 1, 1, 1]");
    r.Add(b.SetShapeFn(DepthwiseConvShape));
  }
  {
    OpDefBuilder b("Conv2DBackpropInput");
    b.Input("input_sizes: int32").Input("filter: T").Input("out_backprop: T").Output("output: T");
    AddConvAttrs(b, "T: {half, bfloat16, float, double, int32}");
    r.Add(b.SetShapeFn([](ShapeContext& c) { return ShapeFromInput(c, 0); }));
  }
  {
    OpDefBuilder b("Conv2DBackpropFilter");
    b.Input("input: T").Input("filter_sizes: int32").Input("out_backprop: T").Output("output: T");
    AddConvAttrs(b, "T: {half, bfloat16, float, double}");
    r.Add(b.SetShapeFn([](ShapeContext& c) { return ShapeFromInput(c, 1); }));
  }

  r.Add(OpDefBuilder("MaxPool")
            .Input("input: T")
            .Output("output: T")
            .Attr("T: {half, bfloat16, float, double, int32, int64, uint8, "
                  "int16, int8, uint16} = DT_FLOAT")
            .Attr("ksize: list(int) >= 4")
            .Attr("strides: list(int) >= 4")
            .Attr(kConvPadding)
            .Attr(kExplicitPaddings)
            .Attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
            .SetShapeFn(PoolShape));
  r.Add(OpDefBuilder("MaxPoolGrad")
            .Input("orig_input: T")
            .Input("orig_output: T")
            .Input("grad: T")
            .Output("output: T")
            .Attr("ksize: list(int) >= 4")
            .Attr("strides: list(int) >= 4")
            .Attr(kConvPadding)
            .Attr(kExplicitPaddings)
            .Attr(kDataFormat)
            .Attr("T: realnumbertype = DT_FLOAT")
            .SetShapeFn([](ShapeContext& c) {
              GR_ASSIGN_OR_RETURN(PartialShape s, c.WithRank(0, 4));
              c.set_output(0, s);
              return absl::OkStatus();
            }));
  r.Add(OpDefBuilder("AvgPool")
            .Input("value: T")
            .Output("output: T")
            .Attr("ksize: list(int) >= 4")
            .Attr("strides: list(int) >= 4")
            .Attr("padding: {'SAME', 'VALID'}")
            .Attr(kDataFormat)
            .Attr("T: {half, bfloat16, float, double}")
            .SetShapeFn(PoolShape));
  r.Add(OpDefBuilder("AvgPoolGrad")
            .Input("orig_input_shape: int32")
            .Input("grad: T")
            .Output("output: T")
            .Attr("ksize: list(int) >= 4")
            .Attr("strides: list(int) >= 4")
            .Attr("padding: {'SAME', 'VALID'}")
            .Attr(kDataFormat)
            .Attr("T: {half, bfloat16, float, double}")
            .SetShapeFn([](ShapeContext& c) { return ShapeFromInput(c, 0); }));

  AddFusedBatchNorm(r, "FusedBatchNorm", 1);
  AddFusedBatchNorm(r, "FusedBatchNormV2", 2);
  AddFusedBatchNorm(r, "FusedBatchNormV3", 3);
  AddFusedBatchNormGrad(r, "FusedBatchNormGrad", 1);
  AddFusedBatchNormGrad(r, "FusedBatchNormGradV2", 2);
  AddFusedBatchNormGrad(r, "FusedBatchNormGradV3", 3);

  r.Add(OpDefBuilder("L2Loss")
            .Input("t: T")
            .Output("output: T")
            .Attr("T: {half, bfloat16, float, double}")
            .SetShapeFn(shape_fns::Scalar));
}

}  // namespace graphrun
