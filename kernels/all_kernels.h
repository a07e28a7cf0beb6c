// Kernel registration. Kernels come in families, one folder each under
// kernels/ (math, nn, data, io, core, gpu), on top of the kernel framework
// (kernels/framework); each family's register.h declares the functions that
// register its kernels into the registry they are given. RegisterAllKernels
// calls them all.
#ifndef GRAPHRUN_KERNELS_ALL_KERNELS_H_
#define GRAPHRUN_KERNELS_ALL_KERNELS_H_

#include "kernels/core/register.h"
#include "kernels/data/register.h"
#include "kernels/framework/kernel_registry.h"
#include "kernels/io/register.h"
#include "kernels/math/register.h"
#include "kernels/nn/register.h"

namespace graphrun {

void RegisterAllKernels(KernelRegistry& r);

// The default registry holding every kernel above, built on first use.
const KernelRegistry& DefaultKernelRegistry();

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_ALL_KERNELS_H_
