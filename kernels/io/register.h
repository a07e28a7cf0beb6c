// The io family: checkpoints (Save/Restore ops and the V2 bundle format).
// RegisterAllKernels (kernels/all_kernels.h) calls these.
#ifndef GRAPHRUN_KERNELS_IO_REGISTER_H_
#define GRAPHRUN_KERNELS_IO_REGISTER_H_

#include "kernels/framework/kernel_registry.h"

namespace graphrun {

// checkpoint_kernels.cc.
void RegisterCheckpointKernels(KernelRegistry& r);
// checkpoint_v1_kernels.cc.
void RegisterCheckpointV1Kernels(KernelRegistry& r);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_IO_REGISTER_H_
