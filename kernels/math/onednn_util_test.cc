// LimitOneDnnThreads sets the calling thread's OpenMP team (the one oneDNN
// uses) to the given intra-op parallelism, and leaves it alone for 0; a
// runtime device reports the parallelism it was configured with.
#include "kernels/math/onednn_util.h"

#include <dlfcn.h>

#include <thread>

#include "gtest/gtest.h"

namespace graphrun {
namespace {

int OmpMaxThreads() {
  using Fn = int (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return fn == nullptr ? -1 : fn();
}

TEST(OneDnnUtilTest, HoldsTheOpenMpTeamToTheParallelism) {
  if (OmpMaxThreads() < 0) GTEST_SKIP() << "oneDNN is not on OpenMP here";
  // Fresh threads, so earlier settings of this thread do not count.
  std::thread([] {
    LimitOneDnnThreads(1);
    EXPECT_EQ(OmpMaxThreads(), 1);
    LimitOneDnnThreads(3);
    EXPECT_EQ(OmpMaxThreads(), 3);
  }).join();
  std::thread([] {
    const int before = OmpMaxThreads();
    LimitOneDnnThreads(0);
    EXPECT_EQ(OmpMaxThreads(), before);
  }).join();
}

}  // namespace
}  // namespace graphrun
