#include "kernels/all_kernels.h"

#include "kernels/test_accel_kernels.h"

namespace graphrun {

void RegisterAllKernels(KernelRegistry& r) {
  RegisterCwiseKernels(r);
  RegisterCastKernels(r);
  RegisterMatMulKernels(r);
  RegisterNnKernels(r);
  RegisterReductionKernels(r);
  RegisterArrayKernels(r);
  RegisterStateKernels(r);
  RegisterRandomKernels(r);
  RegisterControlFlowKernels(r);
  RegisterRuntimeKernels(r);
  RegisterDatasetKernels(r);
  RegisterCheckpointKernels(r);
  RegisterConvKernels(r);
  RegisterTrainingKernels(r);
  RegisterGradKernels(r);
  RegisterQueueKernels(r);
  RegisterDynamicPartitionKernels(r);
  RegisterCollectiveKernels(r);
  RegisterInferenceKernels(r);
  RegisterParsingKernels(r);
  RegisterViaFloatKernels(r);
  RegisterTestAccelKernels(r);
}

const KernelRegistry& DefaultKernelRegistry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    RegisterAllKernels(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace graphrun
