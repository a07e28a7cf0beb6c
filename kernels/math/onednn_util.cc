#include "kernels/math/onednn_util.h"

#include <dlfcn.h>

namespace graphrun {
namespace {

using SetNumThreads = void (*)(int);

SetNumThreads OmpSetNumThreads() {
  static const SetNumThreads fn =
      reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return fn;
}

}  // namespace

void LimitOneDnnThreads(int n) {
  if (n <= 0) return;
  thread_local int current = 0;
  if (current == n) return;
  if (SetNumThreads fn = OmpSetNumThreads(); fn != nullptr) fn(n);
  current = n;
}

}  // namespace graphrun
