// The FunctionLibraryRuntime an Executor hands the kernels of a graph that
// carries a function library: it instantiates a library function as a call
// frame (kernels/core/function_call_kernels.cc).
//
// Instantiation builds the graph
//   _Arg(0..n-1) -> the function, inlined -> _Retval(0..m-1)
// canonicalised as every entry point's graph is (nested calls inlined,
// functional control flow lowered; a nested `_noinline` call stays a call
// frame of its own), and one Executor over it on the calling kernel's
// device. Each Run executes that executor with a call frame of the call's
// inputs, in the caller's step. When the step is traced, the body's node
// stats go with the caller's device's, named under the call
// ("CALL/FUNCTION/NODE", step_stats.h).
#ifndef GRAPHRUN_RUNTIME_FUNCTION_CALL_H_
#define GRAPHRUN_RUNTIME_FUNCTION_CALL_H_

#include <memory>

#include "graph/proto/graph.pb.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {

// `library` and `kernels` must outlive the runtime and every body it makes.
std::unique_ptr<FunctionLibraryRuntime> NewFunctionLibraryRuntime(
    const tensorflow::FunctionDefLibrary* library, const KernelRegistry* kernels);

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_FUNCTION_CALL_H_
