// Window geometry shared by the shape functions (graph/ops/conv_ops.cc) and
// the CPU kernels (kernels/nn/conv_kernels.cc) of convolution and pooling ops,
// so both agree on output sizes and padding. Follows TensorFlow's
// GetWindowedOutputSizeVerbose: SAME gives ceil(in / stride) outputs with
// the padding split evenly, the odd element after; VALID gives
// floor((in - effective_window) / stride) + 1 and no padding; EXPLICIT takes
// the paddings given.
#ifndef GRAPHRUN_GRAPH_OPS_WINDOW_UTIL_H_
#define GRAPHRUN_GRAPH_OPS_WINDOW_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace graphrun {
namespace window {

enum class Padding { kValid, kSame, kExplicit };

// InvalidArgument for anything but "VALID", "SAME", "EXPLICIT".
inline absl::StatusOr<Padding> ParsePadding(const std::string& s) {
  if (s == "VALID") return Padding::kValid;
  if (s == "SAME") return Padding::kSame;
  if (s == "EXPLICIT") return Padding::kExplicit;
  return absl::InvalidArgumentError(absl::StrCat("unknown padding '", s, "'"));
}

// One spatial dimension of a windowed op.
struct Dim {
  int64_t out = 0;
  int64_t pad_before = 0;
  int64_t pad_after = 0;
};

// The output size and padding of one spatial dimension of size `in` under a
// window of `window` taps `dilation` apart moved by `stride`. The explicit
// paddings are only read for Padding::kExplicit. InvalidArgument when the
// stride or dilation is < 1, a padding is negative, or the output size would
// be negative (as TensorFlow, a window just larger than the input gives 0).
inline absl::StatusOr<Dim> ComputeDim(int64_t in, int64_t window, int64_t dilation, int64_t stride,
                                      Padding padding, int64_t explicit_before = 0,
                                      int64_t explicit_after = 0) {
  if (stride < 1 || dilation < 1 || window < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "window ", window, ", stride ", stride, " and dilation ", dilation, " must all be >= 1"));
  }
  const int64_t effective = (window - 1) * dilation + 1;
  Dim d;
  switch (padding) {
    case Padding::kValid:
      d.out = (in - effective + stride) / stride;
      break;
    case Padding::kSame: {
      d.out = (in + stride - 1) / stride;
      const int64_t needed = (d.out - 1) * stride + effective - in;
      const int64_t total = needed > 0 ? needed : 0;
      d.pad_before = total / 2;
      d.pad_after = total - d.pad_before;
      break;
    }
    case Padding::kExplicit:
      if (explicit_before < 0 || explicit_after < 0) {
        return absl::InvalidArgumentError("explicit paddings must be >= 0");
      }
      d.pad_before = explicit_before;
      d.pad_after = explicit_after;
      d.out = (in + explicit_before + explicit_after - effective + stride) / stride;
      break;
  }
  if (d.out < 0) {
    return absl::InvalidArgumentError(absl::StrCat("computed output size would be negative: input ",
                                                   in, ", window ", effective,
                                                   " (after dilation), stride ", stride));
  }
  return d;
}

}  // namespace window
}  // namespace graphrun

#endif  // GRAPHRUN_GRAPH_OPS_WINDOW_UTIL_H_
