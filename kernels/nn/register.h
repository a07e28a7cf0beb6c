// The neural-network family: activations, Softmax and losses, Conv2D,
// pooling and BatchNorm (oneDNN), their gradients, the Apply* optimizer
// updates and the inference ops (Pad, BatchMatMul, ...).
// RegisterAllKernels (kernels/all_kernels.h) calls these.
#ifndef GRAPHRUN_KERNELS_NN_REGISTER_H_
#define GRAPHRUN_KERNELS_NN_REGISTER_H_

#include "kernels/framework/kernel_registry.h"

namespace graphrun {

// nn_kernels.cc.
void RegisterNnKernels(KernelRegistry& r);
// conv_kernels.cc, pool_kernels.cc, batch_norm_kernels.cc.
void RegisterConvKernels(KernelRegistry& r);
// training_kernels.cc.
void RegisterTrainingKernels(KernelRegistry& r);
// grad_kernels.cc.
void RegisterGradKernels(KernelRegistry& r);
// inference_kernels.cc: Pad, BatchMatMul and the like.
void RegisterInferenceKernels(KernelRegistry& r);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_NN_REGISTER_H_
