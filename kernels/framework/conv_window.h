// Window attributes and geometry of convolutions and pooling (NHWC), as
// TensorFlow's Conv2D, MaxPool, AvgPool and their gradients read them:
// shared by the CPU kernels (kernels/nn) and the GPU's (kernels/gpu).
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_CONV_WINDOW_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_CONV_WINDOW_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ops/window_util.h"
#include "graph/tensor.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {
namespace conv_window {

struct WindowParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t window_h = 1, window_w = 1;  // pooling: ksize; conv: from filter
  window::Padding padding = window::Padding::kValid;
  std::vector<int64_t> explicit_paddings;  // 8 values in NHWC order, or empty
};

// Reads data_format (NHWC only), strides, padding (and explicit_paddings),
// and dilations when `conv` or ksize otherwise. Returns the construction's
// error naming the bad attribute.
absl::Status ReadWindowParams(OpKernelConstruction* c, bool conv, WindowParams* p);

// The geometry of one conv or pooling computation.
struct Geometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input
  int64_t kh = 1, kw = 1, out_c = 0;   // window; output channels
  window::Dim dh, dw;                  // output sizes and paddings
  TensorShape OutputShape() const { return TensorShape({n, dh.out, dw.out, out_c}); }
  std::vector<int64_t> Key() const { return {n, h, w, c, kh, kw, out_c}; }
};

// The geometry of a `kh` x `kw` window with `out_c` output channels over the
// NHWC `input`. Returns InvalidArgument (via k.Error) when `input` is not
// rank 4 or the window does not fit.
absl::StatusOr<Geometry> MakeGeometry(const OpKernel& k, const WindowParams& p,
                                      const TensorShape& input, int64_t kh, int64_t kw,
                                      int64_t out_c);

// A rank-4 shape held by an int32/int64 vector input.
absl::StatusOr<TensorShape> ShapeInput(const OpKernel& k, const Tensor& t, const char* what);

}  // namespace conv_window
}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_CONV_WINDOW_H_
