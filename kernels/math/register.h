// The math family: element-wise and cast, MatMul, reductions, random,
// array and indexing ops, DynamicPartition, and the half/bfloat16 kernels
// built on the float ones.
// RegisterAllKernels (kernels/all_kernels.h) calls these.
#ifndef GRAPHRUN_KERNELS_MATH_REGISTER_H_
#define GRAPHRUN_KERNELS_MATH_REGISTER_H_

#include "kernels/framework/kernel_registry.h"

namespace graphrun {

// cwise_ops.cc.
void RegisterCwiseKernels(KernelRegistry& r);
// cast_op.cc.
void RegisterCastKernels(KernelRegistry& r);
// matmul_op.cc.
void RegisterMatMulKernels(KernelRegistry& r);
// reduction_ops.cc.
void RegisterReductionKernels(KernelRegistry& r);
// array_kernels.cc, array_index_kernels.cc.
void RegisterArrayKernels(KernelRegistry& r);
// array_index_kernels.cc (Slice, StridedSlice, Gather, ...); called by
// RegisterArrayKernels.
void RegisterArrayIndexKernels(KernelRegistry& r);
// random_kernels.cc.
void RegisterRandomKernels(KernelRegistry& r);
// dynamic_partition_kernels.cc: DynamicPartition, DynamicStitch.
void RegisterDynamicPartitionKernels(KernelRegistry& r);
// via_float_kernels.cc: half / bfloat16 of MatMul, reductions, Softmax, Conv2D, ... through their
// float kernels (registered last).
void RegisterViaFloatKernels(KernelRegistry& r);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_MATH_REGISTER_H_
