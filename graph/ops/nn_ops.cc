// Neural-network op schemas: activations and their gradients, Softmax,
// BiasAdd and the softmax cross-entropy losses. Names, arguments and attrs
// follow TensorFlow's nn_ops.cc.
#include "absl/strings/str_cat.h"
#include "graph/ops/all_ops.h"
#include "graph/ops/shape_fns.h"
#include "graph/status.h"

namespace graphrun {
namespace {

constexpr char kRealNumberTypes[] =
    "T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, "
    "int64}";
constexpr char kFloatTypes[] = "T: {half, bfloat16, float, double}";
constexpr char kDataFormat[] = "data_format: {'NHWC', 'NCHW'} = 'NHWC'";

// Softmax and LogSoftmax: input of rank >= 1, output of the same shape.
absl::Status SoftmaxShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  if (in.known_rank() && in.rank() < 1) {
    return c.Error("logits must have rank >= 1");
  }
  c.set_output(0, in);
  return absl::OkStatus();
}

// Channel dimension of a rank-`rank` tensor for `data_format`.
absl::StatusOr<int> ChannelDim(ShapeContext& c, int rank) {
  std::string format;
  GR_RETURN_IF_ERROR(c.GetAttr("data_format", &format));
  return format == "NCHW" ? 1 : rank - 1;
}

absl::Status BiasAddShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape bias, c.WithRank(1, 1));
  const PartialShape& value = c.input(0);
  if (!value.known_rank()) {
    c.set_output(0, value);
    return absl::OkStatus();
  }
  if (value.rank() < 2) {
    return c.Error(absl::StrCat("value must have rank >= 2, got ", value.DebugString()));
  }
  int channel = value.rank() - 1;
  if (c.op_def().name() == "BiasAdd") {
    GR_ASSIGN_OR_RETURN(channel, ChannelDim(c, value.rank()));
  }
  DimVector dims(value.dims().begin(), value.dims().end());
  if (dims[channel] >= 0 && bias.dim(0) >= 0 && dims[channel] != bias.dim(0)) {
    return c.Error(absl::StrCat("bias of shape ", bias.DebugString(),
                                " does not match the channel dimension of ", value.DebugString()));
  }
  if (dims[channel] < 0) dims[channel] = bias.dim(0);
  c.set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status BiasAddGradShape(ShapeContext& c) {
  const PartialShape& in = c.input(0);
  if (!in.known_rank()) {
    c.set_output(0, PartialShape::UnknownOfRank(1));
    return absl::OkStatus();
  }
  if (in.rank() < 2) {
    return c.Error(absl::StrCat("out_backprop must have rank >= 2, got ", in.DebugString()));
  }
  GR_ASSIGN_OR_RETURN(int channel, ChannelDim(c, in.rank()));
  c.set_output(0, PartialShape({in.dim(channel)}));
  return absl::OkStatus();
}

absl::Status SoftmaxXentShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape features, c.WithRank(0, 2));
  GR_ASSIGN_OR_RETURN(PartialShape labels, c.WithRank(1, 2));
  auto merged = features.Merge(labels);
  if (!merged.ok()) {
    return c.Error(absl::StrCat("features ", features.DebugString(), " and labels ",
                                labels.DebugString(), " must have the same shape"));
  }
  c.set_output(0, PartialShape({merged->dim(0)}));
  c.set_output(1, *merged);
  return absl::OkStatus();
}

absl::Status SparseSoftmaxXentShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape features, c.WithRank(0, 2));
  GR_ASSIGN_OR_RETURN(PartialShape labels, c.WithRank(1, 1));
  int64_t batch = features.dim(0);
  if (batch >= 0 && labels.dim(0) >= 0 && batch != labels.dim(0)) {
    return c.Error(absl::StrCat("features ", features.DebugString(), " and labels ",
                                labels.DebugString(), " disagree on the batch size"));
  }
  if (batch < 0) batch = labels.dim(0);
  c.set_output(0, PartialShape({batch}));
  c.set_output(1, PartialShape({batch, features.dim(1)}));
  return absl::OkStatus();
}

// Gradient ops taking (gradients, features) of one shape.
absl::Status SameShapeBinary(ShapeContext& c) {
  auto merged = c.input(0).Merge(c.input(1));
  if (!merged.ok()) {
    return c.Error(absl::StrCat("inputs must have the same shape, got ", c.input(0).DebugString(),
                                " and ", c.input(1).DebugString()));
  }
  c.set_output(0, *merged);
  return absl::OkStatus();
}

}  // namespace

namespace {

// images [batch, height, width, channels], size = [new_height, new_width].
absl::Status ResizeShape(ShapeContext& c) {
  GR_ASSIGN_OR_RETURN(PartialShape in, c.WithRank(0, 4));
  if (!in.known_rank()) in = PartialShape::UnknownOfRank(4);
  int64_t h = -1, w = -1;
  if (const Tensor* size = c.input_tensor(1)) {
    if (size->dtype() != DT_INT32 || size->NumElements() != 2) {
      return c.Error("size must be an int32 vector of 2 elements");
    }
    h = size->flat<int32_t>()[0];
    w = size->flat<int32_t>()[1];
    if (h <= 0 || w <= 0) return c.Error("size must be positive");
  }
  c.set_output(0, PartialShape({in.dim(0), h, w, in.dim(3)}));
  return absl::OkStatus();
}

}  // namespace

void RegisterNnOps(OpRegistry& r) {
  r.Add(OpDefBuilder("ResizeBilinear")
            .Input("images: T")
            .Input("size: int32")
            .Output("resized_images: float")
            .Attr("T: {int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double}")
            .Attr("align_corners: bool = false")
            .Attr("half_pixel_centers: bool = false")
            .SetShapeFn(ResizeShape));
  r.Add(OpDefBuilder("ResizeNearestNeighbor")
            .Input("images: T")
            .Input("size: int32")
            .Output("resized_images: T")
            .Attr("T: {int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}")
            .Attr("align_corners: bool = false")
            .Attr("half_pixel_centers: bool = false")
            .SetShapeFn(ResizeShape));
  for (const char* name : {"Relu", "Relu6"}) {
    r.Add(OpDefBuilder(name)
              .Input("features: T")
              .Output("activations: T")
              .Attr(kRealNumberTypes)
              .SetShapeFn(shape_fns::Unchanged));
  }
  for (const char* name : {"ReluGrad", "Relu6Grad"}) {
    r.Add(OpDefBuilder(name)
              .Input("gradients: T")
              .Input("features: T")
              .Output("backprops: T")
              .Attr(kRealNumberTypes)
              .SetShapeFn(SameShapeBinary));
  }
  r.Add(OpDefBuilder("Softmax")
            .Input("logits: T")
            .Output("softmax: T")
            .Attr(kFloatTypes)
            .SetShapeFn(SoftmaxShape));
  r.Add(OpDefBuilder("LogSoftmax")
            .Input("logits: T")
            .Output("logsoftmax: T")
            .Attr(kFloatTypes)
            .SetShapeFn(SoftmaxShape));
  r.Add(OpDefBuilder("BiasAdd")
            .Input("value: T")
            .Input("bias: T")
            .Output("output: T")
            .Attr(kRealNumberTypes)
            .Attr(kDataFormat)
            .SetShapeFn(BiasAddShape));
  r.Add(OpDefBuilder("BiasAddV1")
            .Input("value: T")
            .Input("bias: T")
            .Output("output: T")
            .Attr(kRealNumberTypes)
            .SetShapeFn(BiasAddShape));
  r.Add(OpDefBuilder("BiasAddGrad")
            .Input("out_backprop: T")
            .Output("output: T")
            .Attr(kRealNumberTypes)
            .Attr(kDataFormat)
            .SetShapeFn(BiasAddGradShape));
  r.Add(OpDefBuilder("SoftmaxCrossEntropyWithLogits")
            .Input("features: T")
            .Input("labels: T")
            .Output("loss: T")
            .Output("backprop: T")
            .Attr(kFloatTypes)
            .SetShapeFn(SoftmaxXentShape));
  r.Add(OpDefBuilder("SparseSoftmaxCrossEntropyWithLogits")
            .Input("features: T")
            .Input("labels: Tlabels")
            .Output("loss: T")
            .Output("backprop: T")
            .Attr(kFloatTypes)
            .Attr("Tlabels: {int32, int64} = DT_INT64")
            .SetShapeFn(SparseSoftmaxXentShape));
}

}  // namespace graphrun
