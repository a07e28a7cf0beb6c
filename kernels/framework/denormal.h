// Flush-to-zero and denormals-are-zero for a scope, as TensorFlow's executor
// runs its kernels: arithmetic on denormals takes a microcode assist of
// ~100 cycles per operation (optimizer slots decaying towards zero reach
// them). The executor sets it on its threads; kernels that hand work to
// pool threads set it there too.
#ifndef GRAPHRUN_KERNELS_FRAMEWORK_DENORMAL_H_
#define GRAPHRUN_KERNELS_FRAMEWORK_DENORMAL_H_

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace graphrun {

// Sets the mode on this thread for its lifetime and restores it after.
class ScopedFlushDenormal {
 public:
#if defined(__SSE__)
  ScopedFlushDenormal() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtzDaz); }
  ~ScopedFlushDenormal() { _mm_setcsr(saved_); }

 private:
  static constexpr unsigned kFtzDaz = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
  const unsigned saved_;
#else
  ScopedFlushDenormal() {}  // not an unused trivial variable
#endif
  ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
  ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;
};

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_FRAMEWORK_DENORMAL_H_
