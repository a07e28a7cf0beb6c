// Out-of-line parts of onednn_conv_internal.h: the CPU engine.
#include "kernels/nn/onednn_conv_internal.h"

namespace graphrun {
namespace onednn_conv {

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

}  // namespace onednn_conv
}  // namespace graphrun
