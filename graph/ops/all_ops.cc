#include "graph/ops/all_ops.h"

namespace graphrun {

void RegisterAllOps(OpRegistry& r) {
  RegisterArrayOps(r);
  RegisterMathOps(r);
  RegisterNnOps(r);
  RegisterStateOps(r);
  RegisterRandomOps(r);
  RegisterControlFlowOps(r);
  RegisterRuntimeOps(r);
  RegisterDatasetOps(r);
  RegisterIoOps(r);
  RegisterConvOps(r);
  RegisterTrainingOps(r);
  RegisterGradOps(r);
  RegisterQueueOps(r);
  RegisterDataFlowOps(r);
  RegisterCollectiveOps(r);
  RegisterParsingOps(r);
}

const OpRegistry& DefaultOpRegistry() {
  static const OpRegistry* r = [] {
    auto* reg = new OpRegistry();
    RegisterAllOps(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace graphrun
