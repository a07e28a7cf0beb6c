// The io family: checkpoints (Save/Restore ops and the V2 bundle format).
// RegisterAllKernels (kernels/all_kernels.h) calls these.
#ifndef GRAPHRUN_KERNELS_IO_REGISTER_H_
#define GRAPHRUN_KERNELS_IO_REGISTER_H_

#include <cstddef>
#include <cstdint>

#include "kernels/framework/kernel_registry.h"

namespace graphrun {

// checkpoint_kernels.cc.
void RegisterCheckpointKernels(KernelRegistry& r);
// checkpoint_v1_kernels.cc.
void RegisterCheckpointV1Kernels(KernelRegistry& r);
// For tests: the checkpoints Restore and RestoreSlice have opened so far,
// and the steps that hold opened readers now (released as steps end).
int64_t V1CheckpointOpensForTesting();
size_t V1CheckpointStepsForTesting();

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_IO_REGISTER_H_
