// Kernel registration. Each function registers one family of kernels into
// the registry it is given; RegisterAllKernels calls them all.
#ifndef GRAPHRUN_KERNELS_ALL_KERNELS_H_
#define GRAPHRUN_KERNELS_ALL_KERNELS_H_

#include "kernels/kernel_registry.h"

namespace graphrun {

void RegisterCwiseKernels(KernelRegistry& r);        // cwise_ops.cc
void RegisterCastKernels(KernelRegistry& r);         // cast_op.cc
void RegisterMatMulKernels(KernelRegistry& r);       // matmul_op.cc
void RegisterNnKernels(KernelRegistry& r);           // nn_kernels.cc
void RegisterReductionKernels(KernelRegistry& r);    // reduction_ops.cc
void RegisterArrayKernels(KernelRegistry& r);        // array_kernels.cc
void RegisterStateKernels(KernelRegistry& r);        // state_kernels.cc
void RegisterRandomKernels(KernelRegistry& r);       // random_kernels.cc
void RegisterControlFlowKernels(KernelRegistry& r);  // control_flow_kernels.cc
void RegisterRuntimeKernels(KernelRegistry& r);      // runtime_kernels.cc
// _Send/_Recv for an accelerator type (runtime_kernels.cc), copying
// through the host.
void RegisterAcceleratorTransferKernels(KernelRegistry& r, const std::string& device_type);
void RegisterDatasetKernels(KernelRegistry& r);       // dataset_kernels.cc
void RegisterCheckpointKernels(KernelRegistry& r);    // checkpoint_kernels.cc
void RegisterConvKernels(KernelRegistry& r);          // conv_kernels.cc
void RegisterTrainingKernels(KernelRegistry& r);      // training_kernels.cc
void RegisterGradKernels(KernelRegistry& r);          // grad_kernels.cc
void RegisterQueueKernels(KernelRegistry& r);         // queue_kernels.cc
void RegisterStackKernels(KernelRegistry& r);         // stack_kernels.cc
void RegisterFunctionCallKernels(KernelRegistry& r);  // function_call_kernels.cc
// dynamic_partition_kernels.cc: DynamicPartition, DynamicStitch.
void RegisterDynamicPartitionKernels(KernelRegistry& r);
void RegisterCollectiveKernels(KernelRegistry& r);  // collective_kernels.cc
void RegisterInferenceKernels(KernelRegistry& r);   // inference_kernels.cc: Pad, BatchMatMul, ...
void RegisterParsingKernels(KernelRegistry& r);     // parsing_kernels.cc: ParseExample(V2)
// half / bfloat16 of MatMul, reductions, Softmax, Conv2D, ... through their
// float kernels (via_float_kernels.cc); registered last.
void RegisterViaFloatKernels(KernelRegistry& r);

void RegisterAllKernels(KernelRegistry& r);

// The default registry holding every kernel above, built on first use.
const KernelRegistry& DefaultKernelRegistry();

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_ALL_KERNELS_H_
