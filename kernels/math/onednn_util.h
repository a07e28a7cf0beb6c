// Holds oneDNN's thread team to the device's intra-op parallelism.
//
// Debian's oneDNN runs its primitives (and dnnl_sgemm) on OpenMP, whose
// team defaults to one thread per core in every calling thread. A task
// configured for one intra-op thread (each task of a local cluster) would
// otherwise run every MatMul on all cores, oversubscribing the machine
// that its other tasks share (measured: ~11% more examples/s for the
// 1 PS + 2 workers MLP at batch 32 with the team held to 1).
//
// omp_set_num_threads is looked up at run time (libgomp comes in with
// libdnnl), so nothing links against OpenMP directly; it sets the calling
// thread's team size, remembered per thread.
#ifndef GRAPHRUN_KERNELS_MATH_ONEDNN_UTIL_H_
#define GRAPHRUN_KERNELS_MATH_ONEDNN_UTIL_H_

#include "kernels/framework/op_kernel.h"

namespace graphrun {

// Before a oneDNN call in a kernel, with ctx->intra_op_parallelism(): the
// calling thread's OpenMP team size becomes `parallelism` (no-op when it is
// 0, unknown, or without OpenMP).
void LimitOneDnnThreads(int parallelism);

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_MATH_ONEDNN_UTIL_H_
