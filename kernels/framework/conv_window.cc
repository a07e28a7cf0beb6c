// Window attributes and geometry (conv_window.h).
#include "kernels/framework/conv_window.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/framework/array_util.h"

namespace graphrun {
namespace conv_window {
namespace {

absl::Status ReadList4(OpKernelConstruction* c, const char* name, std::vector<int64_t>* v) {
  GR_RETURN_IF_ERROR(c->GetAttr(name, v));
  if (v->size() != 4) {
    return c->Error(absl::StrCat(name, " must have 4 elements, got ", v->size()));
  }
  if ((*v)[0] != 1 || (*v)[3] != 1) {
    return c->Error(absl::StrCat(name, " in the batch and depth dimensions must be 1"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadWindowParams(OpKernelConstruction* c, bool conv, WindowParams* p) {
  std::string format;
  GR_RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  if (format != "NHWC") {
    return c->Error(absl::StrCat("data_format ", format, " is not supported; use NHWC"));
  }
  std::vector<int64_t> v;
  GR_RETURN_IF_ERROR(ReadList4(c, "strides", &v));
  p->stride_h = v[1];
  p->stride_w = v[2];
  if (conv) {
    GR_RETURN_IF_ERROR(ReadList4(c, "dilations", &v));
    p->dilation_h = v[1];
    p->dilation_w = v[2];
  } else {
    GR_RETURN_IF_ERROR(ReadList4(c, "ksize", &v));
    p->window_h = v[1];
    p->window_w = v[2];
  }
  std::string padding;
  GR_RETURN_IF_ERROR(c->GetAttr("padding", &padding));
  auto pad = window::ParsePadding(padding);
  if (!pad.ok()) return c->Error(pad.status().message());
  p->padding = *pad;
  if (p->padding == window::Padding::kExplicit) {
    GR_RETURN_IF_ERROR(c->GetAttr("explicit_paddings", &p->explicit_paddings));
    if (p->explicit_paddings.size() != 8) {
      return c->Error("explicit_paddings must have 8 elements");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Geometry> MakeGeometry(const OpKernel& k, const WindowParams& p,
                                      const TensorShape& input, int64_t kh, int64_t kw,
                                      int64_t out_c) {
  if (input.dims() != 4) {
    return k.Error(absl::StrCat("input must be 4-dimensional (NHWC), got ", input.DebugString()));
  }
  Geometry g;
  g.n = input.dim_size(0);
  g.h = input.dim_size(1);
  g.w = input.dim_size(2);
  g.c = input.dim_size(3);
  g.kh = kh;
  g.kw = kw;
  g.out_c = out_c;
  const bool ex = !p.explicit_paddings.empty();
  auto dh = window::ComputeDim(g.h, kh, p.dilation_h, p.stride_h, p.padding,
                               ex ? p.explicit_paddings[2] : 0, ex ? p.explicit_paddings[3] : 0);
  if (!dh.ok()) return k.Error(dh.status().message());
  auto dw = window::ComputeDim(g.w, kw, p.dilation_w, p.stride_w, p.padding,
                               ex ? p.explicit_paddings[4] : 0, ex ? p.explicit_paddings[5] : 0);
  if (!dw.ok()) return k.Error(dw.status().message());
  g.dh = *dh;
  g.dw = *dw;
  return g;
}

absl::StatusOr<TensorShape> ShapeInput(const OpKernel& k, const Tensor& t, const char* what) {
  GR_ASSIGN_OR_RETURN(std::vector<int64_t> v, array_util::IntValues(k, t, what));
  if (t.dims() != 1 || v.size() != 4) {
    return k.Error(
        absl::StrCat(what, " must be a vector of 4 elements, got ", t.shape().DebugString()));
  }
  auto s = TensorShape::Make(v);
  if (!s.ok()) return k.Error(absl::StrCat(what, ": ", s.status().message()));
  return *s;
}

}  // namespace conv_window
}  // namespace graphrun
