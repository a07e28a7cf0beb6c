// The core family: variables and state, control flow and stacks, Send/Recv,
// function calls and collectives.
// RegisterAllKernels (kernels/all_kernels.h) calls these.
#ifndef GRAPHRUN_KERNELS_CORE_REGISTER_H_
#define GRAPHRUN_KERNELS_CORE_REGISTER_H_

#include <string>
#include <vector>

#include "kernels/framework/kernel_registry.h"

namespace graphrun {

// state_kernels.cc.
void RegisterStateKernels(KernelRegistry& r);
// control_flow_kernels.cc.
void RegisterControlFlowKernels(KernelRegistry& r);
// runtime_kernels.cc: _Send, _Recv and the other transfer ops.
void RegisterRuntimeKernels(KernelRegistry& r);
// runtime_kernels.cc: _Send/_Recv for an accelerator type, copying through the host.
void RegisterAcceleratorTransferKernels(KernelRegistry& r, const std::string& device_type);
// state_kernels.cc: VarHandleOp, ReadVariableOp, AssignVariableOp,
// VarIsInitializedOp, VariableShape and DestroyResourceOp for an
// accelerator type, variables of `types` in its memory.
void RegisterAcceleratorVariableKernels(KernelRegistry& r, const std::string& device_type,
                                        const std::vector<DataType>& types);
// stack_kernels.cc.
void RegisterStackKernels(KernelRegistry& r);
// function_call_kernels.cc.
void RegisterFunctionCallKernels(KernelRegistry& r);
// collective_kernels.cc.
void RegisterCollectiveKernels(KernelRegistry& r);
// collective_kernels.cc: the V2 collectives for an accelerator type, data of
// `types` staged through host memory.
void RegisterAcceleratorCollectiveKernels(KernelRegistry& r, const std::string& device_type,
                                          const std::vector<DataType>& types);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_CORE_REGISTER_H_
