// The data family: tf.data datasets and iterators, ParseExample, queues
// and conditional accumulators.
// RegisterAllKernels (kernels/all_kernels.h) calls these.
#ifndef GRAPHRUN_KERNELS_DATA_REGISTER_H_
#define GRAPHRUN_KERNELS_DATA_REGISTER_H_

#include "kernels/framework/kernel_registry.h"

namespace graphrun {

// dataset_*.cc.
void RegisterDatasetKernels(KernelRegistry& r);
// queue_kernels.cc; calls RegisterAccumulatorKernels.
void RegisterQueueKernels(KernelRegistry& r);
// accumulator_kernels.cc.
namespace queue_internal {
void RegisterAccumulatorKernels(KernelRegistry& r);
}  // namespace queue_internal
// parsing_kernels.cc: ParseExample and ParseExampleV2.
void RegisterParsingKernels(KernelRegistry& r);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_DATA_REGISTER_H_
