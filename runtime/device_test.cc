// Devices report the intra-op parallelism they were configured with (what
// oneDNN's thread team is held to), and the hardware's by default.
#include "runtime/device.h"

#include <thread>

#include "gtest/gtest.h"

namespace graphrun {
namespace {

TEST(DeviceTest, IntraOpParallelismIsTheConfiguredThreads) {
  for (int threads : {1, 3}) {
    DeviceMgrOptions o;
    o.num_cpus = 2;
    o.intra_op_threads = threads;
    auto mgr = DeviceMgr::NewLocal(o);
    ASSERT_TRUE(mgr.ok()) << mgr.status();
    for (const auto& d : (*mgr)->devices()) EXPECT_EQ(d->intra_op_parallelism(), threads);
  }
  auto mgr = DeviceMgr::NewLocal({});
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  EXPECT_EQ((*mgr)->devices()[0]->intra_op_parallelism(),
            std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace graphrun
