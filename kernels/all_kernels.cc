#include "kernels/all_kernels.h"

#include "kernels/core/test_accel_kernels.h"
#ifdef GRAPHRUN_CUDA
#include "kernels/gpu/gpu_accelerator.h"
#endif

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
  RegisterCheckpointV1Kernels(r);
  RegisterConvKernels(r);
  RegisterTrainingKernels(r);
  RegisterGradKernels(r);
  RegisterQueueKernels(r);
  RegisterStackKernels(r);
  RegisterFunctionCallKernels(r);
  RegisterDynamicPartitionKernels(r);
  RegisterCollectiveKernels(r);
  RegisterInferenceKernels(r);
  RegisterParsingKernels(r);
  RegisterViaFloatKernels(r);
  RegisterTestAccelKernels(r);
#ifdef GRAPHRUN_CUDA
  RegisterGpuKernels(r);
  RegisterAcceleratorTransferKernels(r, kDeviceGpu);
  RegisterAcceleratorVariableKernels(r, kDeviceGpu, {DT_FLOAT});
  RegisterAcceleratorCollectiveKernels(r, kDeviceGpu, {DT_FLOAT});
#endif
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
