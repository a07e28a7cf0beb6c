// The FunctionLibraryRuntime an Executor hands the kernels of a graph that
// carries a function library: it instantiates a library function as a call
// frame (kernels/core/function_call_kernels.cc).
//
// Instantiation builds the graph
//   _Arg(0..n-1) -> the function, inlined -> _Retval(0..m-1)
// canonicalised as every entry point's graph is (nested calls inlined,
// functional control flow lowered; a nested `_noinline` call stays a call
// frame of its own), and one Executor over it on the calling kernel's
// device, or one per device when its nodes ask for devices
// (FunctionRuntimeOptions). Each Run executes that executor with a call frame of the call's
// inputs, in the caller's step. When the step is traced, the body's node
// stats go with the caller's device's, named under the call
// ("CALL/FUNCTION/NODE", step_stats.h).
#ifndef GRAPHRUN_RUNTIME_FUNCTION_CALL_H_
#define GRAPHRUN_RUNTIME_FUNCTION_CALL_H_

#include <cstdint>
#include <memory>

#include "graph/proto/graph.pb.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/framework/op_kernel.h"

namespace graphrun {

class DeviceMgr;  // runtime/device.h

struct FunctionRuntimeOptions {
  // The task's devices. With them, a body whose nodes ask for devices
  // (a `device` attr in the FunctionDef, or colocation with such a node)
  // is placed over this task's devices: unconstrained nodes, _Arg and
  // _Retval on the calling kernel's device, the others where they ask;
  // then partitioned per device, joined by _Send/_Recv through the call's
  // own rendezvous, with one executor per device. A request naming
  // another task is InvalidArgument naming the function, the node and the
  // device: a call frame runs on its caller's task (inline the function,
  // dropping `_noinline`, to place its nodes on other tasks). Null: every
  // body node runs on the calling kernel's device.
  DeviceMgr* device_mgr = nullptr;
  bool allow_soft_placement = false;
  // One executor build may nest call frames at most max_depth deep, and
  // their bodies may have at most max_nodes nodes in all (ResourceExhausted
  // naming the function): a server's --max_function_depth and
  // --max_graph_nodes.
  int max_depth = 64;
  int64_t max_nodes = int64_t{1} << 20;
};

// `library` and `kernels` (and options.device_mgr) must outlive the
// runtime and every body it makes.
std::unique_ptr<FunctionLibraryRuntime> NewFunctionLibraryRuntime(
    const tensorflow::FunctionDefLibrary* library, const KernelRegistry* kernels,
    const FunctionRuntimeOptions& options = {});

}  // namespace graphrun

#endif  // GRAPHRUN_RUNTIME_FUNCTION_CALL_H_
